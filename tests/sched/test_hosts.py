"""The host machine (infosvc/sched/hosts.py): exclusive and shared use, the memory-then-speed sort,
minimum and maximum processors, required and asked nodes, Paused hosts, and the scheduling pass
over hosts; each case worked out by hand, and the scan path checked against the mask path."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.sched import Policy, Running, schedule
from infosvc.sched.hosts import Allocation, HostPool, HostSlot, WaitingJob
from infosvc.sched.request import JobRequest


def job(id: str, least: int = 1, most: int | None = None, *, exclusive: bool = True, estimate: float = 100.0,
        memory: float = 0.0, required: tuple[str, ...] = (), eligible: np.ndarray | None = None,
        admin: bool = False, submitted: float = 0.0, priority: int = 2) -> WaitingJob:
    request = JobRequest(name=id, owner="u", priority=priority, min_processors=least,
                         max_processors=least if most is None else most, estimate=estimate, memory_mb=memory,
                         exclusive=exclusive, required_nodes=required)
    return WaitingJob(id, priority, submitted, estimate, request, eligible, admin)


def names(pool: HostPool, allocation: Allocation | None) -> list[str]:
    assert allocation is not None
    return pool.names(allocation)


def four_hosts() -> HostPool:
    # sorted by memory (largest first), then speed (fastest first): c, b, d, a
    return HostPool([HostSlot("a", 4, 16_000, 2000), HostSlot("b", 4, 32_000, 1000),
                     HostSlot("c", 4, 32_000, 3000), HostSlot("d", 4, 16_000, 2500)])


def test_candidates_are_taken_by_memory_then_speed() -> None:
    pool = four_hosts()
    assert names(pool, pool.place(job("x", 1))) == ["c"]
    assert names(pool, pool.place(job("x", 12))) == ["c", "b", "d"]
    assert names(pool, pool.place(job("x", 1, memory=20_000))) == ["c"]


def test_an_exclusive_job_has_its_hosts_to_itself() -> None:
    pool = four_hosts()
    first = pool.place(job("x", 1))
    assert first == Allocation((pool.row["c"],), (4,), 0.0, True)  # the whole host: idle reserved processors
    pool.take(first)
    assert names(pool, pool.place(job("y", 1, exclusive=False))) == ["b"]
    assert names(pool, pool.place(job("z", 1))) == ["b"]
    assert pool.place(job("w", 13)) is None
    assert pool.place(job("w", 12)) is not None


def test_non_exclusive_jobs_share_a_host_only_with_each_other() -> None:
    pool = four_hosts()
    shared = pool.place(job("x", 1, exclusive=False))
    assert shared == Allocation((pool.row["c"],), (1,), 0.0, False)
    pool.take(shared)
    second = pool.place(job("y", 3, exclusive=False))
    assert names(pool, second) == ["c"]
    pool.take(second)
    assert names(pool, pool.place(job("z", 1, exclusive=False))) == ["b"]
    # an exclusive job passes over the host two shared jobs hold
    assert names(pool, pool.place(job("e", 4))) == ["b"]
    pool.give(shared)
    pool.give(second)
    assert names(pool, pool.place(job("e", 4))) == ["c"]


def test_a_job_gets_up_to_its_maximum() -> None:
    pool = four_hosts()
    allocation = pool.place(job("x", 2, 6, exclusive=False))
    assert allocation is not None and allocation.processors == (4, 2)
    pool.take(pool.place(job("big", 12)) or Allocation((), (), 0, True))
    allocation = pool.place(job("x", 2, 6, exclusive=False))
    assert allocation is not None and allocation.processors == (4,)  # what is free: less than 6, at least 2
    assert pool.place(job("x", 5, 6, exclusive=False)) is None


def test_required_nodes_are_in_the_allocation() -> None:
    pool = four_hosts()
    assert names(pool, pool.place(job("x", 2, required=("a",)))) == ["a"]
    assert names(pool, pool.place(job("x", 8, required=("a",)))) == ["a", "c"]
    assert pool.place(job("x", 1, required=("nohost",))) is None
    pool.take(pool.place(job("hold", 1, required=("a",))) or Allocation((), (), 0, True))
    assert pool.place(job("x", 1, required=("a",))) is None


def test_eligible_hosts_only() -> None:
    pool = four_hosts()
    only_a_and_d = np.array([s.id in ("a", "d") for s in pool.slots])
    assert names(pool, pool.place(job("x", 1, eligible=only_a_and_d))) == ["d"]
    assert pool.place(job("x", 9, eligible=only_a_and_d)) is None
    assert pool.describe_shortfall(job("x", 9, eligible=only_a_and_d)) == (
        "needs 9 processors; the hosts it may use have 8")


def test_paused_hosts_take_administrators_jobs_only_and_unusable_hosts_none() -> None:
    pool = HostPool([HostSlot("p", 4, paused=True), HostSlot("u", 4, usable=False), HostSlot("r", 2)])
    assert names(pool, pool.place(job("x", 2))) == ["r"]
    assert pool.place(job("x", 4)) is None
    assert names(pool, pool.place(job("x", 4, admin=True))) == ["p"]
    assert pool.place(job("x", 8, admin=True)) is None
    assert pool.describe_shortfall(job("x", 4)) == "needs 4 processors; the hosts it may use have 2"


def test_memory_is_held_per_host() -> None:
    pool = HostPool([HostSlot("m", 8, 1000)])
    first = pool.place(job("x", 1, exclusive=False, memory=600))
    assert first is not None
    pool.take(first)
    assert pool.place(job("y", 1, exclusive=False, memory=600)) is None
    assert pool.place(job("y", 1, exclusive=False, memory=400)) is not None
    assert pool.describe_shortfall(job("y", 1, memory=2000)) == "no host it may use has 2000 MB of memory"


def test_taking_what_is_not_free_is_refused_and_giving_back_restores() -> None:
    pool = four_hosts()
    allocation = pool.place(job("x", 16))
    assert allocation is not None
    pool.take(allocation)
    with pytest.raises(ValueError):
        pool.take(allocation)
    pool.give(allocation)
    assert pool.free.tolist() == [4, 4, 4, 4] and pool.shared_free == 16 and pool.idle_free == 16
    with pytest.raises(ValueError):
        pool.give(allocation)


def test_easy_backfills_on_hosts_without_delaying_the_reservation() -> None:
    # Two hosts of 4. R holds c (exclusive) until 100. Head H needs 8 (both hosts): reserved at 100.
    pool = HostPool([HostSlot("c", 4, 2, 2), HostSlot("d", 4, 1, 1)])
    held = pool.place(job("R", 4))
    assert held is not None
    pool.take(held)
    running = [Running("R", 0.0, 100.0, held)]
    head = job("H", 8, submitted=1)
    short = job("S", 4, estimate=50.0, submitted=2)  # ends by 100: backfilled on d
    long = job("L", 4, estimate=500.0, submitted=3)  # would delay H
    plan = schedule(pool, running, [head, short, long], now=0.0, policy=Policy.EASY)
    assert [s.job.id for s in plan.starts] == ["S"]
    assert plan.reservation is not None and plan.reservation.at == 100.0
    assert plan.waiting["L"] == "waiting for 4 processors, 0 free on idle hosts"  # S took d
    assert schedule(pool, running, [head, long], now=0.0).waiting["L"] == "would delay H, reserved to start at 100"
    assert plan.waiting["H"].startswith("first in the queue: waiting for 8 processors, 4 free on idle hosts")
    assert pool.free.tolist() == [0, 4]  # the pass planned on a copy


def test_an_infinite_job_never_backfills_past_a_reservation() -> None:
    pool = HostPool([HostSlot("c", 4), HostSlot("d", 4)])
    held = pool.place(job("R", 4))
    assert held is not None
    pool.take(held)
    plan = schedule(pool, [Running("R", 0.0, 100.0, held)],
                    [job("H", 8), job("I", 4, estimate=math.inf, submitted=1)], now=0.0)
    assert plan.starts == [] and plan.waiting["I"].startswith("would delay H")


slots = st.lists(st.tuples(st.integers(1, 8), st.sampled_from([1000, 2000, 4000]), st.integers(1, 3)),
                 min_size=1, max_size=12)
jobs = st.lists(st.tuples(st.integers(1, 20), st.integers(0, 8), st.booleans(), st.booleans()), max_size=25)


@settings(max_examples=200, deadline=None)
@given(slots, jobs)
def test_the_scan_places_as_the_masks_do(hosts: list[tuple[int, int, int]], wanted: list[tuple[int, int, bool, bool]]) -> None:
    """The scan (no host requirements) and the masked path (an all-true eligibility) agree on every
    placement, through a sequence of takes and gives."""
    scan = HostPool([HostSlot(f"h{i}", p, m, s) for i, (p, m, s) in enumerate(hosts)])
    masked = scan.copy()
    everything = np.ones(len(hosts), np.bool_)
    held: list[Allocation] = []
    for number, (least, extra, exclusive, give_back) in enumerate(wanted):
        plain = job(str(number), least, least + extra, exclusive=exclusive)
        marked = WaitingJob(plain.id, 2, 0.0, 100.0, plain.request, everything)
        one, other = scan.place(plain), masked.place(marked)
        assert one == other
        if one is not None:
            scan.take(one)
            masked.take(one)
            held.append(one)
            total = scan.size.sum() - scan.free.sum()
            assert total == sum(a.total for a in held)
        if give_back and held:
            back = held.pop(0)
            scan.give(back)
            masked.give(back)
        assert (scan.free >= 0).all() and (scan.free <= scan.size).all()
