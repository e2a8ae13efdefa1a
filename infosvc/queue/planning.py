"""One scheduling pass of the site's queue, planned off the event loop on copies: the CEs' limits
on running jobs applied to the pool, the policy's plan (infosvc.sched), and then the CEs' figures
for GLUE (infosvc.queue.cestate). The queue (queue/jobqueue.py) gathers the inputs under its lock and
applies the plan under it again."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from infosvc.matching import Requirements
from infosvc.model.glue import ComputingElement
from infosvc.sched import Plan, Policy, Running, schedule
from infosvc.sched.hosts import NO_HOST, Allocation, HostPool, WaitingJob
from infosvc.model.ccsjob import JobState
from infosvc.sched.jobs import JobRecord
from infosvc.sched.ordering import OVERDUE_AFTER, slack_key
from infosvc.sched.policy import predicted
from infosvc.queue.cestate import SERVED, CEFigures, Homes, figures_of, full_clusters, homes_of, running_per_ce
from infosvc.queue.eligibility import Eligibility
from infosvc.hosts import iso_time

__all__ = ["PassPlan", "Started", "allocation_of", "could_start", "explained", "held_on", "still_waiting"]


@dataclass(frozen=True, slots=True)
class Started:
    """A start the pass has decided, as the CE figures read a running job."""

    id: str
    owner: str
    hosts: dict[str, int]
    started: float
    estimate: float
    project: str = ""


@dataclass(slots=True)
class PassPlan:
    """One pass's planning, off the event loop on copies: the plan, then the CEs' figures."""

    pool: HostPool
    running: list[Running[Allocation]]
    holders: list[JobRecord]
    queued: list[tuple[WaitingJob, JobRecord, bool]]
    now: float
    ces: list[ComputingElement]
    cluster_of: dict[str, str]
    ratio: float
    policy: Policy
    #: the CEs each waiting job is counted on, made by `run` with the figures
    homes: Homes = field(default_factory=lambda: Homes({}, frozenset()))
    #: `predictive`'s guard: a job waiting this long is served in EASY's order (infosvc/queue/predictions.py)
    overdue_after: float = OVERDUE_AFTER

    def run(self) -> tuple[Plan[Allocation], dict[str, CEFigures]]:
        pool, ces = self.pool, self.ces
        counts = running_per_ce(ces, self.cluster_of, self.holders)
        full = full_clusters(ces, counts)
        if full:  # every serving CE there is at its MaxRunningJobs: what is free there is not to be had
            rows = tuple(row for row, host in enumerate(pool.ids)
                         if self.cluster_of.get(host) in full and pool.free[row] > 0 and not pool.exclusive[row])
            if rows:
                pool.take(Allocation(rows, tuple(int(pool.free[r]) for r in rows), 0.0, False))
        if self.policy is Policy.PREDICTIVE:  # within a priority group, the slack order (sched/ordering.py)
            ordered = sorted(self.queued, key=lambda item: (-item[0].priority, slack_key(item[0].submitted, predicted(
                item[0])), item[0].submitted, item[0].id))
        else:
            ordered = sorted(self.queued, key=lambda item: (-item[0].priority, item[0].submitted, item[0].id))
        # jobs with an SSS EligibleTime: the policy passes over those not yet eligible
        not_before = {w.id: r.request.eligible for w, r, may in ordered if may and r.request.eligible is not None}
        plan = schedule(pool, self.running, [w for w, _, may in ordered if may], self.now, self.policy, when=iso_time,
                        not_before=not_before, overdue_after=self.overdue_after)
        kept, started = [], []
        records = {w.id: record for w, record, _ in ordered} if plan.starts else {}  # a refresh starts none
        for start in plan.starts:  # MaxRunningJobs within the pass, in queue order
            clusters = {self.cluster_of.get(pool.ids[row], "") for row in start.allocation.rows}
            serving = [ce for ce in ces if ce.state.status in SERVED and clusters.intersection(ce.clusters)]
            if serving and all(0 < ce.policy.max_running_jobs <= counts[ce.unique_id] for ce in serving):
                plan.waiting[start.job.id] = "its computing element has its maximum of running jobs"
                continue
            for ce in serving:
                counts[ce.unique_id] += 1
            pool.take(start.allocation)
            kept.append(start)
            record = records[start.job.id]
            started.append(Started(record.id, record.owner, {pool.ids[r]: n for r, n in zip(
                start.allocation.rows, start.allocation.processors)}, self.now, start.job.estimate, record.project))
        plan.starts = kept
        ids = {s.id for s in started}
        waiting = [(record, w.eligible, may) for w, record, may in ordered if record.id not in ids]
        reservation = plan.reservation
        reserved = reservation.job.id if reservation is not None and reservation.allocation is not None \
            and math.isfinite(reservation.at) else None
        self.homes = homes_of(ces, self.cluster_of, pool, waiting)
        figures = figures_of(ces, self.cluster_of, pool, [*self.holders, *started], waiting, self.now, self.ratio,
                             reserved, self.homes)
        return plan, figures


def held_on(pool: HostPool, jobs: Iterable[JobRecord]) -> tuple[list[Running[Allocation]], list[JobRecord],
                                                                 list[JobRecord]]:
    """What the running jobs hold, taken from `pool` (a copy of the site's), as the policy reads
    them; every running job (the CE figures count them all); and the finished jobs."""
    running: list[Running[Allocation]] = []
    holders: list[JobRecord] = []
    finished: list[JobRecord] = []
    for job in jobs:
        if job.state is JobState.RUNNING:
            holders.append(job)
            allocation = allocation_of(pool, job)
            if allocation is None:
                continue
            try:
                pool.take(allocation)
            except ValueError:
                continue  # a host shrank under it: the pool holds what it can
            started = job.started or 0.0  # it ends by its limit or its Deadline, whichever comes first
            running.append(Running(job.id, started, min(job.estimate, job.limit_at - started), allocation,
                                   job.predicted or math.nan))
        elif job.state is JobState.FINISHED:
            finished.append(job)
    return running, holders, finished


def allocation_of(pool: HostPool, job: JobRecord) -> Allocation | None:
    rows = [(pool.row[host], count) for host, count in job.hosts.items() if host in pool.row]
    if not rows:
        return None
    hosts = tuple(r for r, _ in rows)
    return Allocation(hosts, tuple(c for _, c in rows), job.memory_mb, job.exclusive,
                      pool.licenses_of(hosts, job.request.licenses), job.request.gpus)


def could_start(records: list[JobRecord], room: HostPool, base: HostPool, eligibility: Eligibility,
                requirements: Mapping[str, Requirements | None], head_priority: int | None) -> bool:
    """Whether a pass now could start one of these newly submitted jobs, by what the last pass
    left free (`room`, over `base`'s rows). Nothing else changed since, so a job that does not fit
    there starts nothing (nor does its arrival let another job start): its pass can wait. A job
    whose hosts need the matcher, or that goes before the reserved head, is the pass's to judge at
    once. A job that cannot start is given the reason the pass would give it."""
    if room.ids is not base.ids:  # the hosts changed since the last pass (a copy shares its pool's ids)
        return True
    for job in records:
        if job.held or job.holds:
            continue
        if job.request.eligible is not None:
            return True  # the pass's to judge, and its time the queue's next wake-up
        if job.admin or (head_priority is not None and job.priority > head_priority):
            return True
        known, mask = eligibility.known(job.request, requirements.get(job.id), base)
        if not known:
            return True
        waiting = WaitingJob(job.id, job.priority, job.submitted, job.estimate, job.request, mask)
        if room.place(waiting) is not None:
            return True
        job.rejected = eligibility.rejected_for(job.request, requirements.get(job.id))
        job.reason = explained(room.describe_shortfall(waiting), job.rejected)
    return False


def explained(reason: str, rejected: tuple[str, ...], idle: str = "") -> str:
    """A waiting job's reason with why no host meets its requirements: the first kind of hosts its
    requirements rule out, else the CEs that serve no job now (`idle`)."""
    if NO_HOST in reason and rejected:
        return reason.replace(NO_HOST, f"{NO_HOST} ({rejected[0]})")
    if NO_HOST in reason and idle:
        return reason.replace(NO_HOST, f"{NO_HOST}: no computing element serves jobs now ({idle})")
    return reason


def still_waiting(job: JobRecord) -> bool:
    """Whether a job a pass planned for is still one it may start, explain or reserve for when the
    plan is applied: queued and not held. A hold is acknowledged while the pass plans off the loop,
    outside the queue's lock; it pokes the next pass, which plans with it."""
    return job.state is JobState.QUEUED and not job.holds and not job.held
