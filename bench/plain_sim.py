"""A plain FCFS and EASY simulator of a Standard Workload Format trace: one file, the standard
library only, nothing of infosvc. It is the baseline `bench/simulate_vs_plain.py` times
`infosvc simulate` against, whole process against whole process.

It reads a trace by the conventions of docs/simulation.md (processors: requested, else
allocated; estimate: requested time, else the run time; run time capped at the estimate; jobs of
no run time, no processors or more than the machine skipped; at one instant all completions, then
all arrivals, then one pass; the queue by submit time, then job number) and decides as EASY is
usually written: a list for the queue, a heap of ends, the shadow time from the running jobs
sorted by start + estimate. It writes nothing of its own to decide with, so where it and
`infosvc simulate` give the same start to every job (`--schedule`, compared by the bench and by
tests/sched/test_simulation_speed.py), it is a fair baseline: the same work, written plainly.

    python bench/plain_sim.py TRACE.swf[.gz] [--policy fcfs|easy] [--processors N] [--schedule OUT.csv]

Prints one JSON object with the same keys and figures as `infosvc simulate`'s (but `seconds`).
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import json
import math
import sys

FIELDS = 18


def read(path: str) -> tuple[list[list[float]], dict[str, str], int]:
    """The job lines' first 18 numbers, the header (`; Key: value`), and the lines left out."""
    with open(path, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
    handle = gzip.open(path, "rt", errors="replace") if gzipped else open(path, errors="replace")
    records: list[list[float]] = []
    header: dict[str, str] = {}
    malformed = 0
    with handle:
        for line in handle:
            text = line.strip()
            if not text:
                continue
            if text.startswith(";"):
                key, colon, value = text[1:].partition(":")
                if colon and key.strip() and " " not in key.strip():
                    header.setdefault(key.strip(), value.strip())
                continue
            words = text.split()
            if len(words) < FIELDS:
                malformed += 1
                continue
            try:
                values = list(map(float, words[:FIELDS]))
            except ValueError:
                malformed += 1
                continue
            if not math.isfinite(sum(values)) and not all(map(math.isfinite, values)):  # a NaN or an infinity
                malformed += 1
                continue
            records.append(values)
    return records, header, malformed


def header_int(header: dict[str, str], key: str) -> int:
    words = header.get(key, "").split()
    try:
        return int(words[0]) if words else 0
    except ValueError:
        return 0


def simulate(records: list[list[float]], machine: int, policy: str) -> tuple[list[tuple[int, float, float, int, float]], int]:
    """(job number, submit, run, processors, start) of every job, and how many were skipped."""
    jobs = []
    skipped = 0
    for r in records:
        number, submit, run_time, allocated, requested, requested_time = int(r[0]), r[1], r[3], int(r[4]), int(r[7]), r[8]
        procs = requested if requested > 0 else allocated
        estimate = requested_time if requested_time > 0 else run_time
        run = min(run_time, estimate)
        if run <= 0 or procs <= 0 or procs > machine:
            skipped += 1
            continue
        jobs.append((submit, number, procs, estimate, run))
    jobs.sort(key=lambda job: (job[0], job[1]))

    free = machine
    queue: list[tuple[float, int, int, float, float]] = []
    running: list[tuple[float, float, int]] = []  # (estimated end, actual end, processors), what EASY plans with
    ends: list[tuple[float, int, int]] = []  # heap of (actual end, job number, processors)
    started: list[tuple[int, float, float, int, float]] = []
    arrival = 0
    while arrival < len(jobs) or ends:
        now = min(jobs[arrival][0] if arrival < len(jobs) else math.inf, ends[0][0] if ends else math.inf)
        ended = False
        while ends and ends[0][0] == now:
            _, _, procs = heapq.heappop(ends)
            free += procs
            ended = True
        if ended:
            running = [job for job in running if job[1] > now]
        while arrival < len(jobs) and jobs[arrival][0] == now:
            queue.append(jobs[arrival])
            arrival += 1
        if not queue:
            continue

        def start(job: tuple[float, int, int, float, float]) -> None:
            nonlocal free
            submit, number, procs, estimate, run = job
            free -= procs
            heapq.heappush(ends, (now + run, number, procs))
            running.append((now + estimate, now + run, procs))
            started.append((number, submit, run, procs, now))

        head = 0
        while head < len(queue) and queue[head][2] <= free:
            start(queue[head])
            head += 1
        del queue[:head]
        if policy == "fcfs" or not queue:
            continue
        # EASY: the head's shadow time and the extra processors; later jobs that cannot delay it start
        need = queue[0][2]
        available = free
        shadow = math.inf
        for estimated_end, _, procs in sorted(running):
            available += procs
            if available >= need:
                shadow = max(estimated_end, now)
                break
        extra = free + sum(procs for estimated_end, _, procs in running if estimated_end <= shadow) - need
        waiting = [queue[0]]
        for at, job in enumerate(queue[1:], 1):
            if free == 0:
                waiting.extend(queue[at:])
                break
            procs, estimate = job[2], job[3]
            if procs > free:
                waiting.append(job)
            elif now + estimate <= shadow:
                start(job)
            elif procs <= extra:
                start(job)
                extra -= procs
            else:
                waiting.append(job)
        queue = waiting
    return started, skipped


def summary(started: list[tuple[int, float, float, int, float]], skipped: int, machine: int, policy: str) -> dict[str, object]:
    if not started:
        return {"jobs": 0, "utilization": 0.0, "mean_wait_seconds": 0.0, "mean_bounded_slowdown": 0.0,
                "max_wait_seconds": 0.0, "makespan_seconds": 0.0, "skipped": skipped, "processors": machine,
                "policy": policy}
    first = min(submit for _, submit, _, _, _ in started)
    last = max(start + run for _, _, run, _, start in started)
    makespan = last - first
    waits = [start - submit for _, submit, _, _, start in started]
    slowdowns = [max(1.0, (start - submit + run) / max(run, 10.0)) for _, submit, run, _, start in started]
    work = sum(run * procs for _, _, run, procs, _ in started)
    return {"jobs": len(started), "utilization": work / (machine * makespan) if makespan > 0 else 0.0,
            "mean_wait_seconds": sum(waits) / len(waits), "mean_bounded_slowdown": sum(slowdowns) / len(slowdowns),
            "max_wait_seconds": max(waits), "makespan_seconds": makespan, "skipped": skipped, "processors": machine,
            "policy": policy}


def number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--policy", choices=("fcfs", "easy"), default="easy")
    p.add_argument("--processors", type=int)
    p.add_argument("--schedule", metavar="OUT.csv")
    args = p.parse_args(argv)
    records, header, malformed = read(args.trace)
    machine = args.processors or header_int(header, "MaxProcs") or header_int(header, "MaxNodes")
    if machine < 1:
        print("plain_sim: no machine size: say --processors N", file=sys.stderr)
        return 2
    started, skipped = simulate(records, machine, args.policy)
    if args.schedule:
        with open(args.schedule, "w", encoding="utf-8") as out:
            out.write("job_id,submit,start,end,processors\n")
            for job, submit, run, procs, start in sorted(started, key=lambda s: (s[1], s[0])):
                out.write(f"{job},{number(submit)},{number(start)},{number(start + run)},{procs}\n")
    result = summary(started, skipped, machine, args.policy)
    result["malformed_lines"] = malformed
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
