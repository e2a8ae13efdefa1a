"""An upper bound for `predictive`'s guard (infosvc/sched/ordering.py): what the policy would do
if it knew, for each job, when EASY would start it. Not a policy (no scheduler can know that): a
measurement of whether a better guard bound could hold the maximum wait at EASY's.

The guard turns a job overdue (served in EASY's order, ahead of the slack order) once it has
waited a quarter of the longest wait so far. Here a job is also overdue from the instant EASY's
own replay of the same jobs started it (`--scale S`: from its submission plus S times its wait
under EASY). If the maximum wait stays above EASY's even so, no choice of the guard's bound can
bring it there: the cause is not when a job turns overdue. docs/simulation.md has the figures.

Run: `python bench/guard_oracle.py TRACE.swf[.gz] [--processors N] [--skip K] [--first M]
[--scale S]` (the arguments of bench/predictive.py); prints easy, predictive and the oracle:
mean bounded slowdown against easy's and maximum wait as a ratio of easy's.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import sys
from itertools import takewhile
from pathlib import Path
from typing import Collection, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infosvc.sched import Policy, ProcessorPool, Running, Start  # noqa: E402
from infosvc.sched.ordering import guard_after  # noqa: E402
from infosvc.sched.policy import Plan, schedule  # noqa: E402
from infosvc.sched.simulation import Options, SimJob, Waiting, _replay, simulate  # noqa: E402
from infosvc.sched.slackqueue import SlackQueue  # noqa: E402
from trace_part import add_arguments, against_easy, read_part  # noqa: E402


#: `schedule`'s guard bound here: far enough back that every job `_overdue` yields counts as overdue
_EVERY = -1e300


class OracleQueue(SlackQueue):
    """`predictive`'s replay queue with one more way to be overdue: EASY's start of the job
    (`due`: job id -> instant). Every pass is made whole (no resume: its conditions assume the
    guard alone)."""

    def __init__(self, due: dict[str, float]) -> None:
        super().__init__(Options(), None, resumes=False)
        self.due = due
        self.pending: list[tuple[float, float, str, Waiting]] = []  # (due, submission, id, job), a heap
        self.late: list[tuple[float, str, Waiting]] = []  # past due and waiting, by (submission, id)

    def arrive(self, job: SimJob, now: float) -> None:
        super().arrive(job, now)
        heapq.heappush(self.pending, (self.due[job.id], job.submitted, job.id, self.fresh[-1]))

    def plan(self, pool: ProcessorPool, running: Collection[Running[int]], now: float) -> Plan[int]:
        self.fresh = []
        while self.pending and self.pending[0][0] <= now:
            _, submitted, job_id, waiting = heapq.heappop(self.pending)
            if job_id in self.key_of:  # still waiting
                bisect.insort(self.late, (submitted, job_id, waiting))
        limit = now - guard_after(self.longest, self.options.overdue_after, self.options.guard_fraction)
        # The overdue jobs, by age: those past the guard's bound (a prefix of `ages`) merged with
        # those past due. The bound handed to `schedule` lets every job read from `by_age` count.
        plan = schedule(pool, running, self.queue, now, Policy.PREDICTIVE, explain=False, overdue_after=_EVERY,
                        by_age=self._overdue(limit), shapes=self.shapes)
        plan.backfilling = None
        if plan.starts:
            self.longest = max(self.longest, now - min(start.job.submitted for start in plan.starts))
        return plan

    def _overdue(self, limit: float) -> Iterator[Waiting]:
        guarded = takewhile(lambda age: age[0] <= limit, self.ages)  # `ages` is by submission
        seen: set[str] = set()
        for _, job_id, waiting in heapq.merge(guarded, self.late, key=lambda age: age[:2]):
            if job_id not in seen:
                seen.add(job_id)
                yield waiting

    def leave(self, starts: list[Start[int]]) -> None:
        for start in starts:
            job = start.job
            at = bisect.bisect_left(self.late, (job.submitted, job.id))
            if at < len(self.late) and self.late[at][1] == job.id:
                del self.late[at]
        super().leave(starts)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(p)
    p.add_argument("--scale", type=float, default=1.0, help="overdue at submission + S x the wait under easy")
    args = p.parse_args()
    read, processors, heading = read_part(p, args)
    easy = simulate(read.jobs, processors, Policy.EASY)
    due = {o.job.id: o.job.submitted + args.scale * o.wait for o in easy}
    against_easy(read, processors, heading, {
        "predictive": lambda: simulate(read.jobs, processors, Policy.PREDICTIVE),
        f"oracle x {args.scale:g}": lambda: _replay(read.jobs, processors, OracleQueue(due), None, 1.0)}, easy)
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
