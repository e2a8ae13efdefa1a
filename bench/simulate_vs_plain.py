"""`infosvc simulate` against a plain simulator (bench/plain_sim.py), whole process against whole
process: the interpreter's start, the imports, reading the trace, the replay and the summary all
count, as they do for someone who runs it.

Each case is a trace, a machine size and a policy. Both simulators are first run once with
`--schedule` and their schedules compared (the same start for every job, or the case is marked
DIFFERENT: a baseline that decides otherwise is not the same work). Then they are run `--runs`
times each, alternating (ours, plain, plain, ours, ours, ...), and the median wall time and the median
CPU time (user + system, of the child) of each is kept: on a shared machine the CPU time moves
less than the wall time. The least CPU time of each is kept too (its ratio the next-to-last column):
other work on the machine only adds to a run's time, so the least is the run it disturbed least.
And the median of the pairs' ratios (each run of ours against the plain run beside it, which of
the two goes first alternating): a pair shares the machine's load of that moment, so a slow
minute moves both (the last column).

Cases: the two vendored traces (NASA iPSC, 128 processors; Lublin, 256), the NASA trace on 2,176
processors (a probe for any cost per processor: nothing waits, so all that grows is the machine),
a synthetic large machine (eight copies of the Lublin workload side by side on 2,048 processors:
eight times the running jobs, and the queue, of the Lublin case), and any trace given with
`--trace` (real traces of large machines: tests/fixtures/traces/README.md says where to get them).

`--instructions` also counts each one's instructions, once (valgrind's callgrind, whole process:
they do not move with the machine's load, where times on a shared machine move by a fifth).

Run: `python bench/simulate_vs_plain.py [--runs 5] [--trace PATH ...] [--predictive] [--instructions]`;
prints a table (ratio: ours / plain; under 1 is faster) and writes bench/results/simulate_vs_plain.json.
`--predictive` also times ours with `--policy predictive` (plain has no such policy: its ratio
is to plain's easy, for scale only).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "tests" / "fixtures" / "traces"
PYTHON = ROOT / ".venv" / "bin" / "python"
INFOSVC = ROOT / ".venv" / "bin" / "infosvc"
PLAIN = ROOT / "bench" / "plain_sim.py"


def side_by_side(source: Path, copies: int, out: Path) -> None:
    """`copies` of a trace's jobs at the same submit times (numbers offset), on `copies` times
    its machine: the same load, `copies` times the processors, running jobs and queue."""
    with gzip.open(source, "rt") as handle:
        lines = handle.read().splitlines()
    header = [line for line in lines if line.startswith(";") and "MaxProcs" not in line and "MaxNodes" not in line]
    jobs = [line.split() for line in lines if line.strip() and not line.startswith(";")]
    maximum = max(int(job[7]) if int(job[7]) > 0 else int(job[4]) for job in jobs)
    header_size = next(int(line.split(":")[1]) for line in lines if line.startswith("; MaxNodes"))
    machine = max(maximum, header_size) * copies
    with gzip.open(out, "wt") as handle:
        handle.write(f"; {source.name} x{copies} side by side (synthetic, made by bench/simulate_vs_plain.py)\n")
        handle.write(f"; MaxProcs: {machine}\n; MaxNodes: {machine}\n")
        handle.writelines(f"{line}\n" for line in header)
        for copy in range(copies):
            for job in jobs:
                fields = list(job)
                fields[0] = str(int(job[0]) + copy * 1_000_000)
                handle.write(" ".join(fields) + "\n")


def ours(trace: Path, policy: str, processors: int | None, schedule: Path | None = None) -> list[str]:
    return [str(INFOSVC), "simulate", str(trace), "--policy", policy, "--quiet",
            *(["--processors", str(processors)] if processors else []),
            *(["--schedule", str(schedule)] if schedule else [])]


def plain(trace: Path, policy: str, processors: int | None, schedule: Path | None = None) -> list[str]:
    return [str(PYTHON), str(PLAIN), str(trace), "--policy", policy,
            *(["--processors", str(processors)] if processors else []),
            *(["--schedule", str(schedule)] if schedule else [])]


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, of the child) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}: {done.stderr[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def instructions(command: list[str], scratch: Path) -> int:
    """The instructions one run executes, start to exit (valgrind --tool=callgrind's total)."""
    out = scratch / "callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    total = next(line for line in out.read_text().splitlines() if line.startswith("totals:"))
    out.unlink()
    return int(total.split()[1])


def same_schedule(trace: Path, policy: str, processors: int | None, scratch: Path) -> bool:
    a, b = scratch / "ours.csv", scratch / "plain.csv"
    for command in (ours(trace, policy, processors, a), plain(trace, policy, processors, b)):
        subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
    return a.read_text().splitlines() == b.read_text().splitlines()  # the csv module ends lines with \r\n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--trace", action="append", default=[], type=Path, help="another trace (repeatable)")
    p.add_argument("--predictive", action="store_true", help="also time ours with --policy predictive")
    p.add_argument("--no-synthetic", action="store_true", help="leave out the synthetic 2,048-processor machine")
    p.add_argument("--instructions", action="store_true", help="also count each one's instructions once (valgrind)")
    args = p.parse_args()
    # The package's bytecode, as a pip install writes it (and Python after a first run): where
    # PYTHONDONTWRITEBYTECODE is set, an editable install would otherwise compile every module of
    # ours on every run. (The plain simulator, run as a script, is compiled each run: that is how
    # `python file.py` runs.)
    subprocess.run([str(PYTHON), "-m", "compileall", "-q", str(ROOT / "infosvc")], check=True)
    scratch = Path(tempfile.mkdtemp(prefix="simulate_vs_plain."))
    cases: list[tuple[str, Path, int | None]] = [
        ("NASA iPSC, 128", TRACES / "NASA-iPSC-1993-3.1-cln.swf.gz", None),
        ("Lublin, 256", TRACES / "lublin_256.swf.gz", None),
        ("NASA iPSC on 2,176 (probe)", TRACES / "NASA-iPSC-1993-3.1-cln.swf.gz", 2176),
    ]
    if not args.no_synthetic:
        synthetic = scratch / "lublin_x8.swf.gz"
        side_by_side(TRACES / "lublin_256.swf.gz", 8, synthetic)
        cases.append(("Lublin x8 side by side, 2,048 (synthetic)", synthetic, None))
    cases += [(path.name.split(".swf")[0], path, None) for path in args.trace]
    rows = []
    for label, trace, processors in cases:
        for policy in ("fcfs", "easy", *(("predictive",) if args.predictive else ())):
            same = None if policy == "predictive" else same_schedule(trace, policy, processors, scratch)
            theirs_policy = "easy" if policy == "predictive" else policy
            mine: list[tuple[float, float]] = []
            theirs: list[tuple[float, float]] = []
            for run in range(args.runs):  # which goes first alternates too: a pair shares the machine's minute
                if run % 2:
                    theirs.append(timed(plain(trace, theirs_policy, processors)))
                mine.append(timed(ours(trace, policy, processors)))
                if not run % 2:
                    theirs.append(timed(plain(trace, theirs_policy, processors)))
            row = {"case": label, "trace": trace.name, "processors": processors, "policy": policy, "same_schedule": same,
                   "ours_wall": statistics.median(w for w, _ in mine), "plain_wall": statistics.median(w for w, _ in theirs),
                   "ours_cpu": statistics.median(c for _, c in mine), "plain_cpu": statistics.median(c for _, c in theirs)}
            row["ratio_wall"] = row["ours_wall"] / row["plain_wall"]
            row["ratio_cpu"] = row["ours_cpu"] / row["plain_cpu"]
            row["ours_cpu_least"], row["plain_cpu_least"] = min(c for _, c in mine), min(c for _, c in theirs)
            row["ratio_cpu_least"] = row["ours_cpu_least"] / row["plain_cpu_least"]
            row["ratio_cpu_paired"] = statistics.median(a / b for (_, a), (_, b) in zip(mine, theirs))
            row["ours_cpu_runs"], row["plain_cpu_runs"] = [c for _, c in mine], [c for _, c in theirs]
            if args.instructions:
                row["ours_instructions"] = instructions(ours(trace, policy, processors), scratch)
                row["plain_instructions"] = instructions(plain(trace, theirs_policy, processors), scratch)
                row["ratio_instructions"] = row["ours_instructions"] / row["plain_instructions"]
            rows.append(row)
            print(f"| {label} | {policy}{' (plain: easy)' if policy == 'predictive' else ''} | "
                  f"{'yes' if same else ('n/a' if same is None else 'DIFFERENT')} | "
                  f"{row['ours_wall']:.2f} s | {row['plain_wall']:.2f} s | {row['ratio_wall']:.2f} | "
                  f"{row['ours_cpu']:.2f} s | {row['plain_cpu']:.2f} s | {row['ratio_cpu']:.2f} | "
                  f"{row['ratio_cpu_least']:.2f} | {row['ratio_cpu_paired']:.2f} |"
                  + (f" {row['ours_instructions'] / 1e6:,.0f} M | {row['plain_instructions'] / 1e6:,.0f} M | "
                     f"{row['ratio_instructions']:.2f} |" if args.instructions else ""), flush=True)
    out = ROOT / "bench" / "results" / "simulate_vs_plain.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"runs": args.runs, "python": platform.python_version(), "cpus": os.cpu_count(),
                               "rows": rows}, indent=1) + "\n")
    for path in scratch.iterdir():
        path.unlink()
    scratch.rmdir()
    return 0 if all(row["same_schedule"] is not False for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
