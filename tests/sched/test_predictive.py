"""The `predictive` policy (infosvc/sched/policy.py, prediction.py, ordering.py, and its loop in
simulation.py): predictions from each user's history, the slack order, and, on random small
workloads, what it guarantees: a valid schedule, the head's guaranteed start never delayed by a job
started behind it, and the bound on every job's wait (docs/simulation.md)."""

from __future__ import annotations

import math

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.sched import Policy
from infosvc.sched.ordering import GUARD_FRACTION, MAX_SLACK, OVERDUE_AFTER, Order, guard_after, order_key, overdue, slack_key
from infosvc.sched.policy import Running, schedule
from infosvc.sched.pool import ProcessorPool
from infosvc.sched.prediction import UserHistory, planned_end
from infosvc.sched.simulation import Options, SimJob, Waiting, simulate, simulate_predictive

MACHINE = 8


def test_a_prediction_is_the_estimate_times_the_part_of_theirs_the_users_last_two_jobs_ran() -> None:
    history = UserHistory()
    assert history.predict("ann", 3600) == 3600  # no history: the estimate
    history.record("ann", 100, 1000)  # a tenth of its limit
    assert history.predict("ann", 3600) == 360
    history.record("ann", 300, 1000)
    history.record("ann", 500, 1000)  # the last two: 0.3 and 0.5 of their limits
    assert history.predict("ann", 3600) == pytest.approx(1440)
    assert history.predict("ann", 2) == pytest.approx(1.0)  # never below a second
    history.record("ann", 5000, 1000)  # ran past its limit (a grace): counts as the whole limit
    assert history.predict("ann", 1000) == 750  # (0.5 + 1) / 2: never above the estimate, the kill limit
    assert history.predict("bob", 50) == 50  # another user's history is not ann's
    history.record("bob", 0, 60)
    assert history.predict("bob", 50) == 1  # at least a second


def test_without_a_finite_limit_a_prediction_is_the_mean_of_the_users_last_two_run_times() -> None:
    history = UserHistory()
    history.record("ann", 100)  # no limit: a run time, no ratio
    history.record("ann", 300, math.inf)
    assert history.predict("ann", 3600) == 200  # EASY++'s mean of the last two
    assert history.predict("ann", math.inf) == 200
    assert history.predict("ann", 150) == 150  # never above the estimate
    history.record("ann", 50, 100)
    assert history.predict("ann", 3600) == 1800  # a ratio known: it reads the job's own limit
    assert history.predict("ann", math.inf) == pytest.approx(175)  # an unlimited job: the run times
    history.record("bob", -1, 10)
    history.record("bob", math.nan, 10)
    assert history.predict("bob", 10) == 10  # nothing read from what is no run time


def test_a_ratio_is_of_the_user_s_last_two_jobs_only() -> None:
    # a review: one old job's ratio outlived fifty jobs of no limit after it
    history = UserHistory()
    history.record("bob", 1000, 100_000)  # 1 % of its limit
    for _ in range(50):
        history.record("bob", 20_000)  # no limit
    assert history.predict("bob", 100_000) == 20_000  # the last two had no ratio: their run times
    history.record("bob", 500, 1000)
    assert history.predict("bob", 100_000) == 50_000  # one of the last two has a ratio


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


def test_the_expected_start_is_told_but_backfilling_is_easys() -> None:
    # 4 processors; R holds 3 (estimate 1000, predicted 100). The head H needs 4: guaranteed at
    # 1000 (R's limit), expected at 100. C (1 processor, estimate 500, predicted 400) ends by 1000 by
    # its estimate, so EASY starts it, and so does predictive: holding C back for the expected start
    # (the earlier design) starved the machine on the tuning traces. The expected start is in H's reason.
    pool = ProcessorPool(4, 1)
    running = [Running("R", 0.0, 1000.0, 3, predicted=100.0)]
    head, c, d = job("1", 0, 4, 4000, 4000), job("2", 1, 1, 400, 500), job("3", 2, 1, 50, 500)
    easy = schedule(pool, running, [head, c, d], now=10.0, policy=Policy.EASY)
    plan = schedule(pool, running, [head, c, d], now=10.0, policy=Policy.PREDICTIVE)
    assert [s.job.id for s in plan.starts] == [s.job.id for s in easy.starts] == [c.id]
    assert plan.reservation is not None
    assert (plan.reservation.at, plan.reservation.predicted_at) == (1000.0, 100.0)
    assert "expected at 100" in plan.waiting[head.id] and "1 free" in plan.waiting[head.id]


def test_the_guard_picks_the_first_groups_jobs_waiting_past_the_bound_oldest_first() -> None:
    young, old, older = job("1", 100, 1, 10), job("2", 50, 1, 99), job("3", 10, 1, 500)
    queue = [young, old, older]  # the slack order: the short young job first
    assert list(overdue(queue, now=110, after=60)) == [older, old]  # 100 and 60 waited: 60 counts, oldest first
    assert list(overdue(queue, now=109, after=60)) == [older]
    assert list(overdue(queue, now=10 ** 9, after=math.inf)) == []  # the guard off
    assert list(overdue([], now=10 ** 9)) == []
    assert list(overdue(queue, now=10, after=0)) == [older]  # a bound of 0: every job already submitted
    # a later priority group is not the guard's: its old job stays behind the first group
    urgent = Waiting("9", 4, 200, 10, 1, 10, SimJob.of(9, 200, 1, 10, 10))
    low = Waiting("8", 0, 0, 10, 1, 10, SimJob.of(8, 0, 1, 10, 10))
    assert list(overdue([urgent, low], now=10 ** 6, after=60)) == [urgent]


def test_the_guards_bound_is_a_part_of_the_longest_wait_never_under_its_floor() -> None:
    assert OVERDUE_AFTER == 0.0  # no fixed floor: the bound is the machine's own
    assert guard_after(0.0) == 0.0  # nothing has waited yet: every job is overdue, EASY's order
    assert guard_after(40 * 3600.0) == GUARD_FRACTION * 40 * 3600.0 == 10 * 3600.0
    assert guard_after(600.0) == 150.0  # where jobs wait minutes, a job is passed for minutes (a 6 h floor: 6 h)
    assert guard_after(1000.0, floor=60.0, fraction=0.25) == 250.0
    assert guard_after(100.0, floor=60.0, fraction=0.25) == 60.0  # a quarter of it is under the floor
    assert guard_after(10.0 ** 9, floor=60.0, fraction=0.0) == 60.0  # no fraction: the floor alone
    assert guard_after(10.0 ** 9, floor=math.inf) == math.inf  # the guard off stays off
    assert guard_after(-5.0, floor=60.0) == 60.0


def test_an_overdue_job_is_reserved_ahead_of_a_shorter_one_the_slack_order_puts_first() -> None:
    # 4 processors, 2 held by R until 100. The slack order puts S (short, 4 wide) before L (long,
    # 4 wide, submitted long before). L has waited past the bound: it is the reserved head, and S waits.
    pool = ProcessorPool(4, 1)
    running = [Running("R", 0.0, 100.0, 2)]
    short, long = job("2", 5000, 4, 10, 10), job("1", 0, 4, 3000, 3000)
    plan = schedule(pool, running, [short, long], now=5000.0, policy=Policy.PREDICTIVE, overdue_after=3600)
    assert plan.reservation is not None and plan.reservation.job is long
    unguarded = schedule(pool, running, [short, long], now=5000.0, policy=Policy.PREDICTIVE, overdue_after=math.inf)
    assert unguarded.reservation is not None and unguarded.reservation.job is short


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
@given(workloads, st.sampled_from([1.0, 10.0]), st.sampled_from([30.0, MAX_SLACK]),
       st.sampled_from([0.0, 20.0, 60.0, math.inf]), st.sampled_from([0.0, 0.25]))
def test_the_guarantees_hold_on_random_workloads(raw: list[tuple[int, int, int, int, int]], factor: float,
                                                  cap: float, after: float, fraction: float) -> None:
    jobs = sim_jobs(raw)
    heads: list[tuple[float, Waiting, float]] = []
    options = Options(slack_factor=factor, max_slack=cap, overdue_after=after, guard_fraction=fraction)
    outcomes = simulate_predictive(jobs, MACHINE, options, observe=lambda now, head, at: heads.append((now, head, at)))
    valid(outcomes, jobs)
    start = {o.job.id: o.start for o in outcomes}

    def bound(now: float) -> float:  # the guard's at the pass at `now`: from the jobs started at earlier passes
        return max(after, fraction * max((start[j.id] - j.submitted for j in jobs if start[j.id] < now), default=0.0))
    key = {o.job.id: (slack_key(o.job.submitted, o.predicted, factor, cap), o.job.submitted, o.job.id)
           for o in outcomes}

    def older(k: SimJob | Waiting, j: SimJob | Waiting) -> bool:
        return (k.submitted, k.id) < (j.submitted, j.id)

    # The head's guaranteed start is kept: only a job going ahead of it after the pass that
    # reserved for it can make it later: one with a smaller key submitted after that pass, or an
    # older one that the guard put ahead once it had waited `after`.
    for now, head, at in heads:
        passed = any((key[j.id] < key[head.id] and j.submitted > now)
                     or (older(j, head) and now - j.submitted < bound(now) and start[j.id] > now) for j in jobs)
        assert passed or start[head.id] <= at, (now, head.id, at, start[head.id])
    longest = max(j.estimate for j in jobs)
    for j in jobs:
        wait = start[j.id] - j.submitted
        # The slack's bound: J is passed only by jobs submitted before submit_J + cap (a smaller key,
        # or, with the guard, an older job); after that each of them, then J, is the head for at
        # most the longest estimate E.
        ahead = sum(1 for k in jobs if (key[k.id] < key[j.id] or (after < math.inf and older(k, j)))
                    and k.submitted < j.submitted + cap)
        assert wait <= cap + (1 + ahead) * longest
        # The guard's: once J has waited the bound (at most `after` or `fraction` of the longest
        # wait of all, whichever is more), only older jobs go ahead of it; the next pass comes
        # within E, then each of them, then J, is the head for at most E.
        if after < math.inf:
            most = max(after, fraction * max(start[k.id] - k.submitted for k in jobs))
            assert wait <= most + (2 + sum(1 for k in jobs if older(k, j))) * longest, (j.id, wait)


@settings(max_examples=200, deadline=None)
@given(workloads, st.booleans(), st.sampled_from([0.0, 20.0, math.inf]))
def test_in_submission_order_it_is_easy_whatever_the_predictions_and_the_guard(
        raw: list[tuple[int, int, int, int, int]], predictions: bool, after: float) -> None:
    # the guard falls back to EASY's order, so over EASY's order it changes nothing; predictions
    # only tell the head's expected start: EASY's schedule, start for start
    jobs = sim_jobs(raw)
    easy = {o.job.id: o.start for o in simulate(jobs, MACHINE, Policy.EASY)}
    same = simulate_predictive(jobs, MACHINE, Options(order=Order.FCFS, predictions=predictions, overdue_after=after))
    assert {o.job.id: o.start for o in same} == easy


@settings(max_examples=300, deadline=None)
@given(workloads, st.sampled_from([0.0, 20.0, 60.0]), st.sampled_from([0.0, 0.25, 1.0]))
def test_when_the_guard_triggers_the_reserved_head_is_easys_the_oldest_overdue_job(
        raw: list[tuple[int, int, int, int, int]], after: float, fraction: float) -> None:
    jobs = sim_jobs(raw)
    heads: list[tuple[float, Waiting, float]] = []
    outcomes = simulate_predictive(jobs, MACHINE, Options(overdue_after=after, guard_fraction=fraction),
                                   observe=lambda now, head, at: heads.append((now, head, at)))
    start = {o.job.id: o.start for o in outcomes}
    for now, head, _ in heads:
        # the bound at this pass: `fraction` of the longest wait of a job started at an earlier pass, at least `after`
        longest = max((start[j.id] - j.submitted for j in jobs if start[j.id] < now), default=0.0)
        bound = max(after, fraction * longest)
        waiting = [j for j in jobs if j.submitted <= now < start[j.id] and now - j.submitted >= bound]
        if waiting:  # overdue jobs still wait after the pass: the oldest of them is the one reserved for
            assert head.id == min(waiting, key=lambda j: (j.submitted, j.id)).id


@settings(max_examples=100, deadline=None)
@given(workloads, st.sampled_from(list(Order)))
def test_every_order_gives_a_valid_schedule(raw: list[tuple[int, int, int, int, int]], order: Order) -> None:
    jobs = sim_jobs(raw)
    valid(simulate_predictive(jobs, MACHINE, Options(order=order)), jobs)
