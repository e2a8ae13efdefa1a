"""`infosvc simulate`'s GPU what-if as a user runs it (`--hosts`, `--gpus-per-host`, `--gpu-jobs`,
`--gpus-per-job`): jobs that wait for GPUs, never more GPUs in use than the hosts have (read back
from the --schedule CSV), the GPU figures, the options refused with clear words, and a run without
them the same, byte for byte, as before the what-if existed."""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
NASA = TRACES / "NASA-iPSC-1993-3.1-cln.swf.gz"
LUBLIN = TRACES / "lublin_256.swf.gz"
# 8 processors; jobs 1-6 of 1 processor at 0 for 10 s; job 7 of 4 processors at 1 for 5 s
BUSY = "; MaxProcs: 8\n" + "".join(
    f"{n} {0 if n < 7 else 1} -1 {10 if n < 7 else 5} {1 if n < 7 else 4} -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"
    for n in range(1, 8))


def simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "infosvc", "simulate", *args], capture_output=True, text=True,
                          timeout=300)


def schedule_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def most_gpus_in_use(rows: list[dict[str, str]]) -> tuple[int, dict[str, int]]:
    """The most GPUs in use at any instant, in all and on each host (ends before starts at one instant)."""
    events = sorted([(float(r["start"]), 1, r) for r in rows] + [(float(r["end"]), -1, r) for r in rows],
                    key=lambda e: (e[0], e[1]))
    total, most = 0, 0
    per_host: dict[str, int] = {}
    most_host: dict[str, int] = {}
    for _, sign, row in events:
        gpus, hosts = int(row["gpus"]), row["hosts"].split()
        total += sign * gpus
        most = max(most, total)
        for host in hosts:
            per_host[host] = per_host.get(host, 0) + sign * (gpus // len(hosts))
            most_host[host] = max(most_host.get(host, 0), per_host[host])
    return most, most_host


def test_gpu_jobs_wait_for_gpus_and_none_are_over_committed(tmp_path: Path) -> None:
    trace = tmp_path / "busy.swf"
    trace.write_text(BUSY)
    out = tmp_path / "schedule.csv"
    # 2 hosts of 4 processors and 1 GPU; every job asks 1 GPU: two at a time, 6 processors idle
    done = simulate(str(trace), "--hosts", "2", "--gpus-per-host", "1", "--gpu-jobs", "1", "--schedule", str(out))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["hosts"], summary["gpus"], summary["gpu_jobs"], summary["jobs"]) == (2, 2, 7, 7)
    rows = schedule_rows(out)
    assert list(rows[0]) == ["job_id", "submit", "start", "end", "processors", "gpus", "hosts"]
    starts = {r["job_id"]: float(r["start"]) for r in rows}
    assert sorted(starts.values()) == [0, 0, 10, 10, 20, 20, 30]  # all waited for a GPU, none for processors
    assert most_gpus_in_use(rows) == (2, {"h0": 1, "h1": 1})
    job7 = next(r for r in rows if r["job_id"] == "7")
    assert (job7["processors"], job7["gpus"]) == ("4", "1") and job7["hosts"] in ("h0", "h1")  # 4 fit on one host
    assert summary["gpu_utilization"] == pytest.approx((6 * 10 + 5) / (2 * 35))
    assert summary["gpu_jobs_mean_wait_seconds"] == summary["mean_wait_seconds"] > 0
    assert summary["other_jobs_mean_wait_seconds"] == 0.0


def test_a_real_trace_with_scarce_gpus(tmp_path: Path) -> None:
    out = tmp_path / "schedule.csv"
    done = simulate(str(NASA), "--hosts", "16", "--gpus-per-host", "1", "--gpu-jobs", "0.5", "--quiet",
                    "--schedule", str(out))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    rows = schedule_rows(out)
    assert len(rows) == summary["jobs"] == 18066
    assert summary["gpus"] == 16 and 0 < summary["gpu_utilization"] < 1
    assert summary["gpu_jobs"] == sum(1 for r in rows if int(r["gpus"]) > 0)
    most, per_host = most_gpus_in_use(rows)
    assert most == 16 and set(per_host.values()) == {1}  # every GPU used at some time, none twice at once
    # the GPU jobs wait longer than the rest, which take any free processor
    assert summary["gpu_jobs_mean_wait_seconds"] > summary["other_jobs_mean_wait_seconds"]


@pytest.mark.parametrize("args,words", [
    (["--gpus-per-host", "4"], "--gpus-per-host: GPUs are on hosts: say --hosts N too"),
    (["--gpu-jobs", "0.5", "--gpus-per-job", "2"], "--gpu-jobs, --gpus-per-job: GPUs are on hosts: say --hosts N"),
    (["--hosts", "0"], "--hosts must be 1 to 1,000,000"),
    (["--hosts", "9"], "--hosts 9: more hosts than the machine's 8 processors"),
    (["--hosts", "2", "--gpus-per-host", "-1"], "--gpus-per-host must be 0 to 1024"),
    (["--hosts", "2", "--gpus-per-host", "1", "--gpu-jobs", "1.5"], "--gpu-jobs is a fraction of the jobs: 0 to 1"),
    (["--hosts", "2", "--gpus-per-host", "1", "--gpu-jobs", "nan"], "--gpu-jobs is a fraction of the jobs: 0 to 1"),
    (["--hosts", "2", "--gpu-jobs", "0.5"], "jobs would ask GPUs of hosts that have none (say --gpus-per-host G)"),
    (["--hosts", "2", "--gpus-per-host", "2", "--gpu-jobs", "0.5", "--gpus-per-job", "3"],
     "--gpus-per-job 3: more than a host's 2 GPUs"),
    (["--hosts", "2", "--gpus-per-host", "2", "--gpus-per-job", "0"], "--gpus-per-job must be at least 1"),
    (["--hosts", "two"], "argument --hosts: invalid int value: 'two'"),
    (["--hosts", "2", "--gpu-jobs", "half"], "argument --gpu-jobs: invalid float value: 'half'"),
])
def test_bad_what_ifs_are_refused(tmp_path: Path, args: list[str], words: str) -> None:
    trace = tmp_path / "busy.swf"
    trace.write_text(BUSY)
    done = simulate(str(trace), *args)
    assert done.returncode == 2 and done.stdout == ""
    assert words in done.stderr and "Traceback" not in done.stderr, done.stderr


#: sha256 of `--schedule`'s CSV for runs without the what-if, made by the code before it existed:
#: they are to stay as they were (a change of policy that moves a start changes them: say why)
BEFORE = {
    (NASA, "easy"): "7b2f628993d5c4f02ab46219646ea564c7dbe2b6466d860f0557333b0204f0bb",
    (LUBLIN, "fcfs"): "cc9350c0688eff43d753dcf6e24c674b44e80d7b3a784a159c1cfb6ebe9a7ac4",
}


@pytest.mark.parametrize("trace,policy", list(BEFORE))
def test_without_the_what_if_nothing_changes(tmp_path: Path, trace: Path, policy: str) -> None:
    out = tmp_path / "schedule.csv"
    done = simulate(str(trace), "--policy", policy, "--quiet", "--schedule", str(out))
    assert done.returncode == 0, done.stderr
    assert hashlib.sha256(out.read_bytes()).hexdigest() == BEFORE[(trace, policy)]
    assert out.read_bytes().startswith(b"job_id,submit,start,end,processors\r\n")
    assert list(json.loads(done.stdout)) == ["jobs", "utilization", "mean_wait_seconds", "mean_bounded_slowdown",
                                             "max_wait_seconds", "makespan_seconds", "skipped", "processors",
                                             "policy", "malformed_lines", "seconds"]
