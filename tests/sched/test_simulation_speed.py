"""What `infosvc simulate`'s speed rests on, held as behaviour rather than timed (timings on a
shared machine prove little; bench/simulate_vs_plain.py times it): the plain baseline of the
bench gives the same schedule, so it is a fair one; the reader's chunks and batches read a trace
as line by line would; the replay's work does not grow with the machine's processors; and the
command imports nothing but what a replay needs."""

from __future__ import annotations

import gc
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from infosvc.codec.swf import MAX_LINE, parse_swf, read_swf
from infosvc.sched import Policy
from infosvc.sched.simulation import simulate, trace_jobs
from support import ROOT, bench_module

TRACES = ROOT / "tests" / "fixtures" / "traces"
NASA = TRACES / "NASA-iPSC-1993-3.1-cln.swf.gz"
LUBLIN = TRACES / "lublin_256.swf.gz"


def plain_sim() -> ModuleType:
    return bench_module("plain_sim")


@pytest.mark.parametrize("path", [NASA, LUBLIN], ids=["nasa", "lublin"])
@pytest.mark.parametrize("policy", [Policy.FCFS, Policy.EASY])
def test_the_plain_baseline_gives_every_job_the_same_start(path: Path, policy: Policy) -> None:
    plain = plain_sim()
    records, header, malformed = plain.read(str(path))
    processors = plain.header_int(header, "MaxProcs") or plain.header_int(header, "MaxNodes")
    theirs, skipped = plain.simulate(records, processors, policy.value)
    trace = read_swf(path)
    jobs = trace_jobs(trace.records, processors)
    ours = simulate(jobs.jobs, processors, policy)
    assert (skipped, malformed) == (jobs.skipped, trace.malformed)
    assert {number: start for number, _, _, _, start in theirs} == {o.job.number: o.start for o in ours}


def test_a_trace_read_in_chunks_is_read_as_line_by_line(tmp_path: Path) -> None:
    """The NASA trace is 1.7 MB: its lines cross the reader's 1 MiB chunks. Read from a file (in
    chunks, job lines converted in batches) and from its lines one by one, the same trace; with a
    long line across a chunk's end, a NaN and a word that is no number among good lines, each
    reported at its line, in order, and the records around them kept in order."""
    text = gzip.decompress(NASA.read_bytes()).decode()
    lines = text.splitlines(keepends=True)
    good = lines[-1]
    bad = [good.replace(good.split()[1], "nan", 1), good.replace(good.split()[3], "ten", 1)]
    assert len(text) > 1 << 20  # more than one chunk
    mixed = lines[:5000] + [bad[0]] + lines[5000:9000] + ["7" * (MAX_LINE + 10) + "\n"] + lines[9000:] + [bad[1]]
    for body in (lines, mixed):
        path = tmp_path / "trace.swf"
        path.write_text("".join(body))
        chunked, by_line = read_swf(path), parse_swf(iter(body))
        assert chunked.records == by_line.records and chunked.header == by_line.header
        assert chunked.problems == by_line.problems and chunked.malformed == by_line.malformed
    assert [problem.split(":")[0] for problem in chunked.problems] == ["line 5001", "line 9002", f"line {len(mixed)}"]
    assert "not a finite number" in chunked.problems[0] and "longer than" in chunked.problems[1]
    assert "not a number: 'ten'" in chunked.problems[2]
    assert len(chunked.records) == len(read_swf(NASA).records)  # the good lines, every one
    assert [r.line for r in chunked.records] == sorted(r.line for r in chunked.records)


def test_the_replay_does_no_work_per_processor() -> None:
    """A few jobs on a machine of a hundred million processors replay at once: nothing in the
    loop is per processor. (It kept a count per processor size and scanned it upward each time the
    queue emptied: on a large, lightly loaded machine nearly every pass; here, gigabytes and
    minutes.)"""
    processors = 100_000_000
    trace = parse_swf(iter([f"{n} {n * 10} -1 5 {size} -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"
                            for n, size in enumerate((1, processors, 3, 1), 1)]))
    started = time.process_time()
    for policy in (Policy.FCFS, Policy.EASY, Policy.PREDICTIVE):
        outcomes = simulate(trace_jobs(trace.records, processors).jobs, processors, policy)
        assert [o.start for o in outcomes] == [10, 20, 30, 40]
    assert time.process_time() - started < 1.0


def test_simulate_imports_only_what_a_replay_needs() -> None:
    """`infosvc simulate` builds only its own command and imports neither the other commands, the
    HTTP client, TLS nor SQLite: on a small trace, imports were as long as the replay. Nor
    `dataclasses` (which imports `inspect` and compiles each class's methods: a third of the
    imports), nor csv without --schedule."""
    code = ("import sys, io; from infosvc.cli import main; sys.stdout = io.StringIO(); "
            f"status = main(['simulate', {str(NASA)!r}, '--quiet']); sys.stdout = sys.__stdout__; "
            "print(status, sorted(m for m in sys.modules if m.startswith(('infosvc', 'ssl', 'sqlite3', 'http', "
            "'urllib.request', 'logging', 'dataclasses', 'inspect', 'csv'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    status, modules = done.stdout.split(" ", 1)
    assert status == "0"
    for absent in ("infosvc.cli.client", "infosvc.cli.jobs", "infosvc.cli.hosts", "infosvc.cli.status",
                   "infosvc.cli.ldif", "'ssl'", "sqlite3", "http.client", "urllib.request", "'logging'",
                   "'dataclasses'", "'inspect'", "'csv'", "infosvc.sched.prediction"):
        assert absent not in modules, (absent, modules)
    assert "infosvc.cli.simulate" in modules and "infosvc.sched.policy" in modules


def test_the_collector_is_on_again_after_a_run(capsys: pytest.CaptureFixture[str]) -> None:
    from infosvc.cli import main

    assert gc.isenabled()
    assert main(["simulate", str(LUBLIN), "--quiet", "--policy", "fcfs"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"] == 10000
    assert gc.isenabled()
    gc.disable()
    try:  # off before, off after: a caller's choice is kept
        assert main(["simulate", str(LUBLIN), "--quiet", "--policy", "fcfs"]) == 0
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_other_commands_are_still_there() -> None:
    from infosvc.cli import parser

    commands = parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"simulate", "submit", "jobs", "status", "ldif", "hosts", "match", "serve"} <= set(commands)
    assert set(parser("simulate")._subparsers._group_actions[0].choices) >= {"simulate"}  # type: ignore[union-attr]
    assert "jobs" not in parser("simulate")._subparsers._group_actions[0].choices  # type: ignore[union-attr]
