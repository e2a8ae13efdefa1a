"""`predictive`'s replay queue (infosvc/sched/slackqueue.py): its two shortcuts decide as the
passes without them do. The guard's jobs read from the queue kept by age are those `overdue`
finds by scanning; and a blocked pass gone on from (`policy.resume`) where the order allows gives
the same starts, and the same reserved heads, as every pass made whole: held on random workloads,
with the guard at every setting and each fixed order; and shown to go on from blocked passes at
all, else the comparison would hold of nothing."""

from __future__ import annotations

import math
from typing import NamedTuple

from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.sched.ordering import Order, overdue
from infosvc.sched.simulation import Options, SimJob, _replay, simulate_predictive
from infosvc.sched.slackqueue import SlackQueue

MACHINE = 8


class Queued(NamedTuple):
    id: str
    priority: int
    submitted: float


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 50)), min_size=1, max_size=20),
       st.integers(0, 60), st.sampled_from([0.0, 10.0, 30.0, math.inf]))
def test_the_guards_jobs_read_by_age_are_those_found_by_scanning(raw: list[tuple[int, int]], now: int,
                                                                  after: float) -> None:
    jobs = [Queued(f"j{n:02d}", priority, submitted) for n, (priority, submitted) in enumerate(raw)]
    queue = sorted(jobs, key=lambda j: -j.priority)  # by group, as a queue is; by no order within one
    by_age = sorted(jobs, key=lambda j: (j.submitted, j.id))
    assert list(overdue(queue, now, after, by_age)) == list(overdue(queue, now, after))


workloads = st.lists(st.tuples(st.integers(0, 3),       # user
                               st.integers(0, 120),     # submit
                               st.integers(1, MACHINE),  # processors
                               st.integers(1, 60),      # estimate
                               st.integers(1, 60)),     # run (cut to the estimate)
                     min_size=1, max_size=30)


def sim_jobs(raw: list[tuple[int, int, int, int, int]]) -> list[SimJob]:
    jobs = [SimJob.of(n, s, w, e, min(r, e), user=u) for n, (u, s, w, e, r) in enumerate(raw, 1)]
    return sorted(jobs, key=lambda j: (j.submitted, j.id))


def replayed(jobs: list[SimJob], options: Options, resumes: bool) -> tuple[list[tuple[str, float, float]],
                                                                           list[tuple[float, str, float]], int]:
    heads: list[tuple[float, str, float]] = []
    queue = SlackQueue(options, lambda now, head, at: heads.append((now, head.id, at)), resumes=resumes)
    outcomes = _replay(jobs, MACHINE, queue, None, 1.0)
    return [(o.job.id, o.start, o.predicted) for o in outcomes], heads, queue.resumed


@settings(max_examples=400, deadline=None)
@given(workloads, st.sampled_from([Order.SLACK, Order.FCFS, Order.SJF, Order.F1]),
       st.sampled_from([0.0, 20.0, math.inf]), st.sampled_from([0.0, 0.25, 1.0]), st.booleans())
def test_going_on_from_a_blocked_pass_decides_as_whole_passes(raw: list[tuple[int, int, int, int, int]],
                                                              order: Order, after: float, fraction: float,
                                                              predictions: bool) -> None:
    jobs = sim_jobs(raw)
    options = Options(order=order, overdue_after=after, guard_fraction=fraction, predictions=predictions)
    gone_on, heads, _ = replayed(jobs, options, resumes=True)
    whole, whole_heads, none = replayed(jobs, options, resumes=False)
    assert none == 0
    assert gone_on == whole
    assert heads == whole_heads  # the reserved head and its guaranteed start, pass for pass


def test_a_blocked_pass_is_gone_on_from_while_nothing_ends_and_the_head_stays_first() -> None:
    """A (1 processor, 100 s) runs; B (8) waits for all 8; C (1, 500 s) arrives at 10: the first
    pass (B blocked, reserved at 100; C would delay it). D (1, 500 s) at 20 and E (1, 5 s) at 30
    arrive while nothing ends, with keys after B's: those two passes go on from the blocked one. E
    ends before B's start and is backfilled; C and D start after B."""
    options = Options(guard_fraction=0.0, overdue_after=math.inf)  # the slack order alone: no job turns overdue
    jobs = sim_jobs([(0, 0, 1, 100, 100), (1, 1, 8, 5, 5), (2, 10, 1, 500, 500), (3, 20, 1, 500, 500),
                     (0, 30, 1, 5, 5)])
    gone_on, heads, resumed = replayed(jobs, options, resumes=True)
    assert resumed == 2
    assert (gone_on, heads) == replayed(jobs, options, resumes=False)[:2]
    started = {job_id: start for job_id, start, _ in gone_on}
    assert started[jobs[4].id] == 30.0  # E ends (35) before B's reserved start (100): backfilled
    assert started[jobs[1].id] == 100.0
    assert started[jobs[2].id] == 105.0 and started[jobs[3].id] == 105.0


def test_an_arrival_ahead_of_the_head_in_the_order_makes_the_pass_whole() -> None:
    """B (8, long) is the head behind A, X (1, long) refused behind it; C, short and 8 wide,
    arrives: its slack key is before B's, so a whole pass tries it first (it becomes the head):
    the blocked pass is not gone on from."""
    options = Options(guard_fraction=0.0, overdue_after=math.inf)
    jobs = sim_jobs([(0, 0, 1, 100, 100), (1, 1, 8, 5000, 5000), (2, 2, 1, 5000, 5000), (3, 10, 8, 1, 1)])
    gone_on, heads, resumed = replayed(jobs, options, resumes=True)
    assert resumed == 0
    assert [(now, head) for now, head, _ in heads[:2]] == [(2.0, jobs[1].id), (10.0, jobs[3].id)]
    assert (gone_on, heads) == replayed(jobs, options, resumes=False)[:2]


def test_the_public_replay_goes_on_from_blocked_passes_with_the_same_schedule() -> None:
    jobs = sim_jobs([(n % 3, n * 7, 1 + (n * 5) % MACHINE, 20 + n % 40, 10 + (n * 13) % 50) for n in range(200)])
    options = Options()
    assert [(o.job.id, o.start) for o in simulate_predictive(jobs, MACHINE, options)] == \
        [(job_id, start) for job_id, start, _ in replayed(jobs, options, resumes=False)[0]]
    assert replayed(jobs, options, resumes=True)[2] > 0
