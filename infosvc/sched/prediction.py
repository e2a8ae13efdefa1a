"""Run time predictions from each user's history, for the `predictive` policy: the job's own
estimate scaled by the part of their estimates the user's last two jobs ran (the mean of their run
time over estimate), never above the estimate, which stays the job's kill limit. Where a job or
the user's last jobs had no finite estimate, the mean of the user's last two run times (Tsafrir,
Etsion and Feitelson, "Backfilling using system-generated predictions rather than user runtime
estimates", IEEE TPDS 18(6), 2007: EASY++); a user's first job is predicted by its estimate.
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
    """Each user's last `HISTORY` actual run times, and the run time over estimate of the last
    `HISTORY` of those jobs that had a finite estimate; newest last."""

    runs: dict[Hashable, list[float]] = field(default_factory=dict)
    ratios: dict[Hashable, list[float]] = field(default_factory=dict)

    def record(self, user: Hashable, run_seconds: float, estimate: float = math.inf) -> None:
        """A job of `user` with kill limit `estimate` ended after `run_seconds` (killed at its limit
        or not: what it used)."""
        if not math.isfinite(run_seconds) or run_seconds < 0:
            return
        _keep(self.runs.setdefault(user, []), run_seconds)
        if math.isfinite(estimate) and estimate > 0:
            _keep(self.ratios.setdefault(user, []), min(1.0, run_seconds / estimate))

    def predict(self, user: Hashable, estimate: float) -> float:
        """The run time `user`'s next job, of kill limit `estimate`, is expected to take: `estimate`
        times the user's recent ratio of run time to estimate; the mean of the user's last run
        times where the job or they had no finite estimate; `estimate` itself while the user has
        no history. At most `estimate` (the job is killed there); never below one second (a
        prediction of nothing would let any job be backfilled anywhere)."""
        ratios = self.ratios.get(user)
        if ratios and math.isfinite(estimate):
            return min(estimate, max(1.0, estimate * sum(ratios) / len(ratios)))
        last = self.runs.get(user)
        if not last:
            return estimate
        return min(estimate, max(1.0, sum(last) / len(last)))


def _keep(last: list[float], value: float) -> None:
    last.append(value)
    if len(last) > HISTORY:
        del last[0]


def planned_end(started: float, predicted: float, estimate: float, now: float) -> float:
    """When a running job is expected to end: at its prediction, or, once it has outlived it, at
    its estimate (the kill limit: the latest it can end). EASY++ also re-plans an overrun job; to
    its limit is the bound that is always right."""
    end = started + predicted
    return end if end > now else started + estimate
