"""Host filters for every route that lists hosts: GET /v1/nodes, GET /v1/glue/hosts and GET
/v1/glue (documented in docs/api.md).

    state=Ready,Paused      life-cycle state, any of (repeatable)
    cluster=compute,gpu     the cluster (site config) the host is in, any of (repeatable)
    feature=BigMem          every named SSS Feature (repeatable, or comma-separated)
    min_free_processors=4   free processors: Available Processors of a Ready host not Offline, else 0
    min_free_memory=8192    Available Memory in MB
    os=Linux                the SSS Opsys or the OS name, case-insensitive
    arch=x86_64             the SSS Arch, case-insensitive
    nodes=node[001-064]     host names, as a ClusterShell NodeSet
    format=json|xml         the rendering (not a filter)

A parameter that is not one of these, or a value that does not parse, is an error that names it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException, NodeSetParseError
from ClusterShell.NodeUtils import GroupResolverError

from infosvc.hosts.lifecycle import NodeState
from infosvc.model.node import split_features
from infosvc.errors import excerpt
from infosvc.model.nodeset import parse_nodeset, range_names, split_terms

if TYPE_CHECKING:
    from infosvc.config import SiteConfig
    from infosvc.hosts.table import HostEntry, HostTable


class QueryError(ValueError):
    def __init__(self, parameter: str, message: str, accepted: tuple[str, ...] | None = None,
                 hint: str | None = None) -> None:
        super().__init__(f"query parameter {parameter!r}: {message}")
        self.parameter = parameter
        #: for an unknown parameter: the ones the route takes, and where else to look
        self.accepted = accepted
        self.hint = hint

    def detail(self) -> dict[str, object]:
        said: dict[str, object] = {"parameter": self.parameter}
        if self.accepted is not None:
            said["accepted"] = list(self.accepted)
        if self.hint:
            said["hint"] = self.hint
        return said


PARAMETERS = ("state", "cluster", "feature", "min_free_processors", "min_free_memory", "os", "arch", "nodes", "format")


def free_processors(entry: HostEntry) -> int:
    if entry.state is not NodeState.READY or entry.node.state == "Offline":
        return 0
    available = entry.node.available.get("Processors")
    return int(available.value) if available is not None else 0


def free_memory_mb(entry: HostEntry) -> float:
    available = entry.node.available.get("Memory")
    if available is None:
        return 0.0
    try:
        return available.amount("MB")
    except (ValueError, OverflowError):  # units is free text in SSS: a unit that is no size counts as none
        return 0.0


#: The most names the ranges of one `nodes` filter may write out: ClusterShell holds a range as a
#: set of all its names, so nodes=n[1-100000000] would cost gigabytes before any host is looked at.
MAX_RANGE_NAMES = 100_000
_DIGITS = re.compile(r"\d+")
_NODESET_ERRORS = (NodeSetException, GroupResolverError, AssertionError, ValueError)



def nodeset_order(name: str) -> tuple[str, list[tuple[int, str]]]:
    """Sort key: NodeSet order (by pattern, then by each index, shorter padding first)."""
    return _DIGITS.sub("%s", name), [(len(d), d) for d in _DIGITS.findall(name)]


@dataclass(frozen=True, slots=True)
class HostNames:
    """A ClusterShell NodeSet expression (a,b!c&d^e: operators left to right), kept as its terms.

    Terms are not folded together: ClusterShell's folding of n-dimensional names across terms costs
    time that grows far faster than the names (seconds for a few thousand), and a query must not
    stall the server. Membership and expansion are done here with the terms' own NodeSets.
    """

    terms: tuple[tuple[str, Any], ...]  # (operator, NodeSet); the first operator is ","

    @classmethod
    def parse(cls, parameter: str, text: str) -> HostNames:
        try:
            if range_names(text) > MAX_RANGE_NAMES:
                raise QueryError(parameter, f"ranges of more than {MAX_RANGE_NAMES} names")
            parts = split_terms(text.strip().lower())  # host Ids are lower case (infosvc.model.hostid)
        except NodeSetParseError as exc:
            raise QueryError(parameter, f"not a NodeSet: {exc}") from None
        terms: list[tuple[str, Any]] = []
        for part in parts:
            if not part.text.strip() and len(parts) > 1:
                raise QueryError(parameter, f"not a NodeSet: an operator without an operand in {excerpt(text)!r}")
            try:
                terms.append((part.operator, parse_nodeset(part.text.strip())))
            except _NODESET_ERRORS as exc:
                raise QueryError(parameter, f"not a NodeSet: {excerpt(str(exc), 200)}") from None
        return cls(tuple(terms))

    def __len__(self) -> int:
        """At least as many as the names (exactly as many when there is one term)."""
        return sum(len(nodes) for _, nodes in self.terms)

    def cost(self, hosts: int) -> int:
        """About how many steps choosing among `hosts` hosts takes (HostFilter.select_from): the
        names written out, or a test of each host against each term when they are more."""
        return len(self) if len(self) <= hosts else hosts * len(self.terms)

    def names(self) -> set[str]:
        found: set[str] = set()
        for operator, nodes in self.terms:
            found = _apply(operator, found, set(nodes))
        return found

    def __contains__(self, host: object) -> bool:
        if not isinstance(host, str):
            return False
        try:
            one = NodeSet(host, resolver=RESOLVER_NOGROUP)
        except _NODESET_ERRORS:
            return False
        if len(one) != 1 or str(one) != host:  # a host id that is no single name is named by no NodeSet
            return False
        inside = False
        for operator, nodes in self.terms:
            inside = _apply(operator, inside, bool(nodes.issuperset(one)))
        return inside


def _apply(operator: str, left: Any, right: Any) -> Any:
    if operator == ",":
        return left | right
    if operator == "!":
        return (left and not right) if isinstance(left, bool) else left - right
    if operator == "&":
        return left & right
    return left ^ right


@dataclass(frozen=True, slots=True)
class HostFilter:
    states: frozenset[NodeState] | None = None
    clusters: frozenset[str] | None = None
    features: tuple[str, ...] = ()
    min_free_processors: int | None = None
    min_free_memory: float | None = None
    os: str | None = None
    arch: str | None = None
    nodes: HostNames | None = None

    @classmethod
    def parse(cls, items: Iterable[tuple[str, str]]) -> HostFilter:
        states: set[NodeState] = set()
        clusters: set[str] = set()
        features: list[str] = []
        values: dict[str, str] = {}
        for key, value in items:
            if key not in PARAMETERS:
                raise QueryError(key, f"unknown; expected one of {', '.join(PARAMETERS)}")
            if key == "state":
                if not split_features(value):  # else `?state=` lists every host, as if no filter were given
                    raise QueryError(key, f"names no state; one of {', '.join(s.value for s in NodeState)}")
                for word in split_features(value):
                    try:
                        states.add(NodeState(word.capitalize()))
                    except ValueError:
                        raise QueryError(key, f"{word!r} is not one of {', '.join(s.value for s in NodeState)}") from None
            elif key == "cluster":
                clusters.update(split_features(value))
            elif key == "feature":
                features.extend(split_features(value))
            elif key in values:
                raise QueryError(key, "given more than once")
            else:
                values[key] = value
        return cls(
            states=frozenset(states) or None,
            clusters=frozenset(clusters) or None,
            features=tuple(features),
            min_free_processors=_integer("min_free_processors", values.get("min_free_processors")),
            min_free_memory=_number("min_free_memory", values.get("min_free_memory"), float),
            os=values.get("os", "").strip().lower() or None,
            arch=values.get("arch", "").strip().lower() or None,
            nodes=HostNames.parse("nodes", values["nodes"]) if "nodes" in values else None,
        )

    def matches(self, entry: HostEntry) -> bool:
        node = entry.node
        if self.states is not None and entry.state not in self.states:
            return False
        if self.features and not all(f in node.features for f in self.features):
            return False
        if self.min_free_processors is not None and free_processors(entry) < self.min_free_processors:
            return False
        if self.min_free_memory is not None and free_memory_mb(entry) < self.min_free_memory:
            return False
        if self.arch is not None and (node.arch or "").lower() != self.arch:
            return False
        if self.os is not None:
            names = {(node.opsys or "").lower(), (node.extension("Name", "OperatingSystem") or "").lower()}
            if self.os not in names:
                return False
        return True

    @property
    def empty(self) -> bool:
        """Filters nothing out."""
        return self == HostFilter()

    def select(self, table: HostTable) -> Iterator[HostEntry]:
        """The matching hosts, in NodeSet order when `nodes` is given, else in table order."""
        return self.select_from(table.entries, table.config)

    def select_from(self, entries: Mapping[str, HostEntry], config: SiteConfig) -> Iterator[HostEntry]:
        """The matching ones of `entries` (by Id: the table's, or Slurm's nodes no agent reports),
        in NodeSet order when `nodes` is given, else in their own order."""
        if self.clusters is not None:
            clusters, cluster_of = self.clusters, config.cluster_of
            base = HostFilter(self.states, None, self.features, self.min_free_processors, self.min_free_memory,
                              self.os, self.arch, self.nodes)
            return (e for e in base.select_from(entries, config) if cluster_of(e.id).id in clusters)
        if self.nodes is None:
            return (entry for entry in entries.values() if self.matches(entry))
        if len(self.nodes) <= len(entries):
            named: Iterable[HostEntry] = (e for e in map(entries.get, self.nodes.names()) if e is not None)
        else:  # more names than hosts: test each host rather than write out the names
            named = (e for e in entries.values() if e.id in self.nodes)
        return iter(sorted((e for e in named if self.matches(e)), key=lambda e: nodeset_order(e.id)))


def _integer(parameter: str, text: str | None) -> int | None:
    value = _number(parameter, text, int)
    return None if value is None else int(value)


def _number(parameter: str, text: str | None, kind: type[int] | type[float]) -> int | None | float:
    if text is None:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise QueryError(parameter, f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int past a float's range: int() reads it, isfinite() cannot
        finite = False
    if not finite:
        raise QueryError(parameter, f"{excerpt(text)!r} is not a finite number")
    if value < 0:
        raise QueryError(parameter, "must not be negative")
    return value
