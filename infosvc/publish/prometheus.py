"""The aggregator's own Prometheus view, built from its in-memory state when scraped.

`Metrics` is one app's registry (never the process-wide default one) and its exposition, the
body of GET /metrics. The per-host families are most of it (12 of every 15 samples at 10,000
hosts), so they are not built as prometheus_client objects at each scrape: each host's lines are
rendered once (`host_lines`) and kept on its HostEntry until the host changes, and a scrape joins
them, adding only the report ages, which change by the second. The rest, the subcluster,
cluster, CE and service families, come from `AggregatorCollector`, a custom collector over the
same state, through prometheus_client's own text rendering; the ingest latency histogram is the
one metric observed as it happens. With `hosts=True` the collector yields the per-host families
too, as plain metric families: the reference that the exposition is tested against.

docs/api.md lists every metric; `METRICS` (infosvc/publish/metric_specs.py) is the one place
each is declared (name, type, labels, help), and the help text on the wire is taken from it. Hosts are labelled `node` (their
SSS Node Id); sizes are in bytes, times in seconds. The CE families carry the job queue's figures
(infosvc.queue.cestate) as GLUE publishes them.
"""

from __future__ import annotations

import logging
import time
from operator import itemgetter
from typing import Callable, Final, Iterable, Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString as _untyped_float_text

from infosvc.hosts import Aggregator
from infosvc.hosts import HostEntry
from infosvc.hosts import NodeState
from infosvc.model.node import Consumable
from infosvc.publish.gpu_series import GPU_FAMILIES, MAX_GPU_DEVICES, MAX_GPU_MODELS, MIB, bytes_of, gpu_values
from infosvc.publish.metric_specs import METRICS, MetricSpec

__all__ = ["INGEST_BUCKETS", "MAX_GPU_DEVICES", "MAX_GPU_MODELS", "METRICS", "AggregatorCollector", "Metrics",
           "MetricSpec", "float_text", "host_lines"]

log = logging.getLogger("infosvc.publish.prometheus")

#: A sample value as prometheus_client writes it (Go's float formatting), so both paths agree.
float_text: Final[Callable[[float], str]] = _untyped_float_text

STATES: tuple[str, ...] = tuple(s.value for s in NodeState)
#: Reasons a report is refused (Aggregator.rejected, infosvc.web.app.post_node): exported from 0.
REJECT_REASONS: tuple[str, ...] = ("unauthorized", "forbidden", "invalid", "too_large", "timeout", "store",
                                   "overloaded", "no_base")
LIVE = (NodeState.READY, NodeState.PAUSED)
INGEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


_BY_NAME = {m.name: m for m in METRICS}


def _gauge(name: str) -> GaugeMetricFamily:
    spec = _BY_NAME[name]
    assert spec.type == "gauge", name
    return GaugeMetricFamily(name, spec.help, labels=spec.labels)


def _counter(name: str) -> CounterMetricFamily:
    spec = _BY_NAME[name]
    assert spec.type == "counter", name
    return CounterMetricFamily(name.removesuffix("_total"), spec.help, labels=spec.labels)


def _first(items: list[Consumable]) -> tuple[Consumable | None, Consumable | None, dict[str | None, Consumable],
                                             list[Consumable]]:
    """The first Processors and Memory of a category, its Load resources by span, and its GPU
    resources (GPU, GPUMemory, GPUUtilization; most hosts: none)."""
    processors = memory = None
    loads: dict[str | None, Consumable] = {}
    gpus: list[Consumable] = []
    for item in items:
        kind = item.kind
        if kind == "Processors":
            if processors is None:
                processors = item
        elif kind == "Memory":
            if memory is None:
                memory = item
        elif kind == "Resource":
            name = item.name
            if name == "Load":
                loads.setdefault(item.type, item)
            elif name is not None and name.startswith("GPU") and item.type:
                gpus.append(item)
    return processors, memory, loads, gpus


class AggregatorCollector:
    """Metric families from an Aggregator's state at the moment of the scrape: with `hosts`, every
    family; without, all but the per-host ones and the scrape's own duration and success, which
    `Metrics.exposition` renders itself."""

    def __init__(self, aggregator: Aggregator, clock: Callable[[], float] | None = None, *,
                 hosts: bool = True) -> None:
        self.aggregator = aggregator
        self.clock = clock if clock is not None else aggregator.clock
        self.hosts = hosts
        #: whether the last collect() built its families (False: it logged why)
        self.ok = True

    def describe(self) -> Iterable[Metric]:
        # The names only, so that the registry detects a duplicate at register time.
        return [_counter(m.name) if m.type == "counter" else _gauge(m.name) for m in METRICS
                if m.type != "histogram" and (self.hosts or not _exposed_by_text(m))]

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        try:
            families = self.families()
            self.ok = True
        except Exception:  # noqa: BLE001 - a bug in one part must not fail the whole scrape
            log.exception("building the metrics failed")
            families, self.ok = [], False
        yield from families
        if self.hosts:
            yield from _scrape_gauges(time.perf_counter() - started, self.ok)

    def families(self) -> list[Metric]:
        agg = self.aggregator
        now = self.clock()
        hosts = self._hosts(agg, now) if self.hosts else []
        return [*hosts, *self._groups(agg), *self._service(agg, now)]

    def _hosts(self, agg: Aggregator, now: float) -> list[Metric]:
        names = [m.name for m in METRICS if m.name.startswith("infosvc_host_")]
        families: list[Metric] = [_gauge(n) for n in names]
        # Each family's samples, appended to directly: one Sample per value, its labels dict shared
        # by the host's metrics (add_metric would build a dict and check the labels per value).
        per_family: list[list[Sample]] = [[] for _ in names]
        info, state, p_conf, p_avail, p_used, m_conf, m_avail, m_used, load1, load5, load15 = per_family[:11]
        s_info, s_state, s_pc, s_pa, s_pu, s_mc, s_ma, s_mu, s_l1, s_l5, s_l15 = names[:11]
        gpu_families = [(per_family[names.index(n)], n, label) for n, label in GPU_FAMILIES]
        age, s_age = per_family[-1], names[-1]
        rollup = agg.tree
        sub_of = rollup.subcluster_of
        hosts = rollup.hosts
        for entry in agg.node_entries():
            node = entry.node
            host_id = entry.id
            labels = {"node": host_id}
            host = hosts.get(host_id)
            sub = sub_of(host_id)
            if host is not None and sub is not None:
                info.append(Sample(s_info, {"node": host_id, "cluster": host.cluster, "subcluster": sub.unique_id}, 1.0))
            current = entry.state.value
            for s in STATES:
                state.append(Sample(s_state, {"node": host_id, "state": s}, 1.0 if s == current else 0.0))
            proc, mem, _, c_gpus = _first(node.configured.items)
            if proc is not None:
                p_conf.append(Sample(s_pc, labels, float(proc.value)))
            if (value := bytes_of(mem)) is not None:
                m_conf.append(Sample(s_mc, labels, value))
            proc, mem, _, a_gpus = _first(node.available.items)
            if proc is not None:
                p_avail.append(Sample(s_pa, labels, float(proc.value)))
            if (value := bytes_of(mem)) is not None:
                m_avail.append(Sample(s_ma, labels, value))
            proc, mem, loads, u_gpus = _first(node.utilized.items)
            if proc is not None:
                p_used.append(Sample(s_pu, labels, float(proc.value)))
            if (value := bytes_of(mem)) is not None:
                m_used.append(Sample(s_mu, labels, value))
            if loads:
                for span, samples, name in (("1min", load1, s_l1), ("5min", load5, s_l5), ("15min", load15, s_l15)):
                    item = loads.get(span)
                    if item is not None:
                        samples.append(Sample(name, labels, float(item.value)))
            if c_gpus or a_gpus or u_gpus:
                for (samples, name, label), values in zip(gpu_families, gpu_values((c_gpus, a_gpus, u_gpus), host_id)):
                    samples.extend(Sample(name, {label: key, "node": host_id}, value) for key, value in values)
            age.append(Sample(s_age, labels, now - entry.reported_at))
        for family, samples in zip(families, per_family):
            family.samples = samples
        return families

    def _groups(self, agg: Aggregator) -> list[Metric]:
        rollup = agg.tree
        sub_hosts = _gauge("infosvc_subcluster_hosts")
        sub_cpus = _gauge("infosvc_subcluster_cpus")
        sub_free = _gauge("infosvc_subcluster_free_cpus")
        sub_mem = _gauge("infosvc_subcluster_memory_available_bytes")
        cluster_hosts = _gauge("infosvc_cluster_hosts")
        cluster_cpus = _gauge("infosvc_cluster_cpus")
        cluster_free = _gauge("infosvc_cluster_free_cpus")
        ce_hosts = _gauge("infosvc_computing_element_hosts")
        ce_cpus = _gauge("infosvc_computing_element_cpus")
        ce_free = _gauge("infosvc_computing_element_free_cpus")
        ce_running = _gauge("infosvc_computing_element_running_jobs")
        ce_waiting = _gauge("infosvc_computing_element_waiting_jobs")
        ce_estimated = _gauge("infosvc_computing_element_estimated_response_time_seconds")
        ce_worst = _gauge("infosvc_computing_element_worst_response_time_seconds")
        by_cluster: dict[str, dict[str, int]] = {}
        for cluster in rollup.clusters():
            cid = cluster.unique_id
            states = dict.fromkeys(STATES, 0)
            cpus = free = 0
            for sub in rollup.subclusters_of(cid):
                labels = (cid, sub.unique_id)
                for s in STATES:
                    count = sub.states.get(s, 0)
                    states[s] += count
                    sub_hosts.add_metric((*labels, s), count)
                sub_cpus.add_metric(labels, sub.total_cpus)
                sub_free.add_metric(labels, sub.free_cpus)
                sub_mem.add_metric(labels, sub.ram_available * MIB)
                cpus += sub.total_cpus
                free += sub.free_cpus
            by_cluster[cid] = states
            for s, count in states.items():
                cluster_hosts.add_metric((cid, s), count)
            cluster_cpus.add_metric((cid,), cpus)
            cluster_free.add_metric((cid,), free)
        for ce in rollup.computing_elements():
            states = dict.fromkeys(STATES, 0)
            for cid in ce.clusters:
                for s, count in by_cluster.get(cid, {}).items():
                    states[s] += count
            for s, count in states.items():
                ce_hosts.add_metric((ce.unique_id, s), count)
            ce_cpus.add_metric((ce.unique_id,), ce.info.total_cpus)
            ce_free.add_metric((ce.unique_id,), ce.state.free_cpus)
            ce_running.add_metric((ce.unique_id,), ce.state.running_jobs)
            ce_waiting.add_metric((ce.unique_id,), ce.state.waiting_jobs)
            ce_estimated.add_metric((ce.unique_id,), ce.state.estimated_response_time)
            ce_worst.add_metric((ce.unique_id,), ce.state.worst_response_time)
        return [sub_hosts, sub_cpus, sub_free, sub_mem, cluster_hosts, cluster_cpus, cluster_free,
                ce_hosts, ce_cpus, ce_free, ce_running, ce_waiting, ce_estimated, ce_worst]

    def _service(self, agg: Aggregator, now: float) -> list[Metric]:
        accepted = _counter("infosvc_reports_accepted_total")
        accepted.add_metric((), agg.accepted)
        rejected = _counter("infosvc_reports_rejected_total")
        for reason in (*REJECT_REASONS, *sorted(set(agg.rejected) - set(REJECT_REASONS))):
            rejected.add_metric((reason,), agg.rejected.get(reason, 0))
        store = _gauge("infosvc_store_size_bytes")
        store.add_metric((), agg.store_bytes())
        oldest = _gauge("infosvc_oldest_live_report_age_seconds")
        reported = [e.reported_at for e in agg.table if e.state in LIVE]
        if reported:
            oldest.add_metric((), now - min(reported))
        return [accepted, rejected, store, oldest]


def _exposed_by_text(spec: MetricSpec) -> bool:
    """The families Metrics.exposition renders itself: the per-host ones and the scrape's own."""
    return spec.name.startswith("infosvc_host_") or spec.name.startswith("infosvc_metrics_collect_")


def _scrape_gauges(seconds: float, ok: bool) -> list[Metric]:
    duration = _gauge("infosvc_metrics_collect_duration_seconds")
    duration.add_metric((), seconds)
    success = _gauge("infosvc_metrics_collect_success")
    success.add_metric((), 1.0 if ok else 0.0)
    return [duration, success]


def _label(value: str) -> str:
    """A label value escaped as the text format wants it (as prometheus_client does)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _header(spec: MetricSpec) -> str:
    help_ = spec.help.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {spec.name} {help_}\n# TYPE {spec.name} {spec.type}\n"


#: The per-host families whose lines host_lines renders, in METRICS order; the report age,
#: which changes by the second, is rendered at each scrape.
_HOST_FAMILIES: Final = tuple(m for m in METRICS if m.name.startswith("infosvc_host_")
                              and m.name != "infosvc_host_report_age_seconds")
_AGE: Final = _BY_NAME["infosvc_host_report_age_seconds"]


def host_lines(entry: HostEntry, cluster: str | None, subcluster: str | None) -> tuple[str, ...]:
    """The host's lines of each of _HOST_FAMILIES (one string each, "" for none), then the start
    of its report-age line: the same samples AggregatorCollector(hosts=True) yields for it."""
    node = entry.node
    label = _label(entry.id)
    one = f'{{node="{label}"}} '
    info = ""
    if cluster is not None and subcluster is not None:
        info = (f'infosvc_host_info{{cluster="{_label(cluster)}",node="{label}",'
                f'subcluster="{_label(subcluster)}"}} 1.0\n')
    current = entry.state.value
    state = "".join(f'infosvc_host_state{{node="{label}",state="{s}"}} {"1.0" if s == current else "0.0"}\n'
                    for s in STATES)
    values: list[str] = []
    loads: dict[str | None, Consumable] = {}
    gpu_items: list[list[Consumable]] = []
    for items, p_name, m_name in (
            (node.configured.items, "infosvc_host_processors_configured", "infosvc_host_memory_configured_bytes"),
            (node.available.items, "infosvc_host_processors_available", "infosvc_host_memory_available_bytes"),
            (node.utilized.items, "infosvc_host_processors_utilized", "infosvc_host_memory_utilized_bytes")):
        proc, mem, loads, gpu = _first(items)
        gpu_items.append(gpu)
        values.append(f"{p_name}{one}{float_text(proc.value)}\n" if proc is not None else "")
        amount = bytes_of(mem)
        values.append(f"{m_name}{one}{float_text(amount)}\n" if amount is not None else "")
    p_conf, m_conf, p_avail, m_avail, p_used, m_used = values
    spans = []
    for span, name in (("1min", "infosvc_host_load1"), ("5min", "infosvc_host_load5"), ("15min", "infosvc_host_load15")):
        item = loads.get(span)  # the Utilized category's, the last of the loop
        spans.append(f"{name}{one}{float_text(item.value)}\n" if item is not None else "")
    gpus = [""] * len(GPU_FAMILIES)
    if any(gpu_items):
        gpus = ["".join(f'{name}{{{key}="{_label(labeled)}",node="{label}"}} {float_text(value)}\n'
                        for labeled, value in values)
                for (name, key), values in zip(GPU_FAMILIES, gpu_values(tuple(gpu_items), entry.id))]
    return (info, state, p_conf, p_avail, p_used, m_conf, m_avail, m_used, *spans, *gpus,
            f'{_AGE.name}{{node="{label}"}} ')


class Metrics:
    """One app's metrics: its own registry, the ingest histogram, and the aggregator's collector."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        spec = _BY_NAME["infosvc_report_ingest_duration_seconds"]
        self.ingest_seconds = Histogram(spec.name, spec.help,
                                        buckets=INGEST_BUCKETS, registry=self.registry)
        self.collector: AggregatorCollector | None = None

    def watch(self, aggregator: Aggregator) -> AggregatorCollector:
        """Export `aggregator`'s state from now on (one aggregator per app)."""
        self.collector = AggregatorCollector(aggregator, hosts=False)
        self.registry.register(self.collector)
        return self.collector

    def unwatch(self) -> None:
        if self.collector is not None:
            self.registry.unregister(self.collector)
            self.collector = None

    def warm(self, entries: Iterable[HostEntry]) -> None:
        """Render the lines of those of `entries` that changed since they were last rendered. GET
        /metrics calls it a slice of hosts at a time, giving the event loop back in between. A
        host whose lines cannot be rendered is left as it is: exposition() tries it again, and
        reports the failure in the scrape."""
        try:
            self._render(entries)
        except Exception:  # noqa: BLE001 - see exposition()
            pass

    def _render(self, entries: Iterable[HostEntry]) -> None:
        assert self.collector is not None
        rollup = self.collector.aggregator.tree
        hosts, sub_of = rollup.hosts, rollup.subcluster_of
        for entry in entries:
            if entry.metric_lines is None:
                host, sub = hosts.get(entry.id), sub_of(entry.id)
                entry.metric_lines = host_lines(entry, host.cluster if host is not None else None,
                                                sub.unique_id if sub is not None else None)

    def exposition(self) -> bytes:
        """The text of GET /metrics: every metric of METRICS (the per-host ones joined from each
        host's kept lines, rendering those not warm yet), in prometheus_client's text format."""
        assert self.collector is not None
        agg = self.collector.aggregator
        started = time.perf_counter()
        try:
            entries = agg.node_entries()
            self._render(entries)
            lines: list[tuple[str, ...]] = []
            for entry in entries:
                assert entry.metric_lines is not None  # _render() rendered it, or raised
                lines.append(entry.metric_lines)
            parts = []
            for i, spec in enumerate(_HOST_FAMILIES):
                parts.append(_header(spec))
                parts.append("".join(map(itemgetter(i), lines)))
            now = self.collector.clock()
            parts.append(_header(_AGE))
            for entry, kept in zip(entries, lines):
                age = now - entry.reported_at
                # repr is what float_text writes below 1e6 (above, Go's exponent form), and cheaper.
                parts.append(f"{kept[-1]}{repr(age) if age < 1e6 else float_text(age)}\n")
            text = "".join(parts)
            ok = True
        except Exception:  # noqa: BLE001 - as in AggregatorCollector.collect: the rest is still exposed
            log.exception("building the per-host metrics failed")
            text, ok = "", False
        rest = generate_latest(self.registry)
        ok = ok and self.collector.ok
        tail = "".join(_header(family_spec) + f"{family_spec.name} {float_text(value)}\n"
                       for family_spec, value in ((_BY_NAME["infosvc_metrics_collect_duration_seconds"],
                                                   time.perf_counter() - started),
                                                  (_BY_NAME["infosvc_metrics_collect_success"], 1.0 if ok else 0.0)))
        return text.encode() + rest + tail.encode()
