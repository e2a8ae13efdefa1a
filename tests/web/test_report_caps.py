"""What one agent report may carry ([reports] in the config, docs/configuration.md): each family of
what a report lists (Extensions, features, file systems, network adapters, consumables, the
Node's own texts) has a count and a size; a report at a cap is taken, one past it is refused with
413 naming the cap, before anything of it is stored. A large real host (64 file systems on long
remote paths, 32 adapters with three addresses each, as the agent writes them) is far inside
every cap. On the real server, at the default caps."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Callable

import pytest

from infosvc.codec.node_xml import node_to_xml
from infosvc.model.node import Consumable, Extension, Node
from infosvc.config.site import ReportsConfig
from support.documents import make_node
from support.server import Server, ServerFactory

CAPS = ReportsConfig()  # the defaults: what a site gets without a word in its config
HOST = "capped.example.org"
FIXTURE_HOST = Path(__file__).resolve().parents[1] / "fixtures" / "host1"


def ext_chars(extensions: list[Extension]) -> int:
    """The size of Extensions as the caps count it: name, type and value, in characters."""
    return sum(len(e.name) + len(e.type or "") + len(e.value) for e in extensions)


def base(sequence: int) -> Node:
    return make_node(HOST, sequence=sequence)


def resources(node: Node) -> list[Consumable]:
    return [*node.configured, *node.available, *node.utilized]


def res_chars(items: list[Consumable]) -> int:
    return sum(len(r.name or "") + len(r.type or "") + len(r.units or "") + len(r.metric or "")
               + len(r.wall_duration or "") for r in items)


# Each builder makes a report holding exactly `cap + over` of one family, the rest of it small.

def extensions_count(sequence: int, over: int) -> Node:
    node = base(sequence)
    node.extensions += [Extension(f"E{i}", "x", "Test") for i in range(CAPS.max_extensions - len(node.extensions) + over)]
    return node


def extensions_size(sequence: int, over: int) -> Node:
    node = base(sequence)
    pad = Extension("Pad", "x" * (CAPS.max_extension_chars - ext_chars(node.extensions) - len("Pad") - len("Test") + over),
                    "Test")
    node.extensions.append(pad)
    assert ext_chars(node.extensions) == CAPS.max_extension_chars + over
    return node


def features_count(sequence: int, over: int) -> Node:
    node = base(sequence)
    node.features = [f"f{i}" for i in range(CAPS.max_features + over)]
    return node


def features_size(sequence: int, over: int) -> Node:
    node = base(sequence)
    each = CAPS.max_feature_chars // 8
    node.features = [f"{i}" + "x" * (each - 1) for i in range(8)]
    node.features[-1] += "y" * over
    assert sum(map(len, node.features)) == CAPS.max_feature_chars + over
    return node


def file_systems_count(sequence: int, over: int) -> Node:
    node = base(sequence)
    for i in range(CAPS.max_file_systems + over):
        node.configured.add(Consumable("Resource", 1000.0, units="MB", name="FileSystem", type=f"/fs{i}"))
    return node


def file_systems_size(sequence: int, over: int) -> Node:
    """One file system whose Resource type and Extensions together are the size of the cap."""
    node = base(sequence)
    node.configured.add(Consumable("Resource", 1000.0, units="MB", name="FileSystem", type="/data"))
    described = [Extension("Type", "nfs4", "FileSystem:/data"), Extension("Device", "", "FileSystem:/data")]
    described[1] = replace(described[1], value="x" * (CAPS.max_file_system_chars - len("/data") - ext_chars(described)
                                                      + over))
    node.extensions += described
    assert len("/data") + ext_chars(described) == CAPS.max_file_system_chars + over
    return node


def adapters_count(sequence: int, over: int) -> Node:
    node = base(sequence)
    for i in range(CAPS.max_adapters + over):
        node.configured.add(Consumable("Resource", 1000, units="Mbit/s", name="NetworkAdapter", type=f"eth{i}"))
    return node


def adapters_size(sequence: int, over: int) -> Node:
    node = base(sequence)
    node.configured.add(Consumable("Resource", 1000, units="Mbit/s", name="NetworkAdapter", type="eth0"))
    described = [Extension("MTU", "9000", "NetworkAdapter:eth0"), Extension("Address", "", "NetworkAdapter:eth0")]
    described[1] = replace(described[1], value="x" * (CAPS.max_adapter_chars - len("eth0") - ext_chars(described) + over))
    node.extensions += described
    assert len("eth0") + ext_chars(described) == CAPS.max_adapter_chars + over
    return node


def resources_count(sequence: int, over: int) -> Node:
    node = base(sequence)
    for i in range(CAPS.max_resources - len(resources(node)) + over):
        node.utilized.add(Consumable("Resource", 1.0, name="Sensor", type=f"t{i}"))
    assert len(resources(node)) == CAPS.max_resources + over
    return node


def resources_size(sequence: int, over: int) -> Node:
    node = base(sequence)
    pad = Consumable("Resource", 1.0, name="Sensor",
                     type="x" * (CAPS.max_resource_chars - res_chars(resources(node)) - len("Sensor") + over))
    node.utilized.add(pad)
    assert res_chars(resources(node)) == CAPS.max_resource_chars + over
    return node


def description_size(sequence: int, over: int) -> Node:
    node = base(sequence)
    node.description = "d" * (CAPS.max_property_chars + over)
    return node


def opsys_size(sequence: int, over: int) -> Node:
    node = base(sequence)
    node.opsys = "L" * (CAPS.max_property_chars + over)
    return node


CASES: dict[str, tuple[Callable[[int, int], Node], str]] = {
    "extensions": (extensions_count, "max_extensions"),
    "extension size": (extensions_size, "max_extension_chars"),
    "features": (features_count, "max_features"),
    "feature size": (features_size, "max_feature_chars"),
    "file systems": (file_systems_count, "max_file_systems"),
    "file system size": (file_systems_size, "max_file_system_chars"),
    "adapters": (adapters_count, "max_adapters"),
    "adapter size": (adapters_size, "max_adapter_chars"),
    "resources": (resources_count, "max_resources"),
    "resource size": (resources_size, "max_resource_chars"),
    "description": (description_size, "max_property_chars"),
    "opsys": (opsys_size, "max_property_chars"),
}


@pytest.fixture(scope="module")
def server(module_serve_app: ServerFactory) -> tuple[Server, str]:
    server = module_serve_app(agents=2)
    token = server.agent_token()
    assert server.post_node(node_to_xml(base(0)), token).status == 200
    return server, token


def stored(server: Server) -> tuple[int, int]:
    """How many reports the host has in the store, and the Sequence of its newest."""
    count = server.sql("SELECT count(*) FROM reports WHERE host_id = ?", HOST)[0][0]
    node = server.get(f"/v1/nodes/{HOST}").json()
    sequence = next(int(e["value"]) for e in node["extensions"] if e["name"] == "Sequence")
    return count, sequence


def rejected_too_large(server: Server) -> float:
    for line in server.get("/metrics").body.decode().splitlines():
        if line.startswith('infosvc_reports_rejected_total{reason="too_large"}'):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no too_large counter in /metrics")


@pytest.mark.parametrize("case", list(CASES))
def test_a_report_at_a_cap_is_taken_and_one_past_it_is_refused_unstored(server: tuple[Server, str],
                                                                           case: str) -> None:
    srv, token = server
    build, key = CASES[case]
    sequence = stored(srv)[1] + 1
    at_cap = node_to_xml(build(sequence, 0))
    assert len(at_cap) <= 256 * 1024, "the case must fit the body limit, or it tests that instead"
    reply = srv.post_node(at_cap, token)
    assert reply.status == 200, (case, reply.status, reply.body[:300])
    before = stored(srv)
    assert before[1] == sequence
    refused_before = rejected_too_large(srv)

    reply = srv.post_node(node_to_xml(build(sequence + 1, 1)), token)
    assert reply.is_error(413), (case, reply.status, reply.body[:300])
    said = reply.json()
    assert f"[reports] {key}" in said["error"] + " " + said["detail"], said
    assert stored(srv) == before  # nothing of it stored: neither history nor the host's newest
    assert rejected_too_large(srv) == refused_before + 1


def test_the_cases_are_each_past_one_cap_only() -> None:
    """Each over-the-cap report breaks its own cap: the boundary tested is the one named."""
    from infosvc.hosts.reportcaps import measure

    for case, (build, key) in CASES.items():
        at, over = measure(build(1, 0)), measure(build(1, 1))
        broken = [k for k, v in over.items() if v > getattr(CAPS, k)]
        assert broken == [key], (case, broken)
        assert all(v <= getattr(CAPS, k) for k, v in at.items()), (case, at)


def big_host() -> Node:
    """A large real host's report, written by the agent's own code: this machine's fixture CPU
    (/proc and /sys of a Xeon Gold 6130), 64 remote file systems on long paths and 32 adapters of
    three addresses each."""
    from infosvc_agents.collectors import CollectorRegistry, CollectorRun, default_collectors
    from infosvc_agents.collectors.filesystems import FileSystem
    from infosvc_agents.collectors.network import NetworkAdapter
    from infosvc_agents.host_node import build_node

    registry = CollectorRegistry()
    registry.extend(default_collectors(str(FIXTURE_HOST / "proc"), str(FIXTURE_HOST / "sys"), str(FIXTURE_HOST / "etc")))
    runs = registry.run()
    gib = 1 << 30
    runs["filesystems"] = CollectorRun("filesystems", facts=tuple(
        FileSystem(f"/gpfs/projects/climate-ensemble-{i:02d}/scratch",
                   f"nsd-server-{i % 4:02d}.storage.example.org:/export/projects/climate-ensemble-{i:02d}",
                   "nfs4", 100 * gib, 50 * gib, 50 * gib, False, True) for i in range(64)))
    runs["network"] = CollectorRun("network", facts=tuple(
        NetworkAdapter(f"enp{129 + i}s0f1np1", f"b8:59:9f:{i:02x}:00:01",
                       (f"10.{i}.12.34", f"2001:db8:{i:x}:12::34", f"fe80::ba59:9fff:fe{i:02x}:1"),
                       9000, 100_000, True, 10**12, 10**12, 10**9, 10**9) for i in range(32)))
    return build_node(runs, host_id="big.example.org", features=("gpu", "ib", "nvme", "avx512"),
                      timestamp="2026-11-26T00:00:00Z", agent_version="0.1.0", sample_id="big-1")


def test_a_large_real_host_is_taken_far_inside_every_cap(server: tuple[Server, str]) -> None:
    from infosvc.hosts.reportcaps import measure

    srv, _ = server
    node = big_host()
    used = measure(node)
    assert used["max_file_systems"] == 64 and used["max_adapters"] == 32
    # at most a third of any size and a quarter of any count: room for hosts larger still
    for key, value in used.items():
        share = 1 / 3 if key.endswith("_chars") else 1 / 4
        assert value <= getattr(CAPS, key) * share, (key, value, getattr(CAPS, key))
    reply = srv.post_node(node_to_xml(node), srv.tokens["agent1"])
    assert reply.status == 200, reply.body[:300]
    glue = srv.get("/v1/glue/hosts/big.example.org").json()
    assert len(glue["file_systems"]) == 64 and len(glue["network_adapters"]) == 32, sorted(glue)


def test_the_caps_are_the_sites_to_set(serve_app: ServerFactory) -> None:
    """A site whose hosts carry more raises a cap; a lower one refuses what the default takes."""
    srv = serve_app({"reports": {"max_features": 2}}, agents=1)
    token = srv.agent_token()
    node = make_node(HOST, features=("a", "b"))
    assert srv.post_node(node_to_xml(node), token).status == 200
    more = copy.deepcopy(node)
    more.features.append("c")
    reply = srv.post_node(node_to_xml(more), token)
    assert reply.is_error(413) and "[reports] max_features" in reply.json()["detail"], reply.body
