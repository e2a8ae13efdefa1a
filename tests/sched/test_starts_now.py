"""`policy.starts_now`, the policies' first rule, which the replay applies alone to a queue of one
job: on random machines and running jobs it decides as a full `schedule` pass of that queue does,
under every policy, with and without reasons; and a whole replay (`simulate`, with its lone-job
passes, its skipped passes and `resume`) gives every job the start that a replay making a full
pass of the whole queue at every instant gives."""

from __future__ import annotations

import heapq
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.sched import Policy, ProcessorPool, Running, schedule
from infosvc.sched.policy import starts_now
from infosvc.sched.simulation import SimJob, jobs_of, simulate
from test_policy import Job

ESTIMATES = st.one_of(st.integers(1, 60).map(float), st.just(math.inf))


@settings(max_examples=400, deadline=None)
@given(size=st.integers(1, 12), held=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 20), ESTIMATES), max_size=6),
       width=st.integers(1, 14), estimate=ESTIMATES, submitted=st.integers(0, 20000), priority=st.integers(0, 4),
       policy=st.sampled_from(list(Policy)), explain=st.booleans(), overdue_after=st.sampled_from([0.0, 60.0, 3600.0]))
def test_a_queue_of_one_starts_as_a_full_pass_starts_it(size: int, held: list[tuple[int, int, float]], width: int,
                                                       estimate: float, submitted: int, priority: int, policy: Policy,
                                                       explain: bool, overdue_after: float) -> None:
    running: list[Running[int]] = []
    for n, (wide, started, ends_in) in enumerate(held):
        if wide <= size - sum(r.allocation for r in running):
            running.append(Running(f"r{n}", 20.0 - started, ends_in, wide))
    pool = ProcessorPool(size, size - sum(r.allocation for r in running))
    job = Job("q", width, estimate, float(submitted) / 1000, priority)
    where = starts_now(pool, job)
    assert pool.free == size - sum(r.allocation for r in running)  # placed, not taken
    plan = schedule(pool, running, [job], 20.0, policy, explain=explain, overdue_after=overdue_after)
    assert [(s.job.id, s.allocation, s.backfilled) for s in plan.starts] == ([] if where is None else [("q", width, False)])
    assert (where is None) == (width > pool.free)


def full_passes(jobs: list[SimJob], processors: int, policy: Policy) -> dict[int, float]:
    """Each job's start by a replay that makes a full `schedule` pass of its whole queue at every
    instant: completions, then arrivals, then the pass (the conventions of docs/simulation.md)."""
    pool, queue, starts = ProcessorPool.empty(processors), list[SimJob](), dict[int, float]()
    running: dict[str, Running[int]] = {}
    ends: list[tuple[float, str]] = []
    at = 0
    while at < len(jobs) or ends:
        now = min(jobs[at].submitted if at < len(jobs) else math.inf, ends[0][0] if ends else math.inf)
        while ends and ends[0][0] == now:
            _, job_id = heapq.heappop(ends)
            pool.give(running.pop(job_id).allocation)
        while at < len(jobs) and jobs[at].submitted == now:
            queue.append(jobs[at])
            at += 1
        plan = schedule(pool, list(running.values()), queue, now, policy, explain=False)
        for start in plan.starts:
            job: SimJob = start.job  # type: ignore[assignment]
            pool.take(start.allocation)
            running[job.id] = Running(job.id, now, job.estimate, start.allocation)
            heapq.heappush(ends, (now + job.run, job.id))
            starts[job.number] = now
        queue = [job for job in queue if job.number not in starts]
    return starts


@settings(max_examples=150, deadline=None)
@given(processors=st.integers(1, 16),
       spec=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 30), st.integers(1, 16), st.integers(0, 40)),
                     min_size=1, max_size=40),
       policy=st.sampled_from([Policy.FCFS, Policy.EASY]))
def test_a_replay_starts_every_job_as_full_passes_do(processors: int, spec: list[tuple[int, int, int, int]],
                                                     policy: Policy) -> None:
    # (gap to the job before, run time, processors, estimate's excess over the run time): light
    # and heavy loads alike, jobs alone in the queue and behind others
    submitted, records = 0, []
    for number, (gap, run, width, excess) in enumerate(spec, 1):
        submitted += gap
        records.append((number, float(submitted), float(run), min(width, processors), -1, float(run + excess)))
    jobs = jobs_of(records, processors).jobs
    replayed = {o.job.number: o.start for o in simulate(jobs, processors, policy)}
    assert replayed == full_passes(jobs, processors, policy)
