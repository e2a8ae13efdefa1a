"""SSS EligibleTime in the pure policy (infosvc/sched/policy.py, `not_before`) and in the CE's
forecast (infosvc/sched/forecast.py, `Demand.not_before`): a job starts no earlier, is never
reserved for before it, blocks nobody while it is not eligible, and the forecast places it no
earlier. Properties over random machines and queues, and passes replayed over time."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.sched import Plan, Policy, ProcessorPool, Running, schedule
from infosvc.sched.forecast import Demand, first_start
from test_policy import Job as PolicyJob


@dataclass(frozen=True)
class Job(PolicyJob):
    eligible: float | None = None
    run: float = 0.0  # how long it really runs (at most its estimate), for the replay


def not_before(jobs: list[Job]) -> dict[str, float]:
    return {job.id: job.eligible for job in jobs if job.eligible is not None}


def test_a_job_before_its_eligible_time_neither_starts_nor_blocks_nor_is_reserved_for() -> None:
    later = Job("later", 8, 10.0, eligible=50.0)
    small = Job("small", 2, 1000.0)
    for policy in Policy:
        plan = schedule(ProcessorPool.empty(10), [], [later, small], 0.0, policy, not_before=not_before([later]))
        assert [s.job.id for s in plan.starts] == ["small"], policy
        assert plan.reservation is None
        assert plan.waiting == {"later": "not eligible before 50 (its EligibleTime)"}
        # at its EligibleTime it is the head again, in its place
        at = schedule(ProcessorPool.empty(10), [], [later, small], 50.0, policy, not_before=not_before([later]))
        assert [s.job.id for s in at.starts] == ["later", "small"], policy


def test_the_head_blocked_by_running_jobs_is_reserved_for_only_once_eligible() -> None:
    running = Running("r", 0.0, 100.0, 6)
    head = Job("head", 8, 10.0, eligible=20.0)
    other = Job("other", 6, 10.0, submitted=1.0)
    plan = schedule(ProcessorPool(10, 4), [running], [head, other], 0.0, Policy.EASY, not_before=not_before([head]))
    assert plan.reservation is not None and plan.reservation.job.id == "other" and plan.reservation.at == 100.0
    plan = schedule(ProcessorPool(10, 4), [running], [head, other], 20.0, Policy.EASY, not_before=not_before([head]))
    assert plan.reservation is not None and plan.reservation.job.id == "head" and plan.reservation.at == 100.0


jobs = st.lists(st.tuples(st.integers(1, 12), st.integers(1, 200), st.integers(0, 300), st.booleans(),
                          st.integers(0, 400), st.integers(0, 4)), min_size=1, max_size=14)


def _queue(drawn: list[tuple[int, int, int, bool, int, int]]) -> list[Job]:
    return [Job(f"j{n}", procs, float(estimate), float(submitted), priority,
                float(submitted + delay) if has else None, float(max(1, estimate // 2)))
            for n, (procs, estimate, submitted, has, delay, priority) in enumerate(drawn)]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 16), jobs, st.integers(0, 500), st.sampled_from(list(Policy)))
def test_one_pass_never_starts_or_reserves_a_job_before_its_eligible_time(size: int, drawn: list[tuple[
        int, int, int, bool, int, int]], now: int, policy: Policy) -> None:
    queue = [job for job in _queue(drawn) if job.processors <= size]
    plan: Plan[int] = schedule(ProcessorPool.empty(size), [], queue, float(now), policy, not_before=not_before(queue))
    for start in plan.starts:
        eligible = getattr(start.job, "eligible", None)
        assert eligible is None or eligible <= now
    if plan.reservation is not None:
        eligible = getattr(plan.reservation.job, "eligible", None)
        assert eligible is None or eligible <= now <= plan.reservation.at
    # every job it did not start waits with a reason, and those not yet eligible with that one
    assert {s.job.id for s in plan.starts} | set(plan.waiting) == {job.id for job in queue}
    for job in queue:
        if job.eligible is not None and job.eligible > now:
            assert "EligibleTime" in plan.waiting[job.id]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 16), jobs, st.sampled_from(list(Policy)))
def test_eligible_times_in_the_past_change_no_decision(size: int, drawn: list[tuple[int, int, int, bool, int, int]],
                                                       policy: Policy) -> None:
    queue = [job for job in _queue(drawn) if job.processors <= size]
    now = max((job.eligible or 0.0 for job in queue), default=0.0)
    with_times = schedule(ProcessorPool.empty(size), [], queue, now, policy, not_before=not_before(queue))
    without = schedule(ProcessorPool.empty(size), [], queue, now, policy)
    assert [(s.job.id, s.allocation) for s in with_times.starts] == [(s.job.id, s.allocation) for s in without.starts]
    assert with_times.reservation == without.reservation and with_times.waiting == without.waiting


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 16), jobs, st.sampled_from([Policy.FCFS, Policy.EASY]))
def test_passes_over_time_start_every_job_at_or_after_its_eligible_time(size: int, drawn: list[tuple[
        int, int, int, bool, int, int]], policy: Policy) -> None:
    """A replay as the queue runs it: a pass at every submission, end and EligibleTime; each start
    is at or after the job's EligibleTime, each reservation too, and every job starts."""
    pending = sorted((job for job in _queue(drawn) if job.processors <= size), key=lambda j: (j.submitted, j.id))
    instants = sorted({job.submitted for job in pending} | {job.eligible for job in pending if job.eligible})
    free, running, queue, started = size, [], [], {}
    while instants:
        now = instants.pop(0)
        for done in [r for r in running if r.started + by_id(pending, r.id).run <= now]:
            running.remove(done)
            free += done.allocation
        queue += [job for job in pending if job.submitted == now]
        queue.sort(key=lambda j: (-j.priority, j.submitted, j.id))
        plan = schedule(ProcessorPool(size, free), running, queue, now, policy, not_before=not_before(queue))
        if plan.reservation is not None and math.isfinite(plan.reservation.at):
            eligible = by_id(pending, plan.reservation.job.id).eligible
            assert eligible is None or eligible <= plan.reservation.at
        for start in plan.starts:
            job = by_id(pending, start.job.id)
            assert job.eligible is None or job.eligible <= now
            started[job.id] = now
            queue.remove(job)
            free -= start.allocation
            running.append(Running(job.id, now, job.estimate, start.allocation))
            instants.append(now + job.run)
        instants = sorted(set(instants))
    assert set(started) == {job.id for job in pending}


def by_id(jobs: list[Job], job_id: str) -> Job:
    return next(job for job in jobs if job.id == job_id)


def test_the_forecast_places_a_job_no_earlier_than_its_eligible_time() -> None:
    # 8 processors, all free. Ahead: a job of 8 for 50 s, eligible at 100. The new job (8 for an
    # hour) cannot run before it without delaying it: it starts once it has run, at 150.
    ahead = Demand(8, 50.0, not_before=100.0)
    assert first_start(0.0, 8, 8, [], [ahead], Demand(8, 3600.0)) == 150.0
    assert first_start(0.0, 8, 8, [], [Demand(8, 50.0)], Demand(8, 3600.0)) == 50.0
    # a short new job fits before it, in the gap its EligibleTime leaves
    assert first_start(0.0, 8, 8, [], [ahead], Demand(8, 100.0)) == 0.0
    # the new job's own EligibleTime, between two breakpoints, is honoured
    assert first_start(0.0, 8, 8, [(30.0, 0)], [], Demand(1, 10.0, not_before=42.5)) == 42.5
    assert first_start(0.0, 8, 0, [(30.0, 8)], [], Demand(8, math.inf, not_before=10.0)) == 30.0


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 16), st.lists(st.tuples(st.integers(1, 16), st.integers(1, 100), st.integers(0, 200)),
                                    max_size=6), st.integers(1, 16), st.integers(1, 100), st.integers(0, 300))
def test_the_forecast_never_starts_before_an_eligible_time(capacity: int, ahead: list[tuple[int, int, int]],
                                                           processors: int, seconds: int, eligible: int) -> None:
    demands = [Demand(p, float(s), float(e)) for p, s, e in ahead]
    start = first_start(0.0, capacity, capacity, [], demands, Demand(processors, float(seconds), float(eligible)))
    assert start >= eligible or math.isinf(start)
