"""Run time predictions from each user's history, for the `predictive` policy: the job's own
estimate scaled by the part of their estimates the user's last two jobs ran (the mean of their run
time over estimate, of those of the two that had a finite one), never above the estimate, which
stays the job's kill limit. Where the job or both those jobs had no finite estimate, the mean of
the user's last two run times (Tsafrir, Etsion and Feitelson, "Backfilling using system-generated
predictions rather than user runtime estimates", IEEE TPDS 18(6), 2007: EASY++); a user's first
job is predicted by its estimate.
docs/simulation.md says why the ratio, and what it was chosen on. Pure: the simulator feeds it the
jobs it ends, the service the finished jobs of its store."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Hashable

__all__ = ["HISTORY", "UserHistory", "planned_end"]

#: How many of a user's last jobs a prediction reads (EASY++'s two).
HISTORY = 2


@dataclass(slots=True)
class UserHistory:
    """Each user's last `HISTORY` jobs, newest last: each one's run time, and its run time over its
    estimate where that was finite (else None)."""

    jobs: dict[Hashable, list[tuple[float, float | None]]] = field(default_factory=dict)

    def record(self, user: Hashable, run_seconds: float, estimate: float = math.inf) -> None:
        """A job of `user` with kill limit `estimate` ended after `run_seconds` (killed at its limit
        or not: what it used)."""
        if not math.isfinite(run_seconds) or run_seconds < 0:
            return
        ratio = min(1.0, run_seconds / estimate) if math.isfinite(estimate) and estimate > 0 else None
        last = self.jobs.setdefault(user, [])
        last.append((run_seconds, ratio))
        if len(last) > HISTORY:
            del last[0]

    def predict(self, user: Hashable, estimate: float) -> float:
        """The run time `user`'s next job, of kill limit `estimate`, is expected to take: `estimate`
        times the mean ratio of run time to estimate of those of the user's last jobs that had a
        finite one; the mean of their run times where none had, or where the job has no finite
        estimate; `estimate` itself while the user has no history. At most `estimate` (the job is
        killed there); never below one second (a prediction of nothing would let any job be
        backfilled anywhere)."""
        last = self.jobs.get(user)
        if not last:
            return estimate
        ratios = [ratio for _, ratio in last if ratio is not None]
        if ratios and math.isfinite(estimate):
            return min(estimate, max(1.0, estimate * sum(ratios) / len(ratios)))
        return min(estimate, max(1.0, sum(run for run, _ in last) / len(last)))


def planned_end(started: float, predicted: float, estimate: float, now: float) -> float:
    """When a running job is expected to end: at its prediction, or, once it has outlived it, at
    its estimate (the kill limit: the latest it can end). EASY++ also re-plans an overrun job; to
    its limit is the bound that is always right."""
    end = started + predicted
    return end if end > now else started + estimate
