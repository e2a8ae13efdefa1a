"""The `predictive` policy (infosvc/sched/policy.py, prediction.py, ordering.py, and its loop in
simulation.py): predictions from each user's history, the slack order, and, on random small
workloads, what it guarantees: a valid schedule, the head's guaranteed start never delayed by a job
started behind it, and the bound on every job's wait (docs/simulation.md)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.sched import Policy
from infosvc.sched.ordering import MAX_SLACK, Order, order_key, slack_key
from infosvc.sched.policy import Running, schedule
from infosvc.sched.pool import ProcessorPool
from infosvc.sched.prediction import UserHistory, planned_end
from infosvc.sched.simulation import Options, SimJob, Waiting, simulate, simulate_predictive

MACHINE = 8


def test_a_prediction_is_the_mean_of_the_users_last_two_run_times_never_above_the_estimate() -> None:
    history = UserHistory()
    assert history.predict("ann", 3600) == 3600  # no history: the estimate
    history.record("ann", 100)
    assert history.predict("ann", 3600) == 100
    history.record("ann", 300)
    history.record("ann", 500)  # the last two: 300 and 500
    assert history.predict("ann", 3600) == 400
    assert history.predict("ann", 200) == 200  # the estimate is the kill limit: never above it
    assert history.predict("bob", 50) == 50  # another user's history is not ann's
    history.record("bob", 0)
    assert history.predict("bob", 50) == 1  # at least a second


def test_a_running_job_past_its_prediction_is_expected_to_run_to_its_limit() -> None:
    assert planned_end(started=0, predicted=100, estimate=1000, now=50) == 100
    assert planned_end(started=0, predicted=100, estimate=1000, now=100) == 1000


def job(name: str, submitted: float, processors: int, predicted: float, estimate: float = 10_000) -> Waiting:
    sim = SimJob.of(int(name), submitted, processors, estimate, predicted)
    return Waiting(sim.id, 0, submitted, estimate, processors, predicted, sim)


def test_the_slack_order_puts_a_short_job_before_long_ones_submitted_a_little_earlier() -> None:
    long, short = job("1", 0, 1, 7200), job("2", 60, 1, 60)
    ordered = sorted([long, short], key=lambda j: order_key(Order.SLACK, j, now=100))
    assert [j.id for j in ordered] == [short.id, long.id]
    # a job submitted more than the largest slack earlier is never passed
    old = job("3", 0, 1, 10 ** 7)
    late = job("4", MAX_SLACK + 1, 1, 1)
    assert order_key(Order.SLACK, old, 0) < order_key(Order.SLACK, late, 0)
    assert slack_key(0, math.inf) == MAX_SLACK


def test_wfp3_and_unicef_grow_with_the_wait() -> None:
    a = job("1", 0, 4, 100)
    for order in (Order.WFP3, Order.UNICEF):
        assert order_key(order, a, now=1000) < order_key(order, a, now=10)


def test_a_backfill_expected_to_delay_the_head_waits_though_easy_would_start_it() -> None:
    # 4 processors; R holds 3 (estimate 1000, predicted 100). The head H needs 4: guaranteed at
    # 1000 (R's limit), expected at 100. C (1 processor, estimate 500, predicted 400) ends by 1000 by
    # its estimate, so EASY starts it, but it is expected to hold its processor past 100, when H is
    # expected to start: predictive keeps it waiting. D (predicted 50) is expected to end by then.
    pool = ProcessorPool(4, 1)
    running = [Running("R", 0.0, 1000.0, 3, predicted=100.0)]
    head, c, d = job("1", 0, 4, 4000, 4000), job("2", 1, 1, 400, 500), job("3", 2, 1, 50, 500)
    easy = schedule(pool, running, [head, c, d], now=10.0, policy=Policy.EASY)
    assert [s.job.id for s in easy.starts] == [c.id]
    plan = schedule(pool, running, [head, c, d], now=10.0, policy=Policy.PREDICTIVE)
    assert [s.job.id for s in plan.starts] == [d.id]
    assert plan.reservation is not None
    assert (plan.reservation.at, plan.reservation.predicted_at) == (1000.0, 100.0)
    assert "would delay" in plan.waiting[c.id] and "expected at 100" in plan.waiting[head.id]


# --- random small workloads -------------------------------------------------------------------

workloads = st.lists(st.tuples(st.integers(0, 3),      # user
                               st.integers(0, 200),    # submit
                               st.integers(1, MACHINE),  # processors
                               st.integers(1, 60),     # estimate
                               st.integers(1, 60)),    # run (cut to the estimate: killed at its limit)
                     min_size=1, max_size=14)


def sim_jobs(raw: list[tuple[int, int, int, int, int]]) -> list[SimJob]:
    jobs = [SimJob.of(n, s, w, e, min(r, e), user=u) for n, (u, s, w, e, r) in enumerate(raw, 1)]
    return sorted(jobs, key=lambda j: (j.submitted, j.id))


def valid(outcomes: list, jobs: list[SimJob]) -> None:  # type: ignore[type-arg]
    assert sorted(o.job.id for o in outcomes) == sorted(j.id for j in jobs)
    for o in outcomes:
        assert o.start >= o.job.submitted
    instants = sorted({o.start for o in outcomes})
    for t in instants:  # the busiest instants are starts
        assert sum(o.job.processors for o in outcomes if o.start <= t < o.end) <= MACHINE


@settings(max_examples=300, deadline=None)
@given(workloads, st.sampled_from([1.0, 10.0]), st.sampled_from([30.0, MAX_SLACK]))
def test_the_guarantees_hold_on_random_workloads(raw: list[tuple[int, int, int, int, int]], factor: float,
                                                  cap: float) -> None:
    jobs = sim_jobs(raw)
    heads: list[tuple[float, Waiting, float]] = []
    options = Options(slack_factor=factor, max_slack=cap)
    outcomes = simulate_predictive(jobs, MACHINE, options, observe=lambda now, head, at: heads.append((now, head, at)))
    valid(outcomes, jobs)
    start = {o.job.id: o.start for o in outcomes}
    key = {o.job.id: (slack_key(o.job.submitted, o.predicted, factor, cap), o.job.submitted, o.job.id)
           for o in outcomes}
    # The head's guaranteed start is kept: only a job going ahead of it (a smaller key, submitted
    # after the pass that reserved for it) can make it later.
    for now, head, at in heads:
        passed = any(key[j.id] < key[head.id] and j.submitted > now for j in jobs)
        assert passed or start[head.id] <= at, (now, head.id, at, start[head.id])
    # The bound: a job J is passed only by jobs submitted before submit_J + cap; after that each
    # job ahead of it, then J, is the head for at most the longest estimate E.
    longest = max(j.estimate for j in jobs)
    for j in jobs:
        ahead = sum(1 for k in jobs if key[k.id] < key[j.id] and k.submitted < j.submitted + cap)
        assert start[j.id] - j.submitted <= cap + (1 + ahead) * longest


@settings(max_examples=200, deadline=None)
@given(workloads)
def test_without_predictions_and_in_submission_order_it_is_easy(raw: list[tuple[int, int, int, int, int]]) -> None:
    jobs = sim_jobs(raw)
    easy = {o.job.id: o.start for o in simulate(jobs, MACHINE, Policy.EASY)}
    same = simulate_predictive(jobs, MACHINE, Options(predictions=False, order=Order.FCFS))
    assert {o.job.id: o.start for o in same} == easy


@settings(max_examples=100, deadline=None)
@given(workloads, st.sampled_from(list(Order)))
def test_every_order_gives_a_valid_schedule(raw: list[tuple[int, int, int, int, int]], order: Order) -> None:
    jobs = sim_jobs(raw)
    valid(simulate_predictive(jobs, MACHINE, Options(order=order)), jobs)
