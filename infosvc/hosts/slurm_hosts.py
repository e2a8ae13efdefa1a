"""Slurm's nodes as the site's hosts (docs/slurm.md, Reading the cluster): the mapping of one node
to a GLUE Host, and what Slurm's state makes of a host an agent also reports.

A node no agent reports is published from Slurm's facts alone: CPUs (the architecture's SMP size),
sockets (PhysicalCPUs), RealMemory (RAM), the CPUs Slurm has not allocated (available), its GRES
GPUs (accelerators, by type), its features (the host's RunTimeEnvironment tags, with the config's
software), its architecture and OS. Its life-cycle state is Slurm's: DOWN or not responding is
Unreachable, DRAIN (draining or drained) is Paused, each with Slurm's reason; FUTURE is Pending;
otherwise Ready. A node an agent reports (same name) keeps the agent's facts; Slurm's drain and
down, with their reason, take the place of its own state (`merged_state`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from infosvc.config import SiteConfig, resources_of
from infosvc.lrms.cluster import SlurmNode
from infosvc.lrms.sss_nodes import sss_state
from infosvc.model import glue
from infosvc.model.glue import Host

#: what the agent's life-cycle state becomes under Slurm's word, strongest first
UNREACHABLE, PAUSED, READY, PENDING = "Unreachable", "Paused", "Ready", "Pending"


@dataclass(frozen=True, slots=True)
class SlurmWord:
    """What Slurm says of a host's state: Ready, Paused (drained) or Unreachable (down), and why."""

    state: str
    reason: str | None = None


def word_of(node: SlurmNode) -> SlurmWord:
    reason = node.reason or None
    if node.down:
        return SlurmWord(UNREACHABLE, reason or ("not responding" if "NOT_RESPONDING" in node.flags else
                                                 f"Slurm state {node.state}"))
    if node.drained:
        return SlurmWord(PAUSED, reason or "drained in Slurm")
    if node.state == "future":
        return SlurmWord(PENDING, reason)
    return SlurmWord(READY, reason)


def merged_state(state: str, paused: bool, reason: str | None, word: SlurmWord | None) -> tuple[str, bool, str | None]:
    """A host's published (state, paused, reason): its own, unless Slurm's word is stronger (down
    over everything; drained over Ready and Paused, not over a silent agent's Unreachable)."""
    if word is None or word.state == READY:
        return state, paused, reason
    if word.state == UNREACHABLE:
        return UNREACHABLE, paused, word.reason
    if word.state == PAUSED:
        return (state if state in (UNREACHABLE, PENDING) else PAUSED), True, word.reason
    return state, paused, reason


@lru_cache(maxsize=256)
def _os(text: str | None) -> glue.OperatingSystem:
    name, _, release = (text or "").partition(" ")
    return glue.OperatingSystem(name or None, release.split(" ")[0] or None, None)


def host_from_slurm(node: SlurmNode, host_id: str, config: SiteConfig, read_at: str) -> Host:
    """The GLUE Host of a node no agent reports."""
    cluster = config.cluster_of(host_id)
    bench = config.benchmark_of(host_id)
    tags = tuple(dict.fromkeys((*config.software_of(host_id), *node.features)))
    state, paused, reason = merged_state(READY, False, None, word_of(node))
    accelerators = tuple(glue.Accelerator("GPU", kind.model, kind.count) for kind in node.gpus)
    total_gpus = sum(k.count for k in node.gpus)
    used_gpus = sum(k.used for k in node.gpus)
    return Host(
        unique_id=host_id, name=node.name, state=state, last_report=read_at, cluster=cluster.id,
        architecture=glue.Architecture(node.architecture, node.cpus or None),
        operating_system=_os(node.operating_system),
        benchmark=glue.Benchmark(bench.si00, bench.sf00) if bench is not None else None,
        application_software=glue.ApplicationSoftware(tags) if tags else None,
        processor=glue.Processor(instruction_set=node.architecture),
        main_memory=glue.MainMemory(node.real_memory or None, max(0, node.real_memory - node.alloc_memory)
                                    if node.real_memory else None),
        total_cpus=node.cpus, available_cpus=node.idle_cpus, reported_state=sss_state(node), paused=paused,
        reason=reason, resources=resources_of(config.resources, host_id, cluster.id),
        physical_cpus=node.sockets or None, accelerators=accelerators,
        accelerators_available=max(0, total_gpus - used_gpus), accelerators_used=used_gpus)
