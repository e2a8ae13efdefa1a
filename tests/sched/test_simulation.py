"""`infosvc simulate`'s loop (infosvc/sched/simulation.py) and its SWF reader (infosvc/codec/swf.py):
tiny traces scheduled by hand, job by job, and the two real traces run to the end with the
invariants checked."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.codec.swf import MAX_CHARS, MAX_LINE, MAX_LINES, parse_swf, read_swf
from infosvc.sched import Policy
from infosvc.sched.simulation import Outcome, jobs_of, simulate, summarize, trace_jobs

# the two vendored traces (tests/fixtures/traces), gzipped (read as they are: the reader takes gzip)
TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
NASA = TRACES / "NASA-iPSC-1993-3.1-cln.swf.gz"
LUBLIN = TRACES / "lublin_256.swf.gz"


def line(number: int, submit: float, run: float, processors: int, requested_time: float = -1,
         requested_processors: int = -1) -> str:
    fields = [number, submit, -1, run, processors, -1, -1, requested_processors, requested_time, -1, 1, 1, 1, -1, -1,
              -1, -1, -1]
    return " ".join(str(f) for f in fields)


def starts(lines: list[str], processors: int, policy: Policy) -> dict[int, float]:
    trace = parse_swf(iter(lines))
    assert trace.malformed == 0, trace.problems
    jobs = trace_jobs(trace.records, processors)
    return {o.job.number: o.start for o in simulate(jobs.jobs, processors, policy)}


def test_fcfs_blocks_behind_the_first_job_that_does_not_fit() -> None:
    # 4 processors. A (3 for 10 s) at 0; B (4) at 1 cannot start until 10; C (1 for 2 s) at 2
    # would fit beside A, but FCFS keeps it behind B: B 10..15, C 15.
    trace = [line(1, 0, 10, 3), line(2, 1, 5, 4), line(3, 2, 2, 1)]
    assert starts(trace, 4, Policy.FCFS) == {1: 0, 2: 10, 3: 15}
    # EASY: B is reserved at 10 (A's end); C ends (2 + 2) before that: backfilled at once.
    assert starts(trace, 4, Policy.EASY) == {1: 0, 2: 10, 3: 2}


def test_easy_backfills_by_the_extra_processors_clause() -> None:
    # 6 processors. A (4 for 10 s) at 0; B (4) at 1: shadow 10, when 6 are free: 2 extra.
    # C (2 for 100 s) at 2 ends long after 10 but needs no more than the extra: starts at 2, using
    # them up. D (1 for 5 s) at 3: nothing free (A 4, C 2). At 10 B starts (4 of the 4 free); D
    # waits for B's end at 15.
    trace = [line(1, 0, 10, 4), line(2, 1, 5, 4), line(3, 2, 100, 2), line(4, 3, 5, 1)]
    assert starts(trace, 6, Policy.EASY) == {1: 0, 2: 10, 3: 2, 4: 15}


def test_a_job_that_would_delay_the_reservation_waits() -> None:
    # 6 processors. As above, but C needs 3: more than the 2 extra, and it would run past 10.
    trace = [line(1, 0, 10, 4), line(2, 1, 5, 4), line(3, 2, 100, 2, requested_processors=3)]
    assert starts(trace, 6, Policy.EASY) == {1: 0, 2: 10, 3: 15}


def test_a_job_that_ends_before_its_estimate() -> None:
    # 5 processors. A (4, estimate 100, runs 10) at 0; B (5) at 1: shadow 100 by A's estimate.
    # C (1 for 50 s, estimate 50) at 2 ends (52) before 100: backfilled at 2. A ends at 10, not 100;
    # B, needing all 5, waits for C's end at 52.
    trace = [line(1, 0, 10, 4, requested_time=100), line(2, 1, 5, 5, requested_time=5),
             line(3, 2, 50, 1, requested_time=50)]
    assert starts(trace, 5, Policy.EASY) == {1: 0, 2: 52, 3: 2}
    assert starts(trace, 5, Policy.FCFS) == {1: 0, 2: 10, 3: 15}


def test_a_completion_and_an_arrival_at_the_same_instant() -> None:
    # A ends at 10 as B arrives: completions first, so B starts at 10.
    assert starts([line(1, 0, 10, 4), line(2, 10, 5, 4)], 4, Policy.FCFS) == {1: 0, 2: 10}


def test_the_queue_orders_equal_submit_times_by_job_number() -> None:
    # 9 and 10 arrive together; 10 < 9 as text, not as numbers: 9 goes first.
    assert starts([line(10, 0, 5, 4), line(9, 0, 5, 4)], 4, Policy.FCFS) == {9: 0, 10: 5}


def test_conventions_processors_estimate_run_and_skipped() -> None:
    trace = parse_swf(iter([
        line(1, 0, 50, 2, requested_time=20, requested_processors=3),  # 3 processors, killed at 20
        line(2, 0, 0, 2),  # run time 0: skipped
        line(3, 0, 5, 0),  # no processors: skipped
        line(4, 0, 5, 9),  # wider than the machine: skipped
        line(5, 0, 5, 2),  # estimate: the run time
    ]))
    jobs = trace_jobs(trace.records, 8)
    assert jobs.skipped == 3
    [one, five] = jobs.jobs
    assert (one.processors, one.estimate, one.run) == (3, 20, 20)
    assert (five.processors, five.estimate, five.run) == (2, 5, 5)
    outcomes = simulate(jobs.jobs, 8, Policy.FCFS)
    summary = summarize(outcomes, jobs.skipped, 8, Policy.FCFS)
    # both start at 0; makespan 20; work 3 x 20 + 2 x 5 = 70 of 8 x 20
    assert (summary.jobs, summary.skipped, summary.makespan_seconds) == (2, 3, 20)
    assert summary.utilization == pytest.approx(70 / 160)
    assert summary.mean_wait_seconds == 0 and summary.mean_bounded_slowdown == 1.0


def test_bounded_slowdown_by_hand() -> None:
    # 2 processors; A (2 for 100 s) at 0; B (1 for 4 s) at 0 waits 100: max(1, (100 + 4) / 10) = 10.4
    outcomes = simulate(jobs_of([(1, 0, 100, 2, -1, -1), (2, 0, 4, 1, -1, -1)], 2).jobs, 2, Policy.FCFS)
    summary = summarize(outcomes, 0, 2, Policy.FCFS)
    assert summary.mean_bounded_slowdown == pytest.approx((1 + 10.4) / 2)
    assert summary.mean_wait_seconds == 50


# --- the reader ------------------------------------------------------------------------------------

def test_header_malformed_lines_and_gzip(tmp_path: Path) -> None:
    text = "\n".join([
        "; Version: 2.2", "; Information: http://a.example/", ";              http://b.example/",
        "; MaxNodes: 64", "; MaxProcs: 128", "; Note: one", "; Note: two", "",
        line(1, 0, 10, 4), "1 2 3", line(2, 5, 10, 4).replace(" 10 ", " ten ", 1), line(3, 6, 1, 1),
    ]) + "\n"
    trace = parse_swf(io.StringIO(text))
    assert trace.header["Information"] == "http://a.example/\nhttp://b.example/"
    assert trace.header["Note"] == "one\ntwo"
    assert (trace.header_int("MaxProcs"), trace.header_int("MaxNodes"), trace.header_int("Version")) == (128, 64, None)
    assert [r.job for r in trace.records] == [1, 3] and trace.records[1].line == 12
    assert trace.malformed == 2
    assert trace.problems[0] == "line 10: 3 fields, not 18: '1 2 3'"
    assert trace.problems[1].startswith("line 11: field 4 (run_time) is not a number: 'ten'")
    packed = tmp_path / "t.swf.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    assert [r.job for r in read_swf(packed).records] == [1, 3]
    (tmp_path / "bad.gz").write_bytes(b"\x1f\x8bnot gzip at all")
    with pytest.raises(OSError, match="not a readable gzip file"):
        read_swf(tmp_path / "bad.gz")



def test_a_header_of_repeated_keys_is_read_whole_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # a review: each repeated key (or continuation) joined its whole value again, so an 18 KB gzip
    # of 80,000 `; Note: x` lines took 86 s; the values are joined once now, and bounded
    from infosvc.codec import swf

    text = "".join(f"; Note: n{i}\n" for i in range(3000)) + ";   more\n" + line(1, 0, 10, 4) + "\n"
    trace = parse_swf(io.StringIO(text))
    assert trace.header["Note"] == "\n".join([*(f"n{i}" for i in range(3000)), "more"])
    assert [r.job for r in trace.records] == [1] and trace.malformed == 0
    monkeypatch.setattr(swf, "MAX_HEADER_CHARS", 100)
    cut = parse_swf(io.StringIO(text))
    kept = cut.header["Note"].split("\n")
    assert kept == [f"n{i}" for i in range(len(kept))] and sum(len(v) + 5 for v in kept) <= 100
    assert cut.malformed == 1 and "the header is past 100 characters" in cut.problems[0]
    assert [r.job for r in cut.records] == [1]


@pytest.mark.parametrize("value", ["1e308", "-1e308", "9007199254740992", "1.5e17", "-9007199254740993"])
def test_a_value_past_what_a_float_holds_exactly_is_malformed(value: str) -> None:
    # a review: a run time of 1e308 (finite) made an end time of infinity: `simulate --schedule`
    # failed with OverflowError, and its summary said a makespan of Infinity, not JSON
    lines = [line(1, 0, 10, 4), line(2, 1, 10, 4).replace(" 10 ", f" {value} ", 1), line(3, 2, 1.5, 1)]
    trace = parse_swf(iter(lines))
    assert [r.job for r in trace.records] == [1, 3] and trace.malformed == 1, trace.problems
    assert trace.problems == [f"line 2: field 4 (run_time) is out of range (2**53 or more): {value!r}"]
    assert trace.records[1].run_time == 1.5


@pytest.mark.parametrize("filler", ["\n", "   \n", "; a comment\n", ";\n"])
def test_every_line_counts_against_the_line_cap(filler: str) -> None:
    """Blank and comment lines cost a read as a job line does: a gzip of nothing but newlines
    unpacks to billions of them, each read in turn."""
    whole = parse_swf(io.StringIO(filler * 4 + line(1, 0, 10, 4) + "\n"), max_lines=5)
    assert whole.too_large is None and [r.job for r in whole.records] == [1]
    cut = parse_swf(io.StringIO(filler * 5 + line(1, 0, 10, 4) + "\n"), max_lines=5)
    assert cut.too_large is not None and "more than 5 lines" in cut.too_large and cut.records == []


def test_characters_count_against_the_size_cap_long_lines_too() -> None:
    job = line(1, 0, 10, 4) + "\n"
    assert parse_swf(io.StringIO(job * 2), max_chars=2 * len(job)).too_large is None
    over = parse_swf(io.StringIO(job * 3), max_chars=2 * len(job))
    assert over.too_large is not None and f"more than {2 * len(job)} characters" in over.too_large
    # a line longer than MAX_LINE is skipped in pieces, and every piece counts
    assert parse_swf(io.StringIO("x" * (MAX_LINE * 4) + "\n"), max_chars=MAX_LINE * 3).too_large is not None
    assert parse_swf(iter(["x" * 100 + "\n"] * 3), max_chars=250).too_large is not None  # lines, not a file


def test_read_swf_refuses_a_trace_past_the_caps_as_an_os_error(tmp_path: Path) -> None:
    packed = tmp_path / "blank.swf.gz"
    packed.write_bytes(gzip.compress(b"\n" * 1000))
    with pytest.raises(OSError, match="more than 999 lines"):
        read_swf(packed, max_lines=999)
    assert read_swf(packed, max_lines=1000).records == []


def test_the_real_traces_are_well_within_the_caps() -> None:
    for path in (NASA, LUBLIN):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            text = handle.read()
        assert text.count("\n") * 100 < MAX_LINES and len(text) * 100 < MAX_CHARS

# --- the real traces -------------------------------------------------------------------------------

def check_invariants(outcomes: list[Outcome], processors: int, policy: Policy) -> None:
    events = sorted([(o.start, o.job.processors) for o in outcomes] + [(o.end, -o.job.processors) for o in outcomes],
                    key=lambda event: (event[0], event[1]))  # ends (negative) before starts at one instant
    held = 0
    for _, change in events:
        held += change
        assert 0 <= held <= processors
    assert all(o.start >= o.job.submitted for o in outcomes)
    if policy is Policy.FCFS:
        ordered = sorted(outcomes, key=lambda o: (o.job.submitted, o.job.id))
        assert all(a.start <= b.start for a, b in zip(ordered, ordered[1:]))


@pytest.mark.parametrize("path,processors,skipped", [(NASA, 128, 173), (LUBLIN, 256, 0)])
@pytest.mark.parametrize("policy", [Policy.FCFS, Policy.EASY])
def test_real_traces_run_to_the_end(path: Path, processors: int, skipped: int, policy: Policy) -> None:
    trace = read_swf(path)
    assert trace.malformed == 0
    assert (trace.header_int("MaxProcs") or trace.header_int("MaxNodes")) == processors
    jobs = trace_jobs(trace.records, processors)
    assert jobs.skipped == skipped
    outcomes = simulate(jobs.jobs, processors, policy)
    assert len(outcomes) == len(jobs.jobs) == len(trace.records) - skipped
    check_invariants(outcomes, processors, policy)


# --- against a second simulator, written from the conventions' words alone (docs/simulation.md) ------------------------------

def reference(jobs: list[tuple[int, int, int, int, int]], processors: int, policy: Policy) -> dict[int, int]:
    """(number, submit, processors, estimate, run) each: the start of each job, by the rules as
    the conventions state them, with no shortcut: at each instant completions, arrivals, one pass."""
    pending = sorted(jobs, key=lambda j: (j[1], j[0]))
    queue: list[tuple[int, int, int, int, int]] = []
    running: list[tuple[int, int, int]] = []  # (start + estimate, start + run, processors)
    start: dict[int, int] = {}
    while pending or running:
        now = min([p[1] for p in pending[:1]] + [r[1] for r in running])
        running = [r for r in running if r[1] != now]
        while pending and pending[0][1] == now:
            queue.append(pending.pop(0))
        free = processors - sum(r[2] for r in running)
        while queue and queue[0][2] <= free:  # fcfs, and the first part of easy
            job = queue.pop(0)
            start[job[0]] = now
            running.append((now + job[3], now + job[4], job[2]))
            free -= job[2]
        if policy is Policy.EASY and queue:
            head = queue[0]
            # shadow: the earliest end (by estimate) at which enough are free for the head
            available, shadow = free, None
            for end, _, count in sorted(running):
                available += count
                if available >= head[2]:
                    shadow = end
                    break
            if shadow is not None:
                extra = free + sum(r[2] for r in running if r[0] <= shadow) - head[2]
                for job in list(queue[1:]):
                    if job[2] > free:
                        continue
                    if now + job[3] <= shadow:
                        pass
                    elif job[2] <= extra:
                        extra -= job[2]
                    else:
                        continue
                    queue.remove(job)
                    start[job[0]] = now
                    running.append((now + job[3], now + job[4], job[2]))
                    free -= job[2]
    return start


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 8), st.integers(1, 30), st.integers(1, 30)),
                min_size=1, max_size=25),
       st.sampled_from([Policy.FCFS, Policy.EASY]), st.data())
def test_the_same_schedule_as_a_second_simulator(raw: list[tuple[int, int, int, int]], policy: Policy,
                                                 data: st.DataObject) -> None:
    # numbers in any order, negative ones too: one instant's arrivals go by number
    numbers = data.draw(st.lists(st.integers(-10**6, 10**6), min_size=len(raw), max_size=len(raw), unique=True))
    jobs = [(number, submit, width, estimate, min(run, estimate))
            for number, (submit, width, estimate, run) in zip(numbers, raw)]
    ours = simulate(jobs_of([(n, s, r, w, -1, e) for n, s, w, e, r in jobs], 8).jobs, 8, policy)
    assert {o.job.number: o.start for o in ours} == reference(jobs, 8, policy)


def test_progress_is_told_as_jobs_start() -> None:
    told: list[tuple[int, float]] = []
    jobs = jobs_of([(n, n * 10, 5, 1, -1, -1) for n in range(1, 6)], 1).jobs
    simulate(jobs, 1, Policy.EASY, lambda done, now: told.append((done, now)), every=0.0)
    assert told == [(n, n * 10) for n in range(1, 6)]
    with pytest.raises(ValueError, match="more than the machine"):
        simulate(jobs_of([(1, 0, 5, 2, -1, -1)], 2).jobs, 1, Policy.FCFS)


def test_fields_past_the_eighteenth_are_read_past_and_counted() -> None:
    """The MetaCentrum archive appends each job's node list, queue and properties after SWF's 18
    fields: the 18 are read, the rest dropped and counted once, the line no malformed one."""
    extra = " zewura7.cerit-sc.cz q_2h :ppn=4:mem=4gb:cl_zewura"
    text = "\n".join(["; MaxProcs: 8", line(1, 0, 10, 4) + extra, line(2, 5, 10, 4), line(3, 6, 1, 1) + " a b",
                      "1 2 3"]) + "\n"
    trace = parse_swf(io.StringIO(text))
    assert [r.job for r in trace.records] == [1, 2, 3]
    plain = parse_swf(io.StringIO("; MaxProcs: 8\n" + line(1, 0, 10, 4) + "\n")).records[0]  # also line 2
    assert trace.records[0] == plain
    assert (trace.extra_fields, trace.first_extra_line) == (2, 2)
    assert trace.malformed == 1 and trace.problems == ["line 5: 3 fields, not 18: '1 2 3'"]


@pytest.mark.parametrize("comment", [";Note:" + " x" * 17, ";1" + " 1" * 17])
def test_a_run_of_job_lines_is_read_at_once_only_when_every_line_is_a_job(comment: str) -> None:
    """A file's job lines after its header are read a batch at a time; a comment of 18 words, a
    blank line, a short or a long line among them sends the batch to the line-at-a-time reading,
    which reads each as before (a comment is no job, the line numbers are the file's)."""
    jobs = [line(n, n, 10, 1) for n in range(1, 7)]
    for text, numbers, lines in [
        ("\n".join(["; MaxProcs: 8", *jobs]) + "\n", [1, 2, 3, 4, 5, 6], [2, 3, 4, 5, 6, 7]),
        ("\n".join(["; MaxProcs: 8", *jobs[:3], comment, *jobs[3:]]) + "\n", [1, 2, 3, 4, 5, 6], [2, 3, 4, 6, 7, 8]),
        ("\n".join([*jobs[:2], comment]) + "\n", [1, 2], [1, 2]),
        ("\n".join([comment, *jobs[:2], "", jobs[2], "  " + jobs[3] + "  "]) + "\n", [1, 2, 3, 4], [2, 3, 5, 6]),
    ]:
        trace = parse_swf(io.StringIO(text))
        assert [r.job for r in trace.records] == numbers
        assert [r.line for r in trace.records] == lines
        assert trace.malformed == 0 and trace.records[0] == parse_swf(iter([jobs[0]])).records[0]._replace(
            line=trace.records[0].line)
    assert "MaxProcs" in parse_swf(io.StringIO(f"; MaxProcs: 8\n{jobs[0]}\n")).header


def test_a_number_the_trace_repeats_is_so_many_jobs_in_the_trace_s_order() -> None:
    # ten and more of one number at one instant: their ids' suffixes sort as the file has them
    jobs = jobs_of([(5, 0, run, 1, -1, -1) for run in range(1, 13)], 1).jobs
    assert [job.run for job in jobs] == list(range(1, 13)) and len({job.id for job in jobs}) == 12
    starts = [o.start for o in simulate(jobs, 1, Policy.FCFS)]
    assert starts == sorted(starts)
