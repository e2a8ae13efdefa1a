"""The host aggregate: who may report, each host's newest report and life-cycle state, the GLUE
roll-up of them all, their history, and the filters that list them. No HTTP.
This is the package's face: other packages import from here, not from its modules."""

from infosvc.hosts.aggregator import Aggregator
from infosvc.hosts.glue_host import gpu_count, host_from_node
from infosvc.hosts.history import HISTORY_MAX, parse_time
from infosvc.hosts.lifecycle import NodeState
from infosvc.hosts.query import PARAMETERS, HostFilter, QueryError, nodeset_order
from infosvc.hosts.rollup import Rollup
from infosvc.hosts.table import HostEntry, HostTable, iso_time
from infosvc.hosts.tokens import USER_NAME, Role, TokenFileError, Tokens, new_token

__all__ = ["HISTORY_MAX", "PARAMETERS", "Aggregator", "HostEntry", "HostFilter", "HostTable", "NodeState",
           "QueryError", "Role", "USER_NAME", "Rollup", "TokenFileError", "Tokens", "gpu_count", "host_from_node", "iso_time", "new_token",
           "nodeset_order",
           "parse_time"]
