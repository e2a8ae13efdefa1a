"""bench/log_to_swf.py: a Torque accounting log or an sacct dump read as the SWF trace its
docstring's conventions give, which the simulator then reads (the held-out machines outside the
Parallel Workloads Archive are judged on such traces, so a wrong field would be a wrong verdict)."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from infosvc.codec.swf import parse_swf, read_swf
from infosvc.sched.simulation import trace_jobs
from support import ROOT, bench_module


def converter() -> ModuleType:
    return bench_module("log_to_swf")


def torque_end(ident: str, user: str, qtime: int, start: int, end: int, nodes: str = "1:ppn=1",
               walltime: str = "01:00:00", slots: int | None = 1, exit_status: int = 0) -> str:
    slot = f" total_execution_slots={slots}" if slots is not None else ""
    return (f"10/01/2017 00:01:38;E;{ident};user={user} group=g{user} queue=batch ctime={qtime} qtime={qtime} "
            f"etime={qtime} start={start} exec_host=c3/0+c4/1 Resource_List.nodes={nodes} "
            f"Resource_List.walltime={walltime}{slot} end={end} Exit_status={exit_status} "
            f"resources_used.walltime=00:00:02\n")


def convert(lines: list[str], fmt: str, processors: int = 64) -> tuple[str, dict[str, int]]:
    out = io.StringIO()
    counts = converter().convert(lines, fmt, processors, "test machine", "test.log", out)
    return out.getvalue(), dict(counts)


def records(text: str) -> list[list[int]]:
    return [[int(field) for field in line.split()] for line in text.splitlines() if not line.startswith(";")]


def test_a_torque_end_record_is_one_job_with_the_fields_swf_gives_them() -> None:
    text, counts = convert([
        torque_end("9.m1", "erin", 900, 900, 1000),  # the log's earliest end: it began before it
        torque_end("10.m1", "alice", 1000, 1100, 1400, nodes="2:ppn=16", walltime="1-02:00:00", slots=32),
        "10/01/2017 00:00:01;Q;11.m1;queue=batch\n",  # queued, not a run: no job
        torque_end("12.m1", "bob", 1005, 1005, 1010, nodes="c3:ppn=4+c4:ppn=4", slots=None, exit_status=271),
        torque_end("13.m1", "alice", 1200, 1300, 1500, walltime="UNLIMITED"),
    ], "torque")
    assert counts == {"read": 4, "kept": 3, "submitted before the log's earliest end": 1}
    assert records(text) == [
        # job, submit, wait, run, allocated, -, -, requested, limit, -, status, user, group, -, queue, ...
        [1, 0, 100, 300, 32, -1, -1, 32, 26 * 3600, -1, 1, 1, 1, -1, 1, -1, -1, -1],
        # no total_execution_slots: exec_host's entries; a failed job's status 0; named nodes count 1 each
        [2, 5, 0, 5, 2, -1, -1, 8, 3600, -1, 0, 2, 2, -1, 1, -1, -1, -1],
        [3, 200, 100, 200, 1, -1, -1, 1, -1, -1, 1, 1, 1, -1, 1, -1, -1, -1],
    ]
    assert "alice" not in text and "bob" not in text  # names are numbered, never written
    assert "; MaxProcs: 64" in text and "; UnixStartTime: 1000" in text


def test_jobs_submitted_before_the_logs_earliest_end_are_left_out() -> None:
    # the log holds what ended from t=400 on: a job queued before ran beside jobs it does not hold
    text, counts = convert([torque_end("1.m", "a", 100, 200, 600), torque_end("2.m", "a", 300, 300, 400),
                            torque_end("3.m", "a", 450, 450, 900), torque_end("4.m", "a", 700, 700, 900)], "torque")
    assert counts == {"read": 4, "kept": 2, "submitted before the log's earliest end": 2}
    assert [r[1] for r in records(text)] == [0, 250]


def test_a_torque_end_record_without_its_times_is_counted_not_a_crash() -> None:
    broken = torque_end("1.m", "a", 100, 200, 600).replace("start=200 ", "")
    text, counts = convert([broken, torque_end("2.m", "a", 100, 100, 100)], "torque")
    assert counts["an E record without qtime, start or end"] == 1 and counts["kept"] == 1


@pytest.mark.parametrize(("text", "seconds"), [("08:00:00", 28800), ("2-00:00:01", 172801), ("15:00", 900),
                                               ("59", 59), ("UNLIMITED", -1), ("Partition_Limit", -1), ("", -1),
                                               ("x-01:00:00", -1), ("1:2:3:4", -1)])
def test_time_limits_read_as_slurm_and_torque_write_them(text: str, seconds: int) -> None:
    assert converter().seconds_of(text) == seconds


@pytest.mark.parametrize(("exec_host", "slots"), [("c3/30", 1), ("c3/0-3+c4/0-3", 8), ("c3/0,2,5-6+c5/7", 5),
                                                  ("c3/0+c4/1", 2), ("", -1), ("c3/x", -1), ("c3/1-", -1)])
def test_torque_exec_hosts_as_slots(exec_host: str, slots: int) -> None:
    assert converter().exec_slots(exec_host) == slots


@pytest.mark.parametrize(("nodes", "processors"), [("1:ppn=1", 1), ("2:ppn=16", 32), ("3", 3), ("c3", 1),
                                                   ("c3:ppn=4+c4:ppn=4", 8), ("1:ppn=x", -1),
                                                   ("2:ppn=8:gpus=1", 16)])
def test_torque_node_requests_as_processors(nodes: str, processors: int) -> None:
    assert converter().requested_processors(nodes) == processors


SACCT_HEADER = "User|JobID|Submit|Start|End|Timelimit|ReqCPUS|ReqNodes|Account|Partition\n"


def test_an_sacct_dump_keeps_the_jobs_that_ran_and_reads_its_times_as_utc() -> None:
    text, counts = convert([
        SACCT_HEADER,
        "erin|99|2024-03-12T09:00:00|2024-03-12T09:00:00|2024-03-12T09:59:00|01:00:00|1|1|acct|epyc\n",
        "carol|100|2024-03-12T10:00:00|2024-03-12T10:00:05|2024-03-12T11:00:05|1-00:00:00|5|1|acct|epyc\n",
        "carol|100.batch|2024-03-12T10:00:00|2024-03-12T10:00:05|2024-03-12T11:00:05|1-00:00:00|5|1|acct|epyc\n",
        "dave|101_3|2024-03-12T10:30:00|None|None|20:00:00|1|1|acct|epyc\n",  # cancelled before it ran
        "dave|102|2024-03-12T10:30:00|Unknown|Unknown|20:00:00|1|1|acct|epyc\n",  # still pending
        "dave|103|2024-03-12T10:30:00|2024-03-12T10:31:00|2024-03-12T10:41:00|UNLIMITED|2|1|acct|epyc\n",
        "too|few|fields\n",
    ], "sacct")
    assert counts == {"read": 3, "kept": 2, "a job step": 1, "submitted before the log's earliest end": 1, "a line of another number of fields": 1,
                      "never started, or not ended (Start or End not a time)": 2}
    assert records(text) == [
        [1, 0, 5, 3600, 5, -1, -1, 5, 86400, -1, 1, 1, 1, -1, 1, -1, -1, -1],
        [2, 1800, 60, 600, 2, -1, -1, 2, -1, -1, 1, 2, 1, -1, 1, -1, -1, -1],
    ]
    assert "; UnixStartTime: 1710237600" in text  # 2024-03-12T10:00:00 read as UTC
    assert "carol" not in text and "dave" not in text and "erin" not in text


def test_an_sacct_dump_without_its_columns_is_refused_by_name() -> None:
    with pytest.raises(SystemExit, match="no Timelimit"):
        convert(["User|JobID|Submit|Start|End|ReqCPUS\n"], "sacct")


def test_the_command_writes_a_trace_the_simulator_reads(tmp_path: Path) -> None:
    log = tmp_path / "acct.gz"
    log.write_bytes(gzip.compress("".join(
        torque_end(f"{n}.m", f"u{n % 3}", 1000 + 60 * n, 1000 + 60 * n + 5, 1000 + 60 * n + 65, nodes="1:ppn=4",
                   slots=4) for n in range(20)).encode()))
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "log_to_swf.py"), "--format", "torque",
                           "--processors", "32", str(log)], capture_output=True, text=True, check=True)
    # the first two were submitted before the first end (at 1065)
    assert "20 jobs read, 18 kept; 2 left out: submitted before the log's earliest end" in done.stderr
    trace = parse_swf(io.StringIO(done.stdout))
    assert trace.malformed == 0 and trace.extra_fields == 0 and trace.header_int("MaxProcs") == 32
    jobs = trace_jobs(trace.records, 32).jobs
    assert len(jobs) == 18 and {job.processors for job in jobs} == {4} and {job.estimate for job in jobs} == {3600}
    (tmp_path / "t.swf").write_text(done.stdout)
    assert len(read_swf(tmp_path / "t.swf").records) == 18
