"""A self-tuning choice of `predictive`'s queue order, as in dynamic policy switching (Streit, "A
self-tuning job scheduler family with dynamic policy switching", JSSPP 2002): at a decision point
the waiting jobs are projected forward twice, once in EASY's order (submission) and once in the
present order (the guard's overdue jobs first, then the slack order: infosvc/sched/ordering.py),
and the slack order is kept only where its projection is no worse on the longest wait and better
on the mean bounded slowdown; else the whole queue goes in EASY's order until the next decision.
A policy that cannot tell falls back to EASY's order. Pure: the replay (infosvc/sched/slackqueue.py)
says when to decide and with what.

The projection is a plain list schedule on a pool of processors, with predicted run times: the jobs
in the order given, each starting at the earliest instant enough processors are free and never
before the job ahead of it. Not EASY's backfilling: a list schedule costs a heap push and pop a
job (backfilling's scan reads the rest of the queue for each reserved head, too dear at a thousand
jobs a decision), and what the two projections are to compare is the order, which a backfilling
of both would blur alike. Running jobs end at their predicted end, or at their limit once past it
(`prediction.planned_end`, as the head's "expected at").

Or (`planned`) a planning-based projection, as the CCS scheduler Streit's dynP ran in plans: each
job in the order at the earliest instant it fits for its whole predicted run beside the jobs
placed before it (conservative backfilling: a job behind may start first, in a hole the ones
ahead leave). What the list schedule's bias leaves out (a short job behind a wide one waits in it,
where EASY backfills it), at a scan of the plan a job. infosvc/sched/forecast.py places jobs the
same way (its profile in numpy arrays, for a CE's one new job); over lists it is eleven times
faster on a 200-job projection beside 100 running jobs (1.7 ms against 18.9), and a replay makes
two projections a decision, thousands of decisions. The two agree, start for start (tested).
"""

from __future__ import annotations

import bisect
import heapq
from typing import Iterable, NamedTuple, Protocol, Sequence

from infosvc.sched.summary import BOUND_SECONDS

__all__ = ["Figures", "Projected", "figures", "list_schedule", "plan_schedule", "slack_order_wins"]


class Projected(Protocol):
    """What the projection reads of a waiting job."""

    @property
    def submitted(self) -> float: ...

    @property
    def processors(self) -> int: ...

    @property
    def predicted(self) -> float:
        """The run time it is planned with (seconds, at least 1)."""
        ...


class Figures(NamedTuple):
    """A projection's figures over the jobs projected."""

    #: the longest projected wait, from submission (seconds)
    max_wait: float
    #: the mean projected bounded slowdown (as infosvc/sched/summary.py's, by predicted run times)
    mean_bsld: float


def list_schedule(free: int, ends: Iterable[tuple[float, int]], jobs: Sequence[Projected], now: float) -> list[float]:
    """Each of `jobs`' projected start, in their order, on a pool with `free` processors free at
    `now` and `ends` the (end, processors) of the running jobs: a job starts at the earliest instant
    at or after the one ahead of it's start when enough are free (an end before `now` counts at
    `now`). A job wider than the pool ever frees is projected at infinity, as is every job behind it."""
    heap = list(ends)
    heapq.heapify(heap)
    push, pop = heapq.heappush, heapq.heappop
    at, starts = now, []
    for job in jobs:
        wanted = job.processors
        while free < wanted and heap:
            end, given = pop(heap)
            if end > at:
                at = end
            free += given
        if free < wanted:
            at = float("inf")
        else:
            free -= wanted
            push(heap, (at + job.predicted, wanted))
        starts.append(at)
    return starts


def plan_schedule(free: int, ends: Iterable[tuple[float, int]], jobs: Sequence[Projected], now: float) -> list[float]:
    """Each of `jobs`' projected start, placed in their order into a plan: at the earliest instant
    from `now` at which enough processors stay free for its whole predicted run, beside the running
    jobs (`free` free at `now`, `ends` their (end, processors)) and the jobs placed before it. A
    job wider than the plan ever has free is projected at infinity (and holds nothing)."""
    times, frees = [now], [free]  # frees[i]: free from times[i] to times[i + 1] (the last: for ever)
    for end, given in sorted(ends):
        if end > times[-1]:
            times.append(end)
            frees.append(frees[-1])
        frees[-1] += given
    starts = []
    for job in jobs:
        wanted, run = job.processors, job.predicted
        at, count = 0, len(times)
        while True:
            while at < count and frees[at] < wanted:
                at += 1
            if at == count:
                break
            until = times[at] + run
            clash = at + 1
            while clash < count and times[clash] < until and frees[clash] >= wanted:
                clash += 1
            if clash == count or times[clash] >= until:
                break
            at = clash + 1
        if at == count:
            starts.append(float("inf"))
            continue
        starts.append(times[at])
        last = bisect.bisect_left(times, until, at)
        if last == count or times[last] != until:  # a step where the job ends
            times.insert(last, until)
            frees.insert(last, frees[last - 1])
        for step in range(at, last):
            frees[step] -= wanted
    return starts


def figures(jobs: Sequence[Projected], starts: Sequence[float]) -> Figures:
    """The longest wait and mean bounded slowdown of `jobs` started at `starts` (zeros for none)."""
    if not jobs:
        return Figures(0.0, 0.0)
    longest, total = 0.0, 0.0
    for job, start in zip(jobs, starts):
        wait = start - job.submitted
        run = job.predicted
        longest = wait if wait > longest else longest
        total += max(1.0, (wait + run) / max(run, BOUND_SECONDS))
    return Figures(longest, total / len(jobs))


def slack_order_wins(free: int, ends: Sequence[tuple[float, int]], easy: Sequence[Projected],
                     present: Sequence[Projected], now: float, tolerance: float = 1.0, planned: bool = False,
                     allowed: float = 0.0) -> bool:
    """Whether the present order (`present`) is kept over EASY's (`easy`, the same jobs by
    submission): its projection's longest wait is no longer than EASY order's (times `tolerance`),
    or than `allowed` (a wait the caller's figure holds already: the longest so far), and its mean
    bounded slowdown strictly lower. Ties and an empty queue go to EASY's order.
    `planned`: projected by `plan_schedule`, else by `list_schedule`."""
    project = plan_schedule if planned else list_schedule
    by_easy = figures(easy, project(free, ends, easy, now))
    by_present = figures(present, project(free, ends, present, now))
    longest = max(tolerance * by_easy.max_wait, allowed)
    return by_present.max_wait <= longest and by_present.mean_bsld < by_easy.mean_bsld
