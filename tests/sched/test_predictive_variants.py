"""The `predictive` variants that bench/predictive.py measures and the policy does not use
(docs/simulation.md, "Tried and dropped"): the guard's bound and the slack shrinking with a job's
width, every overdue job reserved for, and the overdue jobs backfilled first
(infosvc/sched/reservations.py). Off by default; when
on, each must still give a valid schedule and keep the reserved head's guaranteed start."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.sched import Policy
from infosvc.sched.ordering import overdue_scaled, slack_key
from infosvc.sched.policy import Running, schedule
from infosvc.sched.pool import ProcessorPool
from infosvc.sched.simulation import Options, SimJob, Waiting, simulate_predictive

MACHINE = 8


def waiting(number: int, submitted: float, processors: int, estimate: float, predicted: float = 0.0) -> Waiting:
    sim = SimJob.of(number, submitted, processors, estimate, estimate)
    return Waiting(sim.id, 0, submitted, estimate, processors, predicted or estimate, sim)


def test_a_bound_scaled_by_width_makes_a_wide_job_overdue_sooner() -> None:
    narrow, wide = waiting(1, 0.0, 1, 100), waiting(2, 50.0, 6, 100)
    width = lambda job: 1.0 - job.processors / MACHINE  # noqa: E731
    # at 100 the narrow job has waited 100 of its bound 87.5, the wide one 50 of its 25: both late, oldest first
    assert [j.id for j in overdue_scaled([wide, narrow], 100.0, 100.0, width)] == [narrow.id, wide.id]
    assert [j.id for j in overdue_scaled([wide, narrow], 80.0, 100.0, width)] == [wide.id]  # 30 >= 25; 80 < 87.5
    assert list(overdue_scaled([wide, narrow], 80.0, math.inf, width)) == []  # the guard off stays off
    assert list(overdue_scaled([], 80.0, 0.0, width)) == []
    top = Waiting("9", 3, 70.0, 100, 1, 100, SimJob.of(9, 70.0, 1, 100, 100))
    assert [j.id for j in overdue_scaled([top, narrow], 100.0, 0.0, width)] == ["9"]  # the first priority group only


def test_a_slack_scaled_by_width_puts_a_full_width_job_at_its_submission() -> None:
    # the same jobs arriving into the same simulation: the wide one is placed by its scaled key
    jobs = [SimJob.of(1, 0.0, MACHINE, 1000, 1000), SimJob.of(2, 1.0, MACHINE, 1000, 1000),
            SimJob.of(3, 2.0, 1, 50, 50), SimJob.of(4, 3.0, MACHINE, 1000, 1000)]
    # job 4 asks the whole machine: its slack is 0, so job 3 (submitted before, slack 500) is behind it
    plain = {o.job.number: o.start for o in simulate_predictive(jobs, MACHINE, Options(guard_fraction=0.0,
                                                                                        overdue_after=math.inf))}
    scaled = {o.job.number: o.start for o in simulate_predictive(jobs, MACHINE, Options(
        guard_fraction=0.0, overdue_after=math.inf, slack_width=1.0))}
    assert plain[3] < plain[4]  # unscaled, job 4's slack (10,000 s) is far behind job 3's (500 s)
    assert scaled[4] < scaled[3]
    assert slack_key(3.0, 1000.0, 10.0 * 0.0, 48 * 3600.0 * 0.0) == 3.0


def reserving(reserved: int, explain: bool = False) -> dict[str, str]:
    """A pass with two overdue jobs that do not fit: A (6 of 8 processors) first, B (all 8) after
    it; and two young jobs, C that would run past both reserved starts, D that ends before them."""
    pool = ProcessorPool(MACHINE, 4)
    running = [Running("r", 0.0, 100.0, 4)]
    a, b = waiting(1, 0.0, 6, 50), waiting(2, 1.0, 8, 50)
    c, d = waiting(3, 60.0, 2, 200), waiting(4, 60.0, 2, 30)
    plan = schedule(pool, running, [c, d, a, b], 60.0, Policy.PREDICTIVE, explain=explain, overdue_after=50.0,
                    reserved=reserved)
    assert plan.reservation is not None and plan.reservation.job is a and plan.reservation.at == 100.0
    assert pool.free == 4  # the machine is left as it was
    return {s.job.id: "starts" for s in plan.starts} | plan.waiting


def test_one_reservation_lets_a_backfill_push_back_the_second_overdue_job() -> None:
    # C fits in what A leaves at 100 (2 processors) and runs to 260: B, needing all 8, waits past 260
    assert reserving(1) == {waiting(3, 0, 1, 1).id: "starts", waiting(4, 0, 1, 1).id: "starts"}


def test_every_overdue_job_reserved_keeps_the_second_one_from_being_pushed_back() -> None:
    starts = reserving(2)
    assert starts.get(waiting(4, 0, 1, 1).id) == "starts"  # D ends at 90, before either reservation
    assert waiting(3, 0, 1, 1).id not in starts  # C would run past B's start at 150 on B's processors
    reasons = reserving(2, explain=True)
    assert "reserved to start at 150" in reasons[waiting(2, 0, 1, 1).id]
    assert "would delay" in reasons[waiting(3, 0, 1, 1).id]
    assert reserving(5) == starts  # no more overdue jobs than two: a deeper bound changes nothing


def test_an_overdue_job_behind_a_head_that_nothing_frees_is_held_nothing() -> None:
    pool = ProcessorPool(MACHINE, 2)
    running = [Running("r", 0.0, math.inf, 6)]  # runs for ever: no end frees enough for A
    a, b = waiting(1, 0.0, 4, 50), waiting(2, 1.0, 8, 50)
    plan = schedule(pool, running, [a, b], 60.0, Policy.PREDICTIVE, overdue_after=0.0, reserved=3, explain=True)
    assert plan.reservation is not None and math.isinf(plan.reservation.at) and plan.starts == []


def test_overdue_first_gives_the_hole_to_the_older_job() -> None:
    # A (overdue) is the head, reserved at 100 with 2 processors left over then; B (overdue) and C
    # (young, ahead of B in the caller's order) each would take those 2 past 100: one of them starts
    pool = ProcessorPool(MACHINE, 4)
    running = [Running("r", 0.0, 100.0, 4)]
    a, b, c = waiting(1, 0.0, 6, 50), waiting(2, 1.0, 2, 500), waiting(3, 60.0, 2, 500)
    for first, starts in ((False, c.id), (True, b.id)):
        plan = schedule(pool, running, [c, a, b], 60.0, Policy.PREDICTIVE, explain=False, overdue_after=50.0,
                        overdue_first=first)
        assert [s.job.id for s in plan.starts] == [starts]
        assert plan.reservation is not None and plan.reservation.job is a


workloads = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 200), st.integers(1, MACHINE),
                               st.integers(1, 60), st.integers(1, 60)), min_size=1, max_size=14)


@settings(max_examples=300, deadline=None)
@given(workloads, st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([0.0, 1.0, 2.0]), st.sampled_from([1, 2, 100]),
       st.sampled_from([0.0, 20.0]), st.booleans())
def test_every_variant_gives_a_valid_schedule_that_keeps_the_heads_start(
        raw: list[tuple[int, int, int, int, int]], guard_width: float, slack_width: float, reserved: int,
        after: float, first: bool) -> None:
    jobs = sorted((SimJob.of(n, s, w, e, min(r, e), user=u) for n, (u, s, w, e, r) in enumerate(raw, 1)),
                  key=lambda j: (j.submitted, j.id))
    heads: list[tuple[float, Waiting, float]] = []
    options = Options(overdue_after=after, guard_width=guard_width, slack_width=slack_width, reserved=reserved,
                      overdue_first=first)
    outcomes = simulate_predictive(jobs, MACHINE, options, observe=lambda now, head, at: heads.append((now, head, at)))
    assert sorted(o.job.id for o in outcomes) == sorted(j.id for j in jobs)
    for o in outcomes:
        assert o.start >= o.job.submitted
        assert sum(p.job.processors for p in outcomes if p.start <= o.start < p.end) <= MACHINE
    start = {o.job.id: o.start for o in outcomes}

    def scale(j: SimJob | Waiting, power: float) -> float:
        return (1.0 - j.processors / MACHINE) ** power if power else 1.0

    key = {o.job.id: (slack_key(o.job.submitted, o.predicted, 10.0 * scale(o.job, slack_width),
                                48 * 3600.0 * scale(o.job, slack_width)), o.job.submitted, o.job.id) for o in outcomes}

    def bound(now: float, j: SimJob | Waiting) -> float:  # j's guard at the pass at `now`
        longest = max((start[k.id] - k.submitted for k in jobs if start[k.id] < now), default=0.0)
        return max(after, 0.25 * longest) * scale(j, guard_width)

    for now, head, at in heads:
        # only a job going ahead of the head after the pass that reserved for it can make it later
        # (a backfill never does): a smaller key submitted after that pass, or an older job the
        # guard put ahead once overdue
        ahead = any((key[j.id] < key[head.id] and j.submitted > now)
                    or ((j.submitted, j.id) < (head.submitted, head.id) and now - j.submitted < bound(now, j)
                        and start[j.id] > now) for j in jobs)
        assert ahead or start[head.id] <= at, (now, head.id, at, start[head.id])
