"""GPUs as a consumable of each host (infosvc/sched/hosts.py): a job asking for N takes N on each
of its hosts, is placed only where N are free, never shares a GPU, waits with a reason that says
so, and is planned for in the backfill as processors are; the request read from an SSS job."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.codec.job_xml import parse_job
from infosvc.errors import DocumentError
from infosvc.model.job import resolve
from infosvc.model.jobneeds import read_needs
from infosvc.sched import Policy, Running, schedule
from infosvc.sched.hosts import Allocation, HostPool, HostSlot, WaitingJob
from infosvc.sched.request import JobRequest, read_request


def job(id: str, processors: int = 1, gpus: int = 0, *, exclusive: bool = False, estimate: float = 100.0,
        submitted: float = 0.0) -> WaitingJob:
    request = JobRequest(name=id, owner="u", min_processors=processors, max_processors=processors,
                         estimate=estimate, exclusive=exclusive, gpus=gpus)
    return WaitingJob(id, 2, submitted, estimate, request)


def gpu_site() -> HostPool:
    # g4: 64 CPUs and 4 GPUs; g8: 64 and 8; cpu: 64 and none (and the most memory: first in the sort)
    return HostPool([HostSlot("g4", 64, 100, 1, gpus=4), HostSlot("g8", 64, 100, 2, gpus=8),
                     HostSlot("cpu", 64, 200, 3)])


def test_two_4_gpu_jobs_never_share_a_4_gpu_host() -> None:
    pool = HostPool([HostSlot("g4", 64, gpus=4)])
    first = pool.place(job("a", 1, 4))
    assert first is not None and first.gpus == 4
    pool.take(first)
    assert pool.place(job("b", 1, 4)) is None  # 63 processors free, but no GPU
    assert pool.place(job("c", 1)) is not None  # a job without GPUs still fits beside it
    assert pool.describe_shortfall(job("b", 1, 4)) == "waiting for 4 GPUs free on a host: 0 at most now"
    pool.give(first)
    assert pool.place(job("b", 1, 4)) is not None


def test_gpu_jobs_go_only_where_enough_are_free() -> None:
    pool = gpu_site()
    assert pool.names(pool.place(job("six", 1, 6))) == ["g8"]  # type: ignore[arg-type]
    assert pool.names(pool.place(job("none", 1))) == ["cpu"]  # type: ignore[arg-type]
    assert pool.place(job("nine", 1, 9)) is None
    assert pool.describe_shortfall(job("nine", 1, 9)) == "no host it may use has 9 GPUs: 8 at most"
    # each host of a job gives it its GPUs: two hosts with 4 free each for a 70-processor job
    wide = pool.place(job("wide", 70, 4))
    assert wide is not None and sorted(pool.names(wide)) == ["g4", "g8"] and wide.gpus == 4
    pool.take(wide)
    assert pool.gpu_free.tolist() == [0, 4, 0]


def test_taking_more_gpus_than_free_is_refused_and_nothing_is_taken() -> None:
    pool = gpu_site()
    pool.take(Allocation((0,), (1,), 0.0, False, gpus=3))
    with pytest.raises(ValueError):
        pool.take(Allocation((1, 0), (1, 1), 0.0, False, gpus=2))  # g8 has room, g4 has 1 GPU left
    assert pool.gpu_free.tolist() == [1, 8, 0] and pool.free.tolist() == [63, 64, 64]


def test_a_copy_takes_apart_from_its_original() -> None:
    pool = gpu_site()
    other = pool.copy()
    other.take(Allocation((1,), (1,), 0.0, False, gpus=8))
    assert pool.gpu_free.tolist() == [4, 8, 0] and other.gpu_free.tolist() == [4, 0, 0]


def test_easy_reserves_for_gpus_and_backfills_what_does_not_delay_it() -> None:
    pool = HostPool([HostSlot("g4", 64, gpus=4)])
    held = pool.place(job("R", 1, 3))
    assert held is not None
    pool.take(held)
    running = [Running("R", 0.0, 100.0, held)]
    head = job("H", 1, 4, submitted=1)  # waits for R's GPUs: reserved at 100
    short = job("S", 1, 1, estimate=50.0, submitted=2)  # the last GPU, back by 100
    long = job("L", 1, 1, estimate=500.0, submitted=3)  # would hold a GPU H needs at 100
    cpu_only = job("C", 8, estimate=500.0, submitted=4)  # takes no GPU: delays nothing
    plan = schedule(pool, running, [head, short, long, cpu_only], now=0.0, policy=Policy.EASY)
    assert [s.job.id for s in plan.starts] == ["S", "C"]
    assert plan.reservation is not None and plan.reservation.at == 100.0
    assert plan.waiting["H"].startswith("first in the queue: waiting for 4 GPUs free on a host")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=4),
       st.lists(st.tuples(st.integers(1, 16), st.integers(0, 8), st.booleans(), st.integers(1, 500)),
                min_size=1, max_size=12))
def test_no_gpu_is_ever_given_twice(sizes: list[int], jobs: list[tuple[int, int, bool, int]]) -> None:
    """Replayed in time under each policy: at every start the GPUs held on a host never pass its
    GPUs, and every job that started got what it asked on each of its hosts."""
    pool = HostPool([HostSlot(f"h{i}", 16, gpus=n) for i, n in enumerate(sizes)])
    for policy in (Policy.FCFS, Policy.EASY):
        queue = [job(f"j{i}", p, g, exclusive=x, estimate=float(t), submitted=float(i))
                 for i, (p, g, x, t) in enumerate(jobs)]
        running: list[Running[Allocation]] = []
        live = pool.copy()
        now = 0.0
        for _ in range(len(queue) * 2 + 2):
            plan = schedule(live, running, queue, now=now, policy=policy)
            for start in plan.starts:
                live.take(start.allocation)
                assert start.allocation.gpus == start.job.request.gpus  # type: ignore[attr-defined]
                running.append(Running(start.job.id, now, start.job.estimate, start.allocation))
            started = {s.job.id for s in plan.starts}
            queue = [j for j in queue if j.id not in started]
            held = [0] * len(sizes)
            for r in running:
                for row in r.allocation.rows:
                    held[row] += r.allocation.gpus
            assert all(h <= n for h, n in zip(held, sizes))
            assert (live.gpu_free >= 0).all()
            if not running:
                break
            now = min(r.started + r.estimate for r in running)
            for r in [r for r in running if r.started + r.estimate <= now]:
                live.give(r.allocation)
                running.remove(r)
        first_processors, first_gpus = jobs[0][0], jobs[0][1]
        if first_gpus <= max(sizes) and first_processors <= 16 * sum(1 for n in sizes if n >= first_gpus):
            assert "j0" not in {j.id for j in queue}  # the first, which fits the empty site, ran


def request_of(requested: str) -> JobRequest:
    document = (f"<Job><Id>x</Id><Executable>/bin/true</Executable><Requested>{requested}</Requested></Job>")
    [resolved] = resolve(parse_job(document).job)
    return read_request(read_needs(resolved), "alice")


def test_the_request_reads_gpus_per_host() -> None:
    assert request_of("<Processors>2</Processors>").gpus == 0
    assert request_of('<Resource name="GPU">2</Resource>').gpus == 2
    assert request_of('<Resource name="GPU" type="NVIDIA H100 80GB HBM3">1</Resource>').gpus == 1
    assert request_of('<Resource name="GPU" op="GT">1.5</Resource>').gpus == 2
    assert request_of('<Resource name="GPU" op="LE">4</Resource>').gpus == 0  # bounds the job only
    assert request_of('<Resource name="gpu">2</Resource>').gpus == 0  # a site config's consumable, not counted
    with pytest.raises(DocumentError, match="at most 1024"):
        request_of('<Resource name="GPU">5000</Resource>')


def test_the_matcher_asks_a_model_and_a_count_of_the_host() -> None:
    """A type asks for a model; the queue asks it of the host as if idle (its own jobs it counts
    itself), a dry run of what is free now."""
    from infosvc.config.site import parse_config
    from infosvc.hosts.rollup import host_from_node
    from infosvc.matching import compile_requirements, evaluate
    from support.documents import GPUs, make_node

    node = make_node("g01", gpus=GPUs(count=4, busy=3))
    host = host_from_node(node, "Ready", parse_config({}), "2026-11-27T05:00:00Z")

    def verdict(requested: str) -> tuple[bool, str]:
        document = f"<Job><Id>x</Id><Executable>/bin/true</Executable><Requested>{requested}</Requested></Job>"
        [resolved] = resolve(parse_job(document).job)
        result = evaluate(compile_requirements(resolved), node, host, subcluster=None)
        return result.ok, " ".join(result.reasons)

    assert verdict('<Resource name="GPU">1</Resource>')[0]
    matched, reason = verdict('<Resource name="GPU">2</Resource>')
    assert not matched and "GPU: asked GE 2 available, host has 1 free of 4" in reason
    assert verdict('<Resource name="GPU" context="Configured">4</Resource>')[0]
    assert not verdict('<Resource name="GPU" type="NVIDIA A100">1</Resource>')[0]
    assert verdict(f'<Resource name="GPU" type="{GPUs.model}">1</Resource>')[0]
