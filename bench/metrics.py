"""Benchmark of GET /metrics at 10,000 hosts: the custom collector against prometheus_client's own objects.

The issue's target: the exposition of the aggregator's metrics for 10,000 hosts within 1.2x of
what prometheus_client's generate_latest takes for the same series held in plain Gauge / Counter
/ Histogram objects, measured in the same run.

In process, no server: a SQLite store filled with 10,000 reports of ten hardware kinds (varied
per host, as bench/glue.py does), an Aggregator built on it (with bench/glue.py's site config:
two clusters, two computing elements), some hosts paused and some pending, a few refused
reports. Then, alternating rounds:
  exposition  infosvc.publish.prometheus.Metrics.exposition(), the body of GET /metrics, in steady state:
              a quarter of the hosts changed since the last scrape (hosts report every 60 s,
              Prometheus scrapes every 15 s), so their lines are rendered anew and the rest joined;
  cold        the same with every host changed (the first scrape after start, or hosts
              reporting faster than the scrape interval);
  direct      generate_latest of a registry of Gauge / Counter / Histogram objects holding the same
              series (built once from the reference collector, AggregatorCollector(hosts=True)),
              so labels and values match).
The two outputs are compared line by line (but for the collector's timing gauges and the
_created samples that only prometheus_client's counters have). "Longest hold of the event loop"
is the longest step GET /metrics takes without giving the loop back: one slice of hosts
rendered (api.METRICS_SLICE) or the final join, whichever is longer, in steady state.

Run with `make bench` (or `python bench/metrics.py [--hosts 10000] [--rounds 7]`); prints a
table and writes bench/results/metrics.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from glue import SITE_TOML, fill_store  # noqa: E402
from ingest import host_name  # noqa: E402

from infosvc.web.app import METRICS_SLICE  # noqa: E402

TARGET_RATIO = 1.2
#: Samples that differ between the two runs by nature, not by a fault.
VOLATILE = ("infosvc_metrics_collect_duration_seconds", "infosvc_metrics_collect_success", "_created")


def build(hosts: int, workdir: Path) -> Any:
    import tomllib

    from infosvc.hosts.aggregator import Aggregator
    from infosvc.config.site import parse_config
    from infosvc.store import Store
    from infosvc.hosts.tokens import Tokens

    db = workdir / "metrics.sqlite"
    fill_store(db, hosts, 2)
    config = parse_config(tomllib.loads(SITE_TOML if hosts == 10000 else ""))
    agg = Aggregator(config, Store(db, history_per_host=2), Tokens())
    now = agg.clock()
    for i in range(0, hosts, 50):  # 2% paused, 2% pending
        agg.table.set_flags(host_name(i), now, paused=True)
        agg.table.set_flags(host_name(i + 1), now, approved=False)
    agg.accepted = hosts
    agg.rejected.update({"invalid": 12, "unauthorized": 3})
    return agg


def direct_registry(metrics: Any, observed: list[float]) -> Any:
    """A registry of plain prometheus_client objects holding the series the collector exposes."""
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    from infosvc.publish.prometheus import INGEST_BUCKETS, METRICS

    from infosvc.publish.prometheus import AggregatorCollector

    assert metrics.collector is not None
    registry = CollectorRegistry()
    specs = {m.name.removesuffix("_total"): m for m in METRICS}
    for family in AggregatorCollector(metrics.collector.aggregator, hosts=True).collect():
        spec = specs[family.name]
        labels = spec.labels
        if family.type == "counter":
            counter = Counter(family.name, spec.help, labels, registry=registry)
            for s in family.samples:
                (counter.labels(*(s.labels[n] for n in labels)) if labels else counter).inc(s.value)
        else:
            gauge = Gauge(family.name, spec.help, labels, registry=registry)
            for s in family.samples:
                (gauge.labels(*(s.labels[n] for n in labels)) if labels else gauge).set(s.value)
    histogram = Histogram("infosvc_report_ingest_duration_seconds",
                          specs["infosvc_report_ingest_duration_seconds"].help, buckets=INGEST_BUCKETS,
                          registry=registry)
    for value in observed:  # the same observations as the app's histogram had
        histogram.observe(value)
    return registry


def stable_lines(text: bytes) -> set[str]:
    return {line for line in text.decode().splitlines() if not any(v in line for v in VOLATILE)}


def main(argv: list[str] | None = None) -> int:
    from prometheus_client import generate_latest

    from infosvc.publish.prometheus import Metrics

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=10000, help="hosts (10000)")
    p.add_argument("--rounds", type=int, default=7, help="rounds of each measurement (7)")
    args = p.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="infosvc-bench-metrics-"))
    try:
        t0 = time.perf_counter()
        agg = build(args.hosts, workdir)
        setup_s = time.perf_counter() - t0
        metrics = Metrics()
        observed = [0.0004 * (1 + i % 40) for i in range(2000)]
        for value in observed:
            metrics.ingest_seconds.observe(value)
        frozen = agg.clock()
        agg.clock = lambda: frozen  # report ages as of one instant, so that the two outputs compare
        metrics.watch(agg)
        direct = direct_registry(metrics, observed)

        ours, theirs = metrics.exposition(), generate_latest(direct)
        mine, other = stable_lines(ours), stable_lines(theirs)
        if mine != other:
            print("outputs differ:", sorted(mine - other)[:5], sorted(other - mine)[:5], file=sys.stderr)
            return 1
        samples = sum(1 for line in ours.splitlines() if not line.startswith(b"#"))
        entries = list(agg.table)

        def changed(share: float) -> None:  # as if that share of the hosts had reported since
            for entry in entries[:int(len(entries) * share)]:
                entry.forget_renderings()

        def steady() -> None:
            changed(0.25)
            metrics.exposition()

        def cold() -> None:
            changed(1.0)
            metrics.exposition()

        def held() -> None:  # the steps of GET /metrics between two turns of the loop
            changed(0.25)
            longest = 0.0
            for start in range(0, len(entries), METRICS_SLICE):
                t0 = time.perf_counter()
                metrics.warm(entries[start:start + METRICS_SLICE])
                longest = max(longest, time.perf_counter() - t0)
            t0 = time.perf_counter()
            metrics.exposition()
            times["loop_hold"].append(max(longest, time.perf_counter() - t0))

        times: dict[str, list[float]] = {"exposition": [], "cold": [], "direct": [], "loop_hold": []}
        for _ in range(args.rounds):
            for name, func in (("exposition", steady), ("cold", cold), ("direct", lambda: generate_latest(direct))):
                gc.collect()
                t0 = time.perf_counter()
                func()
                times[name].append(time.perf_counter() - t0)
            held()
        agg.store.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    summary = {name: {"median_ms": statistics.median(t) * 1e3, "best_ms": min(t) * 1e3, "rounds": len(t)}
               for name, t in times.items()}
    ratio = summary["exposition"]["median_ms"] / summary["direct"]["median_ms"]
    best_ratio = summary["exposition"]["best_ms"] / summary["direct"]["best_ms"]
    cold_ratio = summary["cold"]["median_ms"] / summary["direct"]["median_ms"]
    results = {"cpus": os.cpu_count(), "python": sys.version.split()[0], "hosts": len(agg.table),
               "samples": samples, "bytes": len(ours), "setup_s": setup_s, "times": summary,
               "ratio_median": ratio, "ratio_best": best_ratio, "ratio_cold_median": cold_ratio,
               "target_ratio": TARGET_RATIO}

    print(f"{len(agg.table)} hosts: {samples} samples, {len(ours) / 1e6:.1f} MB of text (set-up {setup_s:.1f} s)")
    print(f"{'figure':62} {'median':>9} {'best':>9}")
    for name, label in (("exposition", "GET /metrics body, a quarter of the hosts changed (ms)"),
                        ("cold", "GET /metrics body, every host changed (ms)"),
                        ("direct", "generate_latest, prometheus_client Gauge/Counter (ms)"),
                        ("loop_hold", "longest hold of the event loop by GET /metrics (ms)")):
        print(f"{label:62} {summary[name]['median_ms']:9.1f} {summary[name]['best_ms']:9.1f}")
    mark = "ok" if ratio <= TARGET_RATIO else "OVER"
    print(f"{'ratio exposition / direct (target <= 1.2)':62} {ratio:9.2f} {best_ratio:9.2f} {mark}")
    print(f"{'ratio cold exposition / direct':62} {cold_ratio:9.2f}")
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "metrics.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
