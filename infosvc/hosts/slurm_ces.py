"""Slurm's partitions as the site's computing elements (docs/slurm.md, Reading the cluster): one CE
per partition, built from the last good read at each rendering, in place of the config's CEs.

- Which CE: a `[[computing_elements]]` entry whose `queue` is the partition's name (its id, name,
  host, port, access rules and the policy figures Slurm does not give); else the partition alone.
- Status from the partition's State: UP Production, DRAIN Draining, DOWN Closed, INACTIVE Queueing.
- Policy: MaxWallClockTime from MaxTime, MaxSlotsPerJob from MaxNodes (times the most CPUs a node
  of the partition has); the rest from the config's entry (Slurm's QOS limits are not read).
- TotalCPUs: the CPUs of the partition's nodes that are up (drained ones too, as Paused hosts
  count); FreeCPUs: those Slurm has not allocated on nodes that take jobs, while the partition is
  UP; RunningJobs and WaitingJobs: squeue's jobs of the partition, running and pending.
- Response times of a new one-CPU job: the estimated from Slurm's own forecast (`squeue --start`)
  of the partition's last pending job, where Slurm made one; else, and for the worst, the
  service's forecast: every job running to its time limit (the partition's MaxTime where a job
  has none) and the pending jobs starting first come, first served. What neither tells (a job in
  the way has no limit at all) is UNKNOWN_SECONDS.
- Per-VO views: the running and pending jobs of the accounts `[lrms.accounts]` maps to each VO;
  a CE the config gives no access rules admits `VO:name` for each VO mapped from an account the
  partition allows.
"""

from __future__ import annotations

import heapq
import logging
import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Final, Iterable, Mapping

from infosvc.config import ComputingElementConfig, SiteConfig
from infosvc.lrms.cluster import ClusterState, SlurmJob, SlurmNode, SlurmPartition
from infosvc.loglimit import LogLimiter
from infosvc.model import glue
from infosvc.model.glue import directory_key

#: CE Job objects published per CE (running first, then pending); the rest are counted only
MAX_CE_JOBS: Final = 1000
#: what BDII's information providers publish for a response time they cannot tell
UNKNOWN_SECONDS: Final = 2146660842
STATUS_OF: Final = {"UP": "Production", "DRAIN": "Draining", "DOWN": "Closed", "INACTIVE": "Queueing"}
#: a partition left out for its name (read at every rendering): once per interval, not at each
_clashes = LogLimiter(logging.getLogger("infosvc.lrms"))


def _config_for(config: SiteConfig) -> dict[str, ComputingElementConfig]:
    """partition -> the configured CE whose queue names it (the first, as a config lists them)."""
    found: dict[str, ComputingElementConfig] = {}
    for ce in config.computing_elements:
        if not ce.all_clusters:
            found.setdefault(ce.queue, ce)
    return found


def _limit(job: SlurmJob, partition: SlurmPartition) -> float | None:
    """The job's time limit in seconds (the partition's MaxTime where it has none); None: unlimited."""
    limit = job.time_limit if job.time_limit is not None else partition.max_time
    return None if limit is None else limit * 60.0


def by_limits(partition: SlurmPartition, jobs: list[SlurmJob], free_cpus: int, usable_cpus: int,
              now: float) -> float | None:
    """When a new one-CPU job would start if every job ran to its time limit and the pending ones
    started first come, first served (no backfill: so at worst): an instant, or None when a job
    in the way has no limit. A pending job larger than the usable CPUs starts nowhere: skipped."""
    events = [(j.start_time + lim, j.cpus) for j in jobs  # (instant, CPUs freed): a heap
              if j.running and (lim := _limit(j, partition)) is not None]
    heapq.heapify(events)
    unbounded = any(j.running and _limit(j, partition) is None for j in jobs)
    free, clock = free_cpus, now
    for job in [*(j for j in jobs if j.pending and 0 < j.cpus <= usable_cpus), None]:
        cpus = 1 if job is None else job.cpus
        while free < cpus:
            if not events:
                return None if unbounded or usable_cpus < cpus else clock
            when, freed = heapq.heappop(events)
            clock, free = max(clock, when), free + freed
        if job is None:
            return clock
        free -= cpus
        limit = _limit(job, partition)
        if limit is None:
            unbounded = True
        else:
            heapq.heappush(events, (clock + limit, cpus))
    return clock


def response_instants(partition: SlurmPartition, jobs: list[SlurmJob], free_cpus: int, usable_cpus: int,
                      now: float) -> tuple[float, float]:
    """(estimated, worst) instants a new one-CPU job would start on the partition: the estimate
    Slurm's own forecast of the last pending job where it made one, else `by_limits`; the worst
    `by_limits`, never before the estimate. -inf: at once; inf: no one can tell."""
    pending = [j for j in jobs if j.pending]
    if not pending and free_cpus > 0:
        return -math.inf, -math.inf
    worst = by_limits(partition, jobs, free_cpus, usable_cpus, now)
    forecasts = [f for j in pending if (f := j.forecast(now)) is not None]
    estimated = max(forecasts) if forecasts else worst
    est = math.inf if estimated is None else estimated
    return est, (math.inf if worst is None else max(est, worst))


def seconds_from(instant: float, now: float) -> int:
    """An instant of `response_instants` as the seconds from `now` GLUE publishes."""
    if instant == math.inf:
        return UNKNOWN_SECONDS
    return max(0, round(instant - now)) if instant != -math.inf else 0


def response_times(partition: SlurmPartition, jobs: list[SlurmJob], free_cpus: int, usable_cpus: int,
                   now: float) -> tuple[int, int]:
    """(estimated, worst) seconds a new one-CPU job would wait on the partition, from `now`."""
    est, worst = response_instants(partition, jobs, free_cpus, usable_cpus, now)
    return seconds_from(est, now), seconds_from(worst, now)


def _jobs(jobs: list[SlurmJob], private: frozenset[str]) -> tuple[glue.CEJob, ...]:
    """The CE's Job entries: none where Slurm keeps jobs private (PrivateData=jobs or all: a user's
    squeue shows no job of another's, and the counts stay published); the reads are root's, which
    Slurm's privacy does not filter. (PrivateData=users leaves squeue's user names shown.)"""
    if private & {"jobs", "all"}:
        return ()
    shown = sorted(jobs, key=lambda j: not j.running)[:MAX_CE_JOBS]
    return tuple(glue.CEJob(j.id, "RUNNING" if j.running else "WAITING", j.user or None,
                            scheduler_specific=j.reason if j.pending and j.reason and j.reason != "None" else None)
                 for j in shown if j.running or j.pending)


def _by_vo(jobs: Iterable[SlurmJob], vo_of: Callable[[str], str | None]) -> tuple[glue.VOFigures, ...]:
    counts: dict[str, list[int]] = {}
    for job in jobs:
        vo = vo_of(job.account)
        if vo is not None and (job.running or job.pending):
            counts.setdefault(vo, [0, 0])[0 if job.running else 1] += 1
    return tuple(glue.VOFigures(vo, r, w) for vo, (r, w) in sorted(counts.items()))


def _vo_rules(part: SlurmPartition, config: SiteConfig) -> tuple[str, ...]:
    """`VO:name` for each VO whose accounts may use the partition (AllowAccounts, else any), when
    the config gives the CE no rules of its own: the VOs a site maps its accounts to are its users."""
    accounts = config.lrms.accounts
    allowed = [a for a in accounts if not part.allow_accounts or a in part.allow_accounts]
    return tuple(f"VO:{vo}" for vo in dict.fromkeys(accounts[a] for a in allowed))


@dataclass(frozen=True, slots=True)
class PartitionCE:
    """A partition's CE as one read makes it, its response times as instants: `at(now)` is the CE
    a rendering publishes (built once per read, rendered many times)."""

    ce: glue.ComputingElement
    estimated_at: float
    worst_at: float

    def at(self, now: float) -> glue.ComputingElement:
        state = replace(self.ce.state, estimated_response_time=seconds_from(self.estimated_at, now),
                        worst_response_time=seconds_from(self.worst_at, now))
        return replace(self.ce, state=state)


def partition_ces(state: ClusterState, config: SiteConfig, host_of: Mapping[str, str]) -> list[PartitionCE]:
    """A CE per partition of `state`; `host_of`: node name -> the id of the host it is published as."""
    configured = _config_for(config)
    nodes = {n.name: n for n in state.nodes}
    jobs_of: dict[str, list[SlurmJob]] = {}
    for job in state.jobs:
        jobs_of.setdefault(job.partition, []).append(job)
    url = config.service.information_service_url or None
    found = []
    for part in state.partitions:
        ce = configured.get(part.name)
        members = [nodes[n] for n in part.nodes if n in nodes]
        found.append(_ce(part, ce, members, jobs_of.get(part.name, []), state, config, host_of, url))
    return _apart(found, [configured.get(part.name) is not None for part in state.partitions])


def _apart(found: list[PartitionCE], named: list[bool]) -> list[PartitionCE]:
    """The CEs with ids a directory tells apart (`directory_key`: GlueCEUniqueID ignores case and
    runs of spaces): a partition without a config entry is a CE of its own name, which may be a
    configured CE's id (`Batch` serving another partition) or another partition's in another case;
    the config's ids, then the partitions in Slurm's order, keep theirs, and the later one is
    published as `slurm/NAME` (or left out, with a warning, should that be taken too)."""
    taken = {directory_key(p.ce.unique_id) for p, own in zip(found, named) if own}
    kept = []
    for partition, own in zip(found, named):
        ce = partition.ce
        if not own:
            for ident in (ce.unique_id, f"slurm/{ce.queue}"):
                if directory_key(ident) not in taken:
                    partition = replace(partition, ce=replace(ce, unique_id=ident))
                    break
            else:
                _clashes.warning(ce.queue, "Slurm partition %r left out of the CEs: its name and slurm/%s are "
                                 "other CEs' ids to a directory", ce.queue, ce.queue)
                continue
            taken.add(directory_key(partition.ce.unique_id))
        kept.append(partition)
    return kept


def computing_elements(state: ClusterState, config: SiteConfig, host_of: Mapping[str, str],
                       now: float | None = None) -> list[glue.ComputingElement]:
    """The CEs of `state` as published at `now`."""
    now = time.time() if now is None else now
    return [p.at(now) for p in partition_ces(state, config, host_of)]


def _ce(part: SlurmPartition, ce: ComputingElementConfig | None, members: list[SlurmNode], jobs: list[SlurmJob],
        read: ClusterState, config: SiteConfig, host_of: Mapping[str, str], url: str | None) -> PartitionCE:
    status = STATUS_OF.get(part.state, "Closed")
    up = [n for n in members if not n.down]
    total = sum(n.cpus for n in up)
    free = sum(n.idle_cpus for n in members if n.usable) if part.state == "UP" else 0
    running = sum(1 for j in jobs if j.running)
    waiting = sum(1 for j in jobs if j.pending)
    usable = sum(n.cpus for n in members if n.usable)
    estimated, worst = response_instants(part, jobs, free, usable, read.read_at)
    base = ce.policy if ce is not None else glue.CEPolicy()
    policy = glue.CEPolicy(max_wall_clock_time=part.max_time or 0, max_cpu_time=base.max_cpu_time,
                           max_total_jobs=base.max_total_jobs, max_running_jobs=base.max_running_jobs,
                           priority=base.priority)
    widest = max((n.cpus for n in members), default=0)
    clusters = tuple(dict.fromkeys(config.cluster_of(host_of.get(n.name, n.name)).id for n in members))
    gpus = sum(k.count for n in up for k in n.gpus)
    used = sum(k.used for n in up for k in n.gpus)
    free_gpus = sum(k.count - k.used for n in members if n.usable for k in n.gpus) if part.state == "UP" else 0
    return PartitionCE(glue.ComputingElement(
        unique_id=ce.id if ce is not None else part.name, name=ce.name if ce is not None else part.name,
        queue=part.name,
        info=glue.CEInfo("slurm", read.version or None, (ce.gram_version or None) if ce else None,
                         (ce.host_name or None) if ce else None, (ce.gatekeeper_port or None) if ce else None, total),
        policy=policy, state=glue.CEState(status, running, waiting, 0, 0, free),
        access_control_rules=ce.access_control if ce is not None and ce.access_control else _vo_rules(part, config),
        jobs=_jobs(jobs, read.private), clusters=clusters,
        information_service_url=url, by_vo=_by_vo(jobs, config.lrms.vo_of),
        accelerators=glue.AcceleratorFigures(gpus, used, free_gpus) if gpus else None,
        max_slots_per_job=part.max_nodes * widest if part.max_nodes is not None and widest else None),
        estimated, worst)
