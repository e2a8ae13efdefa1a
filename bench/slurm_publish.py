"""Benchmark of what a Slurm read costs the event loop at many nodes: putting a read in the tree
(`SlurmSite.publish`: hosts, the SSS Node entries, the CEs) and the first `GET /v1/nodes` after
it (the entries' JSON), with and without the part made in the read's worker thread
(`SlurmSite.prepare`: hosts, entries and their renderings), in process.

The nodes are the saved output of a real Slurm (tests/fixtures/slurm) copied --nodes times under
new names; each case is run on a first read and on a second read with the same facts (most
reads: an unchanged node keeps its SSS Node). Median of --repeat, milliseconds of wall time.

Run: `.venv/bin/python bench/slurm_publish.py [--nodes 10000] [--repeat 3]`; prints a table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from infosvc.config import parse_config  # noqa: E402
from infosvc.hosts.aggregator import Aggregator  # noqa: E402
from infosvc.hosts.tokens import Tokens  # noqa: E402
from infosvc.lrms.cluster import ClusterState  # noqa: E402
from infosvc.lrms.slurm_parse import SQUEUE_JOBS, jobs_of, nodes_of, partitions_of  # noqa: E402
from infosvc.store import Store  # noqa: E402

FIXTURE = HERE.parent / "tests" / "fixtures" / "slurm"


def cluster(count: int, read_at: float) -> ClusterState:
    saved = nodes_of(json.loads((FIXTURE / "sinfo.json").read_text())["nodes"])
    nodes = tuple(dataclasses.replace(saved[i % len(saved)], name=f"n{i:05d}", hostname=f"n{i:05d}")
                  for i in range(count))
    return ClusterState(nodes, partitions_of((FIXTURE / "partitions.txt").read_text(), nodes),
                        jobs_of((FIXTURE / "squeue.txt").read_text(), SQUEUE_JOBS.with_token("fixture")), "22.05.8",
                        read_at)


def on_loop(agg: Aggregator, state: ClusterState, prepare: bool) -> tuple[float, float]:
    """(the worker thread's part, the event loop's part: publish and the first listing's JSON), ms."""
    thread = 0.0
    if prepare:
        started = time.perf_counter()
        agg.prepare_slurm(state)
        thread = time.perf_counter() - started
    started = time.perf_counter()
    agg.publish_slurm(state)
    for entry in agg.slurm_nodes().values():
        entry.json()
    return thread * 1e3, (time.perf_counter() - started) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    config = parse_config(tomllib.loads('[lrms]\ntype = "slurm"'))
    first, second = cluster(args.nodes, 1.8e9), cluster(args.nodes, 1.8e9 + 30)
    rows: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.repeat):
            for prepare in (False, True):
                agg = Aggregator(config, Store(Path(tmp) / f"{run}-{prepare}.sqlite"), Tokens())
                for which, state in (("first read", first), ("same facts again", second)):
                    rows.setdefault(f"{which}, {'prepared off the loop' if prepare else 'all on the loop'}",
                                    []).append(on_loop(agg, state, prepare))
    print(f"{args.nodes} Slurm nodes, median of {args.repeat} (ms)")
    print(f"{'case':<48} {'worker thread':>14} {'event loop':>11}")
    median: Callable[[list[float]], float] = statistics.median
    for case, runs in rows.items():
        print(f"{case:<48} {median([r[0] for r in runs]):>14.0f} {median([r[1] for r in runs]):>11.0f}")


if __name__ == "__main__":
    main()
