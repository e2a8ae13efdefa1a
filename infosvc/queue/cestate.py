"""The computing elements' job figures from the queue (GLUE CE State RunningJobs, WaitingJobs,
FreeCPUs, EstimatedResponseTime, WorstResponseTime, and the CE's Job objects), made at the end of
each scheduling pass from the plan, and read by the roll-up when a CE is rendered.

Which jobs are a CE's: a running job is on every CE that serves a cluster it holds a host of; a
waiting job on every CE serving a host it may use (its requirements' mask; any host when it asks
nothing). A CE serves its clusters' hosts that are Ready (Paused and gone hosts count for none).

The response times are those of a new default job (one processor, exclusive, as CCS's default)
submitted now, of the CE's MaxWallClockTime or an hour when it has none (infosvc.sched.forecast):
the worst with every job running to its run time limit; the estimated with every job running for
the share of its limit that finished jobs here have used on average (the limit when fewer than
RATIO_SAMPLES have finished). Times are kept as instants and rendered as seconds from the
reader's now, so an idle queue does not publish a stale wait.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Final, Iterable, Mapping, Protocol, Sequence

import numpy as np

from infosvc.model.glue import CEJob, CEQueued, CEState, ComputingElement, VOFigures
from infosvc.sched.forecast import DEPTH, Demand, first_start, whole_hosts
from infosvc.sched.hosts import HostPool, Mask
from infosvc.sched.jobs import JobRecord
from infosvc.config import ComputingElementConfig

__all__ = ["MAX_CE_JOBS", "UNKNOWN_SECONDS", "CEFigures", "CEQueues", "Holding", "figures_of", "run_time_ratio"]

#: CE Job objects published per CE (running first, then waiting in queue order); the rest counted.
MAX_CE_JOBS: Final = 1000
#: What BDII's information providers publish for a response time they cannot tell.
UNKNOWN_SECONDS: Final = 2146660842
#: The run time of the new job when the CE sets no MaxWallClockTime.
DEFAULT_NEW_JOB_SECONDS: Final = 3600.0
#: Finished jobs needed before their share of the limit is trusted for the estimate.
RATIO_SAMPLES: Final = 10


@dataclass(frozen=True, slots=True)
class CEFigures:
    running_jobs: int
    waiting_jobs: int
    #: processors the queue's running jobs hold on the CE's hosts
    held_cpus: int
    estimated_start: float
    worst_start: float
    jobs: tuple[CEJob, ...] = ()
    by_vo: tuple[VOFigures, ...] = ()


@dataclass(slots=True)
class CEQueues:
    """The figures of the last pass, by CE id, and the clock their instants are read against."""

    figures: dict[str, CEFigures] = field(default_factory=dict)
    clock: Callable[[], float] | None = None

    def ce_state(self, ce_id: str, status: str, free_cpus: int, total_cpus: int) -> CEQueued | None:
        """The CE's State from the last pass's figures, its response times counted from now
        (model.glue.CEQueueFigures)."""
        queued = self.figures.get(ce_id)
        if queued is None:
            return None
        # free: what the hosts report free, and no more than the queue's jobs leave (the hold is
        # the last pass's; the hosts' figures are this moment's)
        return CEQueued(CEState(status, queued.running_jobs, queued.waiting_jobs, self.seconds_until(queued.worst_start),
                                self.seconds_until(queued.estimated_start),
                                max(0, min(free_cpus, total_cpus - queued.held_cpus))), queued.jobs, queued.by_vo)

    def seconds_until(self, instant: float) -> int:
        if not math.isfinite(instant) or self.clock is None:
            return UNKNOWN_SECONDS
        return max(0, min(UNKNOWN_SECONDS, round(instant - self.clock())))


def run_time_ratio(ended: Iterable[JobRecord]) -> float:
    """The mean share of their run time limit that finished jobs ran for; 1 with too few of them."""
    shares = [min(1.0, (job.ended - job.started) / job.estimate) for job in ended
              if job.started is not None and job.ended is not None and math.isfinite(job.estimate)
              and job.estimate > 0]
    return max(0.05, sum(shares) / len(shares)) if len(shares) >= RATIO_SAMPLES else 1.0


class Holding(Protocol):
    """A running job as the figures read it (a JobRecord, or a start the pass has just decided)."""

    @property
    def id(self) -> str: ...

    @property
    def owner(self) -> str: ...

    @property
    def hosts(self) -> dict[str, int]: ...

    @property
    def started(self) -> float | None: ...

    @property
    def estimate(self) -> float: ...

    @property
    def project(self) -> str: ...


def figures_of(ces: Sequence[ComputingElement], cluster_of: Mapping[str, str], pool: HostPool,
               running: Sequence[Holding], waiting: Sequence[tuple[JobRecord, Mask | None, bool]],
               now: float, ratio: float, reserved: str | None = None) -> dict[str, CEFigures]:
    """Each CE's figures. `pool` holds what the running jobs hold, the pass's starts included;
    `running` are those jobs; `waiting` the queued ones in queue order, each with the hosts it may
    use and whether it may start (not held); `reserved` the job the plan holds a reservation for
    (SCHEDULED; the other waiting jobs are WAITING)."""
    clusters = np.array([cluster_of.get(host, "") for host in pool.ids], dtype=object)
    ready = pool.usable & ~pool.paused
    found: dict[str, CEFigures] = {}
    for ce in ces:
        served = np.isin(clusters, list(ce.clusters)) if ce.clusters else np.zeros(len(pool.ids), np.bool_)
        rows = served & ready
        member = {pool.ids[row] for row in np.flatnonzero(served)}
        capacity = int(pool.size[rows].sum())
        sizes = Counter(pool.size[rows].tolist())
        host_size = sizes.most_common(1)[0][0] if sizes else 1
        limit = ce.policy.max_wall_clock_time * 60.0 if ce.policy.max_wall_clock_time > 0 else math.inf
        worst_releases, estimated_releases, running_here = [], [], []
        held_here = 0
        for job in running:
            if not any(host in member for host in job.hosts):
                continue
            held = sum(count for host, count in job.hosts.items() if host in member)
            held_here += held
            running_here.append(job)
            started = job.started or now
            length = min(job.estimate, limit)
            worst_releases.append((started + length, held))
            estimated_releases.append((max(now, started + length * ratio), held))
        ahead_worst: list[Demand] = []
        ahead_estimated: list[Demand] = []
        waiting_here: list[JobRecord] = []
        beyond = 0.0  # processor-seconds of the startable jobs past the forecast's depth
        usable_by: dict[int, bool] = {}
        for job, mask, startable in waiting:
            key = id(mask)
            if key not in usable_by:
                usable_by[key] = bool(served.any()) if mask is None else bool((mask & served).any())
            if not usable_by[key]:
                continue
            waiting_here.append(job)
            if startable:
                need = whole_hosts(job.request.min_processors, host_size) if job.request.exclusive \
                    else job.request.min_processors
                length = min(job.estimate, limit)
                if len(ahead_worst) < DEPTH:
                    after = -math.inf if job.request.eligible is None else job.request.eligible  # EligibleTime
                    ahead_worst.append(Demand(need, length, after))
                    ahead_estimated.append(Demand(need, length * ratio, after))
                elif need <= capacity and math.isfinite(length):
                    beyond += need * length
        free_now = int(pool.free[rows].sum())
        new_length = limit if math.isfinite(limit) else DEFAULT_NEW_JOB_SECONDS
        new_job = Demand(whole_hosts(1, host_size), new_length)
        worst = first_start(now, capacity, free_now, worst_releases, ahead_worst, new_job, beyond=beyond)
        estimated = first_start(now, capacity, free_now, estimated_releases, ahead_estimated,
                                Demand(new_job.processors, new_length * ratio), beyond=beyond * ratio)
        listed = [CEJob(local_id=job.id, status="RUNNING", local_owner=job.owner, global_id=f"{ce.unique_id}/{job.id}")
                  for job in running_here[:MAX_CE_JOBS]]
        listed += [CEJob(local_id=job.id, status="SCHEDULED" if job.id == reserved else "WAITING", local_owner=job.owner,
                         global_id=f"{ce.unique_id}/{job.id}") for job in waiting_here[:MAX_CE_JOBS - len(listed)]]
        found[ce.unique_id] = CEFigures(len(running_here), len(waiting_here), held_here, min(estimated, worst), worst,
                                        tuple(listed), by_vo(running_here, waiting_here))
    return found


def by_vo(running: Iterable[Holding], waiting: Iterable[JobRecord]) -> tuple[VOFigures, ...]:
    """Running and waiting jobs per VO, by the Project each job names; none when no job names one."""
    counts: dict[str, list[int]] = {}
    for column, jobs in ((0, running), (1, waiting)):
        for job in jobs:
            if job.project:
                counts.setdefault(job.project, [0, 0])[column] += 1
    return tuple(VOFigures(vo, run, wait) for vo, (run, wait) in sorted(counts.items()))


# --- the CEs' Status and Policy, as the queue enforces them ----------------------------------------

#: GLUE 1.3 CE Status: Production and Draining are served by the scheduler; Production and Queueing
#: accept submissions (Closed does neither).
SERVED: Final = frozenset({"Production", "Draining"})
ACCEPTING: Final = frozenset({"Production", "Queueing"})


def serving_clusters(ces: Iterable[ComputingElement]) -> set[str]:
    """The clusters some CE in Production or Draining serves: the only ones jobs start on."""
    return {cluster for ce in ces if ce.state.status in SERVED for cluster in ce.clusters}


def running_per_ce(ces: Sequence[ComputingElement], cluster_of: Mapping[str, str],
                   running: Iterable[Holding]) -> Counter[str]:
    found: Counter[str] = Counter()
    for job in running:
        clusters = {cluster_of.get(host, "") for host in job.hosts}
        for ce in ces:
            if clusters.intersection(ce.clusters):
                found[ce.unique_id] += 1
    return found


def full_clusters(ces: Sequence[ComputingElement], running: Counter[str]) -> set[str]:
    """Clusters every serving CE of which has reached its MaxRunningJobs: no job starts there."""
    open_: set[str] = set()
    limited: set[str] = set()
    for ce in ces:
        if ce.state.status not in SERVED:
            continue
        cap = ce.policy.max_running_jobs
        if cap > 0 and running[ce.unique_id] >= cap:
            limited.update(ce.clusters)
        else:
            open_.update(ce.clusters)
    return limited - open_


def refusal(ces: Sequence[ComputingElementConfig], figures: Mapping[str, CEFigures], estimate: float) -> str | None:
    """Why no CE takes a new job of run time limit `estimate`, or None when one does: every CE
    Closed or Draining, at its MaxTotalJobs, or allowing less wall-clock time than the job asks.
    The config's CEs: what it reads of one is all there (a submission need not roll the CEs up)."""
    if not ces:
        return None
    reasons = []
    for ce in ces:
        policy = ce.policy
        here = figures.get(ce.id)
        total = 0 if here is None else here.running_jobs + here.waiting_jobs
        if ce.status not in ACCEPTING:
            reasons.append(f"{ce.id} is {ce.status}")
        elif policy.max_total_jobs > 0 and total >= policy.max_total_jobs:
            reasons.append(f"{ce.id} holds its maximum of {policy.max_total_jobs} jobs")
        elif policy.max_wall_clock_time > 0 and math.isfinite(estimate) and estimate > policy.max_wall_clock_time * 60:
            # a job that asks no limit is given the CE's when it starts (limit_on)
            reasons.append(f"{ce.id} allows at most {policy.max_wall_clock_time} minutes of wall-clock time")
        else:
            return None
    return "no computing element takes the job: " + "; ".join(reasons)


def limit_on(ces: Sequence[ComputingElement], clusters: set[str], estimate: float, processors: int) -> float:
    """The run time limit of a job starting on `clusters`: its own, capped by the most generous
    serving CE there (MaxWallClockTime; MaxCPUTime over the processors it asked, as CPU time is
    at most wall time on each)."""
    best = 0.0
    for ce in ces:
        if ce.state.status not in SERVED or not clusters.intersection(ce.clusters):
            continue
        policy = ce.policy
        cap = math.inf
        if policy.max_wall_clock_time > 0:
            cap = policy.max_wall_clock_time * 60.0
        if policy.max_cpu_time > 0:
            cap = min(cap, policy.max_cpu_time * 60.0 / max(1, processors))
        best = max(best, cap)
    return min(estimate, best) if best > 0 else estimate
