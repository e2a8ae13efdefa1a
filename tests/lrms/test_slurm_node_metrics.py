"""Slurm's nodes no agent reports in GET /metrics's per-host families, in process: an Aggregator
reading Slurm (`[lrms] type = "slurm"`) given a read of the saved output of a real Slurm
(tests/fixtures/slurm), its exposition against the reference collector (AggregatorCollector with
hosts=True, which builds every family as plain prometheus_client families), and the figures
against sinfo's: CPUs, memory, the GPU node's GPUs, each node's life-cycle state, the age of the
read; an agent's host that is also a node counted once. And what a later read does to the nodes'
documents: an unchanged node keeps its SSS Node, a changed one is made again, a gone one goes."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from infosvc.config import parse_config
from infosvc.hosts.aggregator import Aggregator
from infosvc.hosts.tokens import Tokens
from infosvc.lrms.cluster import ClusterState
from infosvc.model.node import Consumable
from infosvc.lrms.slurm_parse import SQUEUE_JOBS, jobs_of, nodes_of, partitions_of
from infosvc.publish.prometheus import INGEST_BUCKETS, AggregatorCollector, Metrics
from infosvc.store import Store
from support import FIXTURES
from support.documents import make_node

HERE = FIXTURES / "slurm"
READ_AT = 1795762960.0
MB = 2.0**20


def read() -> ClusterState:
    nodes = nodes_of(json.loads((HERE / "sinfo.json").read_text())["nodes"])
    return ClusterState(nodes, partitions_of((HERE / "partitions.txt").read_text(), nodes),
                        jobs_of((HERE / "squeue.txt").read_text(), SQUEUE_JOBS.with_token("fixture")),
                        "22.05.8", READ_AT)


def values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample_lines(text: str) -> set[str]:
    return {line for line in text.splitlines() if line and not line.startswith("#")
            and not line.startswith(("infosvc_metrics_collect_duration_seconds", "infosvc_report_ingest_"))}


def reference(agg: Aggregator) -> str:
    registry = CollectorRegistry()
    Histogram("infosvc_report_ingest_duration_seconds", "x", buckets=INGEST_BUCKETS, registry=registry)
    registry.register(AggregatorCollector(agg, hosts=True))
    return generate_latest(registry).decode()


def test_slurms_nodes_are_in_the_per_host_families(tmp_path: Path) -> None:
    agg = Aggregator(parse_config(tomllib.loads('[lrms]\ntype = "slurm"')), Store(tmp_path / "m.sqlite"), Tokens())
    agg.clock = lambda: READ_AT + 12.5
    metrics = Metrics()
    metrics.watch(agg)
    agg.publish_slurm(read())
    text = metrics.exposition().decode()
    assert sample_lines(text) == sample_lines(reference(agg))
    found = values(text)
    for name, cpus, free, state in (("c1", 4, 0, "Ready"), ("c3", 4, 4, "Unreachable"), ("c4", 4, 4, "Paused"),
                                    ("g1", 4, 0, "Ready")):
        node = (("node", name),)
        assert found["infosvc_host_processors_configured", node] == cpus
        assert found["infosvc_host_processors_available", node] == free
        assert found["infosvc_host_processors_utilized", node] == cpus - free
        assert found["infosvc_host_memory_configured_bytes", node] == 1000 * MB  # RealMemory
        assert found["infosvc_host_state", (("node", name), ("state", state))] == 1
        assert found["infosvc_host_report_age_seconds", node] == 12.5  # since the read
        assert ("infosvc_host_load1", node) not in found  # Slurm gives no load
    assert found["infosvc_host_gpus", (("model", "gpu"), ("node", "g1"))] == 2
    assert found["infosvc_host_gpus_available", (("model", "gpu"), ("node", "g1"))] == 2
    assert not any(key[0] == "infosvc_host_gpus" and ("node", "c1") in key[1] for key in found)
    # each in its cluster and subcluster, as GLUE publishes it (g1, with GPUs, a subcluster of its own)
    info = {dict(k[1])["node"]: dict(k[1])["subcluster"] for k in found if k[0] == "infosvc_host_info"}
    assert sorted(info) == ["c1", "c2", "c3", "c4", "g1"] and info["c1"] == info["c4"] != info["g1"]

    # an agent that reports c1 has its host counted once, with the agent's figures
    agg.table.report(make_node("c1", processors=16, free_processors=3, memory_mb=2048), READ_AT)
    text = metrics.exposition().decode()
    assert sample_lines(text) == sample_lines(reference(agg))
    found = values(text)
    assert found["infosvc_host_processors_configured", (("node", "c1"),)] == 16
    assert text.count('infosvc_host_processors_configured{node="c1"}') == 1


def test_each_read_replaces_the_nodes_and_keeps_the_unchanged_ones_documents(tmp_path: Path) -> None:
    agg = Aggregator(parse_config(tomllib.loads('[lrms]\ntype = "slurm"')), Store(tmp_path / "m.sqlite"), Tokens())
    first = read()
    agg.publish_slurm(first)
    before = agg.slurm_nodes()
    c2 = next(n for n in first.nodes if n.name == "c2")
    changed = dataclasses.replace(c2, alloc_cpus=1, state="mixed")
    later = dataclasses.replace(first, nodes=tuple(changed if n is c2 else n for n in first.nodes if n.name != "c3"),
                                read_at=READ_AT + 30)
    agg.publish_slurm(later)
    after = agg.slurm_nodes()
    assert list(after) == ["c1", "c2", "c4", "g1"]  # c3 no longer listed by Slurm: gone
    assert after["c1"].node is before["c1"].node and after["c1"] is not before["c1"]  # the same facts: kept
    assert after["c1"].reported_at == READ_AT + 30
    assert after["c2"].node is not before["c2"].node
    assert (after["c2"].node.state, after["c2"].node.available.get("Processors")) == ("Busy", Consumable("Processors", 3))
    assert json.loads(after["c1"].json())["reported_at"] == "2026-11-27T07:03:10Z"


def test_a_read_prepared_off_the_loop_publishes_what_the_loop_alone_would(tmp_path: Path) -> None:
    config = parse_config(tomllib.loads('[lrms]\ntype = "slurm"'))
    inline = Aggregator(config, Store(tmp_path / "a.sqlite"), Tokens())
    prepared = Aggregator(config, Store(tmp_path / "b.sqlite"), Tokens())
    first, later = read(), dataclasses.replace(read(), read_at=READ_AT + 30)
    for state in (first, later):
        inline.publish_slurm(state)
        prepared.prepare_slurm(state)  # as the reader calls it, in its worker thread
        made = prepared._prepared
        assert made is not None and made.state is state
        prepared.publish_slurm(state)
        assert prepared._prepared is None  # used once
        nodes = prepared.slurm_nodes()
        assert all(nodes[i] is made.made[i][1] for i in nodes)  # the entries made off the loop are the ones served ...
        assert all(e._json is not None and e._xml is not None for e in nodes.values())  # ... already rendered
        assert {i: (e.json(), e.xml()) for i, e in nodes.items()} == \
            {i: (e.json(), e.xml()) for i, e in inline.slurm_nodes().items()}
        assert prepared.tree.hosts.keys() == inline.tree.hosts.keys()
        assert all(prepared.tree.hosts[i] == inline.tree.hosts[i] for i in inline.tree.hosts)
    prepared.prepare_slurm(first)  # a preparation of another read than the one published is not used
    other = prepared._prepared
    assert other is not None
    prepared.publish_slurm(later)
    assert all(e is not other.made[i][1] for i, e in prepared.slurm_nodes().items())
    assert json.loads(prepared.slurm_nodes()["c1"].json())["reported_at"] == "2026-11-27T07:03:10Z"
