"""The screen for jobs no known host can run (infosvc/queue/runnable.py) called directly: its sums
over the pool are kept per (mask, memory asked) while the pool is the same, and what it says for
each job is what a fresh sum says, whatever was asked before it."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from infosvc.matching import Site
from infosvc.queue.eligibility import Eligibility
from infosvc.queue.runnable import MAX_KEPT_CAPACITIES, capacity_of, unrunnable
from infosvc.sched.hosts import HostPool, HostSlot
from infosvc.sched.request import JobRequest


def pool() -> HostPool:
    return HostPool([HostSlot("a", 4, 16_000), HostSlot("b", 8, 32_000), HostSlot("c", 2, 64_000)])


def why(eligibility: Eligibility, hosts: HostPool, processors: int, memory: float,
        asked: tuple[str, ...] | None = None) -> str | None:
    request = JobRequest(name="j", owner="u", min_processors=processors, max_processors=processors,
                         memory_mb=memory, asked_nodes=asked)
    return unrunnable(request, None, hosts, eligibility, {}, lambda _: None, Site)


def test_memory_and_processors_are_said_of_the_hosts_with_that_memory() -> None:
    hosts, eligibility = pool(), Eligibility()
    assert why(eligibility, hosts, 14, 0) is None
    assert why(eligibility, hosts, 15, 0) == "it asks 15 processors; the site's hosts have 14"
    # asking 32 GB leaves b and c: 10 processors; the same pool asked before without memory
    assert why(eligibility, hosts, 11, 32_000) == "it asks 11 processors; the site's hosts have 10"
    assert why(eligibility, hosts, 10, 32_000) is None
    assert why(eligibility, hosts, 1, 64_001) == ("it asks 64001 MB of memory per host; the site's hosts have at "
                                                  "most 64000 MB")
    assert why(eligibility, hosts, 3, 64_000) == "it asks 3 processors; the site's hosts have 2"
    # a job naming its hosts is summed over those alone, not from the whole site's kept sum
    assert why(eligibility, hosts, 6, 0, ("a", "c")) is None
    assert why(eligibility, hosts, 7, 0, ("a", "c")) == ("it asks 7 processors; the hosts its requirements let "
                                                         "through have 6")
    # a new pool (hosts changed) is summed again
    smaller = HostPool([HostSlot("a", 4, 16_000)])
    assert why(eligibility, smaller, 5, 0) == "it asks 5 processors; the site's hosts have 4"


def test_the_kept_sums_are_bounded() -> None:
    hosts, eligibility = pool(), Eligibility()
    for memory in range(1, MAX_KEPT_CAPACITIES + 50):
        why(eligibility, hosts, 1, float(memory))
    assert 0 < len(eligibility.capacities) <= MAX_KEPT_CAPACITIES


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 20), st.sampled_from([0.0, 1.0, 16_000.0, 16_001.0, 32_000.0, 64_000.0,
                                                               70_000.0])), min_size=1, max_size=12))
def test_each_answer_is_a_fresh_sum(asks: list[tuple[int, float]]) -> None:
    hosts, kept = pool(), Eligibility()
    for processors, memory in asks:
        assert why(kept, hosts, processors, memory) == why(Eligibility(), hosts, processors, memory)
        most, capacity = capacity_of(hosts, None, memory)
        assert (why(kept, hosts, processors, memory) is None) == (most >= memory and capacity >= processors)
