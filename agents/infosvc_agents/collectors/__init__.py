"""Collectors: small objects behind one protocol that read one part of the host.

A collector is built once (where slow, static facts such as the processor model are read)
and then called once per sample. The registry runs every collector of a sample, times it,
and turns any exception into a logged, recorded failure: one broken collector never stops
a sample.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol, runtime_checkable

log = logging.getLogger("infosvc_agents")


@runtime_checkable
class Collector(Protocol):
    """What every collector offers: a unique name and a collect() for one sample."""

    name: str

    def collect(self) -> Any:  # pragma: no cover - protocol
        ...


@dataclass(slots=True)
class CollectorRun:
    """How one collector did in one sample: its facts or its error, and its duration."""

    name: str
    facts: Any = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(slots=True)
class CollectorRegistry:
    """The collectors of one agent, registered explicitly; duplicate names are refused."""

    collectors: dict[str, Collector] = field(default_factory=dict)

    def register(self, collector: Collector) -> None:
        if collector.name in self.collectors:
            raise ValueError(f"collector {collector.name!r} is already registered")
        self.collectors[collector.name] = collector

    def extend(self, collectors: Iterable[Collector]) -> None:
        for collector in collectors:
            self.register(collector)

    def run(self) -> dict[str, CollectorRun]:
        runs: dict[str, CollectorRun] = {}
        clock = time.perf_counter
        for name, collector in self.collectors.items():
            started = clock()
            try:
                runs[name] = CollectorRun(name, facts=collector.collect())
            except Exception as exc:  # noqa: BLE001 - a failed collector must not stop the sample
                log.warning("collector %s failed: %s: %s", name, type(exc).__name__, exc)
                runs[name] = CollectorRun(name, error=f"{type(exc).__name__}: {exc}")
            runs[name].seconds = clock() - started
        return runs


def default_collectors(proc_root: str = "/proc", sys_root: str = "/sys", etc_root: str = "/etc") -> list[Collector]:
    """One collector of each kind for the host whose /proc, /sys and /etc are given."""
    # Imported here so that importing the protocol stays cheap and cycle-free.
    from infosvc_agents.collectors.filesystems import FileSystemCollector
    from infosvc_agents.collectors.gpus import GpuCollector
    from infosvc_agents.collectors.load import LoadCollector
    from infosvc_agents.collectors.memory import MemoryCollector
    from infosvc_agents.collectors.network import NetworkCollector
    from infosvc_agents.collectors.processors import ProcessorCollector
    from infosvc_agents.collectors.system import SystemCollector

    return [
        ProcessorCollector(proc_root=proc_root, sys_root=sys_root),
        MemoryCollector(proc_root=proc_root),
        LoadCollector(proc_root=proc_root),
        FileSystemCollector(proc_root=proc_root),
        NetworkCollector(proc_root=proc_root, sys_root=sys_root),
        SystemCollector(etc_root=etc_root, proc_root=proc_root),
        GpuCollector(proc_root=proc_root, sys_root=sys_root),
    ]
