"""Benchmark of one read of a Slurm cluster (infosvc/lrms/reader.py) at 100 emulated nodes and
10,000 pending jobs, against Slurm's own commands run alone, and how stale the published state is.

A real Slurm (tests/support/slurm.py, `many_nodes`): 100 `slurmd -N` daemons of 10 CPUs on this
machine, one partition. Every node is filled by a running job (10 CPUs, an hour's limit), then
10,000 one-CPU jobs are submitted with sbatch while the partition is DOWN (so that submitting does
not cost a scheduling pass per job) and the partition is set UP again: they all pend. Timed, each
the median of --repeat runs, wall and CPU (user + system, of the command processes, and of the
parsing in this process):

- `read`: the service's read, `read_cluster` (sinfo --json, scontrol show partition -o,
  squeue --json, each parsed into the model);
- what the event loop then spends: putting the read in the tree (`SlurmSite.publish`: hosts and
  the CEs, once per read), and the CEs at each rendering;
- the commands alone: `sinfo --json`, `squeue --json`, `scontrol show partition -o`, and the
  one-line-per-record forms `sinfo -N -o ...` and `squeue -o ...` for comparison;
- staleness: the reader run as the server runs it (every --interval seconds) for --watch seconds,
  the age of the published state sampled every 50 ms: at most the interval plus one read.

Run under the shared lock: `flock /tmp/heavy.lock .venv/bin/python bench/slurm_read.py`; prints
a table and writes bench/results/slurm_read.json. --nodes and --jobs make it smaller where 100
slurmd are too heavy for the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from infosvc.config import LrmsConfig, parse_config  # noqa: E402
from infosvc.hosts.slurm_site import SlurmSite  # noqa: E402
from infosvc.hosts.table import HostTable  # noqa: E402
from infosvc.lrms.reader import ClusterReader, read_cluster  # noqa: E402
from support.slurm import SlurmCluster, many_nodes, running  # noqa: E402

COMMANDS: dict[str, tuple[str, ...]] = {
    "sinfo --json": ("sinfo", "--json"),
    "squeue --json": ("squeue", "--json"),
    "scontrol show partition -o": ("scontrol", "show", "partition", "-o"),
    "sinfo -N -o (one line a node)": ("sinfo", "-h", "-N", "-o", "%N|%T|%c|%m|%e|%f|%G|%E|%P|%X|%Y|%Z"),
    "squeue -o (one line a job)": ("squeue", "-h", "-o", "%i|%P|%T|%u|%a|%C|%D|%l|%S|%V|%r"),
}


def timed(action: Callable[[], Any]) -> tuple[float, float]:
    """(wall, CPU) seconds of `action`, the CPU of this process and of the children it waited for."""
    before, wall = os.times(), time.monotonic()
    action()
    after = os.times()
    cpu = sum(a - b for a, b in zip(after[:4], before[:4]))
    return time.monotonic() - wall, cpu


def median_of(runs: list[tuple[float, float]]) -> dict[str, float]:
    return {"wall_ms": round(statistics.median(r[0] for r in runs) * 1000, 1),
            "cpu_ms": round(statistics.median(r[1] for r in runs) * 1000, 1)}


def fill(cluster: SlurmCluster, nodes: int, cpus: int, jobs: int) -> None:
    """A running job on every node, then `jobs` one-CPU jobs pending behind them."""
    for _ in range(nodes):
        cluster.sbatch("-n", str(cpus), "-N1", "-t", "60", "--wrap", "sleep 3600")
    deadline = time.monotonic() + 300
    while cluster.run("squeue", "-h", "-t", "R", "-o", "%i").count("\n") < nodes:
        if time.monotonic() > deadline:
            raise RuntimeError("the filling jobs did not all start")
        time.sleep(1)
    cluster.set_partition("main", "DOWN")
    started = time.monotonic()
    script = "for i in $(seq 1 %d); do echo $i; done | xargs -P 4 -I{} sbatch --parsable -n1 -t 30 " \
             "-J pend{} --wrap 'sleep 60' > /dev/null" % jobs
    subprocess.run(["sh", "-c", script], env=cluster.env, check=True, timeout=3600, cwd=cluster.directory)
    print(f"submitted {jobs} jobs in {time.monotonic() - started:.0f} s", flush=True)
    cluster.set_partition("main", "UP")


def staleness(config: LrmsConfig, watch: float) -> dict[str, float]:
    reader = ClusterReader(config)

    async def sample() -> float:
        task = asyncio.create_task(reader.run_forever())
        worst = 0.0
        end = time.monotonic() + watch
        while reader.state is None:
            await asyncio.sleep(0.05)
        while time.monotonic() < end:
            assert reader.state is not None
            worst = max(worst, time.time() - reader.state.read_at)
            await asyncio.sleep(0.05)
        task.cancel()
        return worst

    worst = asyncio.run(sample())
    return {"interval_s": config.interval_seconds, "max_age_s": round(worst, 2), "reads": reader.reads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--cpus", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--watch", type=float, default=20.0)
    args = parser.parse_args()
    results: dict[str, Any] = {"nodes": args.nodes, "pending_jobs": args.jobs, "machine_cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="slurm-bench-") as directory:
        started = time.monotonic()
        with running(Path(directory), many_nodes(args.nodes, args.cpus)) as cluster:
            results["cluster_start_s"] = round(time.monotonic() - started, 1)
            fill(cluster, args.nodes, args.cpus, args.jobs)
            config = LrmsConfig(type="slurm", bin_dir=cluster.bin_dir, slurm_conf=str(cluster.conf),
                                interval_seconds=args.interval, timeout_seconds=120.0)
            state = read_cluster(config)
            pending = sum(j.pending for j in state.jobs)
            results["read_saw"] = {"nodes": len(state.nodes), "jobs": len(state.jobs), "pending": pending}
            results["read"] = median_of([timed(lambda: read_cluster(config)) for _ in range(args.repeat)])
            site = SlurmSite(HostTable(parse_config({"lrms": {"type": "slurm"}})))
            results["publish_on_loop"] = median_of([timed(lambda: site.publish(state)) for _ in range(args.repeat)])
            results["ces_per_rendering"] = median_of([timed(site.computing_elements) for _ in range(args.repeat)])
            results["commands"] = {}
            for label, argv in COMMANDS.items():
                results["commands"][label] = median_of([timed(lambda: cluster.run(*argv, timeout=300))
                                                        for _ in range(args.repeat)])
            results["staleness"] = staleness(config, args.watch)
    out = ROOT / "bench" / "results" / "slurm_read.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"{'what':40} {'wall ms':>10} {'CPU ms':>10}")
    print(f"{'read (3 commands + parsing)':40} {results['read']['wall_ms']:>10} {results['read']['cpu_ms']:>10}")
    for label in ("publish_on_loop", "ces_per_rendering"):
        print(f"{label:40} {results[label]['wall_ms']:>10} {results[label]['cpu_ms']:>10}")
    for label, figures in results["commands"].items():
        print(f"{label:40} {figures['wall_ms']:>10} {figures['cpu_ms']:>10}")
    print(json.dumps({k: results[k] for k in ("read_saw", "staleness", "cluster_start_s")}))


if __name__ == "__main__":
    main()
