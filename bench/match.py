"""Benchmark of requirement evaluation (infosvc/matching/): one SSS Job against 10,000 hosts.

The issue's target: matching one job against 10,000 hosts in 100 subclusters under 10 ms; the
same job against the same hosts as 10,000 singleton subclusters, for the ratio (what evaluating
the static part once per subcluster saves).

In process, no server: 10,000 synthetic SSS Nodes (as tests/support/documents.make_node writes them), their
GLUE Hosts from infosvc.hosts.rollup.host_from_node, put in a Rollup. In the first site the hosts are of
100 kinds (processor model, CPU count, architecture), so 100 subclusters; in the second each
host's processor model is its own, so 10,000 subclusters. 1% of the hosts are Paused.

The job: Architecture x86_64, OperatingSystem Linux, Processors context=Configured GE 8 (static:
the subcluster key holds them), Memory GE 4 GB and Processors GE 4 available (dynamic), and a soft
preference for a feature. Each run compiles the job anew (a fresh static cache, as a request
has) and calls infosvc.matching.match over every host: the verdicts and the ordering.

"match" is match() with the columns the server keeps for its roll-up (infosvc.matching.hostcolumns, one
HostColumns for the whole run, built before the first run: "build"); "general" is match() without
them (the per-host loop); "churn" is match() with the columns after --reports hosts have reported
again since the previous match (new free CPUs and memory: new GLUE Hosts, which the columns patch
in). The answer (as_json and json.dumps), which puts the rejected hosts' reasons into words, is
timed apart: "render ms". "bare loop" is a loop over the same hosts doing nothing but the node
look-up and the state test: the floor of any per-host evaluation in Python on the machine.

Run with `make bench` (or `python bench/match.py [--hosts 10000] [--runs 30] [--baseline FILE]`);
prints a table and writes bench/results/match.json. With --baseline, another version of the
matcher as one module (infosvc/matching.py as it was before it became a package: `git show
COMMIT:infosvc/matching.py > /tmp/old.py`) is timed in the same run (without columns: beside
"general"), interleaved with the current one: before / after on the same machine state.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from infosvc.codec.job_xml import parse_job  # noqa: E402
from infosvc.matching.hostcolumns import HostColumns  # noqa: E402
from infosvc.matching import Requirements, Site, compile_requirements, match  # noqa: E402
from infosvc.model.job import resolve  # noqa: E402
from infosvc.model.node import Consumable, Extension, Node  # noqa: E402
from infosvc.hosts.rollup import Rollup, host_from_node  # noqa: E402
from infosvc.config.site import SiteConfig  # noqa: E402

TARGET_MS = 10.0

JOB = b"""<Job><Id>bench</Id><Requested>
  <Architecture>x86_64</Architecture>
  <OperatingSystem>Linux</OperatingSystem>
  <Processors context="Configured" op="GE">8</Processors>
  <Processors op="GE">4</Processors>
  <Memory op="GE" units="GB">4</Memory>
  <Feature preference="-1">ib</Feature>
</Requested></Job>"""


def make_node(i: int, kinds: int | None) -> Node:
    """Host i; of kind i % kinds, or of a kind of its own when kinds is None."""
    kind = i % kinds if kinds is not None else i
    cpus = (4, 8, 16, 32)[i % 4] if kinds is None else (4, 8, 16, 32)[kind % 4]
    arch = "aarch64" if (kind % 10) == 9 else "x86_64"
    memory = cpus * 2048.0
    free = memory * ((i * 7919) % 100) / 100
    node = Node(id=f"host{i:05d}", name=f"host{i:05d}", features=["ib"] if i % 3 == 0 else [],
                opsys="Linux", arch=arch, state="Idle")
    node.extensions += [Extension("Name", "Rocky Linux", "OperatingSystem"),
                        Extension("Release", "9.3", "OperatingSystem"),
                        Extension("Model", f"CPU model {kind}", "Processor"),
                        Extension("ClockSpeed", str(2000 + 100 * (i % 10)), "Processor")]
    node.configured.add(Consumable("Processors", cpus))
    node.configured.add(Consumable("Memory", memory, units="MB"))
    node.available.add(Consumable("Processors", cpus - i % 5))
    node.available.add(Consumable("Memory", free, units="MB"))
    return node


def build(hosts: int, kinds: int | None) -> tuple[Rollup, dict[str, Node]]:
    config = SiteConfig()
    rollup = Rollup(config)
    nodes = {}
    for i in range(hosts):
        node = make_node(i, kinds)
        host = host_from_node(node, "Paused" if i % 100 == 50 else "Ready", config, "2026-01-01T00:00:00Z")
        rollup.update(host)
        nodes[node.id] = node
    return rollup, nodes


JOB_MODEL = resolve(parse_job(JOB).job)[0]  # parsing (and validating) the document is not timed


def compile_job() -> Requirements:
    return compile_requirements(JOB_MODEL)


def load_baseline(path: str) -> Any:
    """Another version of the matcher as one module (e.g. `git show COMMIT:infosvc/matching.py > old.py`
    for a commit before infosvc/matching/), timed in the same run, interleaved with the current one."""
    spec = importlib.util.spec_from_file_location("matching_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["matching_baseline"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def churn(rollup: Rollup, nodes: dict[str, Node], count: int, step: int) -> None:
    """`count` hosts report again (new free CPUs and memory), as `count` reports a second would:
    each builds a new GLUE Host, which the columns must pick up."""
    config = rollup.config
    ids = list(nodes)
    for k in range(count):
        node = nodes[ids[(step * count + k * 61) % len(ids)]]
        free = node.available.items
        free[0] = Consumable("Processors", (int(free[0].value) + 1) % 9)
        free[1] = Consumable("Memory", (float(free[1].value) * 7 + 1024) % 65536, units="MB")
        old = rollup.hosts[node.id]
        rollup.update(host_from_node(node, old.state, config, "2026-01-01T00:00:01Z"))


def run(name: str, hosts: int, kinds: int | None, runs: int, baseline: Any = None,
        reports: int = 0) -> dict[str, Any]:
    rollup, nodes = build(hosts, kinds)
    site = Site.of(rollup)
    times, renders, before, general, churned = [], [], [], [], []
    result = None
    requirements = compile_job()
    # The columns the server keeps for its roll-up (infosvc.matching.hostcolumns): made on the first match.
    columns = HostColumns()
    gc.collect()
    started = time.perf_counter()
    columns.sync(rollup, nodes.get)
    build_ms = (time.perf_counter() - started) * 1000
    for _ in range(runs):
        if baseline is not None:
            gc.collect()
            started = time.perf_counter()
            baseline.match(baseline.compile_requirements(JOB_MODEL), rollup, nodes.get, site)
            before.append((time.perf_counter() - started) * 1000)
        gc.collect()  # the previous run's garbage is not this run's cost
        started = time.perf_counter()
        match(compile_job(), rollup, nodes.get, site)  # no columns: the per-host loop
        general.append((time.perf_counter() - started) * 1000)
        gc.collect()
        started = time.perf_counter()
        requirements = compile_job()
        result = match(requirements, rollup, nodes.get, site, columns=columns)
        times.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        json.dumps(result.as_json())
        renders.append((time.perf_counter() - started) * 1000)
    assert result is not None
    for step in range(runs if reports else 0):  # hosts reporting between two matches
        churn(rollup, nodes, reports, step)
        gc.collect()
        started = time.perf_counter()
        match(compile_job(), rollup, nodes.get, site, columns=columns)
        churned.append((time.perf_counter() - started) * 1000)
        assert columns.last_sync == ("patched", reports), columns.last_sync
    floors = []
    for _ in range(runs):  # a bare loop over the same hosts: node look-up and state test, nothing else
        gc.collect()
        started = time.perf_counter()
        for sub_id in rollup.subclusters:
            for host in rollup.hosts_of(sub_id):
                if nodes.get(host.unique_id) is not None and host.state != "Ready":
                    pass
        floors.append((time.perf_counter() - started) * 1000)
    return {
        **({"baseline_match_ms_median": round(statistics.median(before), 2),
            "baseline_match_ms_min": round(min(before), 2)} if before else {}),
        **({"churn_reports": reports, "churn_match_ms_median": round(statistics.median(churned), 2),
            "churn_match_ms_min": round(min(churned), 2)} if churned else {}),
        "bare_loop_ms_median": round(statistics.median(floors), 2),
        "name": name, "hosts": hosts, "subclusters": len(rollup.subclusters), "runs": runs,
        "match_ms_median": round(statistics.median(times), 2), "match_ms_min": round(min(times), 2),
        "general_match_ms_median": round(statistics.median(general), 2),
        "general_match_ms_min": round(min(general), 2),
        "columns_build_ms": round(build_ms, 2),
        "render_ms_median": round(statistics.median(renders), 2),
        "matches": len(result.matches), "rejected": len(result.rejected),
        "static_evaluations": requirements.evaluations["static"],
        "dynamic_evaluations": requirements.evaluations["dynamic"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--reports", type=int, default=166,
                        help="hosts that report between two matches in the churn runs (default: a second's "
                             "worth of 10,000 hosts reporting every 60 s)")
    parser.add_argument("--baseline", metavar="FILE",
                        help="another matching.py (one module) to time in the same run (interleaved), for before/after")
    args = parser.parse_args()
    baseline = load_baseline(args.baseline) if args.baseline else None
    rows = [run("100 subclusters", args.hosts, 100, args.runs, baseline, args.reports),
            run("singleton subclusters", args.hosts, None, args.runs, baseline, args.reports)]
    ratio = rows[1]["match_ms_median"] / rows[0]["match_ms_median"]
    print(f"{'site':24} {'subclusters':>11} {'match ms (median / min)':>24} {'general':>15} {'churn':>15} "
          f"{'build':>6} {'bare loop':>10} {'render ms':>10} {'matches':>8} {'rejected':>9} {'static / dynamic':>17}")
    for r in rows:
        churned = f"{r['churn_match_ms_median']} / {r['churn_match_ms_min']}" if "churn_reports" in r else "-"
        print(f"{r['name']:24} {r['subclusters']:>11} {r['match_ms_median']:>15} / {r['match_ms_min']:<6} "
              f"{str(r['general_match_ms_median']) + ' / ' + str(r['general_match_ms_min']):>15} {churned:>15} "
              f"{r['columns_build_ms']:>6} {r['bare_loop_ms_median']:>10} {r['render_ms_median']:>10} "
              f"{r['matches']:>8} {r['rejected']:>9} {r['static_evaluations']:>8} / {r['dynamic_evaluations']:<6}")
    print("match: with the columns the server keeps (infosvc.matching.hostcolumns); general: without them (per-host "
          f"loop); churn: with columns, {args.reports} hosts having reported since the previous match; "
          "build: the first match's column build")
    if baseline is not None:
        for r in rows:
            print(f"{r['name']:24} baseline ({args.baseline}) match ms (median / min): "
                  f"{r['baseline_match_ms_median']} / {r['baseline_match_ms_min']}")
    met = rows[0]["match_ms_median"] < TARGET_MS and rows[0].get("churn_match_ms_median", 0) < TARGET_MS
    print(f"target: {TARGET_MS} ms for {args.hosts} hosts in 100 subclusters: {'met' if met else 'NOT met'}; "
          f"singleton / 100-subcluster ratio {ratio:.2f}")
    out = HERE / "results" / "match.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"target_ms": TARGET_MS, "target_met": met, "ratio_singleton_to_100": round(ratio, 2),
                               "python": platform.python_version(), "machine": platform.machine(),
                               "runs": rows}, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
