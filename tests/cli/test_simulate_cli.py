"""`infosvc simulate` as a user runs it: the summary, the schedule CSV, progress, the errors, and
the what-if against a live site's processors."""

from __future__ import annotations

import csv
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

from support.server import ServerFactory

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
TINY = """; MaxProcs: 4
; MaxNodes: 2
1 0 -1 10 3 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1
2 1 -1 5 4 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1
3 2 -1 2 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1
4 3 -1 2 9 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1
not a job line
"""


def simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "infosvc", "simulate", *args], capture_output=True, text=True,
                          timeout=120)


def test_summary_and_schedule(tmp_path: Path) -> None:
    trace = tmp_path / "tiny.swf"
    trace.write_text(TINY)
    out = tmp_path / "schedule.csv"
    done = simulate(str(trace), "--policy", "easy", "--schedule", str(out))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    # job 4 (9 processors) is wider than MaxProcs 4: skipped; C backfills at 2 (see test_simulation)
    assert {k: summary[k] for k in ("jobs", "skipped", "makespan_seconds", "processors", "policy",
                                    "malformed_lines")} == {
        "jobs": 3, "skipped": 1, "makespan_seconds": 15, "processors": 4, "policy": "easy", "malformed_lines": 1}
    assert summary["mean_wait_seconds"] == (0 + 9 + 0) / 3
    assert summary["utilization"] == (30 + 20 + 2) / (4 * 15)
    assert "tiny.swf: line 7: 4 fields, not 18: 'not a job line' (left out)" in done.stderr
    with out.open() as handle:
        rows = list(csv.reader(handle))
    assert rows == [["job_id", "submit", "start", "end", "processors"], ["1", "0", "0", "10", "3"],
                    ["2", "1", "10", "15", "4"], ["3", "2", "2", "4", "1"]]
    fcfs = json.loads(simulate(str(trace), "--policy", "fcfs", "--processors", "8", "--quiet").stdout)
    assert fcfs["processors"] == 8 and fcfs["skipped"] == 1 and fcfs["policy"] == "fcfs"


def test_a_trace_with_fields_past_swfs_18_is_simulated_with_one_warning(tmp_path: Path) -> None:
    trace = tmp_path / "metacentrum.swf"
    lines = TINY.replace("not a job line\n", "").splitlines()
    trace.write_text("\n".join(l + " node17 q_1d :ppn=1" if l and not l.startswith(";") else l for l in lines) + "\n")
    done = simulate(str(trace), "--policy", "easy", "--quiet")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["jobs"], summary["malformed_lines"]) == (3, 0)
    warnings = [w for w in done.stderr.splitlines() if "past SWF's 18" in w]
    assert len(warnings) == 1 and "4 job lines have fields past SWF's 18" in warnings[0], done.stderr


def test_a_real_trace_gzipped() -> None:
    done = simulate(str(TRACES / "NASA-iPSC-1993-3.1-cln.swf.gz"), "--policy", "fcfs")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["jobs"], summary["skipped"], summary["processors"]) == (18066, 173, 128)


def test_errors(tmp_path: Path) -> None:
    missing = simulate(str(tmp_path / "nope.swf"))
    assert missing.returncode == 1 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr
    headless = tmp_path / "headless.swf"
    headless.write_text("1 0 -1 10 3 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n")
    done = simulate(str(headless))
    assert done.returncode == 2 and "--processors N" in done.stderr
    assert simulate(str(headless), "--processors", "0").returncode == 2
    assert simulate(str(headless), "--policy", "sjf").returncode == 2



def test_a_gzip_of_blank_lines_is_refused_in_seconds(tmp_path: Path) -> None:
    """10 KB of gzip unpack to 10 million newlines (100 MB would be billions): read up to the cap,
    then a clear refusal, not minutes of reading and a summary of no jobs."""
    from infosvc.codec.swf import MAX_LINES

    blank = tmp_path / "blank.swf.gz"
    blank.write_bytes(gzip.compress(b"\n" * (MAX_LINES + 1), 9))
    started = time.monotonic()
    done = simulate(str(blank), "--processors", "4")
    assert time.monotonic() - started < 60
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert f"blank.swf.gz: cannot read: more than {MAX_LINES:,} lines" in done.stderr, done.stderr
    assert "blank and comment lines count" in done.stderr and "Traceback" not in done.stderr

def test_what_if_against_a_live_site(serve_app: ServerFactory, tmp_path: Path) -> None:
    server = serve_app(agents=3)
    for name, processors in (("n0", 4), ("n1", 4), ("n2", 8)):
        server.report(name, server.agent_token(), processors=processors)
    assert server.admin("n2", "pause").status == 200  # Paused: still the site's, so counted
    trace = tmp_path / "tiny.swf"
    trace.write_text(TINY)
    done = simulate(str(trace), "--site", "--server", server.url)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["processors"] == 16 and summary["skipped"] == 0  # job 4's 9 processors fit now
