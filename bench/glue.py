"""Benchmark of the GLUE roll-up and the read API at 10,000 hosts.

The issue's targets: roll-up of 10,000 hosts from cold under 1 s; GET /v1/glue for 10,000 hosts
under 100 ms; a filtered host query under 5 ms.

(a) In process, no server: 10,000 Node objects of ten hardware kinds (one real agent document,
    parsed once per kind, then varied per host; see bench/ingest.py), then
    - roll-up from cold: a fresh infosvc.hosts.rollup.Rollup, host_from_node + update for every host,
      with the default site config and with a config that names clusters, benchmarks and
      software by NodeSet (as a real site's does);
    - HostTable.load of 10,000 stored records: what a server restart costs, parsing and
      validating every stored document included (reported separately).
(b) The real server (`python -m infosvc serve`) on a SQLite file already holding 10,000 hosts
    (filled through infosvc.store.Store.add_report, far faster than POSTing them): its start-up
    time, then over one keep-alive connection, median and p99 of `--requests` requests each:
    GET /v1/glue (JSON and XML), a filtered GET /v1/glue/hosts, a filtered GET /v1/nodes, and
    GET /v1/nodes of all 10,000. The first GET of each rendering is timed on its own (it renders
    every host; later ones reuse each host's cached fragment), and so is GET /v1/glue after 10% of
    the hosts have reported again (their fragments are rendered anew).

Run with `make bench` (or `python bench/glue.py [--hosts 10000] [--requests 50]`); prints a
table and writes bench/results/glue.json.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from ingest import free_port, host_name, host_node, kind_nodes, stop, wait_ready  # noqa: E402

# The targets set for the GLUE roll-up.
TARGET_ROLLUP_S = 1.0
TARGET_GLUE_MS = 100.0
TARGET_FILTER_MS = 5.0

#: A site config that names its hosts by NodeSet, as a real site's does (for --hosts 10000).
SITE_TOML = """
[[clusters]]
id = "alpha"
nodes = "host[0000-4999]"

[[clusters]]
id = "beta"
nodes = "host[5000-9999]"

[[computing_elements]]
id = "ce-alpha"
queue = "alpha"
clusters = ["alpha"]

[[computing_elements]]
id = "ce-all"
queue = "all"
clusters = ["alpha", "beta"]

[[benchmarks]]
nodes = "host[0000-2999]"
si00 = 2400
sf00 = 2100

[[software]]
nodes = "host[0000-9999]"
runtime_environment = ["PYTHON-3.11", "MPI-OPENMPI-4"]
"""


def _best_and_median(func: Any, rounds: int) -> dict[str, float]:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    return {"best_s": min(times), "median_s": statistics.median(times), "rounds": rounds}


def in_process(hosts: int, rounds: int) -> dict[str, Any]:
    import tomllib

    from infosvc.codec.node_xml import node_to_xml
    from infosvc.hosts.table import HostTable
    from infosvc.hosts.rollup import Rollup, host_from_node
    from infosvc.config.site import SiteConfig, parse_config
    from infosvc.store import HostRecord

    kinds = kind_nodes()
    nodes = [host_node(kinds, i) for i in range(hosts)]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results: dict[str, Any] = {"hosts": hosts}
    for label, config in (("default config", SiteConfig()), ("site config", parse_config(tomllib.loads(SITE_TOML)))):
        def rollup_from_cold() -> Rollup:
            rollup = Rollup(config)
            for node in nodes:
                rollup.update(host_from_node(node, "Ready", config, stamp))
            return rollup

        # host_from_node alone, to tell the mapping from the tree upkeep.
        def mapping_only() -> None:
            for node in nodes:
                host_from_node(node, "Ready", config, stamp)

        rollup = rollup_from_cold()
        results[label] = {
            "rollup": _best_and_median(rollup_from_cold, rounds),
            "host_from_node_only": _best_and_median(mapping_only, rounds),
            "subclusters": len(rollup.subclusters), "clusters": len(rollup.clusters()),
        }
    now = time.time()
    records = [HostRecord(node.id, node_to_xml(node), now, now, True, False) for node in nodes]
    config = SiteConfig()
    results["host_table_load"] = _best_and_median(lambda: HostTable(config).load(records, now=now), max(1, rounds // 2))
    results["document_bytes_mean"] = statistics.fmean(len(r.document) for r in records)
    return results


def fill_store(db: Path, hosts: int, history: int) -> list[bytes]:
    from infosvc.codec.node_xml import node_to_xml
    from infosvc.store import Report, Store

    kinds = kind_nodes()
    documents = [node_to_xml(host_node(kinds, i)) for i in range(hosts)]
    store = Store(db, history_per_host=history)
    now = time.time()

    async def add_all() -> None:
        await asyncio.gather(*(store.add_report(Report(host_name(i), doc, now, True))
                               for i, doc in enumerate(documents)))

    asyncio.run(add_all())
    store.close()
    return documents


class Client:
    """One keep-alive HTTP/1.1 connection; each request is timed from send to the last body byte."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[float, int, bytes]:
        t0 = time.perf_counter()
        self.conn.request(method, path, body=body, headers=headers or {})
        answer = self.conn.getresponse()
        data = answer.read()
        return time.perf_counter() - t0, answer.status, data

    def timed(self, path: str, n: int) -> dict[str, Any]:
        times = []
        size = 0
        for _ in range(n):
            elapsed, status, data = self.request("GET", path)
            if status != 200:
                raise RuntimeError(f"GET {path}: {status} {data[:200]!r}")
            times.append(elapsed)
            size = len(data)
        times.sort()
        return {"path": path, "requests": n, "median_ms": statistics.median(times) * 1e3,
                "p99_ms": times[min(n - 1, int(n * 0.99))] * 1e3, "max_ms": times[-1] * 1e3, "bytes": size}

    def close(self) -> None:
        self.conn.close()


def with_server(hosts: int, requests: int, history: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="infosvc-bench-glue-"))
    try:
        db = workdir / "glue.sqlite"
        t0 = time.perf_counter()
        documents = fill_store(db, hosts, history)
        fill_s = time.perf_counter() - t0
        tokens = [secrets.token_urlsafe(24) for _ in range(hosts)]
        (workdir / "tokens").write_text("".join(f"agent {t} {host_name(i)}\n" for i, t in enumerate(tokens)))
        (workdir / "site.toml").write_text(SITE_TOML if hosts == 10000 else "")
        port = free_port()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        t0 = time.perf_counter()
        server = subprocess.Popen(
            [sys.executable, "-m", "infosvc", "serve", "--listen", f"127.0.0.1:{port}", "--db", str(db),
             "--tokens", str(workdir / "tokens"), "--config", str(workdir / "site.toml")],
            env=env, cwd=workdir, stdout=subprocess.DEVNULL)
        try:
            wait_ready(port, server, timeout=300)
            startup_s = time.perf_counter() - t0
            client = Client(port)
            _, _, health = client.request("GET", "/healthz")
            loaded = json.loads(health)["hosts"]
            out: dict[str, Any] = {"hosts": loaded, "fill_store_s": fill_s, "server_startup_s": startup_s,
                                   "sqlite_bytes": db.stat().st_size}
            last = hosts - 1
            lo, hi = min(100, last), min(199, last)
            width = 4
            nodes_expr = f"host[{lo:0{width}d}-{hi:0{width}d}]"
            queries = {
                "glue_json": "/v1/glue",
                "glue_xml": "/v1/glue?format=xml",
                "glue_hosts_filtered": f"/v1/glue/hosts?state=Ready&min_free_memory=65536&nodes={nodes_expr}",
                "nodes_filtered": f"/v1/nodes?nodes={nodes_expr}&feature=BigMem",
                "nodes_all": "/v1/nodes",
            }
            timings: dict[str, Any] = {}
            for name, path in queries.items():
                first, status, data = client.request("GET", path)
                if status != 200:
                    raise RuntimeError(f"GET {path}: {status} {data[:300]!r}")
                timings[name] = client.timed(path, requests)
                timings[name]["first_ms"] = first * 1e3
                if name == "glue_hosts_filtered":
                    timings[name]["matches"] = len(json.loads(data)["hosts"])
                elif name == "nodes_filtered":
                    timings[name]["matches"] = len(json.loads(data))
            out["requests"] = timings
            # GET /v1/glue after a tenth of the hosts reported again: their fragments are stale.
            churn = max(1, hosts // 10)
            after = []
            for round_ in range(3):
                for i in range(round_ * churn, (round_ + 1) * churn):
                    i %= hosts
                    _, status, data = client.request(
                        "POST", "/v1/nodes", documents[i],
                        {"Authorization": f"Bearer {tokens[i]}", "Content-Type": "application/xml"})
                    if status != 200:
                        raise RuntimeError(f"POST for {host_name(i)}: {status} {data[:300]!r}")
                elapsed, status, _ = client.request("GET", "/v1/glue")
                after.append(elapsed * 1e3)
            out["glue_json_after_churn"] = {"hosts_reported": churn, "ms": after, "median_ms": statistics.median(after)}
            client.close()
        finally:
            stop(server)
        return out
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=10000, help="hosts (10000)")
    p.add_argument("--requests", type=int, default=50, help="requests per query (50)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of each in-process measurement (3)")
    p.add_argument("--history", type=int, default=10, help="store.history_per_host when filling the store (10)")
    args = p.parse_args(argv)

    results: dict[str, Any] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    results["in_process"] = local = in_process(args.hosts, args.rounds)
    results["server"] = server = with_server(args.hosts, args.requests, args.history)

    print(f"{args.hosts} hosts, ten kinds; documents of {local['document_bytes_mean']:.0f} bytes on average")
    print(f"{'figure':52} {'median':>10} {'p99/best':>10} {'target':>8}")

    def row(name: str, value: float, other: float | None, target: float | None, unit: str) -> None:
        mark = "" if target is None else ("ok" if value < target else "OVER")
        other_text = f"{other:10.1f}" if other is not None else f"{'-':>10}"
        target_text = f"{target:8.0f}" if target is not None else f"{'-':>8}"
        print(f"{name + ' (' + unit + ')':52} {value:10.1f} {other_text} {target_text} {mark}")

    for label in ("default config", "site config"):
        r = local[label]
        row(f"roll-up from cold, {label}", r["rollup"]["median_s"] * 1e3, r["rollup"]["best_s"] * 1e3,
            TARGET_ROLLUP_S * 1e3, "ms")
        row(f"  of which host_from_node, {label}", r["host_from_node_only"]["median_s"] * 1e3,
            r["host_from_node_only"]["best_s"] * 1e3, None, "ms")
    row("HostTable.load (parse + validate + roll-up)", local["host_table_load"]["median_s"] * 1e3,
        local["host_table_load"]["best_s"] * 1e3, None, "ms")
    row("server start-up to /healthz", server["server_startup_s"] * 1e3, None, None, "ms")
    targets = {"glue_json": TARGET_GLUE_MS, "glue_xml": TARGET_GLUE_MS, "glue_hosts_filtered": TARGET_FILTER_MS,
               "nodes_filtered": TARGET_FILTER_MS, "nodes_all": None}
    for name, r in server["requests"].items():
        row(f"GET {r['path'][:40]}", r["median_ms"], r["p99_ms"], targets[name], "ms")
    for name, r in server["requests"].items():
        extra = f", {r['matches']} matches" if "matches" in r else ""
        print(f"  {name}: first request {r['first_ms']:.1f} ms, {r['bytes']} bytes{extra}")
    churn = server["glue_json_after_churn"]
    print(f"  GET /v1/glue after {churn['hosts_reported']} hosts reported again: "
          + ", ".join(f"{ms:.1f}" for ms in churn["ms"]) + " ms")
    print(f"  store filled with {server['hosts']} hosts in {server['fill_store_s']:.1f} s "
          f"({server['sqlite_bytes'] / 2**20:.1f} MiB)")
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "glue.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
