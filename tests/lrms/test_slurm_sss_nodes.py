"""Slurm's nodes as SSS Nodes (infosvc/lrms/sss_nodes.py) and as the host entries GET /v1/nodes
lists (infosvc/hosts/slurm_site.py): pure functions on output a real Slurm 22.05 wrote
(tests/fixtures/slurm: c1, c2 and g1 allocated, c3 down, c4 drained, g1 with two GPUs), their XML
valid against the SSS Node schema, their JSON as the agents' hosts', and the boundaries the
fixture does not reach."""

from __future__ import annotations

import dataclasses
import json

import pytest

from infosvc.codec.node_json import node_to_json
from infosvc.codec.node_xml import node_to_xml, parse_node
from infosvc.hosts.lifecycle import NodeState
from infosvc.hosts.query import HostFilter
from infosvc.hosts.slurm_site import slurm_entry
from infosvc.config import parse_config
from infosvc.lrms.cluster import GpuKind, SlurmNode
from infosvc.lrms.slurm_parse import nodes_of
from infosvc.lrms.sss_nodes import SLURM, slurm_state, sss_node, sss_state
from infosvc.model.node import Node
from support import FIXTURES

NOW = 1795762960.0


def nodes() -> dict[str, SlurmNode]:
    read = nodes_of(json.loads((FIXTURES / "slurm" / "sinfo.json").read_text())["nodes"])
    return {n.name: n for n in read}


def figures(node: Node, kind: str) -> tuple[float | None, ...]:
    return tuple(item.value if item is not None else None
                 for item in (node.configured.get(kind), node.available.get(kind), node.utilized.get(kind)))


def test_an_allocated_node_is_busy_with_slurms_figures() -> None:
    c1 = sss_node(nodes()["c1"], "c1")
    assert (c1.id, c1.name, c1.state, c1.opsys, c1.arch) == ("c1", "c1", "Busy", "Linux", "x86_64")
    assert figures(c1, "Processors") == (4, 0, 4)
    assert figures(c1, "Memory") == (1000.0, 1000.0, 0.0)  # sinfo: RealMemory 1000, none allocated
    assert [m.units for m in c1.configured if m.kind == "Memory"] == ["MB"]  # as the agent writes it
    assert c1.features == ["intel", "ib"]
    assert c1.extensions_of("Processor") == {"Sockets": "2", "PhysicalCores": "4"}
    assert c1.extensions_of("OperatingSystem") == {"KernelRelease": "6.18.44-fc-v595"}
    assert c1.extensions_of(SLURM) == {"State": "ALLOCATED", "Partitions": "batch,short"}
    assert not c1.configured.resources("GPU")


def test_a_down_node_is_offline_and_a_drained_one_says_so() -> None:
    read = nodes()
    c3, c4 = sss_node(read["c3"], "c3"), sss_node(read["c4"], "c4")
    assert c3.state == "Offline" and c3.extension("Reason", SLURM) == "power cut"
    assert c3.extension("State", SLURM) == "DOWN"
    assert c4.state == "Idle"  # drained: no job, and no new one (its life cycle is Paused)
    assert c4.extension("State", SLURM) == "IDLE+DRAIN" and c4.extension("Reason", SLURM) == "disk replaced"
    assert figures(c4, "Processors") == (4, 4, 0)


def test_a_gpu_nodes_gres_is_the_agents_gpu_resource() -> None:
    g1 = sss_node(nodes()["g1"], "g1")
    assert [(r.value, r.type, r.units) for r in g1.configured.resources("GPU")] == [(2.0, "gpu", None)]
    assert [r.value for r in g1.available.resources("GPU")] == [2.0]
    assert [r.value for r in g1.utilized.resources("GPU")] == [0.0]
    typed = dataclasses.replace(read_g1 := nodes()["g1"], gpus=(GpuKind("a100", 4, 3), GpuKind("t4", 1, 0)))
    made = sss_node(typed, "g1")
    assert [(r.type, r.value) for r in made.available.resources("GPU")] == [("a100", 1.0), ("t4", 1.0)]
    assert [(r.type, r.value) for r in made.utilized.resources("GPU")] == [("a100", 3.0), ("t4", 0.0)]
    assert read_g1.gpus == (GpuKind("gpu", 2, 0),)


@pytest.mark.parametrize("name", ["c1", "c2", "c3", "c4", "g1"])
def test_each_nodes_xml_is_valid_and_reads_back_the_same(name: str) -> None:
    made = sss_node(nodes()[name], name)
    again = parse_node(node_to_xml(made))  # validated against schemas/sss-node.xsd
    assert node_to_json(again) == node_to_json(made)


def test_boundaries_sinfo_did_not_reach() -> None:
    c1 = nodes()["c1"]
    bare = dataclasses.replace(c1, real_memory=0, alloc_memory=0, operating_system=None, architecture=None,
                               features=(), sockets=0, reason="", partitions=(), flags=("NOT_RESPONDING",),
                               state="idle", alloc_cpus=0)
    made = sss_node(bare, "c1")
    assert made.configured.get("Memory") is None  # no RealMemory known: no Memory, rather than 0 MB
    assert (made.opsys, made.arch, made.features) == (None, None, [])
    assert made.state == "Offline" and made.extensions_of(SLURM) == {"State": "IDLE+NOT_RESPONDING"}
    parse_node(node_to_xml(made))
    # allocated past what Slurm configured (a node shrunk under its jobs): never a negative amount
    over = dataclasses.replace(c1, alloc_memory=1500)
    assert figures(sss_node(over, "c1"), "Memory") == (1000.0, 0.0, 1000.0)
    assert sss_state(dataclasses.replace(c1, alloc_cpus=1)) == "Busy"
    assert slurm_state(dataclasses.replace(c1, state="mixed", flags=("DRAIN", "COMPLETING"))) == "MIXED+DRAIN+COMPLETING"


def test_the_entries_life_cycle_json_and_filters() -> None:
    read = nodes()
    entries = {name: slurm_entry(node, name, NOW) for name, node in read.items()}
    assert {n: (e.state, e.paused, e.reason) for n, e in entries.items()} == {
        "c1": (NodeState.READY, False, None), "c2": (NodeState.READY, False, None),
        "c3": (NodeState.UNREACHABLE, False, "power cut"), "c4": (NodeState.PAUSED, True, "disk replaced"),
        "g1": (NodeState.READY, False, None)}
    c3 = json.loads(entries["c3"].json())
    # Slurm knows the node is down: Offline, where an agent's silent host is Unknown
    assert (c3["state"], c3["life_cycle"], c3["reason"]) == ("Offline", "Unreachable", "power cut")
    assert c3["reported_at"] == "2026-11-27T07:02:40Z"
    assert entries["c3"].xml().startswith(b"<Node><Id>c3</Id>") and b"<State>Offline</State>" in entries["c3"].xml()
    assert entries["c1"].json() is entries["c1"].json()  # rendered once
    config = parse_config({})

    def chosen(*query: tuple[str, str]) -> list[str]:
        return [e.id for e in HostFilter.parse(query).select_from(entries, config)]

    assert chosen() == ["c1", "c2", "c3", "c4", "g1"]
    assert chosen(("state", "Paused,Unreachable")) == ["c3", "c4"]
    assert chosen(("min_free_processors", "1")) == []  # c4's are free, but it is drained
    assert chosen(("feature", "gpu")) == ["g1"]
    assert chosen(("nodes", "g1,c[2-3],c9")) == ["c2", "c3", "g1"]
    assert chosen(("nodes", "c[1-4]"), ("state", "Ready")) == ["c1", "c2"]
    assert chosen(("os", "linux"), ("arch", "x86_64"), ("min_free_memory", "1000")) == ["c1", "c2", "c3", "c4", "g1"]
    assert chosen(("min_free_memory", "1001")) == []
