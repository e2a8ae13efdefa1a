"""ClusterShell NodeSets as infosvc reads them: names and ranges (`node[001-128,200]`), never groups.

ClusterShell's standard group resolver reads groups.conf, whose stock `local` source runs a shell
command with the group name in it: a NodeSet taken from a query, a job or a report could run
commands on the server. Importing this module replaces the standard resolver with one that has
no sources, so a group anywhere is an error, and `parse_nodeset` refuses `@group` terms by name
before ClusterShell sees them.
"""

from __future__ import annotations

import re
from typing import Any

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetParseError, set_std_group_resolver
from ClusterShell.NodeUtils import GroupResolver

set_std_group_resolver(GroupResolver())

#: For NodeSet(..., resolver=NO_GROUPS) where an expression is not parsed by parse_nodeset.
NO_GROUPS: Any = RESOLVER_NOGROUP


_BRACKETS = re.compile(r"\[([^\]]*)\]")
_NUMBER = re.compile(r"\d{1,18}")
_RANGE = re.compile(r"(\d{1,18})-(\d{1,18})(?:/(\d{1,18}))?")
_WHITE = re.compile(r"\s+")
#: What range_names says of a bracket it cannot read: more than any limit.
UNCOUNTABLE = 1 << 62


def range_names(expression: str) -> int:
    """How many names the bracketed ranges of `expression` write out, summed over the brackets
    (exact for one dimension; a lower bound for several): read from the text, before ClusterShell
    is asked to expand anything. A bracket part it cannot read as a number or a range (ClusterShell
    takes white space inside ranges; numbers of more than 18 digits) counts as UNCOUNTABLE."""
    total = 0
    for inside in _BRACKETS.findall(expression):
        total += _bracket_names(inside)
        if total >= UNCOUNTABLE:
            return UNCOUNTABLE
    return total


#: The operators of a NodeSet expression, outside brackets: its terms lie between them.
_OPERATORS = re.compile(r"([,!&^])(?![^\[]*\])")


def _bracket_names(inside: str) -> int:
    total = 0
    for part in _WHITE.sub("", inside).split(","):
        if not part or _NUMBER.fullmatch(part):
            total += 1
        elif match := _RANGE.fullmatch(part):
            total += max(0, int(match[2]) - int(match[1])) // max(1, int(match[3] or 1)) + 1
        else:
            return UNCOUNTABLE
    return total


def names_upper_bound(expression: str) -> int:
    """At most how many names `expression` stands for, from its text: each term's brackets
    multiplied (`a[1-300]b[1-300]` is 90,000 names), the terms added (operators other than `,`
    only remove names). UNCOUNTABLE for a bracket it cannot read."""
    total = 0
    for term in _OPERATORS.split(expression)[::2]:
        size = 1
        for inside in _BRACKETS.findall(term):
            size *= _bracket_names(inside)
            if size >= UNCOUNTABLE:
                return UNCOUNTABLE
        total += size
    return min(total, UNCOUNTABLE)


def expand_names(expression: str) -> list[str]:
    """The names of `expression`, each once: term by term when its terms are joined by commas
    only (in term order, each term in ClusterShell's order), since ClusterShell folds a union of
    multi-dimensional terms slowly (7 s for two terms of 150,000 names); else as ClusterShell
    orders the whole. Bound the size first (names_upper_bound): this writes every name out."""
    parts = _OPERATORS.split(expression)
    if len(parts) > 1 and all(operator == "," for operator in parts[1::2]):
        names: dict[str, None] = {}
        for term in parts[::2]:
            if term.strip():
                names.update(dict.fromkeys(parse_nodeset(term)))
            else:  # as ClusterShell says of `a,,b`
                parse_nodeset(expression)
        return list(names)
    return list(parse_nodeset(expression))


def parse_nodeset(expression: str) -> Any:
    """The NodeSet of `expression`; NodeSetParseError (a NodeSetException) for a group or bad syntax."""
    if "@" in expression:
        raise NodeSetParseError(expression.strip(), "NodeSet groups (@name) are not supported")
    try:
        return NodeSet(expression, resolver=RESOLVER_NOGROUP)
    except AssertionError as exc:  # ClusterShell asserts some limits ("range too large")
        raise NodeSetParseError(expression.strip(), f"not a NodeSet ({exc or 'out of range'})") from None
