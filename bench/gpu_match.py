"""Benchmark of matching with GPUs asked against the same without (docs/scheduling.md, GPUs): one
SSS Job against 10,000 hosts in 100 subclusters (bench/match.py's site), a quarter of whose kinds
have 4 or 8 GPUs (`Resource name="GPU"` as the agent reports them), with bench/match.py's job,
and the same job asking `<Resource name="GPU">2</Resource>` on top. Both through
infosvc.matching.match as the server calls it (the roll-up's HostColumns) and without them (the
per-host loop), interleaved, median of --runs.

Run: `python bench/gpu_match.py [--hosts 10000] [--runs 20]`; prints a table."""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import match as base  # noqa: E402  (bench/match.py)
from infosvc.codec.job_xml import parse_job  # noqa: E402
from infosvc.config.site import SiteConfig  # noqa: E402
from infosvc.hosts.rollup import Rollup, host_from_node  # noqa: E402
from infosvc.matching import Site, compile_requirements, match  # noqa: E402
from infosvc.matching.hostcolumns import HostColumns  # noqa: E402
from infosvc.model.job import resolve  # noqa: E402
from infosvc.model.node import Consumable, Extension, Node  # noqa: E402

GPU_JOB = resolve(parse_job(base.JOB.replace(b"</Requested>", b'<Resource name="GPU">2</Resource></Requested>')).job)[0]


def gpu_node(i: int) -> Node:
    node = base.make_node(i, 100)
    kind = i % 100
    if kind % 4 == 3:  # a quarter of the kinds (those of 32 CPUs)
        count, model = (4, 8)[kind % 8 // 4], f"GPU model {kind}"
        node.extensions += [Extension("Vendor", "NVIDIA", f"GPU:0000:{g + 16:02x}:00.0") for g in range(count)]
        node.extensions += [Extension("Model", model, f"GPU:0000:{g + 16:02x}:00.0") for g in range(count)]
        node.configured.add(Consumable("Resource", float(count), name="GPU", type=model))
        node.available.add(Consumable("Resource", float(i % (count + 1)), name="GPU", type=model))
        node.utilized.add(Consumable("Resource", float(count - i % (count + 1)), name="GPU", type=model))
    return node


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    config = SiteConfig()
    rollup = Rollup(config)
    nodes = {}
    for i in range(args.hosts):
        node = gpu_node(i)
        rollup.update(host_from_node(node, "Paused" if i % 100 == 50 else "Ready", config, "2026-01-01T00:00:00Z"))
        nodes[node.id] = node
    site = Site.of(rollup)
    columns = HostColumns()
    columns.sync(rollup, nodes.get)
    times: dict[str, list[float]] = {}
    fits: dict[str, int] = {}
    for _ in range(args.runs):
        for name, model in (("without", base.JOB_MODEL), ("with GPUs", GPU_JOB)):
            for how, kept in (("columns", columns), ("per host", None)):
                gc.collect()
                started = time.perf_counter()
                result = match(compile_requirements(model), rollup, nodes.get, site, columns=kept)
                times.setdefault(f"{name}, {how}", []).append((time.perf_counter() - started) * 1000)
                fits[name] = len(result.matches)
    print(f"{args.hosts} hosts, {len(rollup.subclusters)} subclusters; median of {args.runs} (ms)")
    for key, values in times.items():
        print(f"{key:<22} {statistics.median(values):8.2f}")
    for how in ("columns", "per host"):
        ratio = statistics.median(times[f"with GPUs, {how}"]) / statistics.median(times[f"without, {how}"])
        print(f"with GPUs over without ({how}): {ratio:.2f}x")
    print(f"fitting hosts: {fits}")


if __name__ == "__main__":
    main()
