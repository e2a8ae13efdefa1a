"""What the queue decides on its own before each pass, as changes on trial copies it then stores:
jobs at their run time limit (Canceled), running jobs whose host is no longer usable (requeued if
rerunnable, else failed), tasks no executor started within the start timeout (requeued or failed,
and their host to be drained, as Slurm drains a node after a launch failure), held jobs whose
dependencies have released them or never will, and queued jobs whose SSS Deadline has come
(Canceled; a running one reaches it as its limit: JobRecord.limit_at)."""

from __future__ import annotations

import math
from typing import Callable, Iterable, Mapping

from infosvc.model.ccsjob import JobState
from infosvc.model.snapshot import iso
from infosvc.sched.jobs import ENDED, Event, JobRecord

__all__ = ["dependencies", "held_reason", "start_deadline", "upkeep", "wake_at"]


def upkeep(jobs: Mapping[str, JobRecord], usable: Callable[[str], bool], now: float,
           copy: Callable[[JobRecord], JobRecord], start_timeout: float = math.inf, counted_from: float = 0.0,
           ) -> tuple[list[tuple[JobRecord, JobRecord]], list[Event], dict[str, str]]:
    """(job, its changed copy) for each job that changes now, the events, and the hosts to drain
    with why. A task placed and not started within `start_timeout` seconds (counted from its
    placement, or from `counted_from`, the service's start, when later) is not started. A held job
    still waiting gets its reason (in place: it is no stored state)."""
    changed: list[tuple[JobRecord, JobRecord]] = []
    events: list[Event] = []
    drain: dict[str, str] = {}
    for job in jobs.values():
        if job.state is JobState.RUNNING:
            lost = None if job.limit_at <= now else next((host for host in job.hosts if not usable(host)), None)
            late = job.unstarted(now, start_timeout, counted_from) if job.limit_at > now and lost is None else {}
            if job.limit_at > now and lost is None and not late:
                continue  # the common case, decided without a copy
            trial = copy(job)
            if late:
                details = {host: f"task{'s' if len(tasks) > 1 else ''} {', '.join(map(str, tasks))} of job {job.id} "
                                 f"not started by an executor on {host} within {start_timeout:g} s of its placement"
                           for host, tasks in late.items()}
                host, tasks = next(iter(late.items()))
                step = trial.not_started(host, tasks, now, details[host])
                for other, detail in details.items():
                    drain.setdefault(other, f"drained: {detail}")
            else:
                step = trial.reach_limit(now) if lost is None else trial.host_lost(lost, now)
            if step:
                changed.append((job, trial))
                events.extend(step)
        elif job.state is JobState.QUEUED and job.request.deadline is not None and job.request.deadline <= now:
            trial = copy(job)
            events.extend(trial.end(JobState.CANCELED, now, f"its Deadline ({iso(job.request.deadline)}) came "
                                                            "before it could start"))
            changed.append((job, trial))
        elif job.state is JobState.QUEUED and job.held:
            verdict = dependencies(jobs, job)
            if verdict is True:
                trial = copy(job)
                trial.held, trial.reason = False, held_reason(job.holds)
                changed.append((job, trial))
            elif isinstance(verdict, str):
                trial = copy(job)
                events.extend(trial.end(JobState.CANCELED, now, verdict))
                changed.append((job, trial))
            elif isinstance(verdict, tuple):
                job.reason = held_reason(job.holds, verdict[1])
        elif job.state is JobState.QUEUED and job.holds:
            job.reason = held_reason(job.holds)
    return changed, events, drain


def held_reason(holds: tuple[str, ...], dependency: str = "") -> str:
    """Why a held job waits: each Hold on it by name, and the dependency it waits for."""
    named = [f"{hold} hold" for hold in holds] + ([dependency] if dependency else [])
    return f"held: {', '.join(named)}" if named else ""


def wake_at(jobs: Iterable[JobRecord], now: float) -> float:
    """The next instant a queued job's SSS times change what the queue does: its EligibleTime (a
    pass may start it) or its Deadline (it is ended); inf: none."""
    soonest = math.inf
    for job in jobs:
        request = job.request
        if (request.eligible is not None or request.deadline is not None) and job.state is JobState.QUEUED:
            for at in (request.eligible, request.deadline):
                if at is not None and now < at < soonest:
                    soonest = at
    return soonest


def start_deadline(jobs: Mapping[str, JobRecord], start_timeout: float, counted_from: float) -> float:
    """When the first placed task not yet started is due to have been (inf: none)."""
    return min((max(task.dispatched or 0.0, counted_from) + start_timeout
                for job in jobs.values() if job.state is JobState.RUNNING
                for task in job.tasks if task.state is JobState.RUNNING and task.began is None), default=math.inf)


def dependencies(jobs: Mapping[str, JobRecord], job: JobRecord) -> bool | str | tuple[None, str]:
    """True when every dependency has released the job; a reason when one never will; else
    (None, what it waits for)."""
    for after in job.request.after:
        other = jobs.get(after.job)
        if other is None:
            return f"dependency {after.job} is unknown"
        if other.state not in ENDED:
            return None, f"{after.unmet()} (job {other.id})"
        if not after.released_by(other.state.value, other.exit_code):
            return (f"dependency {after.label or other.id} (job {other.id}) ended {other.state.value}; "
                    f"the job was to run after {after.describe()}")
    return True
