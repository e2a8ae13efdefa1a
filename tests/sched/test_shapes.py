"""The backfill scan's shortcut (infosvc/sched/shapes.py): a `predictive` pass reads only the jobs
the queue's coded shapes find, and decides as the scan of the whole queue. The codes keep order
(every width and length, at every boundary of their steps, the lengths' codes without a gap up
to the infinite's); what `narrow` finds is every job the scan's exact rule could start, in queue
order, whatever the rounding of now + estimate (clocks to 2**60 s); and
replays with and without it give the same starts and reserved heads, on random workloads of
narrow and wide jobs and on both vendored traces."""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.codec.swf import read_swf
from infosvc.sched.ordering import Order
from infosvc.sched.shapes import code, narrow
from infosvc.sched.simulation import Options, SimJob, Waiting, _replay, trace_jobs
from infosvc.sched.slackqueue import SlackQueue

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def test_the_width_code_keeps_order_and_is_exact_below_64() -> None:
    codes = [code(width, 1.0)[0] for width in range(0, 1 << 17)]
    assert all(a <= b for a, b in zip(codes, codes[1:]))
    assert codes[:64] == list(range(64))
    assert codes[15_359] == 126 and codes[15_360] == 127 == max(codes)
    assert len(set(codes)) == 128  # every code of the width's half is used


def test_the_length_code_keeps_order_from_zero_to_the_infinite() -> None:
    seconds = sorted({0.0, 0.5, 15.0, 15.99, 16.0, math.inf, 2.0 ** 31, 2.0 ** 31 - 1, 1e300}
                     | {float(2 ** k + d) for k in range(0, 32) for d in (-1, 0, 1)}
                     | {2 ** k * f for k in range(4, 31) for f in (1.24, 1.25, 1.26, 1.49, 1.5, 1.51, 1.75, 1.99)})
    codes = [code(1, s)[1] for s in seconds]
    assert all(a <= b for a, b in zip(codes, codes[1:]))
    assert [code(1, s)[1] for s in range(16)] == list(range(128, 144))  # exact under 16 s
    assert code(1, math.inf)[1] == code(1, 2.0 ** 31)[1] == code(1, math.nan)[1] == 252
    assert code(1, 2.0 ** 31 - 1)[1] == 251  # the codes run on to the infinite's: no gap a bound could fall in
    assert min(codes) == 128  # a length byte is never a width byte: a match starts on a width only


def test_the_length_codes_run_on_without_a_gap_up_to_the_infinite() -> None:
    seconds = list(range(0, 1 << 20)) + [int(2 ** k * f) + d for k in range(20, 32) for f in (1, 1.25, 1.5, 1.75)
                                         for d in range(-3, 4)]
    codes = sorted({code(1, float(s))[1] for s in seconds} | {code(1, math.inf)[1]})
    assert codes == list(range(128, 253))


class Job(NamedTuple):
    id: str
    processors: int
    estimate: float


def may_start(job: Job, room: int, now: float, at: float, extra: int) -> bool:
    """The scan's exact rule (policy.py's `_backfill` and `_placed`, on a processor pool)."""
    return job.processors <= room and (now + job.estimate <= at or job.processors <= min(extra, room))


widths = st.one_of(st.integers(1, 200), st.integers(1, 70_000))
lengths = st.one_of(st.integers(0, 100_000).map(float), st.floats(0, 3e9), st.floats(2.0 ** 31 - 2, 2.0 ** 31 + 2),
                    st.just(math.inf))


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(widths, lengths), max_size=40), st.integers(0, 70_000),
       st.one_of(st.floats(0, 2e9), st.integers(0, 2 ** 40).map(float), st.floats(2.0 ** 50, 2.0 ** 60)),
       st.one_of(lengths, st.floats(0, 100)),
       st.integers(0, 70_000), st.sets(st.integers(0, 39)))
def test_narrow_finds_every_job_the_scan_could_start_in_queue_order(shaped: list[tuple[int, float]], room: int,
                                                                     now: float, within: float, extra: int,
                                                                     passed_at: set[int]) -> None:
    jobs = [Job(f"j{n}", width, length) for n, (width, length) in enumerate(shaped)]
    shapes = b"".join(code(job.processors, job.estimate) for job in jobs)
    at = now + within
    passed = {jobs[n].id for n in passed_at if n < len(jobs)}
    found = list(narrow(jobs, shapes, room, now, at, extra, passed))
    assert [job for job in jobs if job in found] == found  # in queue order, each once
    assert not passed & {job.id for job in found}
    missing = [job for job in jobs if job.id not in passed and may_start(job, room, now, at, extra)
               and job not in found]
    assert missing == []


@pytest.mark.parametrize("now", [2.0 ** 55, 2.0 ** 60, 3.0 * 2 ** 52 + 0.5, 8470055.7])
def test_narrow_finds_every_job_whose_end_rounds_down_to_the_reserved_start(now: float) -> None:
    """Late in a long clock a sum's last bit is seconds wide (from 2**53 s): now + 11 s may round
    to now + 8 s, so an 11-second job ends by a start 8 s away, in the scan's float arithmetic,
    and must be found; and where it is not (a short clock), nothing is lost either way."""
    rounded = 0
    for within in (0.0, 8.0, 15.5, 63.0, 2.0 ** 31 - 1, 2.0 ** 31):
        at = now + within
        jobs = [Job(f"e{e}", 1, float(e)) for e in range(int(within) - 40 if within > 40 else 0, int(within) + 200)]
        jobs += [Job("e-2**31", 1, 2.0 ** 31), Job("e-inf", 1, math.inf)]
        shapes = b"".join(code(job.processors, job.estimate) for job in jobs)
        found = set(narrow(jobs, shapes, 4, now, at, 0, set()))
        assert [job for job in jobs if now + job.estimate <= at and job not in found] == []
        rounded += sum(1 for job in jobs if job.estimate > within and now + job.estimate <= at)
    assert rounded > 0 or now < 2.0 ** 53  # past 2**53 s the cases above do round onto the start


def test_a_replay_with_an_estimate_of_2_to_the_31_decides_as_the_whole_scan() -> None:
    """A reservation for a job of 2**31 s, at a clock with a fraction: `at - now` comes out a
    hair under 2**31, whose code is the last finite one; a second job of 2**31 s ends by it in
    floats, and must be backfilled as the whole scan backfills it."""
    now, long = 8470055.7, 2.0 ** 31
    jobs = [SimJob.of(1, now, 5, long, 100.0), SimJob.of(2, now, 10, 50.0, 50.0), SimJob.of(3, now, 1, long, 10.0)]
    for order in (Order.FCFS, Order.SLACK):
        narrowed = replayed(jobs, 10, Options(order=order), narrows=True)
        assert narrowed == replayed(jobs, 10, Options(order=order), narrows=False)
        assert dict((job, start) for job, start, _ in narrowed[0])[jobs[2].id] == now  # backfilled at once


def test_narrow_reads_past_jobs_too_wide_or_too_long() -> None:
    """A queue of wide jobs and of narrow long ones, with one short narrow job at its end: that one
    is found, past the others, and a narrow long one is found only with extra processors for it."""
    jobs = [Job("wide", 64, 10.0), Job("long", 2, 10_000.0), Job("short", 2, 50.0)]
    shapes = b"".join(code(job.processors, job.estimate) for job in jobs)
    assert [job.id for job in narrow(jobs, shapes, 4, 0.0, 100.0, 0, set())] == ["short"]
    assert [job.id for job in narrow(jobs, shapes, 4, 0.0, 100.0, 2, set())] == ["long", "short"]
    assert [job.id for job in narrow(jobs, shapes, 4, 0.0, 100.0, 2, {"short"})] == ["long"]
    assert [job.id for job in narrow(jobs, shapes, 64, 0.0, math.inf, 0, set())] == ["wide", "long", "short"]


MACHINE = 300
workloads = st.lists(st.tuples(st.integers(0, 3),                                   # user
                               st.one_of(st.integers(0, 2_000), st.floats(0, 2_000)),  # submit, whole or not
                               st.one_of(st.integers(1, 8), st.integers(1, MACHINE)),  # processors
                               st.integers(1, 4_000),                               # estimate
                               st.integers(1, 4_000)),                              # run (cut to the estimate)
                     min_size=1, max_size=40)


def replayed(jobs: list[SimJob], processors: int, options: Options,
             narrows: bool) -> tuple[list[tuple[str, float, float]], list[tuple[float, str, float]]]:
    """The starts and reserved heads of a replay; at each pass the queue's shapes are checked to
    be its jobs' codes, in its order (a shape out of place would narrow to the wrong jobs)."""
    heads: list[tuple[float, str, float]] = []

    def observe(now: float, head: Waiting, at: float) -> None:
        heads.append((now, head.id, at))
        assert queue.shapes == b"".join(code(w.processors, w.estimate) for w in queue.queue)

    queue = SlackQueue(options, observe, narrows=narrows)
    outcomes = _replay(jobs, processors, queue, None, 1.0)
    return [(o.job.id, o.start, o.predicted) for o in outcomes], heads


@settings(max_examples=300, deadline=None)
@given(workloads, st.sampled_from([Order.SLACK, Order.FCFS, Order.SJF, Order.WFP3]),
       st.sampled_from([0.0, 60.0, math.inf]), st.booleans())
def test_a_replay_decides_as_with_the_whole_queue_scanned(raw: list[tuple[int, float, int, int, int]], order: Order,
                                                           after: float, predictions: bool) -> None:
    jobs = sorted((SimJob.of(n, s, w, e, min(r, e), user=u) for n, (u, s, w, e, r) in enumerate(raw, 1)),
                  key=lambda j: (j.submitted, j.id))
    options = Options(order=order, overdue_after=after, predictions=predictions)
    assert replayed(jobs, MACHINE, options, narrows=True) == replayed(jobs, MACHINE, options, narrows=False)


@pytest.mark.parametrize(("name", "blocked"), [("NASA-iPSC-1993-3.1-cln.swf.gz", 5), ("lublin_256.swf.gz", 1000)])
def test_the_vendored_traces_replay_as_with_the_whole_queue_scanned(name: str, blocked: int) -> None:
    trace = read_swf(TRACES / name)
    processors = trace.header_int("MaxProcs") or trace.header_int("MaxNodes") or 0
    jobs = trace_jobs(trace.records, processors).jobs
    narrowed, heads = replayed(jobs, processors, Options(), narrows=True)
    assert (narrowed, heads) == replayed(jobs, processors, Options(), narrows=False)
    assert len(heads) > blocked  # blocked passes, whose scans the shortcut reads (NASA is lightly loaded)
