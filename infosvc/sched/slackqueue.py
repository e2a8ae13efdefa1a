"""The waiting jobs of a `predictive` replay (infosvc/sched/simulation.py): each with its prediction
made at submission, kept in the policy's order by fixed keys and by age, and the blocked pass the
next one may go on from (`policy.resume`) rather than be made again.

Why a pass may be gone on from, as EASY's is (`policy.resume` says why for EASY): nothing has
ended since the blocked pass, the guard's bound is what it was, and the head that pass reserved
for is still the first job a full pass would try:
- if it was overdue (waited the bound), it is the oldest waiting job (every older one was
  overdue too, came before it in EASY's order and started), and it still is: arrivals are younger;
- if it was not, it was the first unstarted job of the order, and it still is while no waiting job
  has become overdue (the oldest has not waited the bound) and no arrival's key is before its key.
Then a full pass tries the head, which still does not fit, and scans the rest in the order: the
jobs it scanned before are refused again (free only shrank, the reservation is the same), so only
the arrivals can start, tried in the order among themselves. Each pass of a long queue otherwise
reads the whole queue: `predictive` was four times EASY's time on a 100,000-job trace for that.

With `options.switch_every` (or `switch_factor`) the replay also chooses, at most that often,
between the order and EASY's (infosvc/sched/switching.py): while EASY's is chosen, every job is
served in submission order (the guard's bound taken as 0, the backfill scan by age too), which is
EASY start for start. A change of order ends any blocked pass: its head need not be first in the other.
"""

from __future__ import annotations

import bisect
import math
import operator
from typing import TYPE_CHECKING, Collection

from infosvc.sched.ordering import TIMED, Order, guard_after, order_key
from infosvc.sched.policy import Backfilling, Plan, Policy, Queued, Running, Start, resume, schedule
from infosvc.sched.pool import ProcessorPool
from infosvc.sched.prediction import UserHistory, planned_end
from infosvc.sched.simulation import Observer, Options, SimJob, Waiting
from infosvc.sched.switching import slack_order_wins

if TYPE_CHECKING:
    Key = tuple[float, float, str]

__all__ = ["SlackQueue"]


class SlackQueue:
    """`predictive`'s queue in a replay (the simulation's `_Queue`), in `options.order`."""

    learns = True
    arrivals: dict[str, SimJob] | None = None
    policy = Policy.PREDICTIVE

    def __init__(self, options: Options, observe: Observer | None, resumes: bool = True) -> None:
        self.options, self.observe = options, observe
        self.history = UserHistory()
        self.keys: list[Key] = []  # the queue's keys, sorted ...
        self.queue: list[Waiting] = []  # ... and its jobs, in the same order (the pass reads this list as it is)
        self.timed = options.order in TIMED
        self.longest = 0.0  # the longest wait of a job started so far (the guard's bound follows it)
        self.key_of: dict[str, Key] = {}  # each waiting job's key (fixed orders)
        self.ages: list[tuple[float, str]] = []  # each waiting job's (submission, id), sorted: the guard's order
        self.by_id: dict[str, Waiting] = {}
        # The blocked pass to go on from (None: the next pass is made whole), the bound it was made
        # with, its head and whether the head was overdue; the jobs arrived since the last pass
        self.resumes = resumes and not self.timed
        self.blocked: Backfilling[int] | None = None
        self.bound = 0.0
        self.head: Waiting | None = None
        self.head_overdue = False
        self.fresh: list[Waiting] = []
        self.resumed = 0  # passes gone on from a blocked one (what the tests and bench/simulate.py read)
        # The choice of order (switching.py): whether EASY's is chosen, when the next choice is due,
        # the queue's length at the last one; how many choices were made, and how many chose EASY's
        self.switches = options.switch_every < math.inf or options.switch_factor > 0
        self.easy_order = False
        self.next_choice = -math.inf
        self.chosen_at = 0
        self.choices = self.easy_choices = 0

    def arrive(self, job: SimJob, now: float) -> None:
        options = self.options
        guess = self.history.predict(job.user, job.estimate) if options.predictions else job.estimate
        waiting = Waiting(job.id, job.priority, job.submitted, job.estimate, job.processors, guess, job)
        key = order_key(options.order, waiting, now, options.slack_factor, options.max_slack)
        at = bisect.bisect(self.keys, key)
        self.keys.insert(at, key)
        self.queue.insert(at, waiting)
        self.key_of[job.id] = key
        age = (job.submitted, job.id)
        if not self.ages or self.ages[-1] < age:  # a trace's jobs arrive by age: nearly always the last
            self.ages.append(age)
        else:
            bisect.insort(self.ages, age)
        self.by_id[job.id] = waiting
        self.fresh.append(waiting)

    def ended(self, user: int, run: float) -> None:
        self.history.record(user, run)
        self.blocked = None  # an end: the machine is no longer as the blocked pass left it

    def _by_age(self) -> map[Waiting]:
        return map(self.by_id.__getitem__, map(_ID_OF_AGE, self.ages))

    def _goes_on(self, bound: float, now: float, fresh: list[Waiting]) -> bool:
        """Whether the blocked pass may be gone on from at `now` (the module's docstring says why)."""
        if self.blocked is None or bound != self.bound:
            return False
        if self.head_overdue:
            return True
        assert self.head is not None
        if self.ages and self.ages[0][0] <= now - bound:  # a job has become overdue: it goes first
            return False
        head_key = self.key_of[self.head.id]
        return all(self.key_of[job.id] > head_key for job in fresh)

    def plan(self, pool: ProcessorPool, running: Collection[Running[int]], now: float) -> Plan[int]:
        options = self.options
        order = options.order
        if self.timed:
            self.queue.sort(key=lambda w: order_key(order, w, now))
            self.keys = [order_key(order, w, now) for w in self.queue]
        bound = guard_after(self.longest, options.overdue_after, options.guard_fraction)
        if self.switches:
            self._choose(pool, running, now, bound)
        queue = self.queue
        if self.easy_order:  # every job overdue, and the backfill scan by age: EASY
            queue, bound = list(self._by_age()), 0.0
        fresh, self.fresh = self.fresh, []
        if self._goes_on(bound, now, fresh):
            assert self.blocked is not None and self.head is not None
            plan = resume(self.blocked, sorted(fresh, key=_AGE if self.easy_order else lambda job: self.key_of[job.id]), now)
            self.resumed += 1
            reserved: tuple[Queued, float] | None = (self.head, self.blocked.guard.at)
        else:
            plan = schedule(pool, running, queue, now, Policy.PREDICTIVE, explain=False,
                            overdue_after=bound, by_age=self._by_age())
            reserved = None if plan.reservation is None else (plan.reservation.job, plan.reservation.at)
            self.blocked = plan.backfilling if self.resumes else None
            if plan.reservation is not None:
                self.head = plan.reservation.job  # type: ignore[assignment]  # a Waiting of this queue
                self.head_overdue = plan.reservation.job.submitted <= now - bound
            self.bound = bound
        plan.backfilling = None  # kept here: the replay's own `resume` is for the trace's jobs
        if plan.starts:
            self.longest = max(self.longest, now - min(start.job.submitted for start in plan.starts))
        if self.observe is not None and reserved is not None:
            self.observe(now, reserved[0], reserved[1])  # type: ignore[arg-type]
        return plan

    def _choose(self, pool: ProcessorPool, running: Collection[Running[int]], now: float, bound: float) -> None:
        """At a pass where a choice is due (its time has come, or the queue's length has changed by
        `switch_factor`), choose the order until the next: EASY's, unless the projections keep the
        slack order (switching.py), or the order `switch_pin` pins. With `switch_defer`, where the
        two orders are one order now, nothing is chosen: the choice stays as it is, and due."""
        options, length = self.options, len(self.queue)
        factor, last = options.switch_factor, max(self.chosen_at, 1)
        if now < self.next_choice and not (factor > 0 and (length > factor * last or length * factor < last)):
            return
        if options.switch_pin is not None:
            easy = options.switch_pin is Order.FCFS
        else:
            wins = self._slack_wins(pool.free, running, now, bound)
            if wins is None:
                return
            easy = not wins
        self.next_choice, self.chosen_at = now + options.switch_every, length
        if easy != self.easy_order:
            self.easy_order, self.blocked = easy, None
        self.choices += 1
        self.easy_choices += easy

    def _slack_wins(self, free: int, running: Collection[Running[int]], now: float, bound: float) -> bool | None:
        """The projections of the same waiting jobs, the first `switch_depth` of each order (the
        oldest, and the present order's: the overdue oldest first, then by key), in EASY's order and
        in the present one: whether the present one wins; None (with `switch_defer`) where the
        two orders are the same, and nothing is projected."""
        options = self.options
        depth, by_id, limit = options.switch_depth, self.by_id, now - bound
        oldest = [by_id[job_id] for _, job_id in self.ages[:depth]]
        late = sum(1 for job in oldest if job.submitted <= limit)  # the overdue: a prefix of the oldest
        chosen = {job.id for job in oldest}
        younger: list[Waiting] = []  # the present order's others, not among the oldest
        wanted = depth - late
        for job in self.queue if wanted > 0 else ():
            if job.submitted > limit:
                wanted -= 1
                if job.id not in chosen:
                    younger.append(job)
                if not wanted:
                    break
        younger.sort(key=_AGE)
        key_of = self.key_of
        present = oldest[:late] + sorted([*oldest[late:], *younger], key=lambda job: key_of[job.id])
        easy = oldest + younger
        if options.switch_defer and easy == present:
            return None
        ends = [(planned_end(r.started, r.estimate if math.isnan(r.predicted) else r.predicted, r.estimate, now),
                 r.allocation) for r in running]
        return slack_order_wins(free, ends, easy, present, now, options.switch_tolerance, options.switch_planned,
                                self.longest if options.switch_within_longest else 0.0)

    def started(self, entry: Queued) -> tuple[SimJob, float]:
        waiting: Waiting = entry  # type: ignore[assignment]
        return waiting.job, waiting.predicted

    def leave(self, starts: list[Start[int]]) -> None:
        by_id = self.by_id
        if self.timed or len(starts) > 8:  # many at once: one rebuild
            started = {s.job.id for s in starts}
            for job_id in started:
                del self.key_of[job_id], by_id[job_id]
            kept = [at for at, w in enumerate(self.queue) if w.id not in started]
            self.keys, self.queue = [self.keys[at] for at in kept], [self.queue[at] for at in kept]
            self.ages = [age for age in self.ages if age[1] not in started]
            return
        for start in starts:  # a fixed key, found by bisection: a long queue is not copied each pass
            job = start.job
            at = bisect.bisect_left(self.keys, self.key_of.pop(job.id))
            del self.keys[at], self.queue[at], by_id[job.id]
            del self.ages[bisect.bisect_left(self.ages, (job.submitted, job.id))]


_ID_OF_AGE = operator.itemgetter(1)
_AGE = operator.attrgetter("submitted", "id")
