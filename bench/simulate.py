"""Benchmark of `infosvc simulate` (infosvc/sched/simulation.py): the NASA iPSC trace (18,239 jobs)
and a 100,000-job trace made by repeating the Lublin trace end to end, with each policy.

The issue's targets: the NASA trace in under 2 s for either policy, the 100,000-job trace in under
10 s. In process, the trace read once (reading is timed apart); the times are the simulation's,
median of `--runs`. Reported as jobs per second, and EASY's time as a ratio of FCFS's (which
decides the least: it stops at the first job that does not fit), measured in the same run.

Run: `python bench/simulate.py [--runs 3]`; prints a table and writes bench/results/simulate.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infosvc.codec.swf import read_swf  # noqa: E402
from infosvc.sched import Policy  # noqa: E402
from infosvc.sched.simulation import SimJob, jobs_of, simulate  # noqa: E402

TRACES = ROOT / "tests" / "fixtures" / "traces"


Record = tuple[int, float, float, int, int, float, int]


def fields(trace_path: Path) -> tuple[list[Record], int, float]:
    started = time.perf_counter()
    trace = read_swf(trace_path)
    records = [(r.job, r.submit, r.run_time, r.allocated_processors, r.requested_processors, r.requested_time, r.user)
               for r in trace.records]
    return records, trace.header_int("MaxProcs") or trace.header_int("MaxNodes") or 0, time.perf_counter() - started


def repeated(records: list[Record], count: int) -> list[Record]:
    """`count` jobs: the trace again and again, each copy after the last one's final submission."""
    span = max(r[1] for r in records) + 1
    out: list[Record] = []
    copy = 0
    while len(out) < count:
        for number, submit, run, allocated, requested, requested_time, user in records:
            out.append((number + copy * 1_000_000, submit + copy * span, run, allocated, requested, requested_time, user))
            if len(out) == count:
                break
        copy += 1
    return out


def timed(jobs: list[SimJob], processors: int, policy: Policy, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        simulate(jobs, processors, policy)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--jobs", type=int, default=100_000, help="jobs of the repeated trace (100,000)")
    args = p.parse_args()
    nasa, nasa_procs, nasa_read = fields(TRACES / "NASA-iPSC-1993-3.1-cln.swf.gz")
    lublin, lublin_procs, _ = fields(TRACES / "lublin_256.swf.gz")
    cases = {"nasa": (jobs_of(nasa, nasa_procs).jobs, nasa_procs),
             f"lublin x{args.jobs // len(lublin) + 1}": (jobs_of(repeated(lublin, args.jobs), lublin_procs).jobs,
                                                         lublin_procs)}
    results: dict[str, object] = {"python": platform.python_version(), "runs": args.runs,
                                  "nasa_read_seconds": nasa_read, "cases": {}}
    print(f"reading the NASA trace: {nasa_read:.2f} s")
    print(f"{'trace':<14} {'jobs':>7} {'policy':<10} {'seconds':>8} {'jobs/s':>9}")
    for name, (jobs, processors) in cases.items():
        row: dict[str, float] = {"jobs": len(jobs)}
        for policy in (Policy.FCFS, Policy.EASY, Policy.PREDICTIVE):
            seconds = timed(jobs, processors, policy, args.runs)
            row[f"{policy.value}_seconds"] = seconds
            row[f"{policy.value}_jobs_per_second"] = len(jobs) / seconds
            ratio = f"   ({seconds / row['fcfs_seconds']:.2f}x fcfs)" if policy is not Policy.FCFS else ""
            print(f"{name:<14} {len(jobs):7d} {policy.value:<10} {seconds:8.2f} {len(jobs) / seconds:9.0f}{ratio}")
        results["cases"][name] = row  # type: ignore[index]
    out = ROOT / "bench" / "results" / "simulate.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print("targets: NASA < 2 s any policy; 100,000 jobs < 10 s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
