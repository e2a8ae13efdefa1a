"""How far better predictions could take `predictive` on a trace, measured with predictors no
scheduler has (each knows the trace's run times): where the policy gains little, whether any
prediction made from what a submission carries could reach the goal.

Replays, against EASY's figures (mean bounded slowdown, maximum wait):
- `predictive`: the policy as it is (its predictions: the job's estimate times its user's recent
  ratio of run time to estimate, infosvc/sched/prediction.py);
- `exact`: every prediction the job's own run time (the estimates, the kill limits that EASY's
  reservation and backfilling read, are left as they are);
- `class mean`: the mean run time, over the whole trace, of the jobs of the same user, estimate
  and processors: the best any predictor keyed by those could give if it knew the future;
- `burst mean`: the mean run time of the job's burst (its user's jobs submitted within `--gap`
  seconds of the one before): the best a predictor could give jobs submitted together.
If `exact` gains and the two means do not, the room lies between jobs that look alike when they
are submitted, and no predictor of their run times from what they carry finds it.

Run: `python bench/predictor_bound.py TRACE.swf[.gz] [--processors N] [--skip K] [--first M]
[--gap S]` (the arguments of bench/predictive.py). docs/simulation.md has the figures.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Callable, Hashable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infosvc.sched.simulation import Options, Outcome, SimJob, _replay  # noqa: E402
from infosvc.sched.slackqueue import SlackQueue  # noqa: E402
from trace_part import add_arguments, against_easy, read_part  # noqa: E402


class Foreseen(SlackQueue):
    """`predictive`'s replay queue, each job's prediction read from `table` (job id -> seconds),
    within the policy's own bounds (at least a second, at most the estimate)."""

    def __init__(self, table: dict[str, float]) -> None:
        super().__init__(Options(), None)
        self.table = table

    def predicted(self, job: SimJob) -> float:
        return min(job.estimate, max(1.0, self.table[job.id]))


def means_by(jobs: list[SimJob], key: Callable[[SimJob], Hashable]) -> dict[str, float]:
    """Each job's prediction as the mean run time of the jobs sharing its `key`."""
    runs: dict[Hashable, list[float]] = defaultdict(list)
    for job in jobs:
        runs[key(job)].append(job.run)
    mean = {k: statistics.fmean(v) for k, v in runs.items()}
    return {job.id: mean[key(job)] for job in jobs}


def bursts(jobs: list[SimJob], gap: float) -> dict[str, int]:
    """Each job's burst: a number shared by a user's jobs each submitted within `gap` of the last."""
    last: dict[Hashable, tuple[float, int]] = {}
    burst: dict[str, int] = {}
    numbers = itertools.count()
    for job in sorted(jobs, key=lambda j: (j.submitted, j.id)):
        seen = last.get(job.user)
        number = seen[1] if seen is not None and job.submitted - seen[0] <= gap else next(numbers)
        last[job.user] = (job.submitted, number)
        burst[job.id] = number
    return burst


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(p)
    p.add_argument("--gap", type=float, default=120.0, help="a burst's jobs are submitted within this many seconds")
    args = p.parse_args()
    read, processors, heading = read_part(p, args)
    jobs = read.jobs
    burst = bursts(jobs, args.gap)

    def replay(table: dict[str, float] | None) -> list[Outcome]:
        queue = SlackQueue(Options(), None) if table is None else Foreseen(table)
        return _replay(jobs, processors, queue, None, 1.0)

    against_easy(read, processors, heading, {
        "predictive": lambda: replay(None),
        "exact": lambda: replay({job.id: job.run for job in jobs}),
        "class mean": lambda: replay(means_by(jobs, lambda j: (j.user, j.estimate, j.processors))),
        "burst mean": lambda: replay(means_by(jobs, lambda j: burst[j.id]))})
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
