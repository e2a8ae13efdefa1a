"""Benchmark of a top level (docs/grid.md, Federation): 20 sites of 1,000 hosts each.

The targets: the top refreshes every site within one interval, and answers GET /v1/glue for all
20,000 hosts as fast as a single site of 20,000 hosts does. Both are measured in the same run:

(a) The sites: each site's GET /v1/glue JSON is rendered once by the site's own code (a Rollup
    of 1,000 hosts of ten hardware kinds, bench/ingest.py's, through publish.glue.Glue), in two
    versions whose every host's reported_at differs, and served by one small aiohttp process
    (`--serve-sites`, a path per site) that alternates the two on each request: every pull of
    every site is a change of all its hosts, the worst case (a site whose agents report every
    interval), so the top reads each site's whole document anew at every pull.
(b) The top: the real `infosvc serve` with the 20 upstreams, pulling every `--interval` seconds.
    Timed: from its start to the first complete union; then over `--intervals` intervals, the
    top's CPU (utime + stime) per interval, every site's pulls (each must have succeeded in the
    last interval), the longest pull; and GET /v1/glue (JSON) over one keep-alive connection in a
    loop meanwhile: median, p99 and max (reads right after a site changed render its hosts anew).
(c) The single site: the real `infosvc serve` on a SQLite file holding 20,000 hosts (bench/glue.py's
    fill_store): GET /v1/glue median, p99 and max of `--requests` requests.

Run under the shared lock: `flock /tmp/heavy.lock python bench/federation.py` (defaults: 20 sites,
1,000 hosts, a 10 s interval, 3 intervals); prints a table and writes bench/results/federation.json.
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import shutil
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

from glue import Client, fill_store  # noqa: E402
from ingest import free_port, host_node, kind_nodes, stop, wait_ready  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def site_bodies(sites: int, hosts: int, directory: Path) -> int:
    """Write each site's two GLUE JSON documents (sNN.a.json, sNN.b.json); returns their mean size."""
    from infosvc.publish.glue import Glue
    from infosvc.config.site import SiteConfig
    from infosvc.hosts.rollup import Rollup, host_from_node

    kinds = kind_nodes()
    config = SiteConfig()
    sizes = []
    for s in range(sites):
        nodes = [replace(node, id=f"s{s:02d}-host{i:04d}", name=f"s{s:02d}-host{i:04d}")
                 for i, node in enumerate(host_node(kinds, i) for i in range(hosts))]
        for version, stamp in (("a", "2026-01-01T00:00:00Z"), ("b", "2026-01-01T00:01:00Z")):
            rollup = Rollup(config)
            for node in nodes:
                rollup.update(host_from_node(node, "Ready", config, stamp))
            body = Glue(rollup).json.tree()
            (directory / f"s{s:02d}.{version}.json").write_bytes(body)
            sizes.append(len(body))
    return int(statistics.fmean(sizes))


def serve_sites(directory: Path, port: int) -> None:
    """The sites' GET /v1/glue, each at /sNN/v1/glue, the two versions in turn."""
    from aiohttp import web

    bodies = {p.name.split(".")[0]: [] for p in directory.glob("s*.a.json")}
    for name in bodies:
        bodies[name] = [(directory / f"{name}.{v}.json").read_bytes() for v in "ab"]
    served = dict.fromkeys(bodies, 0)

    async def glue(request: web.Request) -> web.Response:
        name = request.match_info["site"]
        if name not in bodies:
            raise web.HTTPNotFound()
        served[name] += 1
        return web.Response(body=bodies[name][served[name] % 2], content_type="application/json")

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "served": served})

    app = web.Application()
    app.router.add_get("/{site}/v1/glue", glue)
    app.router.add_get("/healthz", healthz)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def get_json(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
        return json.loads(answer.read())


def top_level(sites: int, interval: float, intervals: int, workdir: Path, sites_port: int) -> dict[str, Any]:
    lines = ["[federation]", f"interval_seconds = {interval}", "delete_delay_seconds = 3600.0", "timeout_seconds = 10.0"]
    for s in range(sites):
        lines += ["[[federation.upstreams]]", f'url = "http://127.0.0.1:{sites_port}/s{s:02d}"', f'name = "s{s:02d}"']
    (workdir / "top.toml").write_text("\n".join(lines) + "\n")
    (workdir / "tokens").write_text("")
    port = free_port()
    started = time.perf_counter()
    top = subprocess.Popen([sys.executable, "-m", "infosvc", "serve", "--config", str(workdir / "top.toml"),
                            "--listen", f"127.0.0.1:{port}", "--db", str(workdir / "top.sqlite"),
                            "--tokens", str(workdir / "tokens")],
                           env=ENV, cwd=workdir, stdout=subprocess.DEVNULL, stderr=open(workdir / "top.log", "wb"))
    try:
        wait_ready(port, top)
        while True:
            upstreams = get_json(port, "/healthz")["upstreams"]
            if all(u["state"] == "ok" for u in upstreams):
                break
            if time.perf_counter() - started > 300:
                raise RuntimeError(f"no complete union after 300 s: {upstreams}")
            time.sleep(0.05)
        first_union_s = time.perf_counter() - started
        # the pulls alone: the top's CPU per interval, no reader
        cpu0, wall0 = cpu_seconds(top.pid), time.perf_counter()
        time.sleep(interval * intervals)
        cpu = cpu_seconds(top.pid) - cpu0
        wall = time.perf_counter() - wall0
        health = get_json(port, "/healthz")["upstreams"]
        now = time.time()
        ages = [now - calendar.timegm(time.strptime(u["last_success"], "%Y-%m-%dT%H:%M:%SZ")) for u in health]
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
        durations = [float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                     if line.startswith("infosvc_federation_site_pull_duration_seconds{")]
        pulls_ok = sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                       if line.startswith("infosvc_federation_pulls_total{") and 'result="ok"' in line)
        pulls_failed = sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                           if line.startswith("infosvc_federation_pulls_total{") and 'result="failed"' in line)
        # then a reader, while the pulls go on: reads right after a site changed render its hosts anew
        client = Client(port)
        times: list[float] = []
        started_reading = time.perf_counter()
        while time.perf_counter() - started_reading < interval * intervals:
            elapsed, status, body = client.request("GET", "/v1/glue")
            if status != 200:
                raise RuntimeError(f"GET /v1/glue at the top: {status}")
            times.append(elapsed)
            time.sleep(0.05)
        client.close()
        size, hosts = len(body), len(json.loads(body)["hosts"])
        times.sort()
        return {"first_union_s": first_union_s, "window_s": wall, "cpu_s": cpu, "cpu_per_interval_s": cpu / wall * interval,
                "all_ok": all(u["state"] == "ok" for u in health), "oldest_last_success_s": max(ages),
                "last_pull_max_s": max(durations), "last_pull_median_s": statistics.median(durations),
                "pulls_ok": pulls_ok, "pulls_failed": pulls_failed, "hosts": hosts, "bytes": size,
                "glue": {"requests": len(times), "median_ms": statistics.median(times) * 1e3,
                         "p99_ms": times[min(len(times) - 1, int(len(times) * 0.99))] * 1e3, "max_ms": times[-1] * 1e3}}
    finally:
        stop(top)


def single_site(hosts: int, requests: int, workdir: Path) -> dict[str, Any]:
    db = workdir / "site.sqlite"
    fill_store(db, hosts, 2)
    (workdir / "site-tokens").write_text("")
    port = free_port()
    site = subprocess.Popen([sys.executable, "-m", "infosvc", "serve", "--listen", f"127.0.0.1:{port}",
                             "--db", str(db), "--tokens", str(workdir / "site-tokens")],
                            env=ENV, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, site, timeout=600)
        client = Client(port)
        client.request("GET", "/v1/glue")
        timed = client.timed("/v1/glue", requests)
        client.close()
        return timed
    finally:
        stop(site)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sites", type=int, default=20)
    p.add_argument("--hosts", type=int, default=1000, help="hosts per site (1000)")
    p.add_argument("--interval", type=float, default=10.0, help="the top's interval_seconds (10)")
    p.add_argument("--intervals", type=int, default=3, help="intervals measured (3)")
    p.add_argument("--requests", type=int, default=30, help="GET /v1/glue of the single site (30)")
    p.add_argument("--serve-sites", nargs=2, metavar=("DIR", "PORT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve_sites:
        serve_sites(Path(args.serve_sites[0]), int(args.serve_sites[1]))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="infosvc-bench-federation-"))
    try:
        t0 = time.perf_counter()
        mean_bytes = site_bodies(args.sites, args.hosts, workdir)
        render_s = time.perf_counter() - t0
        sites_port = free_port()
        server = subprocess.Popen([sys.executable, __file__, "--serve-sites", str(workdir), str(sites_port)], env=ENV)
        try:
            wait_ready(sites_port, server)
            top = top_level(args.sites, args.interval, args.intervals, workdir, sites_port)
        finally:
            stop(server)
        single = single_site(args.sites * args.hosts, args.requests, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results = {"sites": args.sites, "hosts_per_site": args.hosts, "interval_s": args.interval,
               "site_document_bytes_mean": mean_bytes, "sites_rendered_s": render_s, "top": top, "single_site": single}
    total = args.sites * args.hosts
    print(f"{args.sites} sites x {args.hosts} hosts ({mean_bytes / 1e6:.2f} MB of GLUE JSON each, every host changed "
          f"at every pull); interval {args.interval:g} s")
    print(f"  top: first complete union {top['first_union_s']:.1f} s after start; {top['hosts']} hosts")
    print(f"  top: CPU {top['cpu_per_interval_s']:.2f} s per {args.interval:g} s interval "
          f"({top['cpu_s'] / top['window_s'] * 100:.0f}% of a core); pulls ok {top['pulls_ok']:.0f}, "
          f"failed {top['pulls_failed']:.0f}; last pull median {top['last_pull_median_s'] * 1e3:.0f} ms, "
          f"max {top['last_pull_max_s'] * 1e3:.0f} ms")
    within = top["all_ok"] and top["oldest_last_success_s"] <= args.interval + 1.0
    print(f"  top: every site's last good pull within the last interval: {'yes' if within else 'NO'} "
          f"(oldest {top['oldest_last_success_s']:.1f} s ago, to the second)")
    g, s = top["glue"], single
    print(f"  GET /v1/glue, top ({total} hosts, {top['bytes'] / 1e6:.1f} MB): median {g['median_ms']:.1f} ms, "
          f"p99 {g['p99_ms']:.1f} ms, max {g['max_ms']:.1f} ms over {g['requests']} requests while pulling")
    print(f"  GET /v1/glue, single site ({total} hosts, {s['bytes'] / 1e6:.1f} MB): median {s['median_ms']:.1f} ms, "
          f"p99 {s['p99_ms']:.1f} ms, max {s['max_ms']:.1f} ms over {s['requests']} requests")
    print(f"  top as fast as a single site (median): {'yes' if g['median_ms'] <= s['median_ms'] else 'NO'}")
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "federation.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
