"""Benchmark of the host agent and the Node codec, against node_exporter measured in the same run.

The figure a site pays is the agent's whole cycle: `infosvc-agent --server URL` as it runs, each
sample collected, built into a document, pushed to a real `infosvc serve` on loopback and its
answer read, the loop's own work and every thread included. It is measured in the agent's own
process (CPU time over `--cycles` samples after a warm-up, and its RSS at the end), with the
connection kept (an interval below push.KEEP_CONNECTION_BELOW) and, as a second row, dropped
after each exchange (a longer interval). Its peer is node_exporter with the six collectors that
cover the same ground, scraped over HTTP: CPU per scrape and RSS. Beside them: one sample alone
(collect, build, serialize), and parse + validate of a ~4 KB SSS Node document.

Run with `make bench` (or `python bench/agent.py`); prints a table and writes
bench/results/agent.json.

`python bench/agent.py --gpu` measures the GPU probe alone: the same whole cycle (connection kept)
on this host with and without the probe, and through --proc-root/--sys-root on fixture trees
(tests/fixtures/host1 with no GPU, with the 8-GPU NVIDIA node's files, with the AMD node's), round
after round; writes bench/results/agent-gpu.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# The targets set for the agent.
TARGET_SAMPLE_CPU_MS = 1.1
TARGET_SAMPLE_WALL_MS = 5.0
TARGET_RSS_MIB = 25.0
TARGET_PARSE_US = 200.0

_SAMPLER = r"""
import json, statistics, sys, time
from infosvc_agents import collectors
from infosvc_agents.agent import HostAgent
if sys.argv[2:3] == ["no-gpu"]:  # the agent as it was before it had a GPU probe
    every = collectors.default_collectors
    collectors.default_collectors = lambda *a, **k: [c for c in every(*a, **k) if c.name != "gpus"]
roots = dict(zip(("proc_root", "sys_root", "etc_root"), sys.argv[3:6]))
agent = HostAgent.for_host(**roots)
first = agent.document()
n = int(sys.argv[1])
walls = []
cpu0 = time.process_time()
for _ in range(n):
    t0 = time.perf_counter()
    agent.document()
    walls.append(time.perf_counter() - t0)
cpu = time.process_time() - cpu0
rss_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:"))
print(json.dumps({"samples": n, "cpu_ms": cpu / n * 1e3, "wall_ms_median": statistics.median(walls) * 1e3,
                  "wall_ms_p95": sorted(walls)[int(n * 0.95)] * 1e3, "rss_mib": rss_kib / 1024,
                  "document_bytes": len(first)}))
"""


_CYCLE = r"""
import json, sys, time
from infosvc_agents import cli, collectors, push
warm, cycles, mode, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
if mode == "dropped":
    push.KEEP_CONNECTION_BELOW = 0.0  # as with an interval longer than that
if mode == "no-gpu":  # the agent as it was before it had a GPU probe
    every = collectors.default_collectors
    collectors.default_collectors = lambda *a, **k: [c for c in every(*a, **k) if c.name != "gpus"]
run = push.PushLoop.run
def measured(self, samples=None):
    run(self, samples=warm)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    run(self, samples=cycles)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    rss_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:"))
    with open(out, "w") as handle:
        json.dump({"cycles": cycles, "cpu_ms": cpu / cycles * 1e3, "wall_s": wall, "rss_mib": rss_kib / 1024,
                   "delivered": self.delivered, "refused": self.refused, "kept": len(self.kept)}, handle)
push.PushLoop.run = measured
sys.exit(cli.main(sys.argv[5:]))
"""


def agent_cycle(cycles: int = 1000, interval: float = 0.02, warm: int = 50,
                runs: dict[str, tuple[str, list[str]]] | None = None) -> dict:
    """The agent's whole cycle against a real server, kept and dropped connection: see the docstring.
    `runs`: name -> (mode, extra agent arguments) to measure instead."""
    import secrets
    import tempfile

    from serving import start_server

    with tempfile.TemporaryDirectory() as tmp:
        token = secrets.token_hex(16)
        Path(tmp, "agent.token").write_text(token + "\n")
        server, port = start_server(tmp, f"agent {token} bench-agent.bench\n")
        try:
            results = {}
            for name, (mode, extra) in (runs or {"kept": ("kept", []), "dropped": ("dropped", [])}).items():
                out = Path(tmp, f"{name}.json")
                subprocess.run([sys.executable, "-c", _CYCLE, str(warm), str(cycles), mode, str(out),
                                "--server", f"http://127.0.0.1:{port}", "--token-file", f"{tmp}/agent.token",
                                "--id", "bench-agent.bench", "--interval", str(interval), "--samples", str(cycles),
                                *extra],
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
                results[name] = json.loads(out.read_text())
        finally:
            server.terminate()
            server.wait(timeout=30)
    return results


def agent_sample(samples: int = 2000, mode: str = "kept", roots: tuple[str, ...] = ()) -> dict:
    """Sample in a fresh process, so RSS is the agent's own and nothing of the benchmark's; `mode`
    no-gpu leaves the GPU probe out, `roots` are its proc, sys and etc roots."""
    out = subprocess.run([sys.executable, "-c", _SAMPLER, str(samples), mode, *roots], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def four_kb_document() -> bytes:
    """This host's own Node document, trimmed to just under 4096 bytes, then padded to it."""
    from infosvc.codec.node_xml import node_to_xml
    from infosvc_agents.agent import HostAgent

    node = HostAgent.for_host().node()
    node.extensions = [e for e in node.extensions if e.name != "Flags"]
    while len(node_to_xml(node)) > 4096 and (node.extensions or node.utilized.items):
        # Drop per-adapter counters first, then the least telling extensions.
        if len(node.utilized.items) > 12:
            node.utilized.items.pop()
        else:
            node.extensions.pop()
    node.description = ""
    node.description = "x" * max(0, 4096 - len(node_to_xml(node)))
    return node_to_xml(node)


def _median_us(func, rounds: int) -> tuple[float, float]:
    for _ in range(200):
        func()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        func()
        times.append(time.perf_counter() - t0)
    times.sort()
    return statistics.median(times) * 1e6, times[int(rounds * 0.95)] * 1e6


def node_parse(rounds: int = 5000) -> dict:
    """Parse + validate (bytes -> a tree the schema accepts) and the full decode (-> Node model)."""
    from infosvc.codec import safexml
    from infosvc.codec.node_xml import SCHEMA_FILE, parse_node

    document = four_kb_document()
    xsd = safexml.schema(SCHEMA_FILE)

    def parse_validate() -> None:
        safexml.validate(safexml.parse(document), xsd)

    median, p95 = _median_us(parse_validate, rounds)
    decode_median, decode_p95 = _median_us(lambda: parse_node(document), rounds)
    return {"document_bytes": len(document), "elements": document.count(b"</"),
            "parse_validate_us_median": median, "parse_validate_us_p95": p95,
            "decode_to_model_us_median": decode_median, "decode_to_model_us_p95": decode_p95}


FIXTURES = HERE.parent / "tests" / "fixtures"


def gpu_trees(tmp: str) -> dict[str, Path]:
    """host1's tree alone, and with each GPU node's files laid over it."""
    import shutil

    trees = {}
    for name, gpus in (("no GPU", None), ("8 NVIDIA GPUs", "gpu-nvidia8"), ("4 AMD GPUs", "gpu-amd")):
        root = Path(shutil.copytree(FIXTURES / "host1", Path(tmp, name.replace(" ", "-")), symlinks=True))
        if gpus:
            shutil.copytree(FIXTURES / gpus, root, dirs_exist_ok=True, symlinks=True)
        trees[name] = root
    return trees


def gpu_probe(cycles: int, rounds: int) -> dict:
    """The whole cycle (connection kept) with and without the GPU probe: see the docstring."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        runs: dict[str, tuple[str, list[str]]] = {"this host, no probe": ("no-gpu", []), "this host": ("kept", [])}
        for name, root in gpu_trees(tmp).items():
            runs[f"tree, {name}"] = ("kept", ["--proc-root", str(root / "proc"), "--sys-root", str(root / "sys"),
                                              "--etc-root", str(root / "etc")])
        results = [agent_cycle(cycles, interval=0.01, runs=runs) for _ in range(rounds)]
        # one sample alone (collect, build, serialize), many in a row: less noise than the whole cycle
        alone = [{name: agent_sample(2000, mode, tuple(extra[1::2])) for name, (mode, extra) in runs.items()}
                 for _ in range(rounds)]
    print(f"{'connection kept':30} {'whole cycle CPU ms, each round':>30} {'median':>7} "
          f"{'sample alone CPU ms':>22} {'median':>7} {'RSS MiB':>8}")
    summary = {}
    for name in runs:
        cpus = [r[name]["cpu_ms"] for r in results]
        samples = [r[name]["cpu_ms"] for r in alone]
        rss = max(r[name]["rss_mib"] for r in results)
        summary[name] = {"cycle_cpu_ms": cpus, "cycle_cpu_ms_median": statistics.median(cpus), "rss_mib": rss,
                         "sample_cpu_ms": samples, "sample_cpu_ms_median": statistics.median(samples),
                         "document_bytes": alone[0][name]["document_bytes"],
                         "delivered": [r[name]["delivered"] for r in results]}
        print(f"{name:30} {' '.join(f'{c:6.3f}' for c in cpus):>30} {statistics.median(cpus):7.3f} "
              f"{' '.join(f'{c:6.3f}' for c in samples):>22} {statistics.median(samples):7.3f} {rss:8.1f}")
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "agent-gpu.json").write_text(json.dumps({"rounds": results, "alone": alone,
                                                                 "summary": summary}, indent=2))
    return summary


def main() -> int:
    import node_exporter

    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--cycles", type=int, default=500, help="agent cycles measured per mode and round (500)")
    args.add_argument("--rounds", type=int, default=3,
                      help="rounds, each node_exporter then the agent's two modes, back to back (3): the ratios are "
                           "each round's, their median the figure")
    args.add_argument("--gpu", action="store_true", help="measure the GPU probe alone (see the docstring)")
    opts = args.parse_args()
    if opts.gpu:
        gpu_probe(opts.cycles, opts.rounds)
        return 0
    binary = node_exporter.ensure_installed()
    rounds = []
    for _ in range(opts.rounds):
        ne_round = node_exporter.measure(scrapes=1000) if binary else None
        rounds.append({"node_exporter": ne_round, "cycle": agent_cycle(opts.cycles, interval=0.01)})
    results: dict = {"rounds": rounds, "agent": agent_sample(), "parse": node_parse()}
    results["node_exporter"] = ne = rounds[-1]["node_exporter"]
    agent, parse = results["agent"], results["parse"]
    print(f"{'whole cycle, each round':34} {'CPU ms':>22} {'RSS MiB':>8} {'x node_exporter CPU':>24} {'x RSS':>6}")
    for mode in ("kept", "dropped"):
        cpus = [r["cycle"][mode]["cpu_ms"] for r in rounds]
        rss = max(r["cycle"][mode]["rss_mib"] for r in rounds)
        line = f"{'agent, connection ' + mode:34} {' '.join(f'{c:6.3f}' for c in cpus):>22} {rss:8.1f}"
        if ne:
            ratios = sorted(r["cycle"][mode]["cpu_ms"] / r["node_exporter"]["cpu_ms_per_scrape"] for r in rounds)
            rss_ratio = rss / statistics.median(r["node_exporter"]["rss_mib"] for r in rounds)
            results.setdefault("cycle_ratios", {})[mode] = {"cpu": ratios, "cpu_median": statistics.median(ratios),
                                                            "rss": rss_ratio}
            line += f" {' '.join(f'{x:.2f}' for x in ratios):>17} (med {statistics.median(ratios):.2f}) {rss_ratio:6.2f}"
        print(line)
    if ne:
        scrapes = " ".join(f"{r['node_exporter']['cpu_ms_per_scrape']:6.3f}" for r in rounds)
        ne_rss = statistics.median(r["node_exporter"]["rss_mib"] for r in rounds)
        print(f"{'node_exporter ' + ne['version'] + ', one scrape':34} {scrapes:>22} {ne_rss:8.1f}")
    print()
    rows = [
        ("sample alone CPU (ms)", agent["cpu_ms"], TARGET_SAMPLE_CPU_MS, ne and ne["cpu_ms_per_scrape"]),
        ("sample alone wall median (ms)", agent["wall_ms_median"], TARGET_SAMPLE_WALL_MS, ne and ne["wall_ms_median"]),
        ("agent RSS (MiB)", agent["rss_mib"], TARGET_RSS_MIB, ne and ne["rss_mib"]),
        ("parse+validate 4 KB Node (us)", parse["parse_validate_us_median"], TARGET_PARSE_US, None),
    ]
    print(f"{'figure':34} {'infosvc':>10} {'target':>8} {'node_exp':>10} {'ratio':>7}")
    for name, ours, target, theirs in rows:
        ratio = f"{ours / theirs:.2f}" if theirs else "-"
        mark = "ok" if ours < target else "OVER"
        print(f"{name:34} {ours:10.3f} {target:8.1f} {theirs if theirs else '-':>10} {ratio:>7} {mark}")
    if ne:
        results["ratios"] = {"cpu": agent["cpu_ms"] / ne["cpu_ms_per_scrape"], "rss": agent["rss_mib"] / ne["rss_mib"]}
        print(f"node_exporter {ne['version']}: {ne['series']} series per scrape")
    else:
        print("node_exporter unavailable: no baseline in this run")
    print(f"full decode of the same document to the Node model: {parse['decode_to_model_us_median']:.1f} us median"
          f" (no target; parse+validate is the issue's figure)")
    print(f"agent document: {agent['document_bytes']} bytes; parse bench document: {parse['document_bytes']} bytes,"
          f" {parse['elements']} elements")
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "agent.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
