"""A host's GPUs from its report to every rendering (docs/glue-mapping.md, Accelerators): the
GLUE Host's accelerators, the homogeneity key (a GPU host never shares a subcluster with a CPU
host), the subcluster's and the CE's figures, GLUE JSON (schema-valid, read back by a top level),
GLUE 2.0 JSON's GLUE 2.1 entities and the 2.0 XML and LDIF's OtherInfo (each valid against its
schema), and the per-host Prometheus families."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from infosvc.codec import ldif
from infosvc.codec.glue_read import read_glue
from infosvc.codec.gridformat import GridOptions
from infosvc.config.site import parse_config
from infosvc.hosts.rollup import Rollup, host_from_node
from infosvc.model import glue
from infosvc.model.node import Consumable, Extension, Node
from infosvc.publish.glue import Glue
from support import ROOT
from support.documents import GPUs, make_node, node_document
from support.gridcheck import glue2_validator, xml_valid
from support.server import ServerFactory

WHEN = "2026-11-27T05:00:00Z"
CONFIG = parse_config({"clusters": [{"id": "gpu", "nodes": "g[01-10]"}, {"id": "cpu", "nodes": "c[01-10]"}],
                       "computing_elements": [{"id": "ce-all", "clusters": ["gpu", "cpu"]},
                                              {"id": "ce-cpu", "clusters": ["cpu"]}]})
H100 = "NVIDIA H100 80GB HBM3"
GLUE_SCHEMA = Draft202012Validator(json.loads((ROOT / "schemas" / "glue.schema.json").read_text()))


def gpu_host(name: str, state: str = "Ready", **gpus: object) -> glue.Host:
    return host_from_node(make_node(name, processors=64, memory_mb=512000, gpus=GPUs(**gpus)), state, CONFIG, WHEN)  # type: ignore[arg-type]


def cpu_host(name: str) -> glue.Host:
    return host_from_node(make_node(name, processors=64, memory_mb=512000), "Ready", CONFIG, WHEN)


def test_a_host_s_gpus_are_its_accelerators() -> None:
    host = gpu_host("g01", count=8, busy=3, failed=1)
    assert host.accelerators == (glue.Accelerator("GPU", H100, 8, "NVIDIA", 81559, "9.0"),)
    # a failed GPU is Configured only: neither free nor busy
    assert (host.total_accelerators, host.accelerators_available, host.accelerators_used) == (8, 4, 3)
    assert host.free_accelerators == 4
    assert gpu_host("g02", state="Paused").free_accelerators == 0  # a host that takes no job gives none
    assert cpu_host("c01").accelerators == () and cpu_host("c01").total_accelerators == 0


def test_mig_instances_count_by_their_own_model_and_memory() -> None:
    node = make_node("g01", processors=64)
    gpu = "0000:18:00.0"
    for name, value in (("Vendor", "NVIDIA"), ("Model", H100), ("ComputeCapability", "9.0"), ("MIG", "enabled")):
        node.extensions.append(Extension(name, value, f"GPU:{gpu}"))
    mig = f"{H100} MIG 1g.10gb"
    for ci in range(2):
        node.extensions.append(Extension("Model", mig, f"GPU:{gpu}/gi{7 + ci}/ci0"))
        node.extensions.append(Extension("Memory", str(9856 + ci), f"GPU:{gpu}/gi{7 + ci}/ci0"))
    node.configured.add(Consumable("Resource", 81559.0, units="MB", name="GPUMemory", type=gpu))
    node.configured.add(Consumable("Resource", 2.0, name="GPU", type=mig))
    node.available.add(Consumable("Resource", 2.0, name="GPU", type=mig))
    host = host_from_node(node, "Ready", CONFIG, WHEN)
    # its GPU's vendor and capability; the least of its instances' memory
    assert host.accelerators == (glue.Accelerator("GPU", mig, 2, "NVIDIA", 9856, "9.0"),)


def test_nonsense_counts_are_not_published() -> None:
    node = make_node("g01", gpus=GPUs(count=2))
    node.configured.add(Consumable("Resource", "lots", name="GPU", type="Phantom"))  # type: ignore[arg-type]
    node.configured.add(Consumable("Resource", -3.0, name="GPU", type="Negative"))
    host = host_from_node(node, "Ready", CONFIG, WHEN)
    assert [a.model for a in host.accelerators] == [H100]


def test_gpus_split_subclusters_and_keep_cpu_ids() -> None:
    rollup = Rollup(CONFIG)
    for host in (gpu_host("g01"), gpu_host("g02", busy=2), gpu_host("g03", count=8), cpu_host("g04")):
        rollup.update(host)
    subs = {tuple((a.model, a.count) for a in s.accelerators): s for s in rollup.subclusters.values()}
    assert set(subs) == {((H100, 4),), ((H100, 8),), ()}  # same processors and memory, three subclusters
    four = subs[((H100, 4),)]
    assert (four.host_count, four.total_accelerators, four.used_accelerators, four.free_accelerators) == (2, 8, 2, 6)
    assert "4x NVIDIA H100" in four.name
    # a host without accelerators keeps the id it had before they were in the key
    assert subs[()].unique_id == "gpu-99c167f753"  # as the code before accelerators named it
    # a host that gains GPUs moves, and the figures follow
    rollup.update(gpu_host("g04"))
    assert subs[((H100, 4),)].host_count == 3 and subs[((H100, 4),)].total_accelerators == 12
    ces = {ce.unique_id: ce for ce in rollup.computing_elements()}
    assert ces["ce-all"].accelerators == glue.AcceleratorFigures(total=20, used=2, free=18)
    assert ces["ce-cpu"].accelerators is None
    rollup.update(gpu_host("g01", state="Paused"))
    assert ces["ce-all"] != (after := {c.unique_id: c for c in rollup.computing_elements()})["ce-all"]
    assert after["ce-all"].accelerators == glue.AcceleratorFigures(total=20, used=2, free=14)


@pytest.fixture
def rollup() -> Rollup:
    r = Rollup(CONFIG)
    for host in (gpu_host("g01", busy=1), gpu_host("g02"), cpu_host("c01")):
        r.update(host)
    return r


def test_glue_json_carries_them_valid_and_a_top_level_reads_them_back(rollup: Rollup) -> None:
    document = Glue(rollup).rendering("json", GridOptions()).tree()
    GLUE_SCHEMA.validate(json.loads(document))
    site = json.loads(document)
    host = next(h for h in site["hosts"] if h["unique_id"] == "g01")
    assert host["accelerators"] == [{"type": "GPU", "model": H100, "count": 4, "vendor": "NVIDIA", "memory": 81559,
                                     "compute_capability": "9.0"}]
    assert (host["accelerators_available"], host["accelerators_used"], host["free_accelerators"]) == (3, 1, 3)
    assert "accelerators" not in next(h for h in site["hosts"] if h["unique_id"] == "c01")
    ce = next(c for c in site["computing_elements"] if c["unique_id"] == "ce-all")
    assert ce["accelerators"] == {"total": 8, "used": 1, "free": 7}
    broken = json.loads(document)
    broken["hosts"][0].setdefault("accelerators", [{}])[0]["count"] = -1
    assert not GLUE_SCHEMA.is_valid(broken)

    read = read_glue(document)
    assert read.hosts["g01"].accelerators == rollup.hosts["g01"].accelerators
    assert read.hosts["g01"].accelerators_used == 1
    sub = next(s for s, _ in read.subclusters if s.accelerators)
    assert (sub.total_accelerators, sub.used_accelerators, sub.free_accelerators) == (8, 1, 7)
    assert next(c for c in read.computing_elements if c.unique_id == "ce-all").accelerators == \
        glue.AcceleratorFigures(8, 1, 7)


def test_glue2_json_has_the_glue21_entities_and_stays_valid(rollup: Rollup) -> None:
    document = json.loads(Glue(rollup).rendering("glue2-json", GridOptions()).tree())
    glue2_validator().validate(document)
    (environment,) = document["AcceleratorEnvironment"]
    ee = next(e for e in document["ExecutionEnvironment"] if e["ID"] in environment["Associations"]["ExecutionEnvironmentID"])
    assert ee["OtherInfo"] == [f"Accelerator=GPU:4:{H100}"]
    assert {k: environment[k] for k in ("Type", "PhysicalAccelerators", "LogicalAccelerators", "Vendor", "Model",
                                        "Memory", "ComputeCapability")} == {
        "Type": "GPU", "PhysicalAccelerators": 4, "LogicalAccelerators": 4, "Vendor": "NVIDIA", "Model": H100,
        "Memory": 81559, "ComputeCapability": ["9.0"]}
    (manager,) = document["ComputingManagerAcceleratorInfo"]
    assert (manager["TotalPhysicalAccelerators"], manager["TotalAcceleratorSlots"],
            manager["UsedAcceleratorSlots"]) == (8, 8, 1)
    assert manager["Associations"]["ComputingManagerID"] == document["ComputingManager"][0]["ID"]
    (share,) = document["ComputingShareAcceleratorInfo"]  # ce-cpu's hosts have none
    ce_all = next(s for s in document["ComputingShare"] if s["MappingQueue"] == "ce-all")
    assert share["Associations"]["ComputingShareID"] == ce_all["ID"]
    assert (share["FreeAcceleratorSlots"], share["UsedAcceleratorSlots"], share["MaxAcceleratorSlotsPerJob"]) == (7, 1, 8)


def test_glue2_xml_and_ldif_say_it_in_other_info_and_stay_valid(rollup: Rollup) -> None:
    root = xml_valid(Glue(rollup).rendering("glue2-xml", GridOptions()).tree())
    infos = [i.text for i in root.iter() if isinstance(i.tag, str) and i.tag.endswith("}OtherInfo")]
    assert f"Accelerator=GPU:4:{H100}" in infos
    assert not [e for e in root.iter() if isinstance(e.tag, str) and "Accelerator" in e.tag]
    entries = ldif.parse(Glue(rollup).rendering("ldif-2.0", GridOptions()).tree().decode())
    assert any(("GLUE2EntityOtherInfo", f"Accelerator=GPU:4:{H100}") in attrs for attrs in entries.values())


def test_prometheus_families_per_host(tmp_path: Path) -> None:
    """Both ways of rendering the per-host families say the same (tests/publish/test_metrics.py
    compares them on CPU hosts), and a GPU host's lines are there with their labels."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from infosvc.hosts.aggregator import Aggregator
    from infosvc.hosts.tokens import Tokens
    from infosvc.publish.prometheus import AggregatorCollector, Metrics
    from infosvc.store import Store

    agg = Aggregator(CONFIG, Store(tmp_path / "m.sqlite"), Tokens())
    agg.clock = lambda: 1_800_000_000.0
    agg.table.report(make_node("g01", gpus=GPUs(count=2, busy=1)), 1_800_000_000.0)
    agg.table.report(make_node("c01"), 1_800_000_000.0)
    metrics = Metrics()
    metrics.watch(agg)
    text = metrics.exposition().decode()
    registry = CollectorRegistry()
    registry.register(AggregatorCollector(agg, hosts=True))
    reference = generate_latest(registry).decode()

    def gpu_samples(exposition: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(exposition) for s in family.samples
                if s.name.startswith("infosvc_host_gpu")}

    found = gpu_samples(text)
    assert found == gpu_samples(reference)
    assert found[("infosvc_host_gpus", (("model", H100), ("node", "g01")))] == 2
    assert found[("infosvc_host_gpus_available", (("model", H100), ("node", "g01")))] == 1
    assert found[("infosvc_host_gpus_utilized", (("model", H100), ("node", "g01")))] == 1
    assert found[("infosvc_host_gpu_memory_bytes", (("gpu", "0000:18:00.0"), ("node", "g01")))] == 81559 * 2**20
    assert found[("infosvc_host_gpu_memory_used_bytes", (("gpu", "0000:18:00.0"), ("node", "g01")))] == \
        81559 / 2 * 2**20
    assert found[("infosvc_host_gpu_utilization_ratio", (("gpu", "0000:19:00.0"), ("node", "g01")))] == 0
    assert found[("infosvc_host_gpu_utilization_ratio", (("gpu", "0000:18:00.0"), ("node", "g01")))] == 0.87
    assert not [key for key in found if ("node", "c01") in key[1]]


def test_a_gpu_host_reported_to_the_server_is_published(serve: ServerFactory) -> None:
    server = serve(agents=1)
    token = next(iter(server.tokens.values()))
    reply = server.request("POST", "/v1/nodes", node_document("g01", gpus=GPUs(count=8, busy=2)), token=token)
    assert reply.status in (200, 201), reply.body
    site = server.get("/v1/glue").json()
    GLUE_SCHEMA.validate(site)
    (host,) = site["hosts"]
    assert host["accelerators"][0]["count"] == 8 and host["accelerators_used"] == 2
    metrics = server.get("/metrics").body.decode()
    assert f'infosvc_host_gpus{{model="{H100}",node="g01"}} 8.0' in metrics


@pytest.mark.parametrize("tree, model, count", [("gpu-nvidia8", H100, 8), ("gpu-amd", None, 4)])
def test_what_the_agent_reports_of_a_gpu_node_is_what_is_published(tree: str, model: str | None, count: int) -> None:
    """The agent's own document of a fixture tree (tests/agents/test_gpus.py reads the same trees),
    through the server's parser and roll-up: its GPUs are the host's accelerators."""
    import subprocess
    import sys

    from infosvc.codec.node_xml import parse_node

    fixture = ROOT / "tests" / "fixtures" / tree
    document = subprocess.run([sys.executable, "-m", "infosvc_agents", "--once", "--id", "g01",
                               "--proc-root", str(fixture / "proc"), "--sys-root", str(fixture / "sys")],
                              capture_output=True, check=True, timeout=60).stdout
    host = host_from_node(parse_node(document), "Ready", CONFIG, WHEN)
    (accelerator,) = host.accelerators
    assert accelerator.count == count and (model is None or accelerator.model == model)
    assert host.accelerators_available + host.accelerators_used <= count
    rollup = Rollup(CONFIG)
    rollup.update(host)
    rollup.update(cpu_host("g02"))
    assert len(rollup.subclusters) == 2


def test_a_host_of_many_gpu_models_makes_answers_linear_in_them() -> None:
    # The subcluster's name listed every model, and each AcceleratorEnvironment repeated that name:
    # one report of 2,043 models (127 KB, within every cap) made glue2-json 105 MB, rendered afresh
    # at each unauthenticated read
    def answer(models: int) -> tuple[int, int]:
        r = _many(models)
        (sub,) = r.subclusters.values()
        return len(sub.name), len(Glue(r).rendering("glue2-json", GridOptions()).tree())
    small, large = answer(100), answer(400)
    assert large[0] - small[0] <= 1 and large[0] < 300  # the name names a few models and counts the rest
    assert large[1] < 5 * small[1]  # four times the models: about four times the answer, not sixteen
    (sub,) = _many(400).subclusters.values()
    assert sub.name.endswith(" and 396 more accelerator models"), sub.name


@pytest.mark.parametrize("fmt", ["glue2-json", "glue2-xml", "ldif"])
def test_a_long_processor_model_is_not_repeated_for_each_gpu_model(fmt: str) -> None:
    # a review: each AcceleratorEnvironment repeated its subcluster's name, which holds the
    # processor model: a report of a 90,000-character model and 2,000 GPU models (181 KB) made
    # glue2-json 181 MB at each unauthenticated read (2 GB resident with four readers)
    from infosvc.codec.node_xml import node_to_xml

    node = _many_node(1000, model="X" * 60_000)
    report = len(node_to_xml(node))
    r = Rollup(CONFIG)
    r.update(host_from_node(node, "Ready", CONFIG, WHEN))
    answer = len(Glue(r).rendering(fmt, GridOptions()).tree())
    assert answer < 4 * report, (answer, report)


def _many_node(models: int, *, model: str = "Xeon Gold 6130") -> Node:
    node = make_node("g01", processors=64, memory_mb=512000, model=model)
    for i in range(models):
        node.configured.add(Consumable("Resource", 1.0, name="GPU", type=f"M{i:020d}"))
    return node


def _many(models: int) -> Rollup:
    node = _many_node(models)
    r = Rollup(CONFIG)
    r.update(host_from_node(node, "Ready", CONFIG, WHEN))
    return r


@pytest.mark.parametrize("value", ["1e19", "1.7e308", "4294967296"])
def test_a_gpu_count_past_any_real_host_is_no_count_and_breaks_nothing(serve_app: ServerFactory, value: str) -> None:
    # a review: one report of <Resource name="GPU" type="Fake">1e19</Resource> was accepted, and
    # every submission and match answered 500 after it (the scheduler's numpy pool overflowed);
    # GLUE published a 20-digit accelerator count
    from infosvc.codec.node_xml import node_to_xml

    server = serve_app()
    server.report("victim.example.org", server.agent_token())
    evil = make_node("evil.example.org")
    evil.configured.add(Consumable("Resource", float(value), name="GPU", type="Fake"))
    evil.available.add(Consumable("Resource", float(value), name="GPU", type="Fake"))
    assert server.post_node(node_to_xml(evil), server.agent_token()).status == 200
    job = b"<Job><Id>j</Id><Executable>/bin/true</Executable><Requested><Processors>1</Processors></Requested></Job>"
    submitted = server.request("POST", "/v1/jobs", job, token=server.tokens["submit"],
                               headers={"Content-Type": "application/xml"})
    assert submitted.status == 201, submitted.body
    assert server.request("POST", "/v1/match", job, headers={"Content-Type": "application/xml"}).status == 200
    hosts = {h["unique_id"]: h for h in server.get("/v1/glue").json()["hosts"]}
    assert not hosts["evil.example.org"].get("accelerators"), hosts["evil.example.org"]
    assert str(int(float(value))) not in server.get("/v1/glue").body.decode()
