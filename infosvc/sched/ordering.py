"""Queue orders for the `predictive` policy: which waiting job goes first within a priority group.
Each reads a job's submission, processors and predicted run time (infosvc/sched/prediction.py).

- `slack` (the policy's order): a job's key is its submission plus a slack, `SLACK_FACTOR` times its
  predicted run time, at most `MAX_SLACK` seconds; the queue is by key, then id. A short job goes
  ahead of the long jobs submitted a little before it; every job ages at the same rate, and the key
  never changes while the job waits, so a job can only ever be passed by jobs submitted less than
  `MAX_SLACK` after it. A fixed key lets the simulator keep its queue sorted instead of sorting it
  each pass.
- The guard (`overdue`): whatever the order, a job that has waited the guard's bound goes ahead
  of every job that has not, the overdue jobs in submission order: EASY's order, and the first of
  them that cannot start is the head EASY would reserve for (infosvc/sched/policy.py). That is
  what bounds a job's wait near EASY's (docs/simulation.md). The bound (`guard_after`) follows the
  machine's own waits: `GUARD_FRACTION` of the longest wait a started job has had so far, with no
  fixed floor (`OVERDUE_AFTER` is 0). Where nothing has waited yet the policy cannot tell what
  passing would cost, and every job is in EASY's order; on a machine whose jobs wait an hour a job
  is passed for minutes, not for the six hours the design before allowed (there the longest wait
  was 1.29 x EASY's). The constants were chosen on the tuning traces only (docs/simulation.md
  says which).
- `sjf`: the shortest predicted run time first (the backfill order of Tsafrir et al.'s SJBF when
  the guard puts every job in EASY's order at once).
- `wfp3`: (wait / run time)^3 x processors, largest first (Tang et al., "Fault-aware,
  utility-based job scheduling on Blue Gene/P systems", Cluster 2009).
- `unicef`: wait / (log2(processors + 1) x run time), largest first (Vasupongayya and Chiang,
  2005; + 1 so that a one-processor job is not infinitely urgent).
- `f1`: log10(run time) x processors + 870 x log10(submission), smallest first: the first of the
  functions Carastan-Santos and de Camargo learned ("Obtaining dynamic scheduling policies with
  simulation and machine learning", SC 2017). Its submission term is on the trace's clock (seconds
  from the log's start); on Unix time it degenerates to smallest-first.

`wfp3` and `unicef` change with the clock: the queue is sorted again at each pass. They are here to
be measured against `slack` (bench/predictive.py); the service uses `slack`.
"""

from __future__ import annotations

import math
from enum import StrEnum
from operator import attrgetter
from typing import Callable, Iterator, Protocol, Sequence, TypeVar

__all__ = ["GUARD_FRACTION", "MAX_SLACK", "OVERDUE_AFTER", "SLACK_FACTOR", "Order", "Ranked", "TIMED", "guard_after",
           "order_key", "overdue", "slack_key"]

#: The slack is this many times the predicted run time ...
SLACK_FACTOR = 10.0
#: ... and never more than this (seconds): a job is passed only by jobs submitted within two days after it.
MAX_SLACK = 48 * 3600.0
#: A job waiting this long (seconds) is served in EASY's order, ahead of the slack order (0: always,
#: which is EASY's order throughout; math.inf: never): the guard's floor, none (a fixed floor let
#: jobs be passed for longer than anyone waits on a lightly loaded machine) ...
OVERDUE_AFTER = 0.0
#: ... raised to this part of the longest wait a started job has had (0: the floor alone).
GUARD_FRACTION = 0.25


class Order(StrEnum):
    FCFS = "fcfs"
    SLACK = "slack"
    WFP3 = "wfp3"
    UNICEF = "unicef"
    F1 = "f1"
    SJF = "sjf"


#: The orders whose keys change with the clock.
TIMED = frozenset({Order.WFP3, Order.UNICEF})


class Ranked(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def submitted(self) -> float: ...

    @property
    def processors(self) -> int: ...

    @property
    def predicted(self) -> float:
        """The run time the policy plans with (seconds, at least 1)."""
        ...


class Submitted(Protocol):
    """What the guard reads of a waiting job."""

    @property
    def id(self) -> str: ...

    @property
    def priority(self) -> int: ...

    @property
    def submitted(self) -> float: ...


W = TypeVar("W", bound=Submitted)
_AGE = attrgetter("submitted", "id")


def overdue(queue: Sequence[W], now: float, after: float = OVERDUE_AFTER) -> Iterator[W]:
    """The jobs of `queue`'s first priority group (its first job's; the queue is by group) that
    have waited `after` seconds or more at `now`, oldest first (by submission, then id), found one
    at a time: a pass mostly needs the oldest alone, and a queue of thousands is read once (in C,
    by `min`), never sorted."""
    if not queue or math.isinf(after):
        return
    top, limit = queue[0].priority, now - after
    if queue[-1].priority == top:  # one group (a trace: always): most passes end at this one read
        oldest = min(queue, key=_AGE)
        if oldest.submitted > limit:
            return
        yield oldest
        late = [job for job in queue if job.submitted <= limit and job is not oldest]
    else:
        late = [job for job in queue if job.submitted <= limit and job.priority == top]
    while late:
        oldest = min(late, key=_AGE)
        yield oldest
        late.remove(oldest)


def overdue_scaled(queue: Sequence[W], now: float, after: float, scale: Callable[[W], float]) -> Iterator[W]:
    """`overdue` with a bound of its own for each job: `after` x `scale(job)` (a variant measured by
    bench/predictive.py: the bound shrinking with a job's width). The late jobs of the first
    priority group, oldest first."""
    if not queue or math.isinf(after):
        return
    top = queue[0].priority
    yield from sorted((job for job in queue if job.priority == top and job.submitted <= now - after * scale(job)),
                      key=_AGE)


def guard_after(longest_wait: float, floor: float = OVERDUE_AFTER, fraction: float = GUARD_FRACTION) -> float:
    """The guard's bound (seconds) on a machine where the longest wait of a started job so far is
    `longest_wait`: `fraction` of it, never under `floor` (math.inf: the guard off). With no
    floor, a machine where no job has waited yet has every job in EASY's order."""
    return max(floor, fraction * longest_wait) if longest_wait > 0 else floor


def slack_key(submitted: float, predicted: float, factor: float = SLACK_FACTOR, cap: float = MAX_SLACK) -> float:
    """The `slack` order's key: submission plus the capped slack (an Infinite prediction gets the cap)."""
    return submitted + min(cap, factor * predicted)


def order_key(order: Order, job: Ranked, now: float, factor: float = SLACK_FACTOR,
              cap: float = MAX_SLACK) -> tuple[float, float, str]:
    """The sort key of `job` in `order` at `now` (smaller goes first); ties by submission, then id."""
    run = max(1.0, job.predicted) if math.isfinite(job.predicted) else math.inf
    if order is Order.SLACK:
        value = slack_key(job.submitted, run, factor, cap)
    elif order is Order.WFP3:
        value = -((max(0.0, now - job.submitted) / run) ** 3) * job.processors
    elif order is Order.UNICEF:
        value = -max(0.0, now - job.submitted) / (math.log2(job.processors + 1) * run)
    elif order is Order.SJF:
        value = run
    elif order is Order.F1:
        value = math.log10(run) * job.processors + 870.0 * math.log10(max(job.submitted, 0.1))
    else:
        value = job.submitted
    return (value, job.submitted, job.id)
