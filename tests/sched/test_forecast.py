"""The response time forecast (infosvc/sched/forecast.py), on profiles checked by hand."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.sched.forecast import Demand, first_start, whole_hosts

INF = math.inf


def test_free_now_starts_now() -> None:
    assert first_start(100.0, 8, 2, [], [], Demand(1, 60)) == 100.0


def test_waits_for_the_first_end_that_frees_enough() -> None:
    # 0 free; 2 at t=50, 4 more at t=80
    releases = [(80.0, 4), (50.0, 2)]
    assert first_start(0.0, 8, 0, releases, [], Demand(2, 10)) == 50.0
    assert first_start(0.0, 8, 0, releases, [], Demand(3, 10)) == 80.0


def test_a_job_ahead_is_served_first_and_a_later_one_backfills_where_it_delays_none() -> None:
    # 4 processors, 2 free now, 2 more at t=100. Ahead: a 4-wide job for 50 s -> starts at 100.
    ahead = [Demand(4, 50)]
    # a 2-wide 100 s job fits in the 2 free before t=100: starts now
    assert first_start(0.0, 4, 2, [(100.0, 2)], ahead, Demand(2, 100)) == 0.0
    # a 2-wide 101 s job would overlap the one ahead at t=100: it starts after it, at 150
    assert first_start(0.0, 4, 2, [(100.0, 2)], ahead, Demand(2, 101)) == 150.0


def test_jobs_ahead_in_order_each_at_its_earliest() -> None:
    # 4 processors, all busy until t=10. Ahead: 4 for 10 s (10..20), 2 for 30 s (20..50), then
    # the new 2-wide 5 s job fits beside the second at 20.
    ahead = [Demand(4, 10), Demand(2, 30)]
    assert first_start(0.0, 4, 0, [(10.0, 4)], ahead, Demand(2, 5)) == 20.0
    assert first_start(0.0, 4, 0, [(10.0, 4)], ahead, Demand(3, 5)) == 50.0


def test_never_when_wider_than_the_ce_or_held_for_ever() -> None:
    assert first_start(0.0, 4, 4, [], [], Demand(5, 1)) == INF
    assert first_start(0.0, 4, 0, [], [], Demand(1, 1)) == INF  # nothing ever frees
    # a job ahead that runs until cancelled holds its processors for ever
    assert first_start(0.0, 4, 4, [], [Demand(3, INF)], Demand(2, 1)) == INF
    assert first_start(0.0, 4, 4, [], [Demand(3, INF)], Demand(1, 1)) == 0.0
    # one wider than the CE is ignored: it never runs here
    assert first_start(0.0, 4, 4, [], [Demand(9, 10)], Demand(4, 1)) == 0.0


def test_the_new_job_held_for_ever_needs_its_processors_free_to_the_end() -> None:
    # 2 free now; a job ahead takes 2 of them from t=0 to t=30
    assert first_start(0.0, 2, 2, [], [Demand(2, 30)], Demand(1, INF)) == 30.0


def test_beyond_the_depth_the_work_is_added() -> None:
    ahead = [Demand(1, 100)] * 3
    # depth 1: the first placed (0..100 on 1 of 2), then 2 x 100 processor-seconds over 2 processors
    assert first_start(0.0, 2, 2, [], ahead, Demand(2, 10), depth=1) == 100.0 + 100.0
    assert first_start(0.0, 2, 2, [], ahead, Demand(2, 10), depth=10) == 200.0


def test_releases_in_the_past_count_as_free_now() -> None:
    assert first_start(100.0, 4, 0, [(90.0, 2), (100.0, 1)], [], Demand(3, 1)) == 100.0


def test_whole_hosts() -> None:
    assert [whole_hosts(p, 8) for p in (1, 8, 9, 16)] == [8, 8, 16, 16]
    assert whole_hosts(3, 0) == 3


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 16), st.integers(0, 16), st.lists(st.tuples(st.integers(1, 100), st.integers(1, 4)), max_size=6),
       st.lists(st.tuples(st.integers(1, 6), st.integers(1, 50)), max_size=6), st.integers(1, 6), st.integers(1, 50))
def test_against_a_second_by_second_replay(capacity: int, busy: int, releases: list[tuple[int, int]],
                                           ahead: list[tuple[int, int]], width: int, length: int) -> None:
    """Placing each job at the first whole second where it fits for its whole run, on an array of
    free processors per second, gives the same start (all times whole seconds)."""
    busy = min(busy, capacity)
    released = sum(count for _, count in releases)
    if busy < released:
        releases = []
        released = 0
    horizon = 2000
    free = [capacity - busy] * horizon
    for at, count in releases:
        for t in range(at, horizon):
            free[t] += count

    def place(need: int, seconds: int) -> int | None:
        for t in range(horizon - seconds):
            if all(free[s] >= need for s in range(t, t + seconds)):
                return t
        return None

    for need, seconds in ahead:
        if need > capacity:
            continue
        t = place(need, seconds)
        if t is not None:
            for s in range(t, t + seconds):
                free[s] -= need
    expected = place(width, length)
    got = first_start(0.0, capacity, capacity - busy, [(float(a), c) for a, c in releases],
                      [Demand(n, float(s)) for n, s in ahead], Demand(width, float(length)))
    if width > capacity:
        assert got == INF
    elif expected is None:
        assert got == INF or got >= horizon - length
    else:
        assert got == expected
