"""The host agent: runs its collectors and turns each sample into an SSS Node document.

`HostAgent.document()` is the whole sample -> document path; the one-shot command calls it
once and the push loop calls it every interval.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from infosvc import __version__
from infosvc.codec.node_xml import node_to_xml
from infosvc.model.node import Node

from infosvc_agents.collectors import CollectorRegistry, CollectorRun, default_collectors
from infosvc_agents.host_node import build_node


@dataclass(slots=True)
class HostAgent:
    registry: CollectorRegistry
    host_id: str | None = None
    features: tuple[str, ...] = ()
    last_runs: dict[str, CollectorRun] = field(default_factory=dict)
    sampled_at: float | None = None  # when last_runs were taken (Unix time)
    #: this run's samples are named RUN-N (the SampleId extension): unique across restarts, so the
    #: aggregator can tell a sample delivered again from a new one
    # os.urandom, not secrets: secrets loads hashlib and OpenSSL's libcrypto (4 MiB of the agent's
    # resident memory) for a name that need only be unique
    run_id: str = field(default_factory=lambda: os.urandom(8).hex())
    samples: int = 0

    @classmethod
    def for_host(cls, *, proc_root: str = "/proc", sys_root: str = "/sys", etc_root: str = "/etc",
                 host_id: str | None = None, features: tuple[str, ...] = ()) -> HostAgent:
        registry = CollectorRegistry()
        registry.extend(default_collectors(proc_root=proc_root, sys_root=sys_root, etc_root=etc_root))
        return cls(registry, host_id, features)

    def node(self) -> Node:
        runs = self.registry.run()
        self.sampled_at = time.time()
        self.last_runs = runs
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.sampled_at))
        self.samples += 1
        return build_node(self.last_runs, host_id=self.host_id, features=self.features,
                          timestamp=stamp, agent_version=__version__, sample_id=f"{self.run_id}-{self.samples}")

    def document(self, *, pretty: bool = False) -> bytes:
        return node_to_xml(self.node(), pretty=pretty)
