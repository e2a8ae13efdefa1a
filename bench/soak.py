"""Soak test: N simulated agents report to one `infosvc serve` for a while; then nothing they saw
acknowledged may be missing from the store, nothing refused may be in it, and each host's newest
acknowledged report must be what GET /v1/nodes/{id} serves.

Everything is on loopback: this script starts the server itself (127.0.0.1, a free port, its own
SQLite file, config and tokens file in a temporary directory) and cannot be pointed elsewhere;
agents and minutes are bounded (MAX_AGENTS, MAX_MINUTES).

Each agent has its own token (the tokens file binds it to its host: `agent TOKEN HOST`) and host,
and behaves as agents/infosvc_agents/push.py does: it takes a sample every `--interval` seconds
(jitter ±`--jitter`), numbered by a Sequence Extension (type "Soak"), keeps the samples not yet
acknowledged and sends them oldest first, one request at a time; on 503 or 429 with Retry-After it
waits at least that long (up to 1.2 times), on another 5xx or a failed connection it backs off
exponentially. Every acknowledged (host, sequence) is recorded; a request that failed without an
answer (timeout, reset) is recorded as undecided: the server may or may not have stored it.

Connections (`--connections`): `short`, a new connection for each request, as the real agent's
http.client does (the default); `pool`, a shared pool of at most `--pool` keep-alive connections
(a proxy in front of many agents); `own`, each agent keeps its own connection open between reports
(10,000 agents: 10,000 connections open at once; the server's max_connections and keepalive_seconds
are raised to fit and both processes need `ulimit -n` above that many files).

The documents are bench/ingest.py's fleet: this host's real agent document with ten kinds of
hardware. Prints throughput, latency (p50/p99 of acknowledged reports, send to full answer),
answers by status, the server's CPU and RSS at start and end (psutil), the checks, and writes
bench/results/soak.json. Exit status 1 if a check fails. `make soak` runs 10,000 agents for 10
minutes (AGENTS=, MINUTES=, INTERVAL=, CONNECTIONS= override); docs/reliability.md has the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import resource
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from array import array
from collections import Counter, deque
from pathlib import Path
from typing import Any

import aiohttp
import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from ingest import db_bytes, free_port, host_name, kind_nodes, host_node, stop, wait_ready  # noqa: E402

MAX_AGENTS = 50_000
MAX_MINUTES = 180.0
TARGET_P99_MS = 100.0
#: the Sequence Extension's value in the template, replaced by each report's number
PLACEHOLDER = "424242424242"
SEQUENCE = re.compile(rb'<Extension name="Sequence" type="Soak">(\d+)</Extension>')


def templates(agents: int) -> list[list[bytes]]:
    """Each host's document, split where its sample's number goes: str(n).encode().join(parts).
    The number is the Sequence Extension's value and the end of the SampleId the real agent writes
    (RUN-N: the server acknowledges a SampleId it holds again without storing it twice)."""
    from infosvc.codec.node_xml import node_to_xml
    from infosvc.model.node import Extension

    kinds = kind_nodes()
    out = []
    run = secrets.token_hex(4)
    for i in range(agents):
        node = host_node(kinds, i)
        own = [e for e in node.extensions if not (e.type == "Agent" and e.name in ("SampleId", "SampleTime"))]
        node.extensions = [Extension("Sequence", PLACEHOLDER, "Soak"),
                           Extension("SampleId", f"soak{run}-{PLACEHOLDER}", "Agent"), *own]
        out.append(node_to_xml(node).split(PLACEHOLDER.encode()))
    return out


class Tally:
    """What the agents saw: acknowledged (host, sequence)s, undecided ones, latencies, statuses."""

    def __init__(self, agents: int) -> None:
        self.acked = [array("I") for _ in range(agents)]
        self.undecided: set[tuple[int, int]] = set()
        #: (agent, sample) -> when (Unix time) it was last refused: a later copy may be stored, not that one
        self.refused_at: dict[tuple[int, int], float] = {}
        self.latencies = array("d")
        #: when each acknowledged report was sent (loop time), beside its latency
        self.sent = array("d")
        self.statuses: Counter[str] = Counter()
        self.taken = 0
        self.unsent_at_end = 0
        self.retry_after_waits = 0
        self.started = 0.0


async def agent(i: int, args: argparse.Namespace, session: aiohttp.ClientSession, url: str, token: str,
                template: list[bytes], tally: Tally, end: float) -> None:
    loop = asyncio.get_running_loop()
    rnd = random.Random(i)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/xml"}
    await asyncio.sleep(rnd.uniform(0, args.interval))  # agents start spread over one interval
    kept: deque[int] = deque()
    sequence = 0
    next_sample = loop.time()
    retry_at = 0.0
    backoff = 0.0
    while True:
        now = loop.time()
        if now >= end:
            break
        if now >= next_sample:
            kept.append(sequence)
            sequence += 1
            tally.taken += 1
            next_sample = now + args.interval * rnd.uniform(1 - args.jitter, 1 + args.jitter)
        if kept and now >= retry_at:
            n = kept[0]
            sent = loop.time()
            try:
                async with session.post(url, data=str(n).encode().join(template), headers=headers) as answer:
                    await answer.read()
                    status, retry_after = answer.status, answer.headers.get("Retry-After")
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                tally.undecided.add((i, n))
                errno = getattr(exc, "errno", None)  # ECONNRESET, ECONNREFUSED, ...
                tally.statuses[type(exc).__name__ + (f" {os.strerror(errno)}" if errno else "")] += 1
                backoff = min(60.0, backoff * 2 or 1.0)
                retry_at = loop.time() + backoff * rnd.uniform(0.8, 1.2)
                continue
            tally.statuses[str(status)] += 1
            if 200 <= status < 300:
                tally.latencies.append(loop.time() - sent)
                tally.sent.append(sent)
                tally.acked[i].append(n)
                kept.popleft()
                backoff = 0.0
                continue
            tally.refused_at[(i, n)] = time.time()
            if status in (429, 503) and retry_after and retry_after.isdigit():
                tally.retry_after_waits += 1
                retry_at = loop.time() + int(retry_after) * rnd.uniform(1.0, 1.2)
            elif status >= 500 or status in (408, 429):
                backoff = min(60.0, backoff * 2 or 1.0)
                retry_at = loop.time() + backoff * rnd.uniform(0.8, 1.2)
            else:  # refused for what it is: the real agent drops it too
                kept.popleft()
            continue
        wake = min(next_sample, retry_at) if kept else next_sample
        await asyncio.sleep(max(0.0, min(wake, end) - loop.time()))
    tally.unsent_at_end += len(kept)


class Monitor:
    """The server process as psutil sees it, sampled every few seconds."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.samples: list[dict[str, float]] = []
        self._last = (time.monotonic(), self._cpu())

    def _cpu(self) -> float:
        times = self.process.cpu_times()
        return float(times.user + times.system)

    def sample(self) -> dict[str, float]:
        now, cpu = time.monotonic(), self._cpu()
        then, before = self._last
        self._last = (now, cpu)
        row = {"t": now, "cpu_seconds": cpu, "cpu_cores": (cpu - before) / max(1e-9, now - then),
               "rss_mib": self.process.memory_info().rss / 2**20, "fds": float(self.process.num_fds())}
        self.samples.append(row)
        return row


async def load(args: argparse.Namespace, port: int, tokens: list[str], docs: list[list[bytes]],
               monitor: Monitor) -> tuple[Tally, float]:
    loop = asyncio.get_running_loop()
    tally = Tally(args.agents)
    tally.started = loop.time()
    url = f"http://127.0.0.1:{port}/v1/nodes"
    timeout = aiohttp.ClientTimeout(total=args.timeout)
    keep = args.interval * 2 + 10

    def session(limit: int, force_close: bool = False) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=limit, force_close=force_close,
                                         keepalive_timeout=None if force_close else keep)
        return aiohttp.ClientSession(connector=connector, timeout=timeout)

    if args.connections == "own":
        sessions = [session(1) for _ in range(args.agents)]
    else:
        shared = session(0, force_close=True) if args.connections == "short" else session(args.pool)
        sessions = [shared] * args.agents
    started = loop.time()
    end = started + args.minutes * 60
    monitor.sample()
    cpu0 = time.process_time()
    tasks = [loop.create_task(agent(i, args, sessions[i], url, tokens[i], docs[i], tally, end))
             for i in range(args.agents)]
    every = max(10.0, min(60.0, args.minutes * 6))
    last_acked, last_time = 0, started
    while loop.time() < end:
        await asyncio.sleep(min(every, end - loop.time()))
        row = monitor.sample()
        acked = len(tally.latencies)
        recent = sorted(tally.latencies[last_acked:])
        now = loop.time()
        print(f"  {now - started:6.0f} s: {acked} acknowledged ({(acked - last_acked) / (now - last_time):.0f}/s"
              f", p99 {_at(recent, 0.99) * 1e3:.1f} ms), answers {dict(tally.statuses)}; server "
              f"{row['cpu_cores']:.2f} cores, {row['rss_mib']:.0f} MiB, {row['fds']:.0f} files", flush=True)
        last_acked, last_time = acked, now
    await asyncio.gather(*tasks)  # each finishes the request it has in flight
    elapsed = loop.time() - started
    monitor.sample()
    for s in {id(s): s for s in sessions}.values():
        await s.close()
    print(f"  load generator: {time.process_time() - cpu0:.0f} s CPU over {elapsed:.0f} s", flush=True)
    return tally, elapsed


def _at(ordered: Any, q: float) -> float:
    return float(ordered[min(len(ordered) - 1, int(len(ordered) * q))]) if len(ordered) else 0.0


def check_store(db: Path, agents: int, tally: Tally) -> dict[str, Any]:
    """Every acknowledged (host, sequence) stored exactly once; nothing stored that no attempt saw
    acknowledged (bar the undecided), and no copy stored from before its refusal (a 503 stores nothing)."""
    index = {host_name(i): i for i in range(agents)}
    stored: Counter[tuple[int, int]] = Counter()
    first: dict[tuple[int, int], float] = {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        for host, reported_at, document in conn.execute("SELECT host_id, reported_at, document FROM reports"):
            found = SEQUENCE.search(document)
            if found is not None and host in index:
                key = (index[host], int(found[1]))
                stored[key] += 1
                first[key] = min(reported_at, first.get(key, reported_at))
    acked = {(i, n) for i in range(agents) for n in tally.acked[i]}
    lost = [key for key in acked if key not in stored]
    twice = [key for key, count in stored.items() if count > 1]
    # An undecided attempt (no answer) may have been stored: such a sample proves nothing either way.
    claimed = [key for key in stored if key not in tally.undecided
               and (key not in acked or first[key] <= tally.refused_at.get(key, float("-inf")))]
    return {"acknowledged": len(acked), "stored": sum(stored.values()), "lost": len(lost),
            "stored_twice": len(twice), "stored_unacknowledged": len(claimed),
            "stored_undecided": sum(1 for key in tally.undecided if key in stored and key not in acked),
            "examples": [f"{host_name(i)}#{n}" for i, n in (lost + twice + claimed)[:5]]}


async def check_served(port: int, agents: int, tally: Tally) -> dict[str, Any]:
    """GET /v1/nodes/{id} of every host: its Sequence is the newest acknowledged (or a newer undecided one)."""
    wrong: list[str] = []
    missing = 0
    limit = asyncio.Semaphore(16)

    async def one(session: aiohttp.ClientSession, i: int) -> None:
        nonlocal missing
        if not tally.acked[i]:
            return
        newest = max(tally.acked[i])
        async with limit, session.get(f"http://127.0.0.1:{port}/v1/nodes/{host_name(i)}") as answer:
            if answer.status != 200:
                missing += 1
                return
            node = await answer.json()
        served = next((int(e["value"]) for e in node.get("extensions", [])
                       if e["name"] == "Sequence" and e.get("type") == "Soak"), -1)
        if served != newest and not (served > newest and (i, served) in tally.undecided):
            wrong.append(f"{host_name(i)}: serves #{served}, newest acknowledged #{newest}")

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=16)) as session:
        await asyncio.gather(*(one(session, i) for i in range(agents)))
    return {"hosts_checked": sum(1 for i in range(agents) if tally.acked[i]), "not_found": missing,
            "not_newest": len(wrong), "examples": wrong[:5]}


def slow_by_minute(tally: Tally) -> list[dict[str, float]]:
    """Per minute of the run: answers over the p99 target, and the slowest, to tell a steady cost
    from stalls now and then."""
    minutes: dict[int, list[float]] = {}
    for sent, latency in zip(tally.sent, tally.latencies):
        minutes.setdefault(int((sent - tally.started) // 60), []).append(latency)
    return [{"minute": m, "answers": len(v), "over_target": sum(x * 1e3 >= TARGET_P99_MS for x in v),
             "max_ms": max(v) * 1e3} for m, v in sorted(minutes.items())]


def raise_open_files(needed: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the server inherits it too
        soft = hard
    if soft < needed:
        raise SystemExit(f"{needed} open files needed, the limit is {soft}: raise `ulimit -n` (hard) first")
    return soft


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, default=1000, help="simulated agents, one host and token each (1000)")
    p.add_argument("--minutes", type=float, default=1.0, help="how long they report (1)")
    p.add_argument("--interval", type=float, default=60.0, help="seconds between an agent's samples (60)")
    p.add_argument("--jitter", type=float, default=0.1, help="the interval varies by this share either way (0.1)")
    p.add_argument("--connections", choices=("short", "pool", "own"), default="short",
                   help="a connection per request (short), a shared keep-alive pool, or one kept per agent (own)")
    p.add_argument("--pool", type=int, default=64, help="with --connections pool: its size (64)")
    p.add_argument("--max-pending", type=int, default=256, help="the server's service.max_pending_reports (256)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds an agent waits for an answer (30)")
    p.add_argument("--profile", metavar="FILE", help="run the server under cProfile (its event-loop thread), "
                   "stats to FILE, the top printed")
    p.add_argument("--sample", metavar="FILE", help="run the server under bench/stacksampler.py: where its event-loop "
                   "and writer threads spend wall-clock time, and what held the loop in each stall, to FILE")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (server log, SQLite file)")
    args = p.parse_args(argv)
    if not 1 <= args.agents <= MAX_AGENTS or not 0 < args.minutes <= MAX_MINUTES or args.interval <= 0:
        p.error(f"1..{MAX_AGENTS} agents, 0..{MAX_MINUTES:g} minutes, a positive interval")
    if not 0 <= args.jitter < 1:
        p.error("--jitter is a share: 0 <= jitter < 1")
    files = raise_open_files(args.agents + 512 if args.connections == "own" else 1024)

    workdir = Path(tempfile.mkdtemp(prefix="infosvc-soak-"))
    results: dict[str, Any] = {"agents": args.agents, "minutes": args.minutes, "interval": args.interval,
                               "jitter": args.jitter, "connections": args.connections, "max_pending": args.max_pending,
                               "open_files": files, "cpus": os.cpu_count(), "python": sys.version.split()[0]}
    per_host = math.ceil(args.minutes * 60 / (args.interval * (1 - args.jitter))) + 2
    history = max(100, 2 * per_host)  # every report of the run stays in the store to be checked
    tokens = [secrets.token_urlsafe(24) for _ in range(args.agents)]
    (workdir / "tokens").write_text("".join(f"agent {t} {host_name(i)}\n" for i, t in enumerate(tokens)))
    service = {"max_pending_reports": args.max_pending}
    if args.connections == "own":  # every agent's connection must fit and outlive its interval
        service |= {"max_connections": args.agents + 256, "keepalive_seconds": args.interval * 2 + 10}
    (workdir / "site.toml").write_text(
        "[service]\n" + "".join(f"{k} = {v}\n" for k, v in service.items())
        + f"\n[store]\nhistory_per_host = {history}\n\n[lifecycle]\nheartbeat_seconds = {args.interval}\n")
    docs = templates(args.agents)
    print(f"soak: {args.agents} agents, {args.minutes:g} min, a report every {args.interval:g} s ±{args.jitter:.0%} "
          f"({args.agents / args.interval:.0f}/s offered), {args.connections} connections, documents of "
          f"{min(map(len, map(b''.join, docs)))}-{max(map(len, map(b''.join, docs)))} bytes, "
          f"max_pending_reports {args.max_pending}, {files} open files", flush=True)
    port = free_port()
    db = workdir / "soak.sqlite"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, *(["-m", "cProfile", "-o", args.profile] if args.profile else []),
               *([str(HERE / "stacksampler.py"), args.sample, "--"] if args.sample else ["-m", "infosvc"]), "serve", "--listen", f"127.0.0.1:{port}", "--db", str(db),
               "--tokens", str(workdir / "tokens"), "--config", str(workdir / "site.toml")]
    with open(workdir / "server.log", "wb") as log:
        server = subprocess.Popen(command, env=env, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(port, server)
        monitor = Monitor(server.pid)
        tally, elapsed = asyncio.run(load(args, port, tokens, docs, monitor))
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode} during the run")
        results["store"] = check_store(db, args.agents, tally)
        results["served"] = asyncio.run(check_served(port, args.agents, tally))
        results["sqlite_bytes"] = db_bytes(db)
    finally:
        stop(server)
        if server.returncode not in (0, -15):
            print((workdir / "server.log").read_text()[-3000:], file=sys.stderr)
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    lat = sorted(tally.latencies)
    results["slow_by_minute"] = slow_by_minute(tally)
    results |= {"seconds": elapsed, "samples_taken": tally.taken, "acknowledged": len(lat),
                "rate": len(lat) / elapsed, "answers": dict(tally.statuses), "unsent_at_end": tally.unsent_at_end,
                "undecided": len(tally.undecided), "retry_after_waits": tally.retry_after_waits,
                "latency_ms": {k: _at(lat, q) * 1e3 for k, q in (("p50", .5), ("p90", .9), ("p99", .99),
                                                                   ("p999", .999))} | {"max": _at(lat, 1) * 1e3},
                # CPU at start and end: over the first and the last window of the run
                "server": {"start": monitor.samples[min(1, len(monitor.samples) - 1)],
                           "end": monitor.samples[max(0, len(monitor.samples) - 2)],
                           "peak_rss_mib": max(s["rss_mib"] for s in monitor.samples),
                           "peak_fds": max(s["fds"] for s in monitor.samples),
                           "cpu_cores_mean": (monitor.samples[-1]["cpu_seconds"] - monitor.samples[0]["cpu_seconds"])
                           / max(1e-9, monitor.samples[-1]["t"] - monitor.samples[0]["t"])}}
    failed = report(results)
    if args.profile:
        import pstats
        print(f"the server's event-loop thread, by own time (cProfile, {args.profile}):")
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(25)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "soak.json").write_text(json.dumps(results, indent=2) + "\n")
    return 1 if failed else 0


def report(r: dict[str, Any]) -> bool:
    """Print the figures; True if a check failed."""
    lat, srv, store, served = r["latency_ms"], r["server"], r["store"], r["served"]
    print(f"throughput: {r['acknowledged']} reports acknowledged in {r['seconds']:.0f} s = {r['rate']:.1f}/s "
          f"({r['samples_taken']} samples taken, {r['unsent_at_end']} still kept at the end)")
    print(f"latency of acknowledged reports: p50 {lat['p50']:.1f} ms, p90 {lat['p90']:.1f} ms, p99 {lat['p99']:.1f} ms, "
          f"p99.9 {lat['p999']:.1f} ms, max {lat['max']:.1f} ms; p99 target {TARGET_P99_MS:.0f} ms: "
          + ("ok" if lat["p99"] < TARGET_P99_MS else "MISSED"))
    print("answers over " + f"{TARGET_P99_MS:.0f} ms by minute: " + ", ".join(
        f"{m['over_target']}/{m['answers']} (max {m['max_ms']:.0f} ms)" for m in r["slow_by_minute"]))
    print(f"answers: {r['answers']}; waits for Retry-After: {r['retry_after_waits']}; undecided (no answer): "
          f"{r['undecided']}")
    print(f"server: CPU {srv['start']['cpu_cores']:.2f} cores at start, {srv['end']['cpu_cores']:.2f} at the end, "
          f"{srv['cpu_cores_mean']:.2f} on average; RSS {srv['start']['rss_mib']:.0f} MiB at start, "
          f"{srv['end']['rss_mib']:.0f} MiB at the end (peak {srv['peak_rss_mib']:.0f}); open files peak "
          f"{srv['peak_fds']:.0f}; SQLite {r['sqlite_bytes'] / 2**20:.0f} MiB")
    print(f"store: {store['acknowledged']} acknowledged, {store['lost']} of them lost, {store['stored_twice']} stored "
          f"twice, {store['stored_unacknowledged']} stored though unacknowledged or refused ({store['stored_undecided']} undecided "
          f"ones stored)" + (f"; e.g. {store['examples']}" if store["examples"] else ""))
    print(f"served: {served['hosts_checked']} hosts, {served['not_found']} not found, {served['not_newest']} not "
          "serving their newest acknowledged report" + (f"; e.g. {served['examples']}" if served["examples"] else ""))
    failed = bool(store["lost"] or store["stored_twice"] or store["stored_unacknowledged"]
                  or served["not_found"] or served["not_newest"])
    print("checks: " + ("FAILED" if failed else "passed"))
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
