"""Variants of `predictive` that bench/predictive.py measures and the policy does not use
(docs/simulation.md, "Tried and dropped"): every overdue job reserved, not only the first; and
(`marked`) the overdue jobs backfilled, oldest first, before the others.

`predictive` reserves for the first overdue job that cannot start (EASY's head), and backfills
the rest of the queue around that one reservation; the other overdue jobs wait unreserved, so a
wide one among them can be pushed back by the backfills around a narrower head. Here each
overdue job, oldest first, up to `depth` reservations in all, either starts now without delaying
any reservation made before it, or gets a reservation of its own: conservative backfilling
(Mu'alem and Feitelson, "Utilization, predictability, workloads, and user runtime estimates in
scheduling the IBM SP2 with backfilling", IEEE TPDS 12(6), 2001) among the overdue jobs, EASY's
single reservation for the others. The later jobs are then backfilled, in the caller's order, by
EASY's rule against every reservation: by its estimate a job ends before a reserved start, or fits
in what that reservation leaves at its start (and takes it from there).

Why that rule holds every reservation: what is free only falls at a reserved start (only rises
at an end), so a job that fits now and in what each reservation it overlaps leaves at its start
fits through its whole estimate. The reservations are made in submission order, each no earlier
than the one before (that instant is after every earlier reserved start, so only ends follow it
and a job that fits there fits until its own estimate ends).
"""

from __future__ import annotations

import math
import operator
from typing import Callable, Collection, Iterator, TypeVar

from infosvc.sched.policy import Machine, Plan, Queued, Reservation, Running, Start, _Guard

A = TypeVar("A")

__all__ = ["backfill_guarded", "marked", "reserve_overdue"]

_TIME = operator.itemgetter(0, 1)


def reserve_overdue(free: Machine[A], running: Collection[Running[A]], plan: Plan[A], head: Reservation[A],
                    guard: _Guard[A], late: Iterator[Queued], now: float, depth: int, passed: set[str],
                    explain: bool, when: Callable[[float], str]) -> list[_Guard[A]]:
    """The guards of the head's reservation (`guard`) and of the overdue jobs after it (`late`,
    oldest first), up to `depth` in all; an overdue job that can start now without delaying any
    of them starts (in `plan`, as a backfill). Each job taken from `late` is added to `passed`."""
    guards = [guard]
    if head.allocation is None or math.isinf(head.at):
        return guards
    ending = [(r.started + r.estimate, r.allocation) for r in running] + \
        [(now + s.job.estimate, s.allocation) for s in plan.starts]
    held = [(head.at, head.at + head.job.estimate, head.allocation)]
    for job in late:
        if len(guards) >= depth:
            break
        passed.add(job.id)
        allocation = _fits(free, job, now, guards)
        if allocation is not None:
            _start(free, plan, job, allocation, now, guards)
            ending.append((now + job.estimate, allocation))
            continue
        at, allocation, extra = _shadow_after(free, ending, held, job, guards[-1].at, now)
        if allocation is None:  # nothing frees enough (a running job of Infinite run time): hold nothing more
            if explain:
                plan.waiting[job.id] = f"overdue: {free.describe_shortfall(job)}; no running job's end frees enough"
            break
        held.append((at, at + job.estimate, allocation))
        guards.append(_Guard(at, extra))
        if explain:
            plan.waiting[job.id] = f"overdue: {free.describe_shortfall(job)}; reserved to start at {when(at)}"
    return guards


def backfill_guarded(free: Machine[A], plan: Plan[A], rest: Iterator[Queued], now: float, guards: list[_Guard[A]],
                     explain: bool, delay: Callable[[], str]) -> None:
    """Past the reserved jobs, in the caller's order: a job starts now if it fits and delays none
    of `guards` (the module's rule)."""
    for job in rest:
        allocation = free.place(job) if job.processors <= free.room() else None
        if allocation is None:
            if explain:
                plan.waiting[job.id] = free.describe_shortfall(job)
            continue
        allocation = _fits(free, job, now, guards)
        if allocation is None:
            if explain:
                plan.waiting[job.id] = delay()
            continue
        _start(free, plan, job, allocation, now, guards)


def _fits(free: Machine[A], job: Queued, now: float, guards: list[_Guard[A]]) -> A | None:
    """Where `job` starts now without delaying any guard's start (None: it does not)."""
    ends = now + job.estimate
    within = None
    for guard in guards:
        if ends > guard.at:
            if guard.extra is None or job.processors > guard.room:
                return None
            within = guard.extra if within is None else within
            if guard.extra.place(job) is None:
                return None
    return free.place(job, within=within)


def _start(free: Machine[A], plan: Plan[A], job: Queued, allocation: A, now: float, guards: list[_Guard[A]]) -> None:
    free.take(allocation)
    for guard in guards:
        if now + job.estimate > guard.at:
            assert guard.extra is not None
            guard.extra.take(allocation)
            guard.room = guard.extra.room()
    plan.starts.append(Start(job, allocation, backfilled=True))


def _shadow_after(free: Machine[A], ending: list[tuple[float, A]], held: list[tuple[float, float, A]], job: Queued,
                  after: float, now: float) -> tuple[float, A | None, Machine[A] | None]:
    """The first instant, not before `after`, at which `job` fits with the running jobs ended by
    then (by estimate) and the reserved jobs (`held`: start, end, allocation) holding theirs;
    where, and what is left then beside it. (inf, None, None): never."""
    future = free.copy()
    # (instant, 0: an end or 1: a reserved start, allocation): at one instant the ends go first
    events = [(at, 0, allocation) for at, allocation in ending] + \
        [(end, 0, allocation) for _, end, allocation in held] + [(start, 1, allocation) for start, _, allocation in held]
    events.sort(key=_TIME)
    index, count = 0, len(events)
    while index < count:
        instant = events[index][0]
        if math.isinf(instant):
            break
        while index < count and events[index][0] == instant:
            _, kind, allocation = events[index]
            if kind:
                future.take(allocation)
            else:
                future.give(allocation)
            index += 1
        if instant >= after:
            placed = future.place(job)
            if placed is not None:
                future.take(placed)
                return max(instant, now), placed, future
    return math.inf, None, None


def marked(jobs: Iterator[Queued], passed: set[str]) -> Iterator[Queued]:
    """`jobs`, each added to `passed` as it is read (a later scan then leaves it out)."""
    for job in jobs:
        passed.add(job.id)
        yield job
