"""Which hosts a job may ever run on, and the site's hosts as the scheduler's machine.

The scheduler holds processors and memory itself, so a job's own Processors and Memory are its
business (infosvc.sched.hosts); every other requirement (features, operating system, node names,
the CE's LRMS, queue and wall-clock limit, ...) is the matcher's, evaluated against each host as
if it were idle and Ready: a host it rules out now rules it out until the host changes. Jobs
asking nothing more share one answer: every host.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Container, Iterable, Mapping

import numpy as np

from infosvc.matching import MatchError, Requirements, Site, compile_requirements, evaluate
from infosvc.model.glue import Host
from infosvc.model.job import Conj, Consumable, Context, Job, Properties, Term
from infosvc.model.node import Node
from infosvc.model.folding import fold
from infosvc.sched.hosts import HostPool, HostSlot, Mask
from infosvc.sched.request import JobRequest
from infosvc.config import LicensePools

__all__ = ["Eligibility", "asks_of_hosts", "pool_of"]

#: How many kinds of rejection (the hosts with the same reasons, folded), are kept for `infosvc why`.
KEPT_REJECTIONS = 8


def asks_of_hosts(job: Job) -> bool:
    """Whether the job's Requested terms ask anything of a host beyond processors and memory."""
    levels = [job.properties.requested]
    for group in job.effective_task_groups():
        levels.append(group.properties.requested)
        levels.extend(task.properties.requested for task in group.tasks)
    return any(not _held_by_scheduler(term) for terms in levels for term in terms)


def _held_by_scheduler(term: Term) -> bool:
    item = term.item
    return (isinstance(item, Consumable) and item.kind in ("Processors", "Memory")
            and item.effective_context in (Context.AVAILABLE, Context.DEDICATED))


def pool_of(hosts: Iterable[Host], paused: Callable[[str], bool], served: Container[str] | None = None,
            licenses: LicensePools = LicensePools(()), executors: Container[str] | None = None) -> HostPool:
    """The hosts as the scheduler's machine: Ready and Paused hosts (Paused for administrators'
    jobs only) of the `served` clusters (those a CE in Production or Draining serves; None: all)
    that an executor runs jobs on (`executors`, the hosts executor tokens are bound to; None: all),
    with their configured processors, RAM, clock and GPUs, and the license pools each draws from; the
    rest not usable."""
    return HostPool([HostSlot(host.unique_id, host.total_cpus, float(host.main_memory.ram_size or 0),
                              float(host.processor.clock_speed or 0),
                              usable=host.live and not host.offline and (served is None or host.cluster in served),
                              paused=host.state == "Paused" or paused(host.unique_id),
                              executor=executors is None or host.unique_id in executors,
                              licenses=licenses.of(host.unique_id, host.cluster), gpus=host.total_accelerators)
                     for host in hosts], licenses.sizes)


class Eligibility:
    """Each job's hosts as a mask over one pool's rows, kept while the pool is the same."""

    def __init__(self) -> None:
        self._pool: HostPool | None = None
        #: None: every host (a job whose requirements rule none out is scheduled as one asking nothing)
        self._masks: dict[tuple[int, tuple[str, ...] | None], Mask | None] = {}
        self.rejected: dict[tuple[int, tuple[str, ...] | None], tuple[str, ...]] = {}
        self._keep: list[Requirements | None] = []
        #: what runnable.unrunnable sums over a mask's hosts, by (the mask's id, memory asked): kept
        #: with the masks, as a submission per second would sum the same thousand hosts each time
        self.capacities: dict[tuple[int, float], tuple[float, int]] = {}

    def mask(self, request: JobRequest, requirements: Requirements | None, pool: HostPool,
             hosts: Mapping[str, Host], node_of: Callable[[str], Node | None],
             site: Callable[[], Site]) -> Mask | None:
        """The hosts of `pool` the job may use; None for any. Kept per (requirements, asked nodes)
        while `pool` is the same object: jobs asking alike (one compiled Requirements, shared by
        the queue) are evaluated once. `site` (the CEs by cluster, for the matcher) is asked for
        only when the hosts are evaluated: making it costs more than a kept mask's lookup."""
        if pool is not self._pool:
            self._pool, self._masks, self.rejected, self._keep, self.capacities = pool, {}, {}, [], {}
        asked = request.asked_nodes
        if requirements is None and asked is None:
            return None
        key = (id(requirements), asked)
        if key in self._masks:
            return self._masks[key]
        mask = np.ones(len(pool.ids), np.bool_)
        rejected: dict[str, list[str]] = {}  # reasons -> the hosts ruled out for them
        if asked is not None:
            wanted = frozenset(asked)
            mask &= np.fromiter((host in wanted for host in pool.ids), np.bool_, len(pool.ids))
        if requirements is not None:
            ces = site()
            for row, host_id in enumerate(pool.ids):
                if not mask[row]:
                    continue
                host, node = hosts.get(host_id), node_of(host_id)
                if host is None or node is None:
                    mask[row] = False
                    continue
                idle = replace(host, state="Ready", reported_state=None, available_cpus=host.total_cpus,
                               accelerators_available=host.total_accelerators,
                               main_memory=replace(host.main_memory, ram_available=host.main_memory.ram_size))
                try:
                    verdict = evaluate(requirements, node, idle, subcluster=None, site=ces)
                    ok, reasons = verdict.ok, list(verdict.reasons)
                except MatchError as exc:
                    ok, reasons = False, [str(exc)]
                if not ok:
                    mask[row] = False
                    said = "; ".join(reasons)
                    if said in rejected or len(rejected) < KEPT_REJECTIONS:
                        rejected.setdefault(said, []).append(host_id)
        kept: Mask | None = None if mask.all() else mask
        self._masks[key] = kept
        self.rejected[key] = tuple(f"{fold(names)}: {said}" for said, names in rejected.items())
        self._keep.append(requirements)  # its id stays its own while the key is kept
        return kept

    def known(self, request: JobRequest, requirements: Requirements | None, pool: HostPool) -> tuple[bool, Mask | None]:
        """(True, the mask) when the job's hosts on `pool` are known without evaluating anything
        (it asks nothing, or a job asking alike was evaluated on this pool); else (False, None)."""
        if requirements is None and request.asked_nodes is None:
            return True, None
        key = (id(requirements), request.asked_nodes)
        if pool is not self._pool or key not in self._masks:
            return False, None
        return True, self._masks[key]

    def rejected_for(self, request: JobRequest, requirements: Requirements | None) -> tuple[str, ...]:
        return self.rejected.get((id(requirements), request.asked_nodes), ())


def requirements_of(job: Job) -> Requirements | None:
    """The compiled requirements when the job asks anything of a host beyond processors and memory,
    without those two: the scheduler holds them across the job's hosts (8 processors are two hosts
    of 4, which no one host of 4 would pass)."""
    return compile_requirements(_without_held(job)) if asks_of_hosts(job) else None


def _without_held(job: Job) -> Job:
    """A copy of `job` whose Requested lists leave out the terms the scheduler holds, where they
    are plain conjuncts (a level with an Or, Nand or Nor keeps its terms: the logic is the matcher's)."""
    def strip(properties: Properties) -> Properties:
        terms = properties.requested
        if any(term.effective_conj is not Conj.AND for term in terms):
            return properties
        return replace(properties, requested=[term for term in terms if not _held_by_scheduler(term)])

    groups = [replace(group, properties=strip(group.properties),
                      tasks=[replace(task, properties=strip(task.properties)) for task in group.tasks])
              for group in job.task_groups]
    return replace(job, properties=strip(job.properties), task_groups=groups)
