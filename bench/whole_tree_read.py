"""What anonymous readers of the site's whole GLUE tree (GET /v1/glue, JSON or XML) cost everyone
else: /healthz's latency while they read, with hosts reporting meanwhile (each report changes the
tree, so a read after it cannot be answered as the one before).

A real `infosvc serve` on a store of `--hosts` hosts (bench/glue.py's, filled directly); then for
`--seconds`: `--readers` clients each reading `/v1/glue?format=FMT` whole, again and again, over
a kept connection; one client posting reports of the hosts in turn at `--reports` a second; one
probing /healthz every 50 ms. Prints /healthz's median, p99 and maximum, and how many reads and
reports were answered.

    .venv/bin/python bench/whole_tree_read.py [--hosts 10000] [--readers 8] [--seconds 20] \
        [--reports 100] [--format json] [--pythonpath DIR]

`--pythonpath DIR`: the code the server runs (another checkout's), for a before-and-after in one
session; the clients are this checkout's.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
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
sys.path.insert(0, str(HERE))

from glue import Client, fill_store  # noqa: E402
from ingest import free_port, host_name, stop, wait_ready  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=10000)
    p.add_argument("--readers", type=int, default=8)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--reports", type=float, default=100.0, help="reports a second while the readers read")
    p.add_argument("--format", choices=("json", "xml"), default="json")
    p.add_argument("--pythonpath", type=Path, help="the checkout whose code the server runs")
    args = p.parse_args()
    code = args.pythonpath or ROOT
    workdir = Path(tempfile.mkdtemp(prefix="infosvc-bench-tree-"))
    try:
        db = workdir / "tree.sqlite"
        documents = fill_store(db, args.hosts, 1)
        tokens = [secrets.token_urlsafe(24) for _ in range(args.hosts)]
        (workdir / "tokens").write_text("".join(f"agent {t} {host_name(i)}\n" for i, t in enumerate(tokens)))
        port = free_port()
        env = {**os.environ, "PYTHONPATH": str(code)}
        server = subprocess.Popen([sys.executable, "-m", "infosvc", "serve", "--listen", f"127.0.0.1:{port}",
                                   "--db", str(db), "--tokens", str(workdir / "tokens")],
                                  env=env, cwd=workdir, stdout=subprocess.DEVNULL)
        try:
            wait_ready(port, server, timeout=300)
            result = measure(port, args, documents, tokens)
        finally:
            stop(server)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result |= {"code": str(code), "hosts": args.hosts, "readers": args.readers, "format": args.format}
    print(json.dumps(result, indent=2))
    out = HERE / "results" / "whole_tree_read.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def measure(port: int, args: argparse.Namespace, documents: list[bytes], tokens: list[str]) -> dict[str, Any]:
    path = f"/v1/glue?format={args.format}"
    warm = Client(port)
    _, status, body = warm.request("GET", path)
    if status != 200:
        raise RuntimeError(f"GET {path}: {status} {body[:200]!r}")
    warm.close()
    stop_at = time.monotonic() + args.seconds
    reads, reports, probes, errors = [0], [0], [], []

    def reader() -> None:
        client = Client(port)
        while time.monotonic() < stop_at:
            _, status, _ = client.request("GET", path)
            if status == 200:
                reads[0] += 1
            else:
                errors.append(f"read {status}")
        client.close()

    def reporter() -> None:
        client = Client(port)
        i = 0
        while time.monotonic() < stop_at:
            started = time.monotonic()
            n = i % len(documents)
            _, status, _ = client.request("POST", "/v1/nodes", documents[n], {
                "Authorization": f"Bearer {tokens[n]}", "Content-Type": "application/xml"})
            if status == 200:
                reports[0] += 1
            else:
                errors.append(f"report {status}")
            i += 1
            time.sleep(max(0.0, 1.0 / args.reports - (time.monotonic() - started)))
        client.close()

    def prober() -> None:
        client = Client(port)
        while time.monotonic() < stop_at:
            elapsed, _, _ = client.request("GET", "/healthz")
            probes.append(elapsed * 1e3)
            time.sleep(0.05)
        client.close()

    threads = [threading.Thread(target=reader) for _ in range(args.readers)]
    threads += [threading.Thread(target=reporter), threading.Thread(target=prober)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    probes.sort()
    return {"healthz_ms": {"median": statistics.median(probes), "p99": probes[int(len(probes) * 0.99)],
                           "max": probes[-1], "probes": len(probes)},
            "reads": reads[0], "reports": reports[0], "errors": errors[:10], "error_count": len(errors)}


if __name__ == "__main__":
    raise SystemExit(main())
