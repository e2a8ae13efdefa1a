"""Benchmark of the job queue on a real server: submissions over HTTP, the memory of 10,000 queued
jobs, and ingest with and without them.

The issue's targets: submissions at >= 1,000 jobs/s over HTTP with p99 under 50 ms at 10,000
queued; the service's memory at 10,000 queued jobs under half of slurmctld's (130 MB measured for
Slurm 22.05 on this machine: under 65 MB); with 10,000 jobs waiting, the ingest rate within 10 %
of the rate with an empty queue, in the same run.

Phases, with bench/ingest.py's load generator (a separate process, keep-alive connections,
pre-built requests) against one `infosvc serve` with `--hosts` hosts that have all reported:

  ingest_empty   agents' reports, closed loop, no job in the queue
  submit         POST /v1/jobs, open loop at `--rate` jobs/s (latency from each scheduled send),
                 one-processor exclusive CCS jobs: the first ones start (a host each), the rest
                 wait, until more than `--queued` are waiting
  ingest_queued  the same reports again, with those jobs waiting

The server's RSS (VmRSS) is read from /proc after each phase; the queue's size from GET /v1/jobs.

Run: `python bench/submit.py [--hosts 1000] [--seconds 10] [--rate 1000] [--timeline FILE]`; prints a
table and writes bench/results/submit.json; with `--timeline`, each submission's due time and
latency to FILE, and the bursts of slow ones.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from ingest import drive, fleet_documents, free_port, host_name, request_bytes, stop, wait_ready  # noqa: E402

JOB = (b'<Job xmlns="http://www.microsoft.com/ComputeCluster/" Name="bench" MinimumNumberOfProcessors="1" '
       b'MaximumNumberOfProcessors="1" Runtime="1:00:00" Priority="Normal"><Tasks><Task CommandLine="sleep 600"/>'
       b'</Tasks></Job>')


def job_request(port: int, token: str) -> bytes:
    head = (f"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/xml\r\nContent-Length: {len(JOB)}\r\n\r\n")
    return head.encode() + JOB


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def queue_size(port: int, state: str) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/jobs?state={state}&limit=1", timeout=60) as answer:
        return int(json.load(answer)["total"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=10.0, help="measured seconds of each ingest phase (10)")
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--rate", type=float, default=1000.0, help="submissions per second (1000)")
    p.add_argument("--queued", type=int, default=10_000, help="jobs waiting at the end of the submit phase (10,000)")
    p.add_argument("--profile", metavar="FILE", help="run the server under cProfile, its stats to FILE (the event "
                   "loop's thread only)")
    p.add_argument("--sample", metavar="FILE", help="run the server under bench/stacksampler.py: where its event loop "
                   "was during each stall, and the collector's passes, to FILE")
    p.add_argument("--timeline", metavar="FILE", help="each submission of the submit phase to FILE (JSON): seconds into "
                   "the phase it was due, seconds to its answer: when the slow ones come (each refresh pass)")
    args = p.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="infosvc-bench-submit-"))
    results: dict[str, Any] = {"hosts": args.hosts, "rate": args.rate, "cpus": os.cpu_count()}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        documents = fleet_documents(args.hosts)
        tokens = [secrets.token_urlsafe(24) for _ in documents]
        submit = secrets.token_urlsafe(24)
        (workdir / "tokens").write_text("".join(f"agent {t} {host_name(i)}\n" for i, t in enumerate(tokens))
                                        + f"submit {submit}\n")
        (workdir / "site.toml").write_text("[store]\nhistory_per_host = 10\n")
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, *(["-m", "cProfile", "-o", str(Path(args.profile).resolve())] if args.profile else []),
             *([str(HERE / "stacksampler.py"), str(Path(args.sample).resolve()), "--"] if args.sample else ["-m", "infosvc"]),
             "serve", "--listen", f"127.0.0.1:{port}", "--db",
             str(workdir / "bench.sqlite"), "--tokens", str(workdir / "tokens"), "--config", str(workdir / "site.toml")],
            env=env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=(workdir / "server.log").open("wb"))
        try:
            wait_ready(port, server)
            reports = [request_bytes(port, t, d) for t, d in zip(tokens, documents)]
            results["rss_mb_start"] = rss_mb(server.pid)
            results["ingest_empty"] = drive(port, server.pid, reports, connections=args.connections,
                                            warmup=args.warmup, seconds=args.seconds, rate=None, workdir=workdir)
            results["rss_mb_hosts"] = rss_mb(server.pid)
            print(f"ingest, empty queue: {results['ingest_empty']['rate']:.0f} reports/s", flush=True)
            seconds = (args.queued + args.hosts) * 1.1 / args.rate
            results["submit"] = drive(port, server.pid, [job_request(port, submit)] * args.connections,
                                      connections=args.connections, warmup=1.0, seconds=seconds, rate=args.rate,
                                      workdir=workdir, timeline=args.timeline)
            results["queued"] = queue_size(port, "Queued")
            results["running"] = queue_size(port, "Running")
            results["rss_mb_queued"] = rss_mb(server.pid)
            print(f"submit: {results['submit']['rate']:.0f} jobs/s, p99 "
                  f"{results['submit']['scheduled_latency_ms']['p99']:.1f} ms; {results['queued']} queued, "
                  f"{results['running']} running; RSS {results['rss_mb_queued']:.0f} MB", flush=True)
            results["ingest_queued"] = drive(port, server.pid, reports, connections=args.connections,
                                             warmup=args.warmup, seconds=args.seconds, rate=None, workdir=workdir)
            results["ingest_ratio"] = results["ingest_queued"]["rate"] / results["ingest_empty"]["rate"]
            print(f"ingest, {results['queued']} queued: {results['ingest_queued']['rate']:.0f} reports/s "
                  f"({results['ingest_ratio']:.2f} of the empty queue's)", flush=True)
        finally:
            stop(server)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    submitted = results["submit"]
    print(f"{'phase':<14} {'rate/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for key in ("ingest_empty", "submit", "ingest_queued"):
        row = results[key]
        latency = row["scheduled_latency_ms"] or row["latency_ms"]
        print(f"{key:<14} {row['rate']:8.0f} {latency['p50']:8.1f} {latency['p99']:8.1f} {row['error_count']:7d}")
    print(f"RSS: {results['rss_mb_start']:.0f} MB at start, {results['rss_mb_hosts']:.0f} MB with {args.hosts} hosts, "
          f"{results['rss_mb_queued']:.0f} MB with {results['queued']} queued (target < 65 MB, half of slurmctld's)")
    print(f"targets: submit >= 1000/s: {submitted['rate']:.0f}; p99 < 50 ms: "
          f"{submitted['scheduled_latency_ms']['p99']:.1f}; ingest ratio >= 0.90: {results['ingest_ratio']:.2f}")
    if args.timeline:
        print(bursts(json.loads(Path(args.timeline).read_text())))
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "submit.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


def bursts(timeline: list[list[float]], slow: float = 0.05, apart: float = 0.3) -> str:
    """The submissions answered in over `slow` seconds, grouped into bursts (due less than `apart`
    seconds after the last slow one): when each burst began, how many, the longest."""
    groups: list[list[float]] = []
    for at, latency in sorted(timeline):
        if latency <= slow:
            continue
        if groups and at - groups[-1][1] < apart:
            groups[-1][1:] = [at, groups[-1][2] + 1, max(groups[-1][3], latency)]
        else:
            groups.append([at, at, 1, latency])
    return (f"{sum(int(g[2]) for g in groups)} of {len(timeline)} submissions over {slow * 1e3:.0f} ms, in "
            f"{len(groups)} bursts (at s: count, longest ms): "
            + ", ".join(f"{g[0]:.1f}: {int(g[2])}, {g[3] * 1e3:.0f}" for g in groups))


if __name__ == "__main__":
    sys.exit(main())
