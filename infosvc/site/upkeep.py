"""What the queue decides on its own before each pass, as changes on trial copies it then stores:
jobs at their run time limit (Canceled), running jobs whose host is no longer usable (requeued if
rerunnable, else failed), and held jobs whose dependencies have released them or never will."""

from __future__ import annotations

from typing import Callable, Mapping

from infosvc.sched.jobs import ENDED, Event, JobRecord, JobState

__all__ = ["dependencies", "upkeep"]


def upkeep(jobs: Mapping[str, JobRecord], usable: Callable[[str], bool], now: float,
           copy: Callable[[JobRecord], JobRecord]) -> tuple[list[tuple[JobRecord, JobRecord]], list[Event]]:
    """(job, its changed copy) for each job that changes now, and the events. A held job still
    waiting gets its reason (in place: it is no stored state)."""
    changed: list[tuple[JobRecord, JobRecord]] = []
    events: list[Event] = []
    for job in jobs.values():
        if job.state is JobState.RUNNING:
            lost = None if job.limit_at <= now else next((host for host in job.hosts if not usable(host)), None)
            if job.limit_at > now and lost is None:
                continue  # the common case, decided without a copy
            trial = copy(job)
            step = trial.reach_limit(now) if lost is None else trial.host_lost(lost, now)
            if step:
                changed.append((job, trial))
                events.extend(step)
        elif job.state is JobState.QUEUED and job.held:
            verdict = dependencies(jobs, job)
            if verdict is True:
                trial = copy(job)
                trial.held, trial.reason = False, ""
                changed.append((job, trial))
            elif isinstance(verdict, str):
                trial = copy(job)
                events.extend(trial.end(JobState.CANCELED, now, verdict))
                changed.append((job, trial))
            elif isinstance(verdict, tuple):
                job.reason = f"held: {verdict[1]}"
    return changed, events


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
