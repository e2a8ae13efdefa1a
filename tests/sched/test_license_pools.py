"""License pools in the host machine (infosvc/sched/hosts.py): a running job draws its licenses, a
job asking for more than is free waits and starts when they come back, a job draws each feature
from one pool, and the EASY pass reserves for a head job waiting on licenses."""

from __future__ import annotations

import numpy as np

from infosvc.sched import Policy, Running, schedule
from infosvc.sched.hosts import Allocation, HostPool, HostSlot, WaitingJob
from infosvc.sched.request import JobRequest

MATLAB, ANSYS, LOCKED = 0, 1, 2  # pool numbers


def job(id: str, licenses: tuple[tuple[str, int], ...], processors: int = 1, *, estimate: float = 100.0,
        priority: int = 2, submitted: float = 0.0) -> WaitingJob:
    request = JobRequest(name=id, owner="u", priority=priority, min_processors=processors,
                         max_processors=processors, estimate=estimate, exclusive=False, licenses=licenses)
    return WaitingJob(id, priority, submitted, estimate, request)


def only(pool: HostPool, *hosts: str) -> np.ndarray:
    """The rows of `hosts`: the hosts the matcher lets a job use."""
    mask = np.zeros(len(pool.ids), np.bool_)
    mask[[pool.row[host] for host in hosts]] = True
    return mask


def site() -> HostPool:
    """Hosts a and b share the pools of 4 matlab and 2 ansys; c has a node-locked matlab of its
    own; d has no license at all (the matcher keeps jobs that need one off it)."""
    shared = (("matlab", MATLAB), ("ansys", ANSYS))
    return HostPool([HostSlot("a", 8, 64_000, 3000, licenses=shared), HostSlot("b", 8, 64_000, 2000, licenses=shared),
                     HostSlot("c", 8, 32_000, 2000, licenses=(("matlab", LOCKED),)), HostSlot("d", 8, 16_000)],
                    [4, 2, 1])


def test_running_jobs_draw_licenses_and_a_second_job_waits() -> None:
    pool = site()
    first = pool.place(job("one", (("matlab", 3),)))
    assert first == Allocation((pool.row["a"],), (1,), 0.0, False, ((MATLAB, 3),))
    pool.take(first)
    assert list(pool.license_free) == [1, 2, 1]
    # 3 more matlab: not from the shared pool (1 free), not from c's (1); d draws matlab from no pool
    # (so counts nothing there): the only hosts left uncounted
    second = job("two", (("matlab", 3),))
    assert pool.names(pool.place(second)) == ["d"]  # type: ignore[arg-type]
    # the matcher rules d out; with it out, the job waits and says why
    waiting = WaitingJob("two", 2, 0.0, 100.0, second.request, eligible=only(pool, "a", "b", "c"))
    assert pool.place(waiting) is None
    assert pool.describe_shortfall(waiting) == "waiting for licenses: matlab (3 asked, 1 of 4 free)"
    pool.give(first)
    assert list(pool.license_free) == [4, 2, 1]
    assert pool.names(pool.place(waiting)) == ["a"]  # type: ignore[arg-type]


def test_a_job_draws_each_feature_from_one_pool() -> None:
    pool = site()
    pool.take(Allocation((pool.row["a"],), (1,), 0.0, False, ((MATLAB, 4),)))
    # the shared pool is empty: c's own license does, with c's processors only
    one = pool.place(job("x", (("matlab", 1),), processors=2))
    assert one is not None and pool.names(one) == ["c"] and one.licenses == ((LOCKED, 1),)
    # a job wider than c cannot spread over a (shared pool) and c (its own)
    eligible = only(pool, "a", "b", "c")
    wide = WaitingJob("w", 2, 0.0, 100.0, job("w", (("matlab", 1),), processors=12).request, eligible=eligible)
    assert pool.place(wide) is None
    # two features: the pools of a and b hold both
    both = pool.place(WaitingJob("b", 2, 0.0, 100.0, job("b", (("ansys", 2),), processors=12).request))
    assert both is not None and pool.names(both) == ["a", "b"] and both.licenses == ((ANSYS, 2),)


def test_a_running_job_keeps_its_licenses_after_a_restart() -> None:
    pool = site()
    rows = (pool.row["b"],)
    assert pool.licenses_of(rows, (("matlab", 2), ("ansys", 1))) == ((MATLAB, 2), (ANSYS, 1))
    assert pool.licenses_of((pool.row["c"],), (("matlab", 1), ("ansys", 1))) == ((LOCKED, 1),)
    assert HostPool([HostSlot("a", 8)]).licenses_of((0,), (("matlab", 1),)) == ()
    # a pool shrunk under running jobs: they keep theirs; no other job gets any
    pool.take(Allocation(rows, (1,), 0.0, False, ((ANSYS, 2),)))
    pool.take(Allocation(rows, (1,), 0.0, False, ((ANSYS, 1),)))
    assert pool.license_free[ANSYS] == -1
    eligible = only(pool, "a", "b")
    waiting = WaitingJob("x", 2, 0.0, 100.0, job("x", (("ansys", 1),)).request, eligible=eligible)
    assert pool.place(waiting) is None
    assert pool.describe_shortfall(waiting) == "waiting for licenses: ansys (1 asked, 0 of 2 free)"


def test_copies_hold_licenses_apart() -> None:
    pool = site()
    other = pool.copy()
    other.take(Allocation((0,), (1,), 0.0, False, ((MATLAB, 4),)))
    assert pool.license_free[MATLAB] == 4 and other.license_free[MATLAB] == 0


def test_the_easy_pass_reserves_for_a_head_waiting_on_licenses() -> None:
    pool = site()
    eligible = only(pool, "a", "b")
    running = Allocation((pool.row["a"],), (1,), 0.0, False, ((MATLAB, 3),))
    pool.take(running)

    def licensed(id: str, count: int, estimate: float, submitted: float) -> WaitingJob:
        return WaitingJob(id, 2, submitted, estimate, job(id, (("matlab", count),)).request, eligible=eligible)

    head = licensed("head", 4, 100.0, 1.0)
    long = licensed("long", 1, 500.0, 2.0)  # would hold one of the head's licenses past its reservation
    short = licensed("short", 1, 50.0, 3.0)  # ends before the running job does: backfilled
    plan = schedule(pool, [Running("r", 0.0, 100.0, running)], [head, long, short], now=0.0, policy=Policy.EASY)
    assert [s.job.id for s in plan.starts] == ["short"]
    assert plan.reservation is not None and plan.reservation.job.id == "head" and plan.reservation.at == 100.0
    assert plan.waiting["head"].startswith("first in the queue: waiting for licenses: matlab (4 asked, 1 of 4 free)")
    assert plan.waiting["long"] == "would delay head, reserved to start at 100"
    fcfs = schedule(pool, [Running("r", 0.0, 100.0, running)], [head, short], now=0.0, policy=Policy.FCFS)
    assert fcfs.starts == [] and fcfs.waiting["short"] == "behind head (first come, first served)"
