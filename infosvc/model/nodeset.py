"""ClusterShell NodeSets as infosvc reads them: names and ranges (`node[001-128,200]`), never groups.

ClusterShell's standard group resolver reads groups.conf, whose stock `local` source runs a shell
command with the group name in it: a NodeSet taken from a query, a job or a report could run
commands on the server. Importing this module replaces the standard resolver with one that has
no sources, so a group anywhere is an error, and `parse_nodeset` refuses `@group` terms by name
before ClusterShell sees them.
"""

from __future__ import annotations

from typing import Any

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetParseError, set_std_group_resolver
from ClusterShell.NodeUtils import GroupResolver

set_std_group_resolver(GroupResolver())

#: For NodeSet(..., resolver=NO_GROUPS) where an expression is not parsed by parse_nodeset.
NO_GROUPS: Any = RESOLVER_NOGROUP


def parse_nodeset(expression: str) -> Any:
    """The NodeSet of `expression`; NodeSetParseError (a NodeSetException) for a group or bad syntax."""
    if "@" in expression:
        raise NodeSetParseError(expression.strip(), "NodeSet groups (@name) are not supported")
    return NodeSet(expression, resolver=RESOLVER_NOGROUP)
