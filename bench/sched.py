"""Benchmark of one scheduling pass (infosvc/sched/): EASY, with reservations, over 10,000 queued
jobs on 10,000 hosts in 100 subclusters.

The issue's target: one full pass under 1 s (Slurm 22.05's backfill cycle over ~9,800 pending jobs
took 2.03 s on this machine, 369 ms at its default depth of 500).

In process, no server. The hosts: 100 kinds of 100 hosts (8 to 64 processors, 16 to 512 GB, clock
2.0 to 3.5 GHz), as infosvc.sched.hosts.HostPool takes them. The state: jobs already running on
about 95 % of the processors (each with its start and estimate, so the reservation has ends to
look at); the queue: 10,000 jobs of 1 to 256 processors (most small, as real workloads are),
estimates from 1 minute to 1 day, one in ten non-exclusive, one in twenty with a memory request,
one in fifty restricted to one subcluster (a mask, as a Feature requirement gives), the five
priorities. Each run plans from the same state (the pass is pure; the machine is copied inside).

For the ratio, "pool" is the same pass on a ProcessorPool of the same processors (no hosts, the
simulator's machine): what the hosts cost over counting processors. "fcfs" stops at the first job
that does not fit.

"easy+gpus" is the easy pass on the same site and queue drawn with GPUs: a quarter of the host
kinds have 4 or 8, one job in ten asks 1 to 4 per host.

Run: `python bench/sched.py [--hosts 10000] [--jobs 10000] [--runs 5]`; prints a table and writes
bench/results/sched.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infosvc.sched import Policy, ProcessorPool, Running, queue_order, schedule  # noqa: E402
from infosvc.sched.hosts import Allocation, HostPool, HostSlot, WaitingJob  # noqa: E402
from infosvc.sched.request import JobRequest  # noqa: E402


def site(hosts: int, kinds: int, rng: random.Random, gpus: bool = False) -> HostPool:
    per_kind = max(1, hosts // kinds)
    slots = []
    for kind in range(kinds):
        cpus = rng.choice([8, 16, 32, 48, 64])
        memory = rng.choice([16, 32, 64, 128, 256, 512]) * 1024.0
        speed = rng.choice([2000, 2400, 2800, 3200, 3500])
        count = (4, 8)[kind % 2] if gpus and kind % 4 == 0 else 0  # a quarter of the kinds: GPU hosts
        slots.extend(HostSlot(f"k{kind:03d}n{n:04d}", cpus, memory, speed, gpus=count) for n in range(per_kind))
    return HostPool(slots)


def request(rng: random.Random, number: int, gpus: bool = False) -> JobRequest:
    size = min(256, int(rng.paretovariate(1.2)))
    return JobRequest(name=f"j{number}", owner="bench", priority=rng.choice([1, 2, 2, 2, 3, 4]),
                      min_processors=size, max_processors=size, estimate=float(rng.choice([60, 600, 3600, 14400, 86400])),
                      memory_mb=4096.0 if number % 20 == 0 else 0.0, exclusive=number % 10 != 0,
                      gpus=1 + number % 4 if gpus and number % 10 == 5 else 0)  # one in ten asks 1 to 4 GPUs


def fill(pool: HostPool, rng: random.Random, share: float, now: float, gpus: bool = False) -> list[Running[Allocation]]:
    running: list[Running[Allocation]] = []
    target = int(pool.size.sum() * share)
    held = 0
    number = 0
    while held < target:
        req = request(rng, number, gpus)
        job = WaitingJob(f"r{number}", req.priority, 0.0, req.estimate, req)
        allocation = pool.place(job)
        number += 1
        if allocation is None:
            if number > 10 * len(pool.ids):
                break
            continue
        pool.take(allocation)
        held += allocation.total
        running.append(Running(job.id, now - rng.uniform(0, req.estimate), req.estimate, allocation))
    return running


def queue(pool: HostPool, jobs: int, rng: random.Random, gpus: bool = False) -> list[WaitingJob]:
    kinds = len(pool.ids) // 100
    waiting = []
    for number in range(jobs):
        req = request(rng, number, gpus)
        mask = None
        if number % 50 == 0:
            kind = rng.randrange(max(1, kinds))
            mask = np.zeros(len(pool.ids), np.bool_)
            mask[kind * 100:(kind + 1) * 100] = True
        waiting.append(WaitingJob(f"q{number}", req.priority, float(number), req.estimate, req, mask))
    return queue_order(waiting)  # type: ignore[return-value]


def timed(function, runs: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    times = []
    result = None
    for _ in range(runs):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(12)
    now = 1_000_000.0
    pool = site(args.hosts, 100, rng)
    running = fill(pool, rng, 0.95, now)
    waiting = queue(pool, args.jobs, rng)
    processors = int(pool.size.sum())
    free = ProcessorPool(processors, int(pool.free.sum()))
    counted = [Running(r.id, r.started, r.estimate, r.allocation.total) for r in running]
    rows = {}
    for name, machine, held in (("easy", pool, running), ("pool", free, counted)):
        seconds, plan = timed(lambda: schedule(machine, held, waiting, now, Policy.EASY), args.runs)  # noqa: B023
        rows[name] = {"ms": seconds * 1e3, "started": len(plan.starts),  # type: ignore[attr-defined]
                      "backfilled": sum(s.backfilled for s in plan.starts),  # type: ignore[attr-defined]
                      "reserved_at": plan.reservation.at - now if plan.reservation else None}  # type: ignore[attr-defined]
    seconds, plan = timed(lambda: schedule(pool, running, waiting, now, Policy.FCFS), args.runs)
    rows["fcfs"] = {"ms": seconds * 1e3, "started": len(plan.starts), "backfilled": 0,  # type: ignore[attr-defined]
                    "reserved_at": None}
    # the same site and queue drawn again, with GPUs: a quarter of the host kinds have 4 or 8, one
    # job in ten asks 1 to 4 on each of its hosts (and so leaves the scan for the masks)
    rng = random.Random(12)
    gpu_pool = site(args.hosts, 100, rng, gpus=True)
    gpu_running = fill(gpu_pool, rng, 0.95, now, gpus=True)
    gpu_waiting = queue(gpu_pool, args.jobs, rng, gpus=True)
    seconds, plan = timed(lambda: schedule(gpu_pool, gpu_running, gpu_waiting, now, Policy.EASY), args.runs)
    rows["easy+gpus"] = {"ms": seconds * 1e3, "started": len(plan.starts),  # type: ignore[attr-defined]
                         "backfilled": sum(s.backfilled for s in plan.starts),  # type: ignore[attr-defined]
                         "reserved_at": plan.reservation.at - now if plan.reservation else None}  # type: ignore[attr-defined]
    print(f"{args.hosts} hosts ({processors} processors, {len(running)} jobs running on "
          f"{processors - int(pool.free.sum())}), {len(waiting)} queued; median of {args.runs}")
    print(f"{'pass':<10} {'ms':>9} {'started':>8} {'backfilled':>11} {'reservation in s':>17}")
    for name, row in rows.items():
        print(f"{name:<10} {row['ms']:9.1f} {row['started']:8d} {row['backfilled']:11d} "
              f"{'' if row['reserved_at'] is None else format(row['reserved_at'], '.0f'):>17}")
    print(f"hosts over a processor pool: {rows['easy']['ms'] / rows['pool']['ms']:.1f}x; target: easy < 1000 ms; "
          f"with GPUs over without: {rows['easy+gpus']['ms'] / rows['easy']['ms']:.2f}x")
    out = Path(__file__).resolve().parent / "results" / "sched.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "python": platform.python_version(),
                               "hosts": args.hosts, "jobs": len(waiting), "running": len(running),
                               "runs": args.runs, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
