"""`policy.resume`: a blocked EASY pass gone on with the jobs arrived since, nothing having ended,
decides as a full `schedule` pass on the whole queue would. Held on random machines, running
jobs (some past their estimates, some of Infinite run time), queues and arrivals, pass after
pass; and where `schedule` leaves nothing to resume."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.sched import Plan, Policy, ProcessorPool, Running, schedule
from infosvc.sched.policy import resume
from test_policy import Job


def decided(plan: Plan[int]) -> list[tuple[str, int, bool]]:
    return [(start.job.id, start.allocation, start.backfilled) for start in plan.starts]


def started_now(plan: Plan[int], pool: ProcessorPool, running: list[Running[int]], now: float) -> None:
    """The plan's starts take their processors and run: the caller's part of a pass."""
    for start in plan.starts:
        pool.take(start.allocation)
        running.append(Running(start.job.id, now, start.job.estimate, start.allocation))


ESTIMATES = st.one_of(st.integers(1, 60).map(float), st.just(math.inf))


@settings(max_examples=400, deadline=None)
@given(size=st.integers(1, 12),
       held=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 20), ESTIMATES), max_size=6),
       queued=st.lists(st.tuples(st.integers(1, 12), ESTIMATES), min_size=1, max_size=10),
       batches=st.lists(st.tuples(st.integers(0, 30), st.lists(st.tuples(st.integers(1, 12), ESTIMATES), max_size=5)),
                        min_size=1, max_size=4))
def test_resume_decides_as_a_full_pass(size: int, held: list[tuple[int, int, float]],
                                       queued: list[tuple[int, float]],
                                       batches: list[tuple[int, list[tuple[int, float]]]]) -> None:
    running: list[Running[int]] = []
    for n, (width, started, estimate) in enumerate(held):  # running jobs as fit; started up to 20 s ago
        if width <= size - sum(r.allocation for r in running):
            running.append(Running(f"r{n}", 20.0 - started, estimate, width))
    pool = ProcessorPool(size, size - sum(r.allocation for r in running))
    queue = [Job(f"q{n}", min(width, size), estimate) for n, (width, estimate) in enumerate(queued)]
    now = 20.0
    plan = schedule(pool, running, queue, now, Policy.EASY, explain=False)
    started_now(plan, pool, running, now)
    queue = [job for job in queue if job.id not in {s.job.id for s in plan.starts}]
    state = plan.backfilling
    assert (state is None) == (not queue)  # blocked: something is left; else nothing is
    for after, (pause, arrived) in enumerate(batches):
        if state is None:
            break
        now += pause
        new = [Job(f"a{after}.{n}", min(width, size), estimate, now) for n, (width, estimate) in enumerate(arrived)]
        full = schedule(pool.copy(), list(running), queue + new, now, Policy.EASY, explain=False)
        gone_on = resume(state, new, now)
        assert decided(gone_on) == decided(full)
        assert all(start.backfilled for start in gone_on.starts)  # the head never starts without an end
        started_now(gone_on, pool, running, now)
        assert state.free.room() == pool.free  # the state is the machine as the starts left it
        assert full.backfilling is not None and gone_on.backfilling is state
        assert (state.guard.at, state.guard.room) == (full.backfilling.guard.at, full.backfilling.guard.room)
        queue = [job for job in queue + new if job.id not in {s.job.id for s in gone_on.starts}]


def test_an_overdue_job_moves_the_reserved_start_to_now() -> None:
    """A (6 of 10, estimate 10 from 0) is past its estimate at 15: the head B (8) is reserved at
    once (max(A's end, now)), so no later job is short enough to end by it; C (2 for 1 s) fits
    only by the extra processors (10 - 8 = 2 once A is counted as ended): it starts, D (1) does not."""
    a = Running("A", 0.0, 10.0, 6)
    pool = ProcessorPool(10, 4)
    plan = schedule(pool, [a], [Job("B", 8, 50.0)], 15.0, Policy.EASY, explain=False)
    assert plan.starts == [] and plan.backfilling is not None and plan.backfilling.guard.at == 15.0
    gone_on = resume(plan.backfilling, [Job("C", 2, 1.0, 30.0), Job("D", 1, 1.0, 30.0)], 30.0)
    assert decided(gone_on) == [("C", 2, True)]
    assert plan.backfilling.guard.at == 30.0 and plan.backfilling.guard.room == 0
    assert plan.backfilling.free.room() == 2
    assert decided(resume(plan.backfilling, [], 31.0)) == []


def test_only_a_blocked_pass_without_reasons_or_eligible_times_is_left_to_resume() -> None:
    a = Running("A", 0.0, 100.0, 6)
    queue = [Job("B", 8, 50.0), Job("C", 2, 5.0)]

    def left(policy: Policy, **options: object) -> object:
        return schedule(ProcessorPool(10, 4), [a], queue, 0.0, policy, **options).backfilling  # type: ignore[arg-type]

    assert left(Policy.EASY, explain=False) is not None
    assert left(Policy.EASY) is None  # reasons are written: the service's pass, not resumed
    assert left(Policy.FCFS, explain=False) is None
    assert left(Policy.PREDICTIVE, explain=False) is not None  # left: its caller knows when its order allows
    assert left(Policy.EASY, explain=False, not_before={"C": 10.0}) is None  # C becomes eligible later
    assert schedule(ProcessorPool(10, 10), [], queue[1:], 0.0, Policy.EASY, explain=False).backfilling is None
