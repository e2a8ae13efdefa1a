"""Benchmark of a top level's event loop while it pulls one large site (docs/grid.md, Federation):
GET /healthz latency during pulls of `--hosts` hosts (190,000 by default, the size that stalled
the top's /healthz 4 to 5 s after every pull when the union was built on the event loop).

The upstream is tests/support/upstream.py's: the site's own GLUE JSON of one host repeated under
other ids, two versions alternating so that every pull changes every host. The top is the real
`infosvc serve`, run with `--pythonpath DIR` first on its path (another checkout: main's code, for
a before-and-after on the same machine). Once the first union is complete, /healthz is timed from
a process of its own every 10 ms for `--seconds`, while GET /v1/glue is read every `--read-every`
seconds (the first read after a pull is what rebuilt the union before); printed: /healthz median,
p99 and max, the pulls in the window, the reads of the union; written to
bench/results/federation_pull.json (one entry per `--label`).

Run under the shared lock: `flock /tmp/heavy.lock python bench/federation_pull.py --label after`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support.latency import POLLER  # noqa: E402
from support.server import free_port  # noqa: E402
from support.upstream import serve_upstream  # noqa: E402


def get(port: int, path: str, timeout: float = 300.0) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def pulls(port: int) -> float:
    _, body = get(port, "/metrics")
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines()
               if line.startswith("infosvc_federation_pulls_total{") and 'result="ok"' in line)


def start_top(workdir: Path, hosts: int, interval: float, pythonpath: str | None,
              env: dict[str, str] | None = None) -> tuple[int, subprocess.Popen[bytes], subprocess.Popen[bytes]]:
    """The upstream of `hosts` hosts and a real top level over it (with `env` added to its
    environment), started: the top's port, the top, the upstream."""
    upstream_port, port = free_port(), free_port()
    upstream = serve_upstream(workdir, hosts, upstream_port)
    (workdir / "top.toml").write_text("\n".join([
        "[federation]", f"interval_seconds = {interval}", "delete_delay_seconds = 3600.0",
        "timeout_seconds = 120.0", f"max_body_bytes = {1 << 30}", "[[federation.upstreams]]",
        f'url = "http://127.0.0.1:{upstream_port}"', 'name = "big"']) + "\n")
    (workdir / "tokens").write_text("")
    path = os.pathsep.join(filter(None, [pythonpath, str(ROOT), os.environ.get("PYTHONPATH")]))
    top = subprocess.Popen([sys.executable, "-m", "infosvc", "serve", "--config", str(workdir / "top.toml"),
                            "--listen", f"127.0.0.1:{port}", "--db", str(workdir / "top.sqlite"),
                            "--tokens", str(workdir / "tokens")], env={**os.environ, "PYTHONPATH": path, **(env or {})},
                           cwd=workdir, stdout=subprocess.DEVNULL, stderr=open(workdir / "top.log", "wb"))
    return port, top, upstream


def wait_for_union(top: subprocess.Popen[bytes], port: int, workdir: Path) -> float:
    """Seconds until the top's upstream is pulled whole (its /healthz says so)."""
    started = time.monotonic()
    while True:
        if top.poll() is not None:
            raise RuntimeError(f"the top exited: {(workdir / 'top.log').read_text()[-2000:]}")
        try:
            status, body = get(port, "/healthz", 10)
            if status == 200 and all(u["state"] == "ok" for u in json.loads(body)["upstreams"]):
                return time.monotonic() - started
        except OSError:
            pass
        if time.monotonic() - started > 900:
            raise RuntimeError("no complete union within 900 s")
        time.sleep(0.5)


def stop_all(*processes: subprocess.Popen[bytes]) -> None:
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


def keep(name: str, label: str, result: dict[str, Any]) -> None:
    """`result` as bench/results/NAME.json's entry `label`, beside the others there."""
    out = HERE / "results" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    kept = json.loads(out.read_text()) if out.exists() else {}
    kept[label] = result
    out.write_text(json.dumps(kept, indent=2) + "\n")


def measure(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    port, top, upstream = start_top(workdir, args.hosts, args.interval, args.pythonpath)
    try:
        first_union_s = wait_for_union(top, port, workdir)
        get(port, "/v1/glue")
        pulled = pulls(port)
        stop = workdir / "stop"
        poller = subprocess.Popen([sys.executable, "-c", POLLER.replace("timeout=10", "timeout=120").replace("deadline = time.monotonic() + 60",
                                                                        f"deadline = time.monotonic() + {args.seconds + 120}"),
                                   str(port), "100", str(stop)], stdout=subprocess.PIPE, text=True)
        reads: list[float] = []
        done = threading.Event()

        def reader() -> None:
            while not done.is_set():
                began = time.perf_counter()
                status, body = get(port, "/v1/glue")
                if status == 200:
                    reads.append(time.perf_counter() - began)
                done.wait(args.read_every)

        thread = threading.Thread(target=reader)
        thread.start()
        time.sleep(args.seconds)
        done.set()
        stop.touch()
        thread.join()
        out, _ = poller.communicate(timeout=300)
        latencies = sorted(float(x) for x in out.split())
        return {"hosts": args.hosts, "interval_s": args.interval, "window_s": args.seconds,
                "first_union_s": round(first_union_s, 1), "pulls": pulls(port) - pulled,
                "union_reads": len(reads), "union_read_median_s": round(statistics.median(reads), 2) if reads else None,
                "healthz": {"requests": len(latencies), "median_ms": round(statistics.median(latencies) * 1e3, 1),
                            "p99_ms": round(statistics.quantiles(latencies, n=100)[98] * 1e3, 1),
                            "max_ms": round(latencies[-1] * 1e3, 1)}}
    finally:
        stop_all(top, upstream)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=190_000)
    p.add_argument("--interval", type=float, default=30.0, help="the top's interval_seconds (30)")
    p.add_argument("--seconds", type=float, default=90.0, help="the window /healthz is timed over (90)")
    p.add_argument("--read-every", type=float, default=2.0, help="seconds between reads of the union (2)")
    p.add_argument("--pythonpath", help="the code the top runs, first on its path (another checkout)")
    p.add_argument("--label", default="this checkout")
    args = p.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="infosvc-bench-federation-pull-"))
    result = {"label": args.label, **measure(args, workdir)}
    print(json.dumps(result, indent=2))
    keep("federation_pull", args.label, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
