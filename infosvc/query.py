"""Host filters for GET /v1/nodes and GET /v1/glue/hosts (documented in docs/api.md).

    state=Ready,Paused      life-cycle state, any of (repeatable)
    feature=BigMem          every named SSS Feature (repeatable, or comma-separated)
    min_free_processors=4   free processors: Available Processors of a Ready host, else 0
    min_free_memory=8192    Available Memory in MB
    os=Linux                the SSS Opsys or the OS name, case-insensitive
    arch=x86_64             the SSS Arch, case-insensitive
    nodes=node[001-064]     host names, as a ClusterShell NodeSet
    format=json|xml         the rendering (not a filter)

A parameter that is not one of these, or a value that does not parse, is an error that names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator

from infosvc.lifecycle import NodeState
from infosvc.model.node import split_features
from infosvc.model.noderef import NodeRefError, expand_range

if TYPE_CHECKING:
    from infosvc.hosts import HostEntry, HostTable


class QueryError(ValueError):
    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(f"query parameter {parameter!r}: {message}")
        self.parameter = parameter


PARAMETERS = ("state", "feature", "min_free_processors", "min_free_memory", "os", "arch", "nodes", "format")


def free_processors(entry: HostEntry) -> int:
    if entry.state is not NodeState.READY:
        return 0
    available = entry.node.available.get("Processors")
    return int(available.value) if available is not None else 0


def free_memory_mb(entry: HostEntry) -> float:
    available = entry.node.available.get("Memory")
    return available.amount("MB") if available is not None else 0.0


@dataclass(frozen=True, slots=True)
class HostFilter:
    states: frozenset[NodeState] | None = None
    features: tuple[str, ...] = ()
    min_free_processors: int | None = None
    min_free_memory: float | None = None
    os: str | None = None
    arch: str | None = None
    names: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, items: Iterable[tuple[str, str]]) -> HostFilter:
        states: set[NodeState] = set()
        features: list[str] = []
        values: dict[str, str] = {}
        for key, value in items:
            if key not in PARAMETERS:
                raise QueryError(key, f"unknown; expected one of {', '.join(PARAMETERS)}")
            if key == "state":
                for word in split_features(value):
                    try:
                        states.add(NodeState(word.capitalize()))
                    except ValueError:
                        raise QueryError(key, f"{word!r} is not one of {', '.join(s.value for s in NodeState)}") from None
            elif key == "feature":
                features.extend(split_features(value))
            elif key in values:
                raise QueryError(key, "given more than once")
            else:
                values[key] = value
        names: tuple[str, ...] | None = None
        if "nodes" in values:
            try:
                names = tuple(expand_range(values["nodes"]))
            except NodeRefError as exc:
                raise QueryError("nodes", str(exc)) from None
        return cls(
            states=frozenset(states) or None,
            features=tuple(features),
            min_free_processors=_integer("min_free_processors", values.get("min_free_processors")),
            min_free_memory=_number("min_free_memory", values.get("min_free_memory"), float),
            os=values.get("os", "").strip().lower() or None,
            arch=values.get("arch", "").strip().lower() or None,
            names=names,
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

    def select(self, table: HostTable) -> Iterator[HostEntry]:
        """The matching hosts, in name order when `nodes` is given, else in table order."""
        if self.names is not None:
            candidates: Iterable[HostEntry] = (e for e in map(table.get, self.names) if e is not None)
        else:
            candidates = table
        return (entry for entry in candidates if self.matches(entry))


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
    if value < 0:
        raise QueryError(parameter, "must not be negative")
    return value
