"""The `predictive` policy's run time predictions in the service: each queued job predicted once,
when a pass first sees it, from its owner's ended jobs that ran (the queue keeps the newest ended
jobs in memory, read back from the store at start), as the simulator predicts a trace's job at its
submission (infosvc/sched/prediction.py); and its guard's bound, from the longest wait of those
jobs and the running ones, as the simulator's follows the longest wait of its started jobs."""

from __future__ import annotations

from typing import Iterable

from infosvc.model.ccsjob import JobState
from infosvc.sched.jobs import JobRecord
from infosvc.sched.ordering import guard_after
from infosvc.sched.prediction import UserHistory

__all__ = ["history_of", "overdue_guard", "predict_queued"]


def history_of(jobs: Iterable[JobRecord]) -> UserHistory:
    """Each owner's run times and their part of the jobs' limits, from the jobs that started and
    ended, in the order they ended."""
    # a run is a part of the limit its job asked, not of its CE's where a start lowered it (a 10 h
    # job killed at a 1 h CE limit ran a tenth of its ask, not the whole)
    ran = sorted((job.ended, job.owner, job.ended - job.started,
                  job.estimate if job.request.asked_estimate is None else job.request.asked_estimate)
                 for job in jobs if job.started is not None and job.ended is not None)
    history = UserHistory()
    for _, owner, seconds, estimate in ran:
        history.record(owner, seconds, estimate)
    return history


def predict_queued(jobs: Iterable[JobRecord]) -> int:
    """Predict every queued job that has no prediction yet; how many were. The owners' history is
    read only when there is one to predict."""
    jobs = list(jobs)
    new = [job for job in jobs if job.state is JobState.QUEUED and job.predicted is None]
    if new:
        history = history_of(jobs)
        for job in new:
            job.predicted = history.predict(job.owner, job.estimate)
    return len(new)


def overdue_guard(*started: Iterable[JobRecord]) -> float:
    """The guard's bound (infosvc/sched/ordering.py, `guard_after`) for a pass: from the longest
    wait, submission to start, of the jobs given that started (the ended jobs kept, the running)."""
    longest = max((job.started - job.submitted for jobs in started for job in jobs if job.started is not None),
                  default=0.0)
    return guard_after(longest)
