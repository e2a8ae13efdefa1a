"""Benchmark of report ingest: the real server under 1,000 simulated hosts, against a bare aiohttp app.

The issue's target: at least 3,000 reports/s sustained from 1,000 simulated hosts on this 2-core
machine, with schema validation and the durable store, p99 latency under 50 ms; a bare aiohttp
handler (reads the body, answers 200) is measured in the same run and the server's rate is given
as a ratio of it.

Phases, each driven by the same load generator, a separate process (so it does not share the
server's GIL) that keeps `--connections` keep-alive HTTP/1.1 connections busy with pre-built
requests (asyncio protocols, no HTTP client library), each host sending two samples in turn with
its own bearer token (two SampleIds: each is a new sample to the server, stored and rolled up;
one document sent again and again would be acknowledged as a repeat and not stored):

  bare         a bare aiohttp app, closed loop (every connection sends again as soon as it is answered)
  floor        a bare aiohttp app whose handler parses the body and validates it against
               schemas/sss-node.xsd with the server's own code, and does nothing else: the most any
               ingest that validates can take in this stack, before decoding, storing or roll-up
  floor_multi  the same in one process per CPU sharing the port (SO_REUSEPORT): what more processes
               would add on this machine
  saturate     `infosvc serve`, closed loop: the most it can take
  paced        `infosvc serve`, open loop at `--rate` reports/s: latency at the target rate, measured
               from each request's scheduled send time, so a server that falls behind shows it
  saturate_delta  `infosvc serve`, closed loop, each host having sent a whole sample first, then two
               delta reports of it in turn with every Available and Utilized value changed (the
               reports most samples are, at their largest: docs/api.md, Delta reports)

For each: reports/s answered 2xx, latency p50/p99/max (send to full response), errors; for the
server, its CPU time per report (all threads, and the event-loop thread alone, from /proc) and
how the SQLite file grew. Hosts report every ~0.3 s here, so the config keeps a short history
(`--history`, default 10) to reach the store's steady state (insert + trim) within the warm-up.

Run with `make bench` (or `python bench/ingest.py [--seconds 15] [--connections 128] [--hosts 1000]`);
prints a table and writes bench/results/ingest.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from serving import free_port, post_reports  # noqa: E402  (free_port: bench/submit.py takes it from here)

# The targets set for ingest.
TARGET_RATE = 3000.0
TARGET_P99_MS = 50.0

# --- a fleet of simulated hosts ------------------------------------------------------------------

#: Ten kinds of hardware: (processor model, clock MHz, CPUs, RAM MiB, OS release, architecture, features).
KINDS: list[tuple[str, int, int, int, str, str, tuple[str, ...]]] = [
    ("AMD EPYC 7763 64-Core Processor", 2450, 128, 512 * 1024, "12", "x86_64", ("BigMem",)),
    ("AMD EPYC 7543 32-Core Processor", 2800, 64, 256 * 1024, "12", "x86_64", ()),
    ("Intel(R) Xeon(R) Gold 6338 CPU", 2000, 64, 256 * 1024, "12", "x86_64", ()),
    ("Intel(R) Xeon(R) Gold 6248 CPU", 2500, 40, 192 * 1024, "11", "x86_64", ()),
    ("Intel(R) Xeon(R) CPU E5-2680 v4", 2400, 28, 128 * 1024, "11", "x86_64", ()),
    ("Intel(R) Xeon(R) Platinum 8380 CPU", 2300, 80, 1024 * 1024, "12", "x86_64", ("BigMem",)),
    ("AMD EPYC 9654 96-Core Processor", 2400, 192, 768 * 1024, "12", "x86_64", ("BigMem",)),
    ("Ampere Altra Q80-30", 3000, 80, 256 * 1024, "12", "aarch64", ()),
    ("Intel(R) Xeon(R) Silver 4314 CPU", 2400, 32, 128 * 1024, "12", "x86_64", ("GPU",)),
    ("AMD EPYC 7302 16-Core Processor", 3000, 32, 64 * 1024, "11", "x86_64", ()),
]


def host_name(i: int) -> str:
    return f"host{i:04d}"


def kind_nodes() -> list[Any]:
    """One Node per kind: this host's real agent document, parsed once, with the kind's hardware."""
    from infosvc.codec.node_xml import node_to_xml, parse_node
    from infosvc.model.node import Consumable, Extension
    from infosvc_agents.agent import HostAgent

    template = HostAgent.for_host(host_id="template").document()
    nodes = []
    for model, clock, cpus, ram, release, arch, features in KINDS:
        node = parse_node(template)
        node.arch = arch
        node.features = list(features)
        values = {("Processor", "Model"): model, ("Processor", "ClockSpeed"): str(clock),
                  ("Processor", "InstructionSet"): arch, ("OperatingSystem", "Release"): release}
        node.extensions = [Extension(e.name, values.get((e.type, e.name), e.value), e.type) for e in node.extensions]
        for props, share in ((node.configured, 1.0), (node.available, 0.75)):
            for i, item in enumerate(props.items):
                if item.kind == "Processors":
                    props.items[i] = replace(item, value=int(cpus * share))
                elif item.kind == "Memory":
                    props.items[i] = Consumable("Memory", ram * share, units="MB")
        nodes.append(parse_node(node_to_xml(node)))  # as the server will see it
    return nodes


def host_node(kinds: list[Any], i: int) -> Any:
    """Host i: its kind's node with its own Id and Name and a few values of its own."""
    from infosvc.model.node import Properties

    base = kinds[i % len(kinds)]
    spread = (i * 7919 % 1000) / 1000  # 0 <= spread < 1, different for neighbours
    cpus = base.configured.get("Processors").value
    ram = base.configured.get("Memory").value

    def vary(item: Any) -> Any:
        if item.kind == "Processors" and item.metric is None:
            return replace(item, value=int(cpus * spread))
        if item.kind == "Memory" and item.metric is None:
            return replace(item, value=round(ram * (0.2 + 0.75 * spread), 3))
        if item.name == "Load":
            return replace(item, value=round(cpus * (1 - spread) * {"1min": 1.0, "5min": 0.9, "15min": 0.8}[item.type], 2))
        return item

    return replace(base, id=host_name(i), name=f"{host_name(i)}.example.org",
                   state="Busy" if spread < 0.05 else "Idle",
                   available=Properties([vary(item) for item in base.available.items]),
                   utilized=Properties([vary(item) for item in base.utilized.items]))


def fleet_nodes(hosts: int) -> list[Any]:
    kinds = kind_nodes()
    return [host_node(kinds, i) for i in range(hosts)]


def fleet_documents(hosts: int) -> list[bytes]:
    from infosvc.codec.node_xml import node_to_xml

    return [node_to_xml(node) for node in fleet_nodes(hosts)]


def as_sample(node: Any, sample: str, step: int = 0) -> Any:
    """The node as the agent's sample `sample`; with `step`, every Available and Utilized value
    moved (the worst case for a delta: all of them changed)."""
    from infosvc.model.node import Extension, Properties

    def moved(item: Any) -> Any:
        if not step:
            return item
        value = item.value + step if isinstance(item.value, int) else round(item.value * (1 - 0.01 * step), 3)
        return replace(item, value=value)

    return replace(node, extensions=[Extension(e.name, sample, e.type) if (e.type, e.name) == ("Agent", "SampleId") else e
                                     for e in node.extensions],
                   available=Properties([moved(item) for item in node.available.items]),
                   utilized=Properties([moved(item) for item in node.utilized.items]))


def sample_documents(nodes: list[Any]) -> list[bytes]:
    """Two whole samples of each host, told apart by their SampleIds: a host sending them in
    turn sends a new sample each time (the same SampleId twice running is a repeat, which the
    server acknowledges without storing)."""
    from infosvc.codec.node_xml import node_to_xml

    return [node_to_xml(as_sample(node, f"{node.id}-{k}", k)) for k in (1, 2) for node in nodes]


def delta_documents(nodes: list[Any]) -> tuple[list[bytes], list[bytes]]:
    """Each host's whole base sample, and two deltas of it (every volatile value changed) to send in turn."""
    from infosvc.codec.node_xml import node_to_xml
    from infosvc.model.nodedelta import delta_of

    bases = [as_sample(node, f"{node.id}-base") for node in nodes]
    deltas = []
    for k in (1, 2):
        for base in bases:
            delta = delta_of(base, as_sample(base, f"{base.id}-d{k}", k))
            assert delta is not None
            deltas.append(node_to_xml(delta))
    return [node_to_xml(base) for base in bases], deltas


# --- the load generator (runs in its own process) ------------------------------------------------

_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.I)


class _Connection(asyncio.Protocol):
    """One keep-alive connection: one request in flight, the next sent on the answer (or when due)."""

    def __init__(self, run: _Run, requests: list[bytes], offset: float) -> None:
        self.run = run
        self.requests = requests
        self.k = 0
        self.buf = b""
        self.need = -1
        self.status = 0
        self.sent = 0.0  # when the request in flight was sent
        self.due = offset  # paced: when the next request is due (loop time)
        self.transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.run.stopping:
            self.run.errors["connection lost"] = self.run.errors.get("connection lost", 0) + 1
        self.run.finished(self)

    def send(self) -> None:
        run = self.run
        if run.stopping or self.closed or self.transport is None:
            run.finished(self)
            return
        request = self.requests[self.k]
        self.k = (self.k + 1) % len(self.requests)
        self.sent = run.loop.time()
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        while True:
            if self.need < 0:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    break
                head = buf[:end]
                self.status = int(head[9:12])
                found = _LENGTH.search(head)
                if found is None:  # the server answers with a length; anything else is an error here
                    self.run.errors["no content-length"] = self.run.errors.get("no content-length", 0) + 1
                    assert self.transport is not None
                    self.transport.close()
                    return
                self.need = end + 4 + int(found[1])
            if len(buf) < self.need:
                break
            buf = buf[self.need:]
            self.need = -1
            self.answered()
        self.buf = buf

    def answered(self) -> None:
        run = self.run
        now = run.loop.time()
        if run.measuring:
            if 200 <= self.status < 300:
                run.ok += 1
                run.latencies.append(now - self.sent)
                if run.interval:
                    run.scheduled_latencies.append(now - min(self.sent, self.due))
                    run.scheduled_at.append(min(self.sent, self.due))
            else:
                key = str(self.status)
                run.errors[key] = run.errors.get(key, 0) + 1
        if run.interval:
            self.due += run.interval
            if now >= self.due or run.stopping:
                if now - self.due > run.interval:
                    run.late += run.measuring
                self.send()
            else:
                run.loop.call_at(self.due, self.send)
        else:
            self.send()


class _Run:
    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float) -> None:
        self.loop = loop
        self.interval = interval
        self.measuring = False
        self.stopping = False
        self.ok = 0
        self.late = 0
        self.errors: dict[str, int] = {}
        self.latencies: list[float] = []
        self.scheduled_latencies: list[float] = []
        self.scheduled_at: list[float] = []  # each measured request's scheduled send (the loop's clock)
        self.open: set[_Connection] = set()
        self.all_done = loop.create_future()

    def finished(self, conn: _Connection) -> None:
        self.open.discard(conn)
        if self.stopping and not self.open and not self.all_done.done():
            self.all_done.set_result(None)


async def _generate(port: int, requests: list[bytes], connections: int, warmup: float, seconds: float,
                    rate: float | None, timeline: str | None = None) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    interval = connections / rate if rate else 0.0
    run = _Run(loop, interval)
    per_connection: list[list[bytes]] = [requests[c::connections] for c in range(connections)]
    conns = []
    for c, mine in enumerate(per_connection):
        if not mine:
            continue
        _, conn = await loop.create_connection(lambda m=mine: _Connection(run, m, 0.0), "127.0.0.1", port)
        conns.append(conn)
    start = loop.time() + 0.05
    for c, conn in enumerate(conns):
        run.open.add(conn)
        conn.due = start + (c / rate if rate else 0.0)
        loop.call_at(conn.due, conn.send)
    await asyncio.sleep(start - loop.time() + warmup)
    print("WINDOW_START", flush=True)
    cpu0, t0 = time.process_time(), loop.time()
    run.measuring = True
    await asyncio.sleep(seconds)
    run.measuring = False
    cpu1, t1 = time.process_time(), loop.time()
    print("WINDOW_END", flush=True)
    run.stopping = True
    try:
        await asyncio.wait_for(asyncio.shield(run.all_done), 30)
    except asyncio.TimeoutError:
        run.errors["unanswered at the end"] = len(run.open)
    for conn in conns:
        if conn.transport is not None:
            conn.transport.close()
    elapsed = t1 - t0
    if timeline and rate:  # when each request was due, from the window's start, and its latency from then
        Path(timeline).write_text(json.dumps([[at - t0, latency] for at, latency in
                                              zip(run.scheduled_at, run.scheduled_latencies)]))
    return {"connections": len(conns), "seconds": elapsed, "ok": run.ok, "rate": run.ok / elapsed,
            "errors": run.errors, "error_count": sum(run.errors.values()),
            "latency_ms": _percentiles(run.latencies),
            "scheduled_latency_ms": _percentiles(run.scheduled_latencies) if rate else None,
            "target_rate": rate, "late_sends": run.late if rate else None,
            "generator_cpu_us_per_request": (cpu1 - cpu0) / max(1, run.ok) * 1e6}


def _percentiles(samples: list[float]) -> dict[str, float] | None:
    if not samples:
        return None
    samples.sort()
    n = len(samples)
    return {"p50": samples[n // 2] * 1e3, "p90": samples[int(n * 0.90)] * 1e3, "p99": samples[int(n * 0.99)] * 1e3,
            "max": samples[-1] * 1e3, "mean": statistics.fmean(samples) * 1e3}


def generator_main(spec_path: str) -> int:
    spec = pickle.loads(Path(spec_path).read_bytes())
    result = asyncio.run(_generate(spec["port"], spec["requests"], spec["connections"], spec["warmup"],
                                   spec["seconds"], spec["rate"], spec.get("timeline")))
    print("RESULT " + json.dumps(result), flush=True)
    return 0


# --- the bare baseline -------------------------------------------------------------------------

def bare_server_main(port: int, validate: bool = False) -> int:
    """A bare aiohttp app: reads the body and answers 200. With `validate`, the handler also
    parses the body and checks it against schemas/sss-node.xsd with the server's own code
    (infosvc.codec.safexml), and does nothing else: the floor of any ingest that validates, in
    this stack. Listens with SO_REUSEPORT, so several of them can share the port."""
    from aiohttp import web

    check = None
    if validate:
        from infosvc.codec import safexml
        from infosvc.codec.node_xml import SCHEMA_FILE

        xsd = safexml.schema(SCHEMA_FILE)

        def check(body: bytes) -> None:
            safexml.validate(safexml.parse(body, what="SSS Node document"), xsd)

    async def post(request: web.Request) -> web.Response:
        body = await request.read()
        if check is not None and request.method == "POST":
            check(body)
        return web.Response(body=b'{"ok":true}', content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/nodes", post)
    app.router.add_get("/healthz", lambda request: post(request))
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, reuse_port=True)
    return 0


# --- the orchestration -------------------------------------------------------------------------

PHASE_NAMES = {"bare": "bare aiohttp, closed loop", "floor": "floor: parse+validate only",
               "floor_multi": "floor: parse+validate, {n} procs"}

def wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not become ready")


def proc_cpu(pids: list[int]) -> dict[str, float]:
    """CPU seconds of processes: all their threads, and their main (event-loop) threads alone."""
    tick = os.sysconf("SC_CLK_TCK")

    def read(path: str) -> float:
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick  # utime, stime

    return {"process": sum(read(f"/proc/{pid}/stat") for pid in pids),
            "main_thread": sum(read(f"/proc/{pid}/task/{pid}/stat") for pid in pids)}


def db_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists())


def drive(port: int, pid: int | list[int], requests: list[bytes], *, connections: int, warmup: float, seconds: float,
          rate: float | None, workdir: Path, profile: str | None = None, gil: bool = False,
          timeline: str | None = None) -> dict[str, Any]:
    """Run the generator against the server `pid` (or processes sharing the port) listening on
    `port`; the server's CPU over the window. `timeline`: a paced run's requests written there as
    JSON, [seconds into the window it was due, seconds from then to its answer] each."""
    pids = pid if isinstance(pid, list) else [pid]
    spec = workdir / "spec.pickle"
    spec.write_bytes(pickle.dumps({"port": port, "requests": requests, "connections": connections,
                                   "warmup": warmup, "seconds": seconds, "rate": rate,
                                   "timeline": str(Path(timeline).resolve()) if timeline else None}))
    gen = subprocess.Popen([sys.executable, __file__, "--_generate", str(spec)], stdout=subprocess.PIPE, text=True)
    assert gen.stdout is not None
    cpu0 = cpu1 = None
    spy = None
    result: dict[str, Any] = {}
    for line in gen.stdout:
        if line.startswith("WINDOW_START"):
            cpu0 = proc_cpu(pids)
            if profile:
                spy_bin = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
                spy = subprocess.Popen([spy_bin, "record", "--pid", str(pids[0]), "--duration", str(int(seconds)),
                                        "--rate", "100", "--format", "raw", "--output", profile, *(["--gil"] if gil else [])],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elif line.startswith("WINDOW_END"):
            cpu1 = proc_cpu(pids)
        elif line.startswith("RESULT "):
            result = json.loads(line[7:])
    if gen.wait() != 0 or not result:
        raise RuntimeError("load generator failed")
    if spy is not None:
        spy.wait()
    assert cpu0 is not None and cpu1 is not None
    ok = max(1, result["ok"])
    window = result["seconds"]
    result["server_cpu_us_per_report"] = (cpu1["process"] - cpu0["process"]) / ok * 1e6
    result["server_main_thread_cpu_us_per_report"] = (cpu1["main_thread"] - cpu0["main_thread"]) / ok * 1e6
    result["server_cpu_utilization"] = (cpu1["process"] - cpu0["process"]) / window
    result["server_main_thread_utilization"] = (cpu1["main_thread"] - cpu0["main_thread"]) / window
    return result


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def request_bytes(port: int, token: str, body: bytes) -> bytes:
    head = (f"POST /v1/nodes HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/xml\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=15.0, help="measured seconds per phase (15)")
    p.add_argument("--warmup", type=float, default=4.0, help="unmeasured seconds before each phase (4)")
    p.add_argument("--connections", type=int, default=128, help="concurrent keep-alive connections (128)")
    p.add_argument("--hosts", type=int, default=1000, help="simulated hosts, one token each (1000)")
    p.add_argument("--rate", type=float, default=TARGET_RATE, help="reports/s of the paced phase (3000; 0 skips it)")
    p.add_argument("--share", type=float, default=0.8,
                   help="when the saturated rate is below --rate, also pace at this share of it (0.8; 0 skips)")
    p.add_argument("--history", type=int, default=10, help="store.history_per_host in the server's config (10)")
    p.add_argument("--no-bare", action="store_true", help="skip the bare aiohttp baseline")
    p.add_argument("--profile", metavar="FILE", help="record the server with py-spy (raw stacks) while saturated")
    p.add_argument("--profile-gil", action="store_true", help="with --profile: sample only the thread holding the GIL")
    p.add_argument("--_generate", metavar="SPEC", help=argparse.SUPPRESS)
    p.add_argument("--no-floor", action="store_true",
                   help="skip the floor phases (a bare app that only parses and validates, 1 and 2 processes)")
    p.add_argument("--_bare-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    p.add_argument("--_validate", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args._generate:
        return generator_main(args._generate)
    if args._bare_server:
        return bare_server_main(args._bare_server, validate=args._validate)

    workdir = Path(tempfile.mkdtemp(prefix="infosvc-bench-ingest-"))
    results: dict[str, Any] = {"hosts": args.hosts, "connections": args.connections, "seconds": args.seconds,
                               "warmup": args.warmup, "history_per_host": args.history,
                               "cpus": os.cpu_count(), "python": sys.version.split()[0]}
    try:
        nodes = fleet_nodes(args.hosts)
        documents = sample_documents(nodes)
        bases, deltas = delta_documents(nodes)
        tokens = [secrets.token_urlsafe(24) for _ in nodes]
        results["delta_bytes"] = {"min": min(map(len, deltas)), "max": max(map(len, deltas))}
        (workdir / "tokens").write_text("".join(f"agent {t} {host_name(i)}\n" for i, t in enumerate(tokens)))
        tokens2 = tokens * 2  # each host's two samples
        (workdir / "site.toml").write_text(f"[store]\nhistory_per_host = {args.history}\n")
        results["document_bytes"] = {"min": min(map(len, documents)), "max": max(map(len, documents))}
        print(f"{args.hosts} hosts, documents of {results['document_bytes']['min']}-"
              f"{results['document_bytes']['max']} bytes (deltas {results['delta_bytes']['min']}-"
              f"{results['delta_bytes']['max']}), {args.connections} connections, "
              f"{args.warmup:g} s warm-up + {args.seconds:g} s per phase", flush=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}

        phases = [] if args.no_bare else [("bare", 1, False)]
        if not args.no_floor:
            phases += [("floor", 1, True), ("floor_multi", os.cpu_count() or 2, True)]
        for key, processes, validate in phases:
            port = free_port()
            procs = [subprocess.Popen([sys.executable, __file__, "--_bare-server", str(port),
                                       *(["--_validate"] if validate else [])], env=env) for _ in range(processes)]
            try:
                for proc in procs:
                    wait_ready(port, proc)
                requests = [request_bytes(port, t, d) for t, d in zip(tokens2, documents)]
                results[key] = drive(port, [proc.pid for proc in procs], requests, connections=args.connections,
                                     warmup=args.warmup, seconds=args.seconds, rate=None, workdir=workdir)
                results[key]["processes"] = processes
            finally:
                for proc in procs:
                    stop(proc)
            print(f"  {PHASE_NAMES[key].format(n=processes)}: {results[key]['rate']:.0f}/s", flush=True)

        port = free_port()
        db = workdir / "bench.sqlite"
        server = subprocess.Popen(
            [sys.executable, "-m", "infosvc", "serve", "--listen", f"127.0.0.1:{port}", "--db", str(db),
             "--tokens", str(workdir / "tokens"), "--config", str(workdir / "site.toml")], env=env, cwd=workdir)
        try:
            wait_ready(port, server)
            size0 = db_bytes(db)
            requests = [request_bytes(port, t, d) for t, d in zip(tokens2, documents)]
            results["saturate"] = drive(port, server.pid, requests, connections=args.connections, warmup=args.warmup,
                                        seconds=args.seconds, rate=None, workdir=workdir, profile=args.profile, gil=args.profile_gil)
            print(f"  infosvc saturated: {results['saturate']['rate']:.0f}/s", flush=True)
            if args.rate:
                results["paced"] = drive(port, server.pid, requests, connections=args.connections,
                                         warmup=args.warmup, seconds=args.seconds, rate=args.rate, workdir=workdir)
            if args.share and results["saturate"]["rate"] < args.rate:
                # The target rate is beyond this server: latency at a rate it can sustain, too.
                rate = round(args.share * results["saturate"]["rate"])
                results["paced_sustainable"] = drive(port, server.pid, requests, connections=args.connections,
                                                     warmup=args.warmup, seconds=args.seconds, rate=rate,
                                                     workdir=workdir)
            size1 = db_bytes(db)
            # The reports most samples are: deltas of each host's whole sample, sent first.
            post_reports(port, tokens, bases)
            results["saturate_delta"] = drive(port, server.pid, [request_bytes(port, t, d) for t, d in zip(tokens2, deltas)],
                                              connections=args.connections, warmup=args.warmup, seconds=args.seconds,
                                              rate=None, workdir=workdir, gil=args.profile_gil,
                                              profile=args.profile and f"{args.profile}.delta")
            print(f"  infosvc saturated with deltas: {results['saturate_delta']['rate']:.0f}/s", flush=True)
        finally:
            stop(server)
        results["sqlite"] = {"bytes_at_start": size0, "bytes_at_end": size1, "bytes_after_shutdown": db_bytes(db),
                             "growth_bytes": size1 - size0}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    report(results)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "ingest.json").write_text(json.dumps(results, indent=2))
    return 0


def report(results: dict[str, Any]) -> None:
    rows = [(PHASE_NAMES[key].format(n=results[key]["processes"]), results[key])
            for key in ("bare", "floor", "floor_multi") if results.get(key)]
    rows.append(("infosvc, closed loop", results.get("saturate")))
    rows.append(("infosvc, deltas, closed loop", results.get("saturate_delta")))
    for key in ("paced", "paced_sustainable"):
        if results.get(key):
            rows.append((f"infosvc, paced at {results[key]['target_rate']:.0f}/s", results[key]))
    print(f"{'phase':30} {'2xx/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'errors':>7} "
          f"{'srv CPU us/rep':>15} {'loop thr us/rep':>16}")
    for name, r in rows:
        if not r:
            continue
        lat = r["scheduled_latency_ms"] or r["latency_ms"] or {"p50": 0, "p99": 0, "max": 0}
        print(f"{name:30} {r['rate']:8.0f} {lat['p50']:8.1f} {lat['p99']:8.1f} {lat['max']:8.1f} {r['error_count']:7d} "
              f"{r['server_cpu_us_per_report']:15.0f} {r['server_main_thread_cpu_us_per_report']:16.0f}")
    sat, bare, delta = results.get("saturate"), results.get("bare"), results.get("saturate_delta")
    if sat and bare:
        results["ratio_to_bare"] = sat["rate"] / bare["rate"]
        print(f"infosvc / bare aiohttp: {results['ratio_to_bare']:.3f} of the bare rate for whole reports (goal 0.25)")
    if delta and bare:
        results["delta_ratio_to_bare"] = delta["rate"] / bare["rate"]
        print(f"infosvc / bare aiohttp: {results['delta_ratio_to_bare']:.3f} of the bare rate for deltas (goal 0.5)")
    for key in ("floor", "floor_multi"):
        floor = results.get(key)
        if floor:
            mark = "reaches" if floor["rate"] >= TARGET_RATE else "is BELOW"
            print(f"{PHASE_NAMES[key].format(n=floor['processes'])}: {floor['rate']:.0f}/s, which {mark} the target "
                  f"{TARGET_RATE:.0f}/s before any decoding, storing or roll-up"
                  + (f"; infosvc is {sat['rate'] / floor['rate']:.3f} of it" if sat else ""))
    if sat:
        mark = "ok" if sat["rate"] >= TARGET_RATE else "UNDER"
        print(f"saturated rate {sat['rate']:.0f}/s against the target {TARGET_RATE:.0f}/s: {mark}; server CPU "
              f"{sat['server_cpu_utilization']:.2f} cores (event-loop thread {sat['server_main_thread_utilization']:.2f})")
    for paced in (results.get("paced"), results.get("paced_sustainable")):
        if not paced:
            continue
        p99 = (paced["scheduled_latency_ms"] or {}).get("p99", float("inf"))
        mark = "ok" if p99 < TARGET_P99_MS and paced["rate"] >= 0.98 * paced["target_rate"] else "OVER"
        print(f"paced: {paced['rate']:.0f}/s of {paced['target_rate']:.0f}/s asked, p99 {p99:.1f} ms from the scheduled "
              f"send (target {TARGET_P99_MS:.0f} ms): {mark}; {paced['late_sends']} sends more than one interval late")
    s = results.get("sqlite")
    if s:
        print(f"SQLite (db + wal): {s['bytes_at_start'] / 2**20:.1f} MiB -> {s['bytes_at_end'] / 2**20:.1f} MiB while "
              f"loaded, {s['bytes_after_shutdown'] / 2**20:.1f} MiB after shutdown (history_per_host "
              f"{results['history_per_host']})")
    for name, r in rows:
        if r:
            print(f"  {name}: load generator {r['generator_cpu_us_per_request']:.0f} us CPU per request"
                  + (f"; errors {r['errors']}" if r["errors"] else ""))


if __name__ == "__main__":
    raise SystemExit(main())
