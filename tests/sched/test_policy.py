"""The scheduling pass (infosvc/sched/policy.py) on a pool of processors, each case worked out by
hand: priority-based FCFS, EASY's two backfill clauses, Infinite run times, purity."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.sched import Plan, Policy, ProcessorPool, Running, Start, queue_order, schedule


@dataclass(frozen=True)
class Job:
    id: str
    processors: int
    estimate: float
    submitted: float = 0.0
    priority: int = 2


def started(plan: Plan[int]) -> list[str]:
    return [start.job.id for start in plan.starts]


def pool_of(size: int, *running: Running[int]) -> ProcessorPool:
    return ProcessorPool(size, size - sum(r.allocation for r in running))


# A machine of 10 processors; A holds 6 until t=100. B, first in the queue, needs 8.
A = Running("A", started=0.0, estimate=100.0, allocation=6)
B = Job("B", 8, 50.0)


def test_fcfs_stops_at_the_first_job_that_does_not_fit() -> None:
    small = Job("C", 2, 5.0)
    plan = schedule(pool_of(10, A), [A], [B, small], now=0.0, policy=Policy.FCFS)
    assert started(plan) == [] and plan.reservation is None
    assert plan.waiting == {"B": "first in the queue: waiting for 8 processors, 4 free",
                            "C": "behind B (first come, first served)"}


def test_fcfs_starts_from_the_head_while_jobs_fit() -> None:
    plan = schedule(ProcessorPool.empty(10), [], [Job("x", 4, 1.0), Job("y", 6, 1.0), Job("z", 1, 1.0)], 0.0,
                    Policy.FCFS)
    assert started(plan) == ["x", "y"] and set(plan.waiting) == {"z"}


def test_easy_backfills_a_job_that_ends_by_the_shadow_time() -> None:
    # Shadow time: A ends at 100, then 10 are free for B's 8. C (2 for 5 s) ends at 5 <= 100.
    plan = schedule(pool_of(10, A), [A], [B, Job("C", 2, 5.0)], now=0.0, policy=Policy.EASY)
    assert started(plan) == ["C"] and plan.starts[0].backfilled
    assert plan.reservation is not None and (plan.reservation.job.id, plan.reservation.at) == ("B", 100.0)
    assert plan.waiting["B"] == "first in the queue: waiting for 8 processors, 4 free; reserved to start at 100"


def test_easy_backfills_into_the_extra_processors_and_uses_them_up() -> None:
    # At t=100 B takes 8 of 10: 2 extra. C (2 for 500 s) outlives the shadow but fits the extra;
    # D (2 for 500 s) then fits now (2 still free) but the extra is used up: it would delay B.
    plan = schedule(pool_of(10, A), [A], [B, Job("C", 2, 500.0), Job("D", 2, 500.0)], now=0.0)
    assert started(plan) == ["C"]
    assert plan.waiting["D"] == "would delay B, reserved to start at 100"


def test_a_job_that_does_not_fit_is_passed_over_and_the_scan_goes_on() -> None:
    plan = schedule(pool_of(10, A), [A], [B, Job("E", 5, 1.0), Job("F", 1, 1.0)], now=0.0)
    assert started(plan) == ["F"]
    assert plan.waiting["E"] == "waiting for 5 processors, 4 free"


def test_the_shadow_counts_every_job_ending_at_one_instant_and_the_ones_started_now() -> None:
    # Two jobs of 3 end at 40; the head (9) needs both; the job started now from the head of the
    # queue (1 for 30 s) ends before. Extra at t=40: 10 - 9 = 1.
    r1, r2 = Running("r1", 0.0, 40.0, 3), Running("r2", 10.0, 30.0, 3)
    queue = [Job("first", 1, 30.0), Job("head", 9, 10.0), Job("long", 1, 1000.0), Job("long2", 1, 1000.0)]
    plan = schedule(pool_of(10, r1, r2), [r1, r2], queue, now=10.0)
    assert plan.reservation is not None and plan.reservation.at == 40.0
    assert started(plan) == ["first", "long"]  # long takes the 1 extra processor; long2 would delay head
    assert plan.waiting["long2"] == "would delay head, reserved to start at 40"


def test_an_infinite_job_is_never_backfilled_past_a_reservation() -> None:
    plan = schedule(pool_of(10, A), [A], [B, Job("G", 4, math.inf)], now=0.0)
    assert started(plan) == []  # 4 fit now, but B takes 8 at t=100: 2 extra, not 4
    plan = schedule(pool_of(10, A), [A], [B, Job("G", 2, math.inf)], now=0.0)
    assert started(plan) == ["G"]  # into the 2 extra


def test_behind_a_running_job_of_infinite_run_time_nothing_can_be_reserved() -> None:
    forever = Running("forever", 0.0, math.inf, 6)
    plan = schedule(pool_of(10, forever), [forever], [B, Job("C", 4, 1e9)], now=0.0)
    assert plan.reservation is not None and math.isinf(plan.reservation.at)
    assert started(plan) == ["C"]  # nothing it could delay
    assert plan.waiting["B"].endswith("no running job's end frees enough")


def test_a_job_larger_than_the_machine_says_so() -> None:
    plan = schedule(ProcessorPool.empty(10), [], [Job("huge", 11, 1.0), Job("ok", 1, 1.0)], now=0.0)
    assert started(plan) == ["ok"]
    assert plan.waiting["huge"].startswith("first in the queue: needs 11 processors; the machine has 10")


def test_priority_groups_then_submission_then_id() -> None:
    jobs = [Job("n2", 1, 1, submitted=5), Job("low", 1, 1, submitted=0, priority=0),
            Job("n1", 1, 1, submitted=5), Job("high", 1, 1, submitted=9, priority=4), Job("n0", 1, 1, submitted=1)]
    assert [j.id for j in queue_order(jobs)] == ["high", "n0", "n1", "n2", "low"]


def test_the_machine_given_is_left_as_it_was() -> None:
    machine = pool_of(10, A)
    schedule(machine, [A], [Job("C", 2, 5.0), B, Job("D", 1, 1.0)], now=0.0)
    assert machine == ProcessorPool(10, 4)


def test_a_pool_refuses_to_take_or_give_what_it_has_not() -> None:
    pool = ProcessorPool.empty(4)
    with pytest.raises(ValueError):
        pool.take(5)
    with pytest.raises(ValueError):
        pool.give(1)


def test_running_start_and_pool_compare_and_print_by_their_fields_as_dataclasses_did() -> None:
    assert Running("r", 0.0, 5.0, 3, 1.0) == Running("r", 0.0, 5.0, 3, 1.0)
    assert Running("r", 0.0, 5.0, 3, 1.0) != Running("r", 0.0, 5.0, 4, 1.0)
    assert Running("r", 0.0, 5.0, 3, 1.0) != ("r", 0.0, 5.0, 3, 1.0)  # another type is never equal
    assert Start(B, 2) == Start(B, 2) and Start(B, 2) != Start(B, 2, backfilled=True)
    assert ProcessorPool(4, 1).copy() == ProcessorPool(4, 1) and ProcessorPool(4, 1) != ProcessorPool(4, 2)
    assert repr(Running("r", 0.0, 5.0, 3, 1.0)) == "Running(id='r', started=0.0, estimate=5.0, allocation=3, predicted=1.0)"
    assert repr(ProcessorPool(4, 1)) == "ProcessorPool(size=4, free=1)"
    plan: Plan[int] = Plan()
    assert plan == Plan() and repr(plan) == "Plan(starts=[], reservation=None, waiting={}, backfilling=None)"
    with pytest.raises(TypeError):  # mutable: no hash, as a dataclass that compares
        hash(ProcessorPool(4, 1))
    with pytest.raises(AttributeError):  # slots: no field that is not one
        ProcessorPool(4, 1).used = 3  # type: ignore[attr-defined]


jobs = st.lists(st.tuples(st.integers(1, 16), st.sampled_from([1.0, 5.0, 30.0, 100.0, 1e4, math.inf]),
                          st.integers(0, 4)), min_size=1, max_size=25)
runs = st.lists(st.tuples(st.integers(1, 8), st.sampled_from([10.0, 60.0, 200.0, math.inf])), max_size=4)


@settings(max_examples=300)
@given(jobs, runs, st.sampled_from(list(Policy)))
def test_a_pass_never_overcommits_and_never_delays_the_reservation(queue_spec: list[tuple[int, float, int]],
                                                                  run_spec: list[tuple[int, float]],
                                                                  policy: Policy) -> None:
    size = 16
    running, used = [], 0
    for k, (processors, estimate) in enumerate(run_spec):
        if used + processors <= size:
            running.append(Running(f"r{k}", 0.0, estimate, processors))
            used += processors
    queue = queue_order([Job(f"j{k:02d}", p, e, submitted=float(k), priority=pr)
                         for k, (p, e, pr) in enumerate(queue_spec)])
    plan = schedule(ProcessorPool(size, size - used), running, queue, now=0.0, policy=policy)
    assert used + sum(s.allocation for s in plan.starts) <= size  # never more than the machine
    assert {s.job.id for s in plan.starts}.isdisjoint(plan.waiting)
    assert {s.job.id for s in plan.starts} | set(plan.waiting) == {j.id for j in queue}
    if policy is Policy.FCFS:  # a prefix of the queue
        assert started(plan) == [j.id for j in queue[:len(plan.starts)]]
    reservation = plan.reservation
    if reservation is not None and not math.isinf(reservation.at):
        # At the shadow time the head still fits, with everything started now that is still running.
        free_then = size - sum(r.allocation for r in running if r.ends > reservation.at) - sum(
            s.allocation for s in plan.starts if s.job.estimate > reservation.at)
        assert free_then >= reservation.job.processors  # type: ignore[attr-defined]


@dataclass(frozen=True)
class PredictedJob(Job):
    predicted: float = math.nan


def decided(plan: Plan[int]) -> tuple[list[tuple[str, int, bool]], tuple[str, float, int | None] | None]:
    """The starts and the reservation (not predicted_at: the expected start is worked out only when
    something could be backfilled)."""
    r = plan.reservation
    reserved = None if r is None else (r.job.id, r.at, r.allocation)
    return [(s.job.id, s.allocation, s.backfilled) for s in plan.starts], reserved


@settings(max_examples=300)
@given(jobs, runs, st.lists(st.sampled_from([1.0, 5.0, 50.0, math.nan]), min_size=25, max_size=25),
       st.sampled_from([Policy.EASY, Policy.PREDICTIVE]))
def test_the_reasons_change_no_decision(queue_spec: list[tuple[int, float, int]], run_spec: list[tuple[int, float]],
                                        guesses: list[float], policy: Policy) -> None:
    """EASY and predictive backfill in one loop (policy._backfill), which without `explain` (a
    simulation) refuses jobs by the machine's rooms alone and stops once nothing fits: the same
    starts and reservation as the service's pass, which asks the machine about every job."""
    size = 16
    running, used = [], 0
    for k, (processors, estimate) in enumerate(run_spec):
        if used + processors <= size:
            running.append(Running(f"r{k}", 0.0, estimate, processors, guesses[k]))
            used += processors
    queue = queue_order([PredictedJob(f"j{k:02d}", p, e, float(k), pr, guesses[k])
                         for k, (p, e, pr) in enumerate(queue_spec)])
    told, silent = (schedule(ProcessorPool(size, size - used), running, queue, now=1.0, policy=policy, explain=explain)
                    for explain in (True, False))
    assert decided(told) == decided(silent)
    assert set(told.waiting) | {s.job.id for s in told.starts} == {j.id for j in queue} and not silent.waiting
