"""Run time predictions from each user's history, for the `predictive` policy: the mean of the
user's last two actual run times (Tsafrir, Etsion and Feitelson, "Backfilling using
system-generated predictions rather than user runtime estimates", IEEE TPDS 18(6), 2007: EASY++),
never above the job's own estimate, which stays its kill limit; a user's first job is predicted by
its estimate. Pure: the simulator feeds it the jobs it ends, the service the finished jobs of its
store."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Hashable

__all__ = ["HISTORY", "UserHistory", "planned_end"]

#: How many of a user's last run times a prediction averages (EASY++'s two).
HISTORY = 2


@dataclass(slots=True)
class UserHistory:
    """Each user's last `HISTORY` actual run times, newest last."""

    runs: dict[Hashable, list[float]] = field(default_factory=dict)

    def record(self, user: Hashable, run_seconds: float) -> None:
        """A job of `user` ended after `run_seconds` (killed at its limit or not: what it used)."""
        if not math.isfinite(run_seconds) or run_seconds < 0:
            return
        last = self.runs.setdefault(user, [])
        last.append(run_seconds)
        if len(last) > HISTORY:
            del last[0]

    def predict(self, user: Hashable, estimate: float) -> float:
        """The run time `user`'s next job is expected to take: the mean of the user's last run
        times, at most `estimate` (a user's job is killed at its estimate, so it cannot take longer);
        `estimate` itself while the user has no history. Never below one second: a prediction of
        nothing would let any job be backfilled anywhere."""
        last = self.runs.get(user)
        if not last:
            return estimate
        return min(estimate, max(1.0, sum(last) / len(last)))


def planned_end(started: float, predicted: float, estimate: float, now: float) -> float:
    """When a running job is expected to end: at its prediction, or, once it has outlived it, at
    its estimate (the kill limit: the latest it can end). EASY++ also re-plans an overrun job; to
    its limit is the bound that is always right."""
    end = started + predicted
    return end if end > now else started + estimate
