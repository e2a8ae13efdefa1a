"""The GPU what-if of `infosvc simulate` (infosvc/sched/hostsim.py): traces replayed on a machine of
hosts with GPUs through the service's own host pool. By hand on tiny traces (jobs waiting for GPUs
while processors are free); against the processor pool where the two must agree (one host, any
policy; many hosts under FCFS, without GPU jobs); on random workloads, never more GPUs or
processors held on a host than it has; and which jobs ask GPUs."""

from __future__ import annotations

import heapq
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.codec.swf import parse_swf, read_swf
from infosvc.sched import Policy
from infosvc.sched.hostsim import WhatIf, asks_gpus, gpu_figures, host_slots, simulate_hosts
from infosvc.sched.simulation import SimJob, simulate, trace_jobs

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def job(number: int, submitted: float, processors: int, run: float, estimate: float | None = None,
        user: int = 1) -> SimJob:
    return SimJob.of(number, submitted, processors, run if estimate is None else estimate, run, user)


def test_gpu_jobs_wait_for_gpus_while_processors_are_free() -> None:
    # 2 hosts of 2 processors and 1 GPU; every job asks 1 GPU and 1 processor: two at a time run,
    # with 2 processors idle, whatever the policy
    jobs = [job(n, 0, 1, 10) for n in range(1, 5)]
    for policy in Policy:
        replay = simulate_hosts(jobs, 4, policy, WhatIf(2, 1, 1.0, 1))
        assert sorted((o.job.number, o.start) for o in replay.outcomes) == [(1, 0), (2, 0), (3, 10), (4, 10)]
        assert sorted(replay.held) == [(1, (0,)), (1, (0,)), (1, (1,)), (1, (1,))]
    figures = gpu_figures(replay)
    assert (figures.gpus, figures.gpu_jobs, figures.gpu_utilization) == (2, 4, 1.0)
    assert (figures.gpu_jobs_mean_wait_seconds, figures.gpu_jobs_max_wait_seconds) == (5.0, 10.0)
    assert figures.other_jobs_mean_wait_seconds == 0.0 and figures.hosts == 2


def test_a_job_without_gpus_backfills_beside_a_gpu_job_that_waits() -> None:
    # 1 host of 4 processors and 2 GPUs. A (1 processor, 2 GPUs, 10 s) at 0; B (1 processor, 2 GPUs)
    # at 1 waits for A's GPUs though 3 processors are free; C (1 processor, no GPU, 100 s) at 2
    # backfills at once beside both: it takes no GPU the head is reserved. (The job numbers are
    # picked so that `asks_gpus` at 0.5 makes A and B the GPU jobs.)
    gpu_numbers = [n for n in range(1, 200) if asks_gpus(n, 0.5)]
    other = next(n for n in range(1, 200) if not asks_gpus(n, 0.5))
    jobs = [job(gpu_numbers[0], 0, 1, 10), job(gpu_numbers[1], 1, 1, 10), job(other, 2, 1, 100)]
    replay = simulate_hosts(sorted(jobs, key=lambda j: (j.submitted, j.id)), 4, Policy.EASY, WhatIf(1, 2, 0.5, 2))
    started = {o.job.number: o.start for o in replay.outcomes}
    assert started == {gpu_numbers[0]: 0, gpu_numbers[1]: 10, other: 2}
    # FCFS keeps C behind B
    replay = simulate_hosts(sorted(jobs, key=lambda j: (j.submitted, j.id)), 4, Policy.FCFS, WhatIf(1, 2, 0.5, 2))
    assert {o.job.number: o.start for o in replay.outcomes}[other] == 10


def test_a_gpu_job_takes_its_gpus_on_each_of_its_hosts() -> None:
    # 3 hosts of 2 processors and 2 GPUs; a 4-processor job asking 2 GPUs spans two hosts and
    # holds 4 GPUs; a second such job has 1 host with GPUs left: it waits
    jobs = [job(1, 0, 4, 10), job(2, 0, 4, 10)]
    replay = simulate_hosts(jobs, 6, Policy.EASY, WhatIf(3, 2, 1.0, 2))
    assert [(o.job.number, o.start) for o in replay.outcomes] == [(1, 0), (2, 10)]
    assert replay.held == [(4, (0, 1)), (4, (0, 1))]


def test_hosts_share_the_processors() -> None:
    assert [(s.id, s.processors, s.gpus) for s in host_slots(10, WhatIf(4, 8))] == [
        ("h0", 3, 8), ("h1", 3, 8), ("h2", 2, 8), ("h3", 2, 8)]
    assert [s.id for s in host_slots(11, WhatIf(11))][:3] == ["h00", "h01", "h02"]


@pytest.mark.parametrize("what_if,processors,words", [
    (WhatIf(0), 8, "--hosts must be 1 to 1,000,000"),
    (WhatIf(9), 8, "more hosts than the machine's 8 processors"),
    (WhatIf(2, -1), 8, "--gpus-per-host must be 0 to 1024"),
    (WhatIf(2, 1025), 8, "--gpus-per-host must be 0 to 1024"),
    (WhatIf(2, 1, 1.5), 8, "--gpu-jobs is a fraction"),
    (WhatIf(2, 1, -0.1), 8, "--gpu-jobs is a fraction"),
    (WhatIf(2, 1, math.nan), 8, "--gpu-jobs is a fraction"),
    (WhatIf(2, 0, 0.5), 8, "hosts that have none"),
    (WhatIf(2, 1, 0.5, 0), 8, "--gpus-per-job must be at least 1"),
    (WhatIf(2, 2, 0.5, 3), 8, "more than a host's 2 GPUs"),
])
def test_impossible_what_ifs_are_refused(what_if: WhatIf, processors: int, words: str) -> None:
    problem = what_if.problem(processors)
    assert problem is not None and words in problem
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        simulate_hosts([job(1, 0, 1, 1)], processors, Policy.EASY, what_if)


def test_boundaries_are_accepted() -> None:
    for what_if, processors in ((WhatIf(8, 1024, 1.0, 1024), 8), (WhatIf(1, 0, 0.0, 5), 1), (WhatIf(3, 2, 0.0, 9), 3)):
        assert what_if.problem(processors) is None
        assert len(simulate_hosts([job(1, 0, 1, 1)], processors, Policy.EASY, what_if).outcomes) == 1


def test_which_jobs_ask_gpus() -> None:
    numbers = range(1, 20_001)
    for fraction in (0.1, 0.25, 0.5, 0.9):
        share = sum(asks_gpus(n, fraction) for n in numbers) / len(numbers)
        assert abs(share - fraction) < 0.02, (fraction, share)
    assert not any(asks_gpus(n, 0.0) for n in numbers) and all(asks_gpus(n, 1.0) for n in numbers)
    # those asking at a fraction ask at any larger one; and the choice is the number's alone
    assert all(asks_gpus(n, 0.5) for n in numbers if asks_gpus(n, 0.2))
    assert [asks_gpus(n, 0.3) for n in range(-5, 50)] == [asks_gpus(n, 0.3) for n in range(-5, 50)]
    assert WhatIf(2, 4, 0.0, 3).gpus_of(job(7, 0, 1, 1)) == 0


@pytest.mark.parametrize("policy", list(Policy))
def test_one_host_decides_as_the_processor_pool(policy: Policy) -> None:
    trace = trace_jobs(read_swf(TRACES / "lublin_256.swf.gz").records, 256)
    jobs = trace.jobs[:2000]
    pooled = {o.job.number: o.start for o in simulate(jobs, 256, policy)}
    hosted = {o.job.number: o.start for o in simulate_hosts(jobs, 256, policy, WhatIf(1)).outcomes}
    assert hosted == pooled


def test_many_hosts_under_fcfs_decide_as_the_processor_pool() -> None:
    # FCFS only places: a job spans any hosts with free processors, so 16 hosts are 256 processors.
    # (EASY's extra processors are per host there: a backfilled job must find them on the hosts it
    # holds, which a pool of interchangeable processors does not ask: the two may differ.)
    trace = trace_jobs(read_swf(TRACES / "lublin_256.swf.gz").records, 256)
    jobs = trace.jobs[:3000]
    pooled = {o.job.number: o.start for o in simulate(jobs, 256, Policy.FCFS)}
    hosted = {o.job.number: o.start for o in simulate_hosts(jobs, 256, Policy.FCFS, WhatIf(16)).outcomes}
    assert hosted == pooled


WORKLOADS = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 8), st.integers(1, 30), st.integers(0, 20)),
                     min_size=1, max_size=25)


@settings(max_examples=80, deadline=None)
@given(workload=WORKLOADS, hosts=st.integers(1, 4), gpus=st.integers(1, 3), fraction=st.sampled_from((0.3, 0.7, 1.0)),
       per_job=st.integers(1, 3), policy=st.sampled_from(list(Policy)))
def test_no_host_is_ever_over_committed(workload: list[tuple[int, int, int, int]], hosts: int, gpus: int,
                                        fraction: float, per_job: int, policy: Policy) -> None:
    processors = 8
    jobs = sorted((job(n, submit, width, run, run + extra, user=n % 3)
                   for n, (submit, width, run, extra) in enumerate(workload, 1)), key=lambda j: (j.submitted, j.id))
    what_if = WhatIf(hosts, gpus, fraction, min(per_job, gpus))
    replay = simulate_hosts(jobs, processors, policy, what_if)
    assert sorted(o.job.number for o in replay.outcomes) == [j.number for j in sorted(jobs, key=lambda j: j.number)]
    size = {row: slot.processors for row, slot in enumerate(replay.slots)}
    events: list[tuple[float, int, int, tuple[int, ...]]] = []  # (time, +1 start / -1 end, GPUs a host, rows)
    for o, (held, rows) in zip(replay.outcomes, replay.held):
        assert o.start >= o.job.submitted
        each = what_if.gpus_of(o.job)
        assert held == each * len(rows) and (each == 0 or len(rows) <= o.job.processors)
        assert sum(size[r] for r in rows) >= o.job.processors
        heapq.heappush(events, (o.start, 1, each, rows))
        heapq.heappush(events, (o.end, -1, each, rows))
    in_use = [0] * hosts
    while events:  # ends (-1) before starts (+1) at one instant
        _, sign, each, rows = heapq.heappop(events)
        for row in rows:
            in_use[row] += sign * each
            assert 0 <= in_use[row] <= gpus


def test_a_real_trace_with_gpus() -> None:
    trace = trace_jobs(read_swf(TRACES / "NASA-iPSC-1993-3.1-cln.swf.gz").records, 128)
    replay = simulate_hosts(trace.jobs, 128, Policy.EASY, WhatIf(16, 1, 0.5, 1))
    figures = gpu_figures(replay)
    assert len(replay.outcomes) == len(trace.jobs) == 18066
    assert figures.gpus == 16 and 0 < figures.gpu_utilization < 1
    assert figures.gpu_jobs == sum(asks_gpus(j.number, 0.5) for j in trace.jobs)


def test_a_trace_parsed_by_hand_runs_on_hosts() -> None:
    lines = ["1 0 -1 10 2 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1", "2 0 -1 10 2 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1"]
    jobs = trace_jobs(parse_swf(iter(lines)).records, 4).jobs
    replay = simulate_hosts(jobs, 4, Policy.EASY, WhatIf(2, 1, 1.0, 1))
    # each job of 2 processors fits on one host of 2 and holds its 1 GPU: both run at once
    assert sorted((o.job.number, o.start) for o in replay.outcomes) == [(1, 0), (2, 0)]
    assert sorted(replay.held) == [(1, (0,)), (1, (1,))]


def test_easy_goes_on_from_a_blocked_pass_as_a_whole_pass_decides() -> None:
    # Lublin's queue is long: every arrival while the head is blocked was a pass over all of it
    trace = trace_jobs(read_swf(TRACES / "lublin_256.swf.gz").records, 256)
    jobs = trace.jobs[:3000]
    for what_if in (WhatIf(16), WhatIf(16, 2, 0.4, 1)):
        whole = simulate_hosts(jobs, 256, Policy.EASY, what_if, resumes=False)
        gone_on = simulate_hosts(jobs, 256, Policy.EASY, what_if)
        assert [(o.job.number, o.start) for o in gone_on.outcomes] == [(o.job.number, o.start) for o in whole.outcomes]
        assert gone_on.held == whole.held


@settings(max_examples=120, deadline=None)
@given(workload=WORKLOADS, hosts=st.integers(1, 4), gpus=st.integers(0, 3), fraction=st.sampled_from((0.0, 0.5, 1.0)))
def test_easy_gone_on_from_blocked_passes_starts_every_job_as_whole_passes(
        workload: list[tuple[int, int, int, int]], hosts: int, gpus: int, fraction: float) -> None:
    jobs = sorted((job(n, submit, width, run, run + extra, user=n % 3)
                   for n, (submit, width, run, extra) in enumerate(workload, 1)), key=lambda j: (j.submitted, j.id))
    what_if = WhatIf(hosts, gpus, fraction if gpus else 0.0, 1)
    whole = simulate_hosts(jobs, 8, Policy.EASY, what_if, resumes=False)
    gone_on = simulate_hosts(jobs, 8, Policy.EASY, what_if)
    assert [(o.job.number, o.start) for o in gone_on.outcomes] == [(o.job.number, o.start) for o in whole.outcomes]
    assert gone_on.held == whole.held
