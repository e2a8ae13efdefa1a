"""ClusterShell NodeSets as infosvc reads them: names and ranges (`node[001-128,200]`), never groups.

ClusterShell's standard group resolver reads groups.conf, whose stock `local` source runs a shell
command with the group name in it: a NodeSet taken from a query, a job or a report could run
commands on the server. Importing this module replaces the standard resolver with one that has
no sources, so a group anywhere is an error, and `parse_nodeset` refuses `@group` terms by name
before ClusterShell sees them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetParseError, set_std_group_resolver
from ClusterShell.NodeUtils import GroupResolver
from ClusterShell.RangeSet import RangeSetParseError

from infosvc.errors import excerpt

set_std_group_resolver(GroupResolver())

#: For NodeSet(..., resolver=NO_GROUPS) where an expression is not parsed by parse_nodeset.
NO_GROUPS: Any = RESOLVER_NOGROUP


#: The longest NodeSet expression read, in characters: a real one is a few dozen; the bound keeps
#: the work and the error text of a hostile one small.
MAX_EXPRESSION = 16_384

# One token at a time, left to right: a bracket with its inside (no bracket in it), an operator,
# or a bracket left over (unbalanced or nested). The inside excludes both brackets, so each
# character is read by one token: linear time. (A pattern whose inside runs to the next `]`
# rescans the rest of the text from every `[`: 262,000 of them took minutes.)
_TOKENS = re.compile(r"\[([^\[\]]*)\]|([,!&^])|([\[\]])")
_NUMBER = re.compile(r"\d{1,18}")
_RANGE = re.compile(r"(\d{1,18})-(\d{1,18})(?:/(\d{1,18}))?")
_WHITE = re.compile(r"\s+")
#: What range_names says of a bracket it cannot read: more than any limit.
UNCOUNTABLE = 1 << 62


@dataclass(frozen=True, slots=True)
class Term:
    """One operand of a NodeSet expression: the operator before it (`,` for the first), its text,
    and the insides of its brackets."""

    operator: str
    text: str
    brackets: tuple[str, ...]


def split_terms(expression: str) -> list[Term]:
    """The terms of `expression` between its operators (`,` `!` `&` `^` outside brackets), read in
    one pass. NodeSetParseError for an expression over MAX_EXPRESSION characters, or a bracket
    that is not closed, closed twice or nested; the error quotes a short excerpt only."""
    if len(expression) > MAX_EXPRESSION:
        raise NodeSetParseError(excerpt(expression),
                                f"a NodeSet of {len(expression)} characters; at most {MAX_EXPRESSION} are read")
    terms: list[Term] = []
    operator, start, brackets = ",", 0, []
    for token in _TOKENS.finditer(expression):
        if token.lastindex == 1:
            brackets.append(token[1])
        elif token.lastindex == 2:
            terms.append(Term(operator, expression[start:token.start()], tuple(brackets)))
            operator, start, brackets = token[2], token.end(), []
        else:
            at = token.start()
            raise NodeSetParseError(excerpt(expression[max(0, at - 20):]),
                                    f"unbalanced or nested bracket at character {at + 1}")
    terms.append(Term(operator, expression[start:], tuple(brackets)))
    return terms


def range_names(expression: str) -> int:
    """How many names the bracketed ranges of `expression` write out, summed over the brackets
    (exact for one dimension; a lower bound for several): read from the text, before ClusterShell
    is asked to expand anything. A bracket part it cannot read as a number or a range (ClusterShell
    takes white space inside ranges; numbers of more than 18 digits) counts as UNCOUNTABLE.
    NodeSetParseError for an expression split_terms refuses."""
    total = 0
    for term in split_terms(expression):
        for inside in term.brackets:
            total += _bracket_names(inside)
            if total >= UNCOUNTABLE:
                return UNCOUNTABLE
    return total


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
    only remove names). UNCOUNTABLE for a bracket it cannot read; NodeSetParseError for an
    expression split_terms refuses."""
    total = 0
    for term in split_terms(expression):
        size = 1
        for inside in term.brackets:
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
    terms = split_terms(expression)
    if len(terms) > 1 and all(term.operator == "," for term in terms):
        names: dict[str, None] = {}
        for term in terms:
            if not term.text.strip():
                raise NodeSetParseError(excerpt(expression), "an operator without an operand")
            names.update(dict.fromkeys(parse_nodeset(term.text)))
        return list(names)
    return list(parse_nodeset(expression))


def parse_nodeset(expression: str) -> Any:
    """The NodeSet of `expression`; NodeSetParseError (a NodeSetException) for a group or bad syntax."""
    if "@" in expression:
        raise NodeSetParseError(excerpt(expression.strip()), "NodeSet groups (@name) are not supported")
    split_terms(expression)  # the length bound, and brackets checked in linear time
    try:
        return NodeSet(expression, resolver=RESOLVER_NOGROUP)
    except (NodeSetParseError, RangeSetParseError) as exc:  # they quote the whole part they could not read
        raise NodeSetParseError(excerpt(expression.strip()), excerpt(str(exc), 200)) from None
    except AssertionError as exc:  # ClusterShell asserts some limits ("range too large")
        raise NodeSetParseError(excerpt(expression.strip()), f"not a NodeSet ({exc or 'out of range'})") from None


_BRACKET = re.compile(r"\[[^\[\]]*\]")


class Numbers:
    """The numbers of one bracket (`01-10,15,20-40/5`) as ClusterShell reads them, each part kept
    as (start, stop, step, padding) and never written out: `"07" in numbers` is a few comparisons.
    The parts are the forms `names_upper_bound` counts (a number, a range, a range with a step);
    ClusterShell's padding rules hold: `01-10` is 01 ... 10, `1-10` is 1 ... 10, `01-100` is refused."""

    def __init__(self, inside: str, term: str = "") -> None:
        self.parts: list[tuple[int, int, int, int]] = []
        for part in _WHITE.sub("", inside).split(","):
            number = _NUMBER.fullmatch(part)
            found = _RANGE.fullmatch(part)
            if number:
                begin = end = part
                step = 1
            elif found:
                begin, end, step = found[1], found[2], int(found[3] or 1)
            else:
                raise NodeSetParseError(excerpt(term or inside), f"bad range {excerpt(part)!r}")
            # As ClusterShell: a start of zeros (`00`) pads, an end of zeros does not.
            pad = len(begin) if len(begin) > 1 and begin[0] == "0" else 0
            endpad = len(end) if end[0] == "0" and int(end) else 0
            if (pad or endpad) and len(begin) != len(end):
                raise NodeSetParseError(excerpt(term or inside), f"padding length mismatch in {excerpt(part)!r}")
            if int(begin) > int(end) or step < 1:
                raise NodeSetParseError(excerpt(term or inside), f"invalid values in range {excerpt(part)!r}")
            self.parts.append((int(begin), int(end), step, pad))

    def __contains__(self, digits: object) -> bool:
        if not isinstance(digits, str) or not digits.isdigit():
            return False
        value = int(digits)
        for start, stop, step, pad in self.parts:
            if start <= value <= stop and not (value - start) % step and f"{value:0{pad}d}" == digits:
                return True
        return False


class NameSet:
    """A NodeSet expression as a membership test, never expanded into its names: each term kept as
    its literal parts and one `Numbers` per bracket, so that `name in names` costs a few
    comparisons however many names the expression stands for (`a[1-300]b[1-300]` keeps two ranges,
    not 90,000 names). Writing 100,000 names out held the interpreter lock long enough to stall
    the event loop (150 ms sorting them). Names compare as DNS names: case and one final dot
    ignored (infosvc.model.hostid)."""

    def __init__(self, expression: str) -> None:
        if "@" in expression:
            raise NodeSetParseError(excerpt(expression.strip()), "NodeSet groups (@name) are not supported")
        self._terms: list[tuple[str, list[str], list[Numbers]]] = []
        for term in split_terms(expression.strip()):
            text = term.text.strip()
            if not text:
                raise NodeSetParseError(excerpt(expression), "an operator without an operand")
            literals = [part.lower() for part in _BRACKET.split(text)]
            if "" in literals[1:-1]:  # as ClusterShell: `n[1-2][3-4]` has no separator between numbers
                raise NodeSetParseError(excerpt(text), "illegal reopening bracket")
            if literals[-1].endswith("."):
                literals[-1] = literals[-1][:-1]
            ranges = [Numbers(inside, text) for inside in term.brackets]
            self._terms.append((term.operator, literals, ranges))

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        name = name.strip().lower()
        name = name[:-1] if name.endswith(".") else name
        inside = False
        for operator, literals, ranges in self._terms:
            fits = _fits(name, literals, ranges)
            if operator == ",":
                inside = inside or fits
            elif operator == "!":
                inside = inside and not fits
            elif operator == "&":
                inside = inside and fits
            else:
                inside = inside != fits
        return inside


def _fits(name: str, literals: list[str], ranges: list[Numbers]) -> bool:
    """Whether `name` is one of the names of a term (literals[0] range[0] literals[1] ...): the
    positions reachable after each part, so that digits split between adjacent numbers cost
    polynomial time, never a search of every split."""
    if not name.startswith(literals[0]):
        return False
    positions = {len(literals[0])}
    for numbers, literal in zip(ranges, literals[1:]):
        reached = set()
        for at in positions:
            end = at
            while end < len(name) and "0" <= name[end] <= "9":
                end += 1
            for stop in range(at + 1, end + 1):
                if name[at:stop] in numbers and name.startswith(literal, stop):
                    reached.add(stop + len(literal))
        if not reached:
            return False
        positions = reached
    return len(name) in positions
