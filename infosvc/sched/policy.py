"""The scheduling policies of CCS as one pure function: `schedule(machine, running, queue, now,
policy)` decides which queued jobs start now and where, and why each other one waits. No clock,
no I/O, no state of its own: the service calls it with the live site and real time, the
simulator with a simulated machine and simulated time, and both get the same decisions.

- Priority-based FCFS: the queue is ordered by priority group (Highest first), then by submission
  (a job goes to the end of its group), then by id. Jobs start from the head while they fit; the
  first that does not fit blocks the rest (`fcfs`).
- Backfilling (`easy`): the blocked head job gets a reservation: the shadow time, the earliest
  instant enough resources are free for it, counting running jobs as ending at start + estimate;
  and the extra resources, what is free at the shadow time beyond the head's reservation once every
  running job that ends by then has ended. A later job starts now if it fits now and either ends
  (now + estimate) by the shadow time, or fits in the extra resources, which it then uses up. A
  job that does not fit is passed over and the scan goes on. CCS's own rule, a job that completes
  within the backfill window, is the first clause. A job of Infinite run time never ends by a
  shadow time, so it is never backfilled past a reservation, only into the extra resources.
- Predictive (`predictive`): EASY over the caller's order (the slack order of
  infosvc/sched/ordering.py) with its guard: the jobs that have waited `overdue_after` start
  first, oldest first (EASY's order), and the first of them that does not fit is the reserved
  head; the others, and every job when none is overdue, are in the caller's order, and the
  backfilling past the head scans them in that order. The reservation and the backfilling rule
  are EASY's, by estimates (kill limits); the head's expected start by predicted run times
  (`predicted`, infosvc/sched/prediction.py) is told in its reason and holds nothing back:
  holding backfills to it too made the policy worse than EASY on the tuning traces
  (docs/simulation.md: what it guarantees).

- EligibleTime (`not_before`): a job whose SSS EligibleTime is after `now` is passed over, by
  every policy: it neither starts, nor blocks the queue, nor is reserved for; it waits with that
  reason. The pass at its EligibleTime (the caller runs one then) takes it in its place.

What "resources" are is the machine's (`Machine`): a pool of processors for a trace
(infosvc/sched/pool.py), a site's hosts with their exclusive use and resource sorting for the
service. The policy only asks a machine to place a job, to take or give back an allocation, and
for a copy to plan on.
"""

from __future__ import annotations

import math
import operator
from enum import StrEnum
from itertools import chain, compress
from typing import Callable, Collection, Generic, Iterable, Iterator, Mapping, NamedTuple, Protocol, Sequence, TypeVar

from infosvc.sched.ordering import OVERDUE_AFTER, overdue
from infosvc.sched.shapes import narrow

A = TypeVar("A")


class Policy(StrEnum):
    FCFS = "fcfs"
    EASY = "easy"
    #: EASY's guarantee with run time predictions and a queue order of the caller's (docs/simulation.md)
    PREDICTIVE = "predictive"


# A pass asks which policy it runs a few times; a member read from its class costs a lookup through
# the enum's metaclass each time (a twentieth of a pass), a module's name one load.
_FCFS, _EASY, _PREDICTIVE = Policy.FCFS, Policy.EASY, Policy.PREDICTIVE


class Queued(Protocol):
    """What the policy reads of a waiting job."""

    @property
    def id(self) -> str: ...

    @property
    def priority(self) -> int:
        """0 (Lowest) .. 4 (Highest): the CCS priority's rank."""
        ...

    @property
    def submitted(self) -> float: ...

    @property
    def estimate(self) -> float:
        """Seconds it may run: its run time limit; math.inf for Infinite."""
        ...

    @property
    def processors(self) -> int:
        """The fewest processors it can start with."""
        ...


class Machine(Protocol[A]):
    """The resources jobs are placed on, as the policy needs them."""

    def place(self, job: Queued, within: Machine[A] | None = None) -> A | None:
        """Where `job` would go on what is free now (and, with `within`, on what is free there
        too), or None when it does not fit. Nothing is taken."""
        ...

    def take(self, allocation: A) -> None: ...

    def give(self, allocation: A) -> None: ...

    def copy(self) -> Machine[A]: ...

    def describe_shortfall(self, job: Queued) -> str:
        """Why `job` does not fit now, in a user's words ("needs 64 processors, 12 free")."""
        ...

    def room(self) -> int:
        """At least the processors any one job could be given now (0: nothing fits). A bound the
        pass checks before asking `place`: over a long queue most jobs are refused by it alone."""
        ...


# None of these is a dataclass: `dataclasses` imports `inspect` and compiles each class's methods
# at import, a tenth of `infosvc simulate`'s start. Running and Start are made once a job (a
# simulation makes hundreds of thousands) and read often: slotted classes, whose fields are read
# faster than a named tuple's and which are made as fast as a dataclass of slots. Reservation, made
# once a blocked pass, is a named tuple; Plan and _Guard, changed as a pass goes, slotted classes.
class Slotted:
    """Equality and a repr by the slots, as a dataclass writes them (mutable: no hash)."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names: tuple[str, ...] = self.__slots__
        return all(getattr(self, name) == getattr(other, name) for name in names)

    def __repr__(self) -> str:
        names: tuple[str, ...] = self.__slots__
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__name__}({fields})"


class Running(Slotted, Generic[A]):
    """A job holding its resources since `started`, expected to end by started + estimate;
    `predicted`: the run time `predictive` plans with (NaN: the estimate)."""

    __slots__ = ("id", "started", "estimate", "allocation", "predicted")

    def __init__(self, id: str, started: float, estimate: float, allocation: A, predicted: float = math.nan) -> None:
        self.id, self.started, self.estimate, self.allocation, self.predicted = id, started, estimate, allocation, predicted

    @property
    def ends(self) -> float:
        return self.started + self.estimate


class Start(Slotted, Generic[A]):
    """A job to start now, where; `backfilled`: ahead of a job before it in the queue (EASY's backfill)."""

    __slots__ = ("job", "allocation", "backfilled")

    def __init__(self, job: Queued, allocation: A, backfilled: bool = False) -> None:
        self.job, self.allocation, self.backfilled = job, allocation, backfilled


class Reservation(NamedTuple, Generic[A]):
    """Where and when the blocked head job will start, should every running job end by its estimate."""

    job: Queued
    at: float  # math.inf when no end of a running job frees enough: then nothing is held for it
    allocation: A | None
    #: `predictive`: when it is expected to start, by the predictions (`at` is what is guaranteed)
    predicted_at: float | None = None


class Plan(Slotted, Generic[A]):
    """One scheduling pass: the jobs to start now, the head's reservation, why the others wait."""

    __slots__ = ("starts", "reservation", "waiting", "backfilling")

    def __init__(self) -> None:
        self.starts: list[Start[A]] = []
        self.reservation: Reservation[A] | None = None
        #: job id -> why it waits, for every queued job not started
        self.waiting: dict[str, str] = {}
        #: a blocked EASY or predictive pass without `explain`: what `resume` may go on from (else
        #: None; for predictive, only where its order allows: infosvc/sched/slackqueue.py)
        self.backfilling: Backfilling[A] | None = None


class Backfilling(Generic[A]):
    """Where a blocked EASY (or predictive) pass left off: the machine as its starts left it, and
    the head's guard (its reserved start, and the extra resources as its backfills left them). Held
    by the caller for `resume`, which changes it as the pass it makes goes on."""

    __slots__ = ("free", "guard")

    def __init__(self, free: Machine[A], guard: _Guard[A]) -> None:
        self.free, self.guard = free, guard


def queue_order(jobs: Iterable[Queued]) -> list[Queued]:
    """Priority-based FCFS: Highest group first, each group by submission, then by id."""
    return sorted(jobs, key=lambda job: (-job.priority, job.submitted, job.id))


def _seconds(at: float) -> str:
    return f"{at:g}"


def schedule(machine: Machine[A], running: Collection[Running[A]], queue: Iterable[Queued], now: float,
             policy: Policy = Policy.EASY, *, when: Callable[[float], str] = _seconds,
             explain: bool = True, not_before: Mapping[str, float] | None = None,
             overdue_after: float = OVERDUE_AFTER, by_age: Iterable[Queued] | None = None,
             shapes: bytearray | None = None) -> Plan[A]:
    """The jobs of `queue` (in queue order) to start at `now` on `machine` (what is free now, with
    `running` holding the rest), by `policy`. `machine` is left as it was. `when` writes a time in
    the waiting jobs' reasons (the service: a UTC date and time); without `explain` (a simulation)
    no reasons are written, and the decisions are the same. `not_before`: job id -> its
    EligibleTime, for the jobs that have one; those whose time is after `now` are passed over.
    `overdue_after`: `predictive`'s guard (infosvc/sched/ordering.py); `by_age`: the queue's jobs
    oldest first, where the caller keeps them so (`ordering.overdue`); `shapes`: a `predictive`
    queue's (a list's) jobs coded as infosvc/sched/shapes.py says, where the caller keeps them."""
    free = machine.copy()
    plan: Plan[A] = _new(Plan)  # Plan(), without a frame for its __init__: a simulation makes one a pass
    plan.starts, plan.reservation, plan.waiting, plan.backfilling = [], None, {}, None
    if not_before:
        queue = _eligible(queue, not_before, now, plan, when, explain)
    jobs: Sequence[Queued] = ()
    if policy is _PREDICTIVE:  # the guard: the jobs waiting past its bound first, in EASY's order
        jobs = queue if isinstance(queue, Sequence) else list(queue)
        queue = chain(overdue(jobs, now, overdue_after, by_age), _unstarted(jobs, plan))
    rest = iter(queue)  # read once, never copied: a simulation's queue may be long
    for head in rest:
        allocation = starts_now(free, head)
        if allocation is None:
            break
        free.take(allocation)
        start = _new(Start)  # Start(head, allocation), without a frame for its __init__: most passes start one
        start.job, start.allocation, start.backfilled = head, allocation, False
        plan.starts.append(start)
    else:
        return plan
    if policy is _FCFS:
        if explain:
            plan.waiting[head.id] = f"first in the queue: {free.describe_shortfall(head)}"
            for job in rest:
                plan.waiting[job.id] = f"behind {head.id} (first come, first served)"
        return plan
    reservation, extra = _reserve(free, running, plan.starts, head, now)
    if policy is _PREDICTIVE and explain:
        reservation = _expected(free, running, plan, reservation, now)
    plan.reservation = reservation
    guard = _Guard(reservation.at, extra)
    if policy is _PREDICTIVE:  # backfilling is in the caller's order still: only the head is the guard's
        passed = {start.job.id for start in plan.starts}
        passed.add(head.id)
        if shapes is not None and not explain and not not_before:  # `shapes` is `queue`'s: the jobs that may start
            rest = narrow(jobs, shapes, free.room(), now, guard.at, guard.room, passed)
        else:
            rest = compress(jobs, map(operator.not_, map(passed.__contains__, map(_ID, jobs))))  # in C: a long queue
    delay = _delay(free, plan, head, reservation, when) if explain else str  # without `explain` not asked
    _backfill(free, plan, rest, now, guard, delay, explain)
    if policy is not _FCFS and not explain and not not_before:  # predictive's: its caller knows if its order allows
        plan.backfilling = Backfilling(free, guard)
    return plan


def starts_now(free: Machine[A], head: Queued) -> A | None:
    """Every policy's first rule: the job at the head of the queue starts now if it fits on what
    is `free`: where it starts (placed there, not taken), else None. `schedule` applies it from the
    head until a job does not fit; a replay whose queue is one job (a lightly loaded machine: most
    of its passes) applies it alone, as that is the whole of such a pass under every policy:
    nothing is left to block, reserve for or backfill, and no guard reorders a queue of one."""
    return free.place(head)


def _delay(free: Machine[A], plan: Plan[A], head: Queued, reservation: Reservation[A],
           when: Callable[[float], str]) -> Callable[[], str]:
    """The blocked head's reason, written in `plan`, and what a job it holds back is told. (A
    function of its own: a pass without reasons makes no closure over the head.)"""
    held = ("no running job's end frees enough" if math.isinf(reservation.at)
            else f"reserved to start at {when(reservation.at)}" if reservation.predicted_at is None
            else f"reserved to start by {when(reservation.at)}, expected at {when(reservation.predicted_at)}")
    plan.waiting[head.id] = f"first in the queue: {free.describe_shortfall(head)}; {held}"
    return lambda: f"would delay {head.id}, reserved to start at {when(reservation.at)}"


def resume(backfilling: Backfilling[A], arrived: Iterable[Queued], now: float) -> Plan[A]:
    """The EASY pass at `now` of a queue that is the one a blocked pass (`schedule`'s, or an
    earlier `resume`'s, without `explain`) left, with `arrived` after it, when since that pass no
    job has ended and nothing was given back or taken but the pass's starts: the same decisions as
    `schedule` on that queue, made on the new jobs alone.

    Why they are the same: the machine is as the pass left it, so the blocked head still does not
    fit, and its reservation is unchanged: the earlier pass's backfills end by the shadow time or
    hold only extra resources, so the first end by estimate at which the head fits is the same
    one; its time is that end's or, for a job past its estimate, now's (hence `max`). Every job
    the pass passed over was wider than what was free (free only shrank since), or would have
    delayed the head (it still would: now is later, the extra resources no larger). So only the
    jobs after it can start, by the rule they would meet in a full pass, and `backfilling` goes on
    from where that leaves the machine and the guard (it is changed: the next `resume` reads it).
    `predictive`'s pass (EASY's rule over its order) is gone on from the same way, `arrived` in
    its order, where its head is still first (infosvc/sched/slackqueue.py says when)."""
    plan: Plan[A] = Plan()
    guard = backfilling.guard
    guard.at = guard.at if guard.at > now else now
    _backfill(backfilling.free, plan, iter(arrived), now, guard, str, False)  # no reasons: `delay` is not asked
    plan.backfilling = backfilling
    return plan


def _eligible(queue: Iterable[Queued], not_before: Mapping[str, float], now: float, plan: Plan[A],
              when: Callable[[float], str], explain: bool) -> Iterator[Queued]:
    """The jobs of `queue` that may start at `now`; the others get their EligibleTime as reason."""
    for job in queue:
        at = not_before.get(job.id)
        if at is None or at <= now:
            yield job
        elif explain:
            plan.waiting[job.id] = f"not eligible before {when(at)} (its EligibleTime)"


class _Guard(Generic[A]):
    """A reserved start a backfilled job must not delay: it ends by `at`, or fits in `extra` (what
    is left at `at` beyond the reservation), whose room is kept as jobs are taken from it."""

    __slots__ = ("at", "extra", "room")

    def __init__(self, at: float, extra: Machine[A] | None) -> None:
        self.at, self.extra = at, extra
        self.room = 0 if extra is None else extra.room()


def _backfill(free: Machine[A], plan: Plan[A], rest: Iterator[Queued], now: float, guaranteed: _Guard[A],
              delay: Callable[[], str], explain: bool) -> None:
    """Past the blocked head, in queue order: a later job starts now if it fits on `free` and cannot
    delay the `guaranteed` start by its estimate (EASY's rule; then what it takes from the extra
    resources is taken from them too). `delay()`: why a job that fits waits (explain only; the
    reservation's time is written only then, as a start at infinity has no date).

    The rooms are bounds: without `explain` (a simulation) a job wider than them is refused without
    asking the machine, and the scan stops once nothing more fits: the decisions are the same."""
    room = free.room()
    for job in rest:
        if not explain and (room <= 0 or job.processors > room):
            if room <= 0:
                break
            continue
        safe = now + job.estimate <= guaranteed.at
        if not explain and not safe and job.processors > guaranteed.room:
            continue  # it would delay the head whether it fits now or not
        placed = _placed(free, job, room, safe, guaranteed)  # unpacked apart: else mypy binds A to A | None
        allocation, fits = placed
        if allocation is None:
            if explain:
                plan.waiting[job.id] = delay() if fits else free.describe_shortfall(job)
            continue
        free.take(allocation)
        room = free.room()
        if not safe:
            _take(guaranteed, allocation)
        plan.starts.append(Start(job, allocation, backfilled=True))


def _placed(free: Machine[A], job: Queued, room: int, safe: bool, guaranteed: _Guard[A]) -> tuple[A | None, bool]:
    """Where `job` starts now (None: it does not), and whether it fits on `free` at all (else it
    waits for resources, not for the reservation)."""
    allocation = free.place(job) if job.processors <= room else None
    if allocation is None:
        return None, False
    if not safe:  # it fits now, but must not take what the head is guaranteed
        allocation = (free.place(job, within=guaranteed.extra)
                      if guaranteed.extra is not None and job.processors <= guaranteed.room else None)
    return allocation, True


def _take(guard: _Guard[A], allocation: A) -> None:
    assert guard.extra is not None
    guard.extra.take(allocation)
    guard.room = guard.extra.room()


def _reserve(free: Machine[A], running: Collection[Running[A]], starting: Sequence[Start[A]], head: Queued,
             now: float) -> tuple[Reservation[A], Machine[A] | None]:
    """The head job's shadow time and reservation, and the machine as it will be at the shadow time
    with the reservation held and every running job that ends by then ended (the extra resources)."""
    ending = sorted([(r.started + r.estimate, r.allocation) for r in running]  # r.ends, without a call a job
                    + [(now + s.job.estimate, s.allocation) for s in starting], key=_END)
    return _shadow(free, ending, head, now)


_END = operator.itemgetter(0)
_ID = operator.attrgetter("id")
_new = object.__new__


def _shadow(free: Machine[A], ending: list[tuple[float, A]], head: Queued,
            now: float) -> tuple[Reservation[A], Machine[A] | None]:
    """The reservation and extra resources of `_reserve`, with `ending` the (end, allocation) of
    every running and starting job, by end."""
    future = free.copy()
    give, place = future.give, future.place  # called once a running job: a simulation's pass makes thousands
    allocation: A | None = None
    last: float | None = None  # the instant whose ends were given last
    for instant, held in ending:  # all that end at one instant are given before the head is tried
        if instant != last:
            if last is not None:
                allocation = place(head)
                if allocation is not None:
                    break
            if math.isinf(instant):
                break
            last = instant
        give(held)
    else:
        if last is not None:
            allocation = place(head)
    if allocation is None or last is None:
        return Reservation(head, math.inf, None), None
    future.take(allocation)
    return Reservation(head, max(last, now), allocation), future  # a job past its estimate: expected to end at once


def predicted(job: Queued) -> float:
    """The run time `predictive` plans `job` with: its `predicted` if it has one, else its estimate."""
    value: float = getattr(job, "predicted", math.nan)
    return value if value < job.estimate else job.estimate  # NaN is not less: the estimate


def _unstarted(jobs: Sequence[Queued], plan: Plan[A]) -> Iterator[Queued]:
    """The jobs, in their order, that the plan does not start, as the plan stands when the first
    is asked for (a generator: nothing runs before)."""
    started = {start.job.id for start in plan.starts}
    yield from (job for job in jobs if job.id not in started) if started else jobs


def _expected(free: Machine[A], running: Collection[Running[A]], plan: Plan[A], reservation: Reservation[A],
              now: float) -> Reservation[A]:
    """`reservation` with the head's expected start: when enough is expected to be free by the
    predicted run times (a running job past its prediction expected to run to its limit), never
    later than the guaranteed start. Told in the head's reason only: nothing waits for it."""
    from infosvc.sched.prediction import planned_end  # here: a simulation never explains, nor imports it

    ending = sorted([(planned_end(r.started, r.estimate if math.isnan(r.predicted) else r.predicted, r.estimate, now),
                      r.allocation) for r in running]
                    + [(now + predicted(s.job), s.allocation) for s in plan.starts], key=lambda pair: pair[0])
    expected, _ = _shadow(free, ending, reservation.job, now)
    return Reservation(reservation.job, reservation.at, reservation.allocation, min(expected.at, reservation.at))
