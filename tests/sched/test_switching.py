"""The self-tuning choice between EASY's order and the slack order (infosvc/sched/switching.py, and
its use in the replay, infosvc/sched/slackqueue.py): the list-schedule projection, worked cases
where it keeps the slack order and where it falls back to EASY's, and on random workloads that the
choice pinned to EASY's order gives EASY's starts exactly, pinned to the slack order the present
design's, and chosen freely a valid schedule, decided no more often than asked."""

from __future__ import annotations

import math
from typing import NamedTuple

from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.sched import Policy
from infosvc.sched.forecast import Demand, first_start
from infosvc.sched.ordering import Order
from infosvc.sched.simulation import Options, Outcome, SimJob, _replay, simulate, simulate_predictive
from infosvc.sched.slackqueue import SlackQueue
from infosvc.sched.switching import Figures, figures, list_schedule, plan_schedule, slack_order_wins

MACHINE = 8


class Job(NamedTuple):
    submitted: float
    processors: int
    predicted: float


def test_a_list_schedule_starts_each_job_when_enough_is_free_never_before_the_one_ahead() -> None:
    # 2 of 4 free at 100; running: 1 due at 90 (past: counts at now), 1 at 150
    jobs = [Job(0, 3, 50), Job(10, 1, 10), Job(20, 1, 10), Job(30, 4, 10)]
    # the first needs 3: the end due at 90 gives one at once (100); the second waits for the end
    # at 150; the third would fit at 150 as well (never before the one ahead); the fourth needs
    # all 4: the first's end (150) and the second's and third's (160)
    assert list_schedule(2, [(150.0, 1), (90.0, 1)], jobs, 100.0) == [100.0, 150.0, 150.0, 160.0]


def test_a_job_wider_than_the_pool_ever_frees_is_projected_at_infinity_with_all_behind_it() -> None:
    starts = list_schedule(2, [(110.0, 1)], [Job(0, 1, 5), Job(0, 4, 5), Job(0, 1, 5)], 100.0)
    assert starts == [100.0, math.inf, math.inf]


def test_a_plan_puts_a_job_in_the_first_hole_it_fits_for_its_whole_run() -> None:
    # 2 of 4 free from 0, all 4 from 100. A (4 wide, 50 s) is placed at 100; B (2, 100 s) fits
    # before it, in the hole, ending as A starts; C (2, 101 s) would not end by then: after A
    jobs = [Job(0, 4, 50), Job(0, 2, 100), Job(0, 2, 101)]
    assert plan_schedule(2, [(100.0, 2)], jobs, 0.0) == [100.0, 0.0, 150.0]
    assert list_schedule(2, [(100.0, 2)], jobs, 0.0) == [100.0, 150.0, 150.0]  # no job passes the one ahead
    assert plan_schedule(2, [(100.0, 1)], [Job(0, 4, 5), Job(0, 1, 5)], 0.0) == [math.inf, 0.0]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, MACHINE), st.lists(st.tuples(st.integers(-20, 100), st.integers(1, 3)), max_size=5),
       st.lists(st.tuples(st.integers(1, MACHINE), st.integers(1, 60)), max_size=12))
def test_a_plan_never_holds_more_than_the_machine_and_starts_no_job_before_now(
        free: int, running: list[tuple[int, int]], raw: list[tuple[int, int]]) -> None:
    ends = [(float(end), held) for end, held in running]
    size = free + sum(held for _, held in ends)  # the pool: what is free now and what the running give back
    jobs = [Job(0, wanted, run) for wanted, run in raw]
    starts = plan_schedule(free, ends, jobs, 0.0)
    held = [(0.0, size - free)] + [(max(end, 0.0), -given) for end, given in ends]
    held += [change for job, at in zip(jobs, starts) if at < math.inf
             for change in ((at, job.processors), (at + job.predicted, -job.processors))]
    busy = 0
    for _, change in sorted(held, key=lambda e: (e[0], e[1])):  # ends before starts at one instant
        busy += change
        assert busy <= size
    assert all(at >= 0.0 for at in starts)
    assert all((at < math.inf) == (job.processors <= size) for job, at in zip(jobs, starts))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, MACHINE), st.lists(st.tuples(st.integers(1, 100), st.integers(1, 3)), max_size=5),
       st.lists(st.tuples(st.integers(1, MACHINE + 2), st.integers(1, 60)), max_size=10))
def test_a_plan_places_each_job_where_the_ces_forecast_would_start_it(
        free: int, running: list[tuple[int, int]], raw: list[tuple[int, int]]) -> None:
    # the forecast (infosvc/sched/forecast.py) places the jobs ahead by the same rule: the start it
    # gives a job behind them is the one the plan gives it
    ends = [(float(end), held) for end, held in running]
    size = free + sum(held for _, held in ends)
    jobs = [Job(0, wanted, run) for wanted, run in raw]
    starts = plan_schedule(free, ends, jobs, 0.0)
    demands = [Demand(job.processors, job.predicted) for job in jobs]
    assert starts == [first_start(0.0, size, free, ends, demands[:n], demands[n]) for n in range(len(jobs))]


def test_the_figures_are_the_longest_wait_and_the_mean_bounded_slowdown_by_predictions() -> None:
    # waits 100 and 5; bounded slowdowns (100 + 100) / 100 = 2 and (5 + 1) / 10 -> 1
    assert figures([Job(0, 1, 100), Job(95, 1, 1)], [100.0, 100.0]) == Figures(100.0, 1.5)
    assert figures([], []) == Figures(0.0, 0.0)


def test_the_slack_order_is_kept_where_it_passes_an_old_job_for_little() -> None:
    """All 4 processors free at 100. A (4 wide, 100 s) was submitted at 1, B (1, 10 s) at 2; the
    slack order puts B first. EASY's order: A at 100, B at 200 (longest wait 198, mean bsld 11.4);
    the slack order: B at 100, A at 110 (longest 109, mean bsld 6.4): kept. Planned, the same
    (nothing is free beside A for B to pass it in either order)."""
    a, b = Job(1, 4, 100), Job(2, 1, 10)
    assert slack_order_wins(4, [], [a, b], [b, a], 100.0)
    assert slack_order_wins(4, [], [a, b], [b, a], 100.0, planned=True)


def test_planned_easys_order_backfills_and_the_slack_order_gains_nothing() -> None:
    """2 of 4 free at 100, all from 200: A (4 wide) at 200 in either order, and B (2, 10 s) in the
    hole before it in either: the same starts, a tie: EASY's order. As a list, EASY's order puts B
    after A, and the slack order would be kept."""
    a, b = Job(1, 4, 100), Job(2, 2, 10)
    assert slack_order_wins(2, [(200.0, 2)], [a, b], [b, a], 100.0)
    assert not slack_order_wins(2, [(200.0, 2)], [a, b], [b, a], 100.0, planned=True)


def test_easys_order_is_chosen_where_the_slack_order_makes_an_old_job_wait_longest() -> None:
    """B (1, 60 s) was submitted at 90: EASY's order has it wait 110 (A at 100, B at 200), the slack
    order A 159 (B at 100, A at 160): a longer longest wait, though a lower mean bsld: EASY's."""
    a, b = Job(1, 4, 100), Job(90, 1, 60)
    assert figures([b, a], list_schedule(4, [], [b, a], 100.0)).mean_bsld < \
        figures([a, b], list_schedule(4, [], [a, b], 100.0)).mean_bsld
    assert not slack_order_wins(4, [], [a, b], [b, a], 100.0)
    # a longest wait up to a tolerance over EASY order's: 159 is 1.45 x 110
    assert slack_order_wins(4, [], [a, b], [b, a], 100.0, tolerance=1.5)
    assert not slack_order_wins(4, [], [a, b], [b, a], 100.0, tolerance=1.4)
    # or up to a wait already seen (the longest so far): 159 within 160, not within 158
    assert slack_order_wins(4, [], [a, b], [b, a], 100.0, allowed=160.0)
    assert not slack_order_wins(4, [], [a, b], [b, a], 100.0, allowed=158.0)


def test_a_tie_and_an_empty_queue_go_to_easys_order() -> None:
    a = Job(1, 4, 100)
    assert not slack_order_wins(4, [], [a], [a], 100.0)
    assert not slack_order_wins(4, [], [], [], 100.0)


def replay(jobs: list[SimJob], options: Options, machine: int = MACHINE) -> tuple[dict[str, float], SlackQueue]:
    queue = SlackQueue(options, None)
    outcomes: list[Outcome] = _replay(jobs, machine, queue, None, 1.0)
    return {o.job.id: o.start for o in outcomes}, queue


def two_orders(b_submitted: int, b_run: int) -> list[SimJob]:
    """R (4 wide, 100 s) runs from 0; A (4 wide, 100 s) comes at 1, B (1 wide) later. The first
    choice is at R's pass (0: a queue of one, a tie, EASY's order); the next due at 50, made at the
    first pass after, at 100, when R ends."""
    return [SimJob.of(1, 0, 4, 100, 100, user=1), SimJob.of(2, 1, 4, 100, 100, user=2),
            SimJob.of(3, b_submitted, 1, b_run, b_run, user=3)]


# the guard off, so that the slack order is not EASY's already (with the guard, while no job has
# waited yet, every job is overdue: EASY's order, and the choice could not differ)
NO_GUARD = Options(overdue_after=math.inf, guard_fraction=0.0)


def test_the_replay_keeps_the_slack_order_where_the_projection_says_so() -> None:
    jobs = two_orders(2, 10)
    started, queue = replay(jobs, NO_GUARD._replace(switch_every=50.0), 4)
    assert (queue.choices, queue.easy_choices) == (2, 1)
    assert started == replay(jobs, NO_GUARD, 4)[0] == {jobs[0].id: 0.0, jobs[1].id: 110.0, jobs[2].id: 100.0}


def test_the_replay_falls_back_to_easys_order_where_the_projection_says_so() -> None:
    jobs = two_orders(90, 60)
    started, queue = replay(jobs, NO_GUARD._replace(switch_every=50.0), 4)
    assert (queue.choices, queue.easy_choices) == (3, 3)  # at 0, 100 and B's pass at 200
    assert started == {o.job.id: o.start for o in simulate(jobs, 4, Policy.EASY)}
    assert started == {jobs[0].id: 0.0, jobs[1].id: 100.0, jobs[2].id: 200.0}
    assert replay(jobs, NO_GUARD, 4)[0][jobs[1].id] == 160.0  # without the choice: passed by B


def test_deferred_a_pass_whose_two_orders_are_one_chooses_nothing() -> None:
    """R's pass (0) has a queue of one: the same order both ways. Deferred, nothing is chosen
    there and the choice is due still: it is made at 100, where the orders differ (the slack order
    kept); without deferring, the choice at 0 is EASY's (a tie)."""
    jobs = two_orders(2, 10)
    started, queue = replay(jobs, NO_GUARD._replace(switch_every=3600.0, switch_defer=True), 4)
    assert (queue.choices, queue.easy_choices) == (1, 0)
    assert started[jobs[2].id] == 100.0
    started, queue = replay(jobs, NO_GUARD._replace(switch_every=3600.0), 4)
    assert (queue.choices, queue.easy_choices) == (1, 1)  # EASY's at 0, kept for the hour
    assert started[jobs[2].id] == 200.0


def test_no_jobs_projected_is_a_policy_that_cannot_tell_easys_order() -> None:
    jobs = two_orders(2, 10)
    started, queue = replay(jobs, NO_GUARD._replace(switch_every=50.0, switch_depth=0), 4)
    assert queue.easy_choices == queue.choices == 3
    assert started == {o.job.id: o.start for o in simulate(jobs, 4, Policy.EASY)}


workloads = st.lists(st.tuples(st.integers(0, 3),       # user
                               st.integers(0, 200),     # submit
                               st.integers(1, MACHINE),  # processors
                               st.integers(1, 60),      # estimate
                               st.integers(1, 60)),     # run (cut to the estimate)
                     min_size=1, max_size=30)


def sim_jobs(raw: list[tuple[int, int, int, int, int]]) -> list[SimJob]:
    jobs = [SimJob.of(n, s, w, e, min(r, e), user=u) for n, (u, s, w, e, r) in enumerate(raw, 1)]
    return sorted(jobs, key=lambda j: (j.submitted, j.id))


@settings(max_examples=300, deadline=None)
@given(workloads, st.sampled_from([0.0, 30.0, 3600.0]), st.sampled_from([0.0, 2.0]), st.sampled_from([0.0, 0.25]))
def test_pinned_to_easys_order_the_replay_is_easy_start_for_start(
        raw: list[tuple[int, int, int, int, int]], every: float, factor: float, fraction: float) -> None:
    jobs = sim_jobs(raw)
    pinned = Options(switch_every=every, switch_factor=factor, switch_pin=Order.FCFS, guard_fraction=fraction)
    assert {o.job.id: o.start for o in simulate_predictive(jobs, MACHINE, pinned)} == \
        {o.job.id: o.start for o in simulate(jobs, MACHINE, Policy.EASY)}


@settings(max_examples=300, deadline=None)
@given(workloads, st.sampled_from([0.0, 30.0, 3600.0]), st.sampled_from([0.0, math.inf]))
def test_pinned_to_the_slack_order_the_replay_is_the_present_design(
        raw: list[tuple[int, int, int, int, int]], every: float, after: float) -> None:
    jobs = sim_jobs(raw)
    present = Options(overdue_after=after)
    pinned = present._replace(switch_every=every, switch_pin=Order.SLACK)
    assert simulate_predictive(jobs, MACHINE, pinned) == simulate_predictive(jobs, MACHINE, present)


@settings(max_examples=300, deadline=None)
@given(workloads, st.sampled_from([0.0, 30.0, 100.0]), st.sampled_from([0, 1, 3, 500]), st.booleans(), st.booleans(),
       st.booleans(), st.booleans())
def test_chosen_freely_the_schedule_is_valid_and_chosen_no_more_often_than_asked(
        raw: list[tuple[int, int, int, int, int]], every: float, depth: int, guard: bool, planned: bool,
        within: bool, defer: bool) -> None:
    jobs = sim_jobs(raw)
    options = (Options() if guard else NO_GUARD)._replace(switch_every=every, switch_depth=depth, switch_planned=planned,
                                                           switch_within_longest=within, switch_defer=defer)
    started, queue = replay(jobs, options)
    assert set(started) == {job.id for job in jobs}
    events = sorted([(started[j.id], j.processors) for j in jobs] + [(started[j.id] + j.run, -j.processors) for j in jobs],
                    key=lambda e: (e[0], e[1]))  # ends before starts at one instant
    busy = 0
    for _, change in events:
        busy += change
        assert busy <= MACHINE
    assert all(started[j.id] >= j.submitted for j in jobs)
    if every > 0:  # one choice at the first pass, then at most one per `every`
        span = max(started.values()) - min(j.submitted for j in jobs)
        assert queue.choices <= 1 + span // every
    assert 0 <= queue.easy_choices <= queue.choices


def test_a_queue_grown_by_the_factor_is_chosen_for_before_its_time() -> None:
    """R holds the machine until 100; A and B (8 wide) wait behind it. The first pass that can
    start anything (100) chooses; C to F (1 wide, each submitted after the one before has started)
    ... each pass then has a queue of 1 or 2: the length never doubles and the day-long interval
    is never out; with a queue at 5 times the first choice's length a second choice is made."""
    first = [SimJob.of(1, 0, 8, 100, 100, user=1), SimJob.of(2, 1, 8, 50, 50, user=2), SimJob.of(3, 2, 1, 10, 10, user=3)]
    burst = [SimJob.of(n, 120, 1 if n % 2 else 8, 10, 10, user=n % 3) for n in range(4, 16)]
    day = Options(switch_every=86400.0)
    assert replay(first + burst, day)[1].choices == 1
    assert replay(first + burst, day._replace(switch_factor=2.0))[1].choices >= 2
