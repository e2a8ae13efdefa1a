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
"""

from __future__ import annotations

import bisect
import operator
from typing import TYPE_CHECKING, Collection

from infosvc.sched.ordering import TIMED, guard_after, order_key
from infosvc.sched.policy import Backfilling, Plan, Policy, Queued, Running, Start, resume, schedule
from infosvc.sched.pool import ProcessorPool
from infosvc.sched.prediction import UserHistory
from infosvc.sched.simulation import Observer, Options, SimJob, Waiting
from infosvc.sched.shapes import code

if TYPE_CHECKING:
    Key = tuple[float, float, str]

__all__ = ["SlackQueue"]


class SlackQueue:
    """`predictive`'s queue in a replay (the simulation's `_Queue`), in `options.order`."""

    learns = True
    arrivals: dict[str, SimJob] | None = None
    policy = Policy.PREDICTIVE

    def __init__(self, options: Options, observe: Observer | None, resumes: bool = True, narrows: bool = True) -> None:
        self.options, self.observe = options, observe
        self.history = UserHistory()
        self.keys: list[Key] = []  # the queue's keys, sorted ...
        self.queue: list[Waiting] = []  # ... and its jobs, in the same order (the pass reads this list as it is)
        self.shapes = bytearray()  # ... and their widths and estimates, coded (infosvc/sched/shapes.py)
        self.timed = options.order in TIMED
        self.longest = 0.0  # the longest wait of a job started so far (the guard's bound follows it)
        self.key_of: dict[str, Key] = {}  # each waiting job's key (fixed orders)
        # each waiting job as (submission, id, job), sorted: the guard's order (ids are unique: no job compared)
        self.ages: list[tuple[float, str, Waiting]] = []
        # The blocked pass to go on from (None: the next pass is made whole), the bound it was made
        # with, its head and whether the head was overdue; the jobs arrived since the last pass
        self.resumes = resumes and not self.timed
        self.blocked: Backfilling[int] | None = None
        self.bound = 0.0
        self.head: Waiting | None = None
        self.head_overdue = False
        self.fresh: list[Waiting] = []
        self.resumed = 0  # passes gone on from a blocked one (what the tests and bench/simulate.py read)
        self.narrows = narrows  # whether the backfill scan reads only the jobs `shapes` finds (tests: both)

    def arrive(self, job: SimJob, now: float) -> None:
        options = self.options
        guess = self.predicted(job) if options.predictions else job.estimate
        waiting = Waiting(job.id, job.priority, job.submitted, job.estimate, job.processors, guess, job)
        key = order_key(options.order, waiting, now, options.slack_factor, options.max_slack)
        at = bisect.bisect(self.keys, key)
        self.keys.insert(at, key)
        self.queue.insert(at, waiting)
        self.shapes[2 * at:2 * at] = code(job.processors, job.estimate)
        self.key_of[job.id] = key
        age = (job.submitted, job.id, waiting)
        if not self.ages or self.ages[-1] < age:  # a trace's jobs arrive by age: nearly always the last
            self.ages.append(age)
        else:
            bisect.insort(self.ages, age)
        self.fresh.append(waiting)

    def predicted(self, job: SimJob) -> float:
        """`job`'s run time as predicted at its submission (bench/predictor_bound.py puts bounds here)."""
        return self.history.predict(job.user, job.estimate)

    def ended(self, user: int, run: float, estimate: float) -> None:
        self.history.record(user, run, estimate)
        self.blocked = None  # an end: the machine is no longer as the blocked pass left it

    def _by_age(self) -> map[Waiting]:
        return map(_JOB_OF_AGE, self.ages)

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
        if self.timed:  # each key once (a key ends with the job's id: no two are equal, no job compared)
            keyed = sorted(zip([order_key(order, w, now) for w in self.queue], self.queue))
            self.keys, self.queue = [key for key, _ in keyed], [w for _, w in keyed]
            self.shapes = bytearray(b"".join(code(w.processors, w.estimate) for w in self.queue))
        bound = guard_after(self.longest, options.overdue_after, options.guard_fraction)
        fresh, self.fresh = self.fresh, []
        if self._goes_on(bound, now, fresh):
            assert self.blocked is not None and self.head is not None
            plan = resume(self.blocked, sorted(fresh, key=lambda job: self.key_of[job.id]), now)
            self.resumed += 1
            reserved: tuple[Queued, float] | None = (self.head, self.blocked.guard.at)
        else:
            plan = schedule(pool, running, self.queue, now, Policy.PREDICTIVE, explain=False,
                            overdue_after=bound, by_age=self._by_age(),
                            shapes=self.shapes if self.narrows else None)
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

    def started(self, entry: Queued) -> tuple[SimJob, float]:
        waiting: Waiting = entry  # type: ignore[assignment]
        return waiting.job, waiting.predicted

    def leave(self, starts: list[Start[int]]) -> None:
        if self.timed or len(starts) > 8:  # many at once: one rebuild
            started = {s.job.id for s in starts}
            for job_id in started:
                del self.key_of[job_id]
            kept = [at for at, w in enumerate(self.queue) if w.id not in started]
            self.keys, self.queue = [self.keys[at] for at in kept], [self.queue[at] for at in kept]
            shapes = self.shapes
            self.shapes = bytearray(b"".join(shapes[2 * at:2 * at + 2] for at in kept))
            self.ages = [age for age in self.ages if age[1] not in started]
            return
        for start in starts:  # a fixed key, found by bisection: a long queue is not copied each pass
            job = start.job
            at = bisect.bisect_left(self.keys, self.key_of.pop(job.id))
            del self.keys[at], self.queue[at], self.shapes[2 * at:2 * at + 2]
            del self.ages[bisect.bisect_left(self.ages, (job.submitted, job.id))]  # before its (submission, id, job)


_JOB_OF_AGE = operator.itemgetter(2)
