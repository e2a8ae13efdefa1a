"""The GLUE renderings (XML and JSON) against the very schemas published with the project.

A roll-up is built from synthetic SSS Nodes through the real SSS -> GLUE mapping, under a site
config with several clusters and computing elements, benchmarks, software, an empty cluster, a CE
without clusters and one naming the implicit `default` cluster; every document is validated with
lxml against schemas/glue-ce-1.1.xsd or with jsonschema against schemas/glue.schema.json.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker
from lxml import etree
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from infosvc.codec import safexml
from infosvc.codec.glue_xml import NAMESPACE
from infosvc.publish.glue import Glue
from infosvc.codec.node_xml import parse_node
from infosvc.hosts.table import HostEntry
from infosvc.model import glue
from infosvc.model.node import Consumable, Extension, Node
from infosvc.hosts.rollup import Rollup, host_from_node
from infosvc.config.site import SiteConfig, parse_config
from support.readings import untimed

ROOT = Path(__file__).resolve().parents[2]
NS = {"g": NAMESPACE}
WHEN = "2024-05-01T12:00:00Z"
KINDS = ("computing-elements", "clusters", "subclusters", "hosts")
HOSTILE = "a&b <c> \"d\" 'e' ]]> \U0001d50a \u00e9\r\ttab"

# jsonschema checks "date-time" only with an optional package; check RFC 3339 here instead.
FORMATS = FormatChecker()
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)\Z")


@FORMATS.checks("date-time")
def _date_time(value: object) -> bool:
    return not isinstance(value, str) or bool(_RFC3339.match(value))


def _json_schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((ROOT / "schemas" / name).read_text())
    Draft202012Validator.check_schema(schema)
    return schema


GLUE_SCHEMA = _json_schema("glue.schema.json")
NODE_SCHEMA = _json_schema("sss-node.schema.json")
_REGISTRY: Registry[Any] = Registry().with_resources(
    (s["$id"], DRAFT202012.create_resource(s)) for s in (GLUE_SCHEMA, NODE_SCHEMA))


def json_validator(schema: dict[str, Any], definition: str | None = None) -> Draft202012Validator:
    """A validator for the whole `schema`, or for one of its $defs, as the schema's description says."""
    target = schema if definition is None else {"$ref": f"{schema['$id']}#/$defs/{definition}"}
    return Draft202012Validator(target, registry=_REGISTRY, format_checker=FORMATS)


ENTITY_DEFS = {"computing-elements": "ComputingElement", "clusters": "Cluster", "subclusters": "SubCluster",
               "hosts": "Host"}
ROOT_TAGS = {"computing-elements": "ComputingElement", "clusters": "Cluster", "subclusters": "SubCluster",
             "hosts": "Host"}


def xml_valid(document: bytes) -> etree._Element:
    """The root of `document`, after checking its declaration and validating it with the XSD file."""
    assert document.startswith(b"<?xml version='1.0' encoding='UTF-8'?>\n")
    root = safexml.parse(document, max_bytes=1 << 30, what="GLUE document")
    safexml.validate(root, safexml.schema("glue-ce-1.1.xsd"))
    return root


def json_valid(document: bytes, definition: str | None = None) -> Any:
    value = json.loads(document)
    json_validator(GLUE_SCHEMA, definition).validate(value)
    return value


# --- a site ---------------------------------------------------------------------------------

CONFIG = {
    "service": {"information_service_url": "https://glue.example.org:8443/v1/glue?a=1&b=2"},
    "clusters": [
        {"id": "alpha", "name": "Alpha <&> \"main\"", "nodes": "a[001-100]"},
        {"id": "beta", "nodes": "b[01-10]"},
        {"id": "empty", "name": "Nothing here yet", "nodes": "z[1-4]"},
    ],
    "computing_elements": [
        {"id": "ce.example.org:2119/jobmanager-infosvc-all", "name": "All", "queue": "all",
         "clusters": ["alpha", "beta", "empty"], "lrms_version": "1.0", "gram_version": "2",
         "host_name": "ce.example.org", "gatekeeper_port": 2119,
         "access_control": ["VO:atlas", "/DC=org/CN=Jane <Doe> & \"co\""],
         "policy": {"max_wall_clock_time": 2880, "max_cpu_time": 1440, "max_total_jobs": 1000,
                    "max_running_jobs": 500, "priority": -5}},
        {"id": "ce-beta", "clusters": ["beta"], "status": "Draining"},
        {"id": "ce-none", "status": "Closed"},
        {"id": "ce-default", "clusters": ["default"], "status": "Queueing"},
    ],
    "benchmarks": [{"nodes": "a[001-050]", "si00": 1500, "sf00": 1400}],
    "software": [{"nodes": "a[001-100]", "runtime_environment": ["LCG-2", "R-4.3 <beta> & more"]},
                 {"nodes": "a[001-010]", "runtime_environment": ["MPI"]}],
}


def make_node(node_id: str, *, cpus: int = 4, free: int = 2, memory: float = 16000.0, memory_free: float = 9000.5,
              model: str = "Xeon Gold 6130", loads: tuple[float, float, float] = (1.0, 1.5, 2.0),
              name: str | None = None, os_name: str = "Debian GNU/Linux") -> Node:
    """An SSS Node as the host agent writes it (docs/node-mapping.md)."""
    node = Node(id=node_id, name=name or node_id, opsys="Linux", arch="x86_64", state="Idle")
    ext = node.extensions.append
    for key, value in (("Name", os_name), ("Release", "12"), ("Version", "bookworm")):
        ext(Extension(key, value, "OperatingSystem"))
    for key, value in (("Vendor", "GenuineIntel"), ("Model", model), ("Version", "6/85/4"), ("ClockSpeed", "2100"),
                       ("InstructionSet", "x86_64"), ("Flags", "sse sse2 avx512f"), ("CacheL1D", "32"),
                       ("CacheL1I", "32"), ("CacheL2", "1024")):
        ext(Extension(key, value, "Processor"))
    for root, kind, fs_type, read_only in (("/", "local", "ext4", "false"), ("/home", "remote", "nfs4", "true")):
        for key, value in (("Type", fs_type), ("ReadOnly", read_only), ("Kind", kind), ("Device", f"dev{root}")):
            ext(Extension(key, value, f"FileSystem:{root}"))
    ext(Extension("MTU", "9000", "NetworkAdapter:eth0"))
    ext(Extension("Address", "fe80::1", "NetworkAdapter:eth0"))
    ext(Extension("Address", "10.0.0.7", "NetworkAdapter:eth0"))
    c, a, u = node.configured.add, node.available.add, node.utilized.add
    c(Consumable("Processors", cpus))
    c(Consumable("Memory", memory, "MB"))
    c(Consumable("Swap", 2048.0, "MB"))
    c(Consumable("Resource", 100000.0, "MB", name="FileSystem", type="/"))
    c(Consumable("Resource", 500000.0, "MB", name="FileSystem", type="/home"))
    c(Consumable("Resource", 10000.0, "Mbit/s", name="NetworkAdapter", type="eth0"))
    c(Consumable("Resource", 0.0, "Mbit/s", name="NetworkAdapter", type="lo"))
    a(Consumable("Processors", free))
    a(Consumable("Memory", memory_free, "MB"))
    a(Consumable("Swap", 1024.0, "MB"))
    a(Consumable("Resource", 40000.0, "MB", name="FileSystem", type="/"))
    for span, load in zip(("1min", "5min", "15min"), loads):
        u(Consumable("Resource", load, metric="Average", name="Load", type=span))
    return node


STATES = ("Ready", "Ready", "Ready", "Pending", "Paused", "Unreachable")


def site_hosts(config: SiteConfig) -> list[glue.Host]:
    hosts = []
    for i in range(1, 61):
        model = "Xeon Gold 6130" if i <= 40 else "EPYC 7302"
        hosts.append(host_from_node(make_node(f"a{i:03d}", model=model), STATES[i % len(STATES)], config, WHEN))
    for i in range(1, 6):
        hosts.append(host_from_node(make_node(f"b{i:02d}", cpus=64, free=60, memory=256000.0), "Ready", config, WHEN))
    return hosts


@pytest.fixture
def config() -> SiteConfig:
    return parse_config(json.loads(json.dumps(CONFIG)))  # a deep copy: parse_config consumes tables


@pytest.fixture
def rollup(config: SiteConfig) -> Rollup:
    r = Rollup(config)
    for host in site_hosts(config):
        r.update(host)
    return r


def ids(root: etree._Element, path: str) -> list[str]:
    return [e.text for e in root.iterfind(path, NS)]


# --- XML ------------------------------------------------------------------------------------

def test_tree_xml_is_valid_and_complete(rollup: Rollup) -> None:
    root = xml_valid(Glue(rollup).xml.tree())
    assert root.tag == f"{{{NAMESPACE}}}Glue"
    assert ids(root, "g:ComputingElement/g:UniqueID") == [ce.unique_id for ce in rollup.computing_elements()]
    # configured clusters (the empty one too), then `default`, published empty because ce-default names it
    assert ids(root, "g:Cluster/g:UniqueID") == ["alpha", "beta", "empty", "default"]
    assert sorted(ids(root, "g:Cluster/g:SubCluster/g:Host/g:UniqueID")) == sorted(rollup.hosts)
    assert ids(root, "g:Cluster[g:UniqueID='empty']/g:SubCluster") == []
    none = root.find("g:ComputingElement[g:UniqueID='ce-none']", NS)
    assert none is not None and none.find("g:ClusterRef", NS) is None
    assert none.findtext("g:State/g:Status", namespaces=NS) == "Closed"
    ce = root.find("g:ComputingElement", NS)
    assert ids(ce, "g:ClusterRef") == ["alpha", "beta", "empty"]
    assert ids(ce, "g:AccessControlBase/g:Rule") == ["VO:atlas", "/DC=org/CN=Jane <Doe> & \"co\""]
    assert ce.findtext("g:Policy/g:Priority", namespaces=NS) == "-5"
    assert ce.findtext("g:Info/g:GatekeeperPort", namespaces=NS) == "2119"
    assert ce.findtext("g:InformationServiceURL", namespaces=NS) == CONFIG["service"]["information_service_url"]  # type: ignore[index]
    live = [h for h in rollup.hosts.values() if h.live]
    assert ce.findtext("g:Info/g:TotalCPUs", namespaces=NS) == str(sum(h.total_cpus for h in live))
    assert ce.findtext("g:State/g:FreeCPUs", namespaces=NS) == str(sum(h.free_cpus for h in rollup.hosts.values()))
    alpha = root.find("g:Cluster[g:UniqueID='alpha']", NS)
    assert alpha.findtext("g:Name", namespaces=NS) == "Alpha <&> \"main\""


def test_subcluster_xml_carries_shared_groups_and_totals(rollup: Rollup) -> None:
    root = xml_valid(Glue(rollup).xml.tree())
    subs = root.findall("g:Cluster/g:SubCluster", NS)
    assert len(subs) == len(rollup.subclusters)
    for sub_el in subs:
        sub = rollup.subclusters[sub_el.findtext("g:UniqueID", namespaces=NS)]
        hosts = list(rollup.hosts_of(sub.unique_id))
        assert sub_el.findtext("g:SubClusterCount", namespaces=NS) == str(len(hosts))
        assert len(sub_el.findall("g:Host", NS)) == len(hosts)
        totals = sub_el.find("g:Totals", NS)
        assert totals.findtext("g:LiveHosts", namespaces=NS) == str(sum(h.live for h in hosts))
        assert totals.findtext("g:FreeCPUs", namespaces=NS) == str(sum(h.free_cpus for h in hosts))
        for state in ("Pending", "Ready", "Paused", "Unreachable"):
            assert totals.findtext(f"g:{state}Hosts", namespaces=NS) == str(sum(h.state == state for h in hosts))
    benchmarked = [s for s in subs if s.find("g:Benchmark", NS) is not None]
    assert benchmarked and all(s.findtext("g:Benchmark/g:SI00", namespaces=NS) == "1500" for s in benchmarked)
    software = {tuple(ids(s, "g:ApplicationSoftware/g:RunTimeEnvironment")) for s in subs}
    assert ("LCG-2", "R-4.3 <beta> & more", "MPI") in software and ("LCG-2", "R-4.3 <beta> & more") in software


def test_host_xml_carries_the_mapping(rollup: Rollup) -> None:
    root = xml_valid(Glue(rollup).xml.entity("hosts", "a001") or b"")
    assert root.tag == f"{{{NAMESPACE}}}Host"

    def text(path: str) -> str | None:
        found: str | None = root.findtext(path, namespaces=NS)
        return found

    assert text("g:State") == "Ready" and text("g:LastReport") == WHEN
    assert text("g:Architecture/g:SMPSize") == "4" and text("g:Architecture/g:PlatformType") == "x86_64"
    assert text("g:Processor/g:ClockSpeed") == "2100" and text("g:Processor/g:CacheL2") == "1024"
    assert text("g:Processor/g:ComputerISA") == "x86_64"
    assert text("g:MainMemory/g:RAMSize") == "16000" and text("g:MainMemory/g:RAMAvailable") == "9000"
    assert ids(root, "g:FileSystem/g:Root") == ["/"] and ids(root, "g:RemoteFileSystem/g:Root") == ["/home"]
    assert text("g:RemoteFileSystem/g:ReadOnly") == "true" and text("g:RemoteFileSystem/g:Type") == "nfs4"
    assert text("g:RemoteFileSystem/g:AvailableSpace") is None
    assert ids(root, "g:NetworkAdapter/g:Name") == ["eth0"]  # loopback left out
    assert text("g:NetworkAdapter/g:IPAddress") == "10.0.0.7" and text("g:NetworkAdapter/g:MTU") == "9000"
    # (4 CPUs - 1.0 runnable) x 100 for the node; per processor, divided by 4
    assert ids(root, "g:SMPLoad/*") == ["300", "250", "200"]
    assert ids(root, "g:ProcessorLoad/*") == ["75", "62", "50"]


def test_every_entity_xml_is_valid(rollup: Rollup) -> None:
    xml = Glue(rollup).xml
    every = {"computing-elements": [c.unique_id for c in rollup.computing_elements()],
             "clusters": ["alpha", "beta", "empty", "default"], "subclusters": list(rollup.subclusters),
             "hosts": list(rollup.hosts)}
    for kind, found in every.items():
        for ident in found:
            document = xml.entity(kind, ident)
            assert document is not None, (kind, ident)
            root = xml_valid(document)
            assert root.tag == f"{{{NAMESPACE}}}{ROOT_TAGS[kind]}"
            assert root.findtext("g:UniqueID", namespaces=NS) == ident
        assert xml.entity(kind, "no-such-id") is None
    assert xml.entity("nodes", "a001") is None
    alpha = xml_valid(xml.entity("clusters", "alpha") or b"")
    assert sorted(ids(alpha, "g:SubCluster/g:Host/g:UniqueID")) == sorted(h for h in rollup.hosts if h.startswith("a"))


def test_hosts_xml(rollup: Rollup) -> None:
    xml = Glue(rollup).xml
    chosen = [rollup.hosts[h] for h in ("b03", "a010", "a001")]
    root = xml_valid(xml.hosts(chosen))
    assert root.tag == f"{{{NAMESPACE}}}Hosts"
    assert ids(root, "g:Host/g:UniqueID") == ["b03", "a010", "a001"]
    assert len(xml_valid(xml.hosts([]))) == 0


def test_schema_refuses_what_it_should(rollup: Rollup) -> None:
    xsd = safexml.schema("glue-ce-1.1.xsd")
    good = Glue(rollup).xml.tree()
    for before, after in ((b"<State>Ready</State>", b"<State>Busy</State>"),
                          (b"<ClusterRef>beta</ClusterRef>", b"<ClusterRef>gamma</ClusterRef>"),
                          (b"<UniqueID>a002</UniqueID>", b"<UniqueID>a001</UniqueID>"),
                          (b"<Status>Draining</Status>", b"<Status>Open</Status>"),
                          (f"<LastReport>{WHEN}</LastReport>".encode(), b"<LastReport>yesterday</LastReport>")):
        assert before in good
        assert not xsd.validate(etree.fromstring(good.replace(before, after, 1))), after


# --- JSON -----------------------------------------------------------------------------------

def test_tree_json_is_valid_and_consistent(rollup: Rollup) -> None:
    tree = json_valid(Glue(rollup).json.tree())
    ces = {c["unique_id"]: c for c in tree["computing_elements"]}
    clusters = {c["unique_id"]: c for c in tree["clusters"]}
    subs = {s["unique_id"]: s for s in tree["subclusters"]}
    hosts = {h["unique_id"]: h for h in tree["hosts"]}
    assert list(clusters) == ["alpha", "beta", "empty", "default"]
    assert set(subs) == set(rollup.subclusters) and set(hosts) == set(rollup.hosts)
    assert len(tree["hosts"]) == len(hosts)
    for ce in ces.values():
        assert all(c in clusters for c in ce["clusters"])
    assert ces["ce-none"]["clusters"] == [] and ces["ce-none"]["state"]["status"] == "Closed"
    for cid, cluster in clusters.items():
        for sid in cluster["subclusters"]:
            assert subs[sid]["cluster"] == cid
    for sid, sub in subs.items():
        assert sub["host_count"] == len(sub["hosts"])
        for hid in sub["hosts"]:
            assert hosts[hid]["subcluster"] == sid and hosts[hid]["cluster"] == sub["cluster"]
    ce = ces["ce.example.org:2119/jobmanager-infosvc-all"]
    assert ce["info"] == {"lrms_type": "infosvc", "lrms_version": "1.0", "gram_version": "2",
                          "host_name": "ce.example.org", "gatekeeper_port": 2119,
                          "total_cpus": sum(h.total_cpus for h in rollup.hosts.values() if h.live)}
    assert ce["policy"]["priority"] == -5 and ce["state"]["total_jobs"] == 0
    assert ce["access_control_base"]["rules"][1] == "/DC=org/CN=Jane <Doe> & \"co\""
    assert "gatekeeper_port" not in ces["ce-beta"]["info"]  # None is left out
    a001 = hosts["a001"]
    assert a001["smp_load"] == {"last_1min": 300, "last_5min": 250, "last_15min": 200}
    assert a001["main_memory"] == {"ram_size": 16000, "ram_available": 9000, "virtual_size": 2048,
                                   "virtual_available": 1024}
    assert [fs["remote"] for fs in a001["file_systems"]] == [False, True]
    assert a001["benchmark"] == {"si00": 1500, "sf00": 1400}
    assert hosts["a060"].get("benchmark") is None and "benchmark" not in hosts["a060"]


def test_xml_and_json_say_the_same(rollup: Rollup) -> None:
    root = xml_valid(Glue(rollup).xml.tree())
    tree = json_valid(Glue(rollup).json.tree())
    assert ids(root, "g:Cluster/g:SubCluster/g:Host/g:UniqueID") == [h["unique_id"] for h in tree["hosts"]]
    assert ids(root, "g:Cluster/g:SubCluster/g:UniqueID") == [s["unique_id"] for s in tree["subclusters"]]
    for sub in tree["subclusters"]:
        el = root.find(f"g:Cluster/g:SubCluster[g:UniqueID='{sub['unique_id']}']", NS)
        assert el.findtext("g:Totals/g:TotalCPUs", namespaces=NS) == str(sub["total_cpus"])
        assert el.findtext("g:Totals/g:RAMAvailable", namespaces=NS) == str(sub["ram_available"])
        assert el.findtext("g:Name", namespaces=NS) == sub["name"]


def test_every_entity_json_is_valid(rollup: Rollup) -> None:
    js = Glue(rollup).json
    tree = json.loads(js.tree())
    for kind, key in (("computing-elements", "computing_elements"), ("clusters", "clusters"),
                      ("subclusters", "subclusters"), ("hosts", "hosts")):
        for expected in tree[key]:
            document = js.entity(kind, expected["unique_id"])
            assert document is not None
            assert json_valid(document, ENTITY_DEFS[kind]) == expected
        assert js.entity(kind, "no-such-id") is None
    assert js.entity("nodes", "a001") is None
    listed = json_valid(js.hosts([rollup.hosts["b02"], rollup.hosts["a005"]]), "Hosts")
    assert [h["unique_id"] for h in listed["hosts"]] == ["b02", "a005"]
    assert listed["hosts"][0] == next(h for h in tree["hosts"] if h["unique_id"] == "b02")
    assert json_valid(js.hosts([]), "Hosts") == {"hosts": []}


def test_json_schema_refuses_what_it_should(rollup: Rollup) -> None:
    host = json.loads(Glue(rollup).json.entity("hosts", "a001") or b"")
    validator = json_validator(GLUE_SCHEMA, "Host")
    assert validator.is_valid(host)
    for broken in ({**host, "colour": "blue"}, {k: v for k, v in host.items() if k != "state"},
                   {**host, "state": "Busy"}, {**host, "reported_at": "yesterday"},
                   {**host, "main_memory": {"ram_size": -1}}, {**host, "smp_load": {"last_1min": 1}}):
        assert not validator.is_valid(broken), broken
    assert not json_validator(GLUE_SCHEMA).is_valid({"hosts": []})


# --- hostile text, odd numbers, changes ------------------------------------------------------

def test_hostile_strings_are_escaped_and_cleaned(config: SiteConfig) -> None:
    rollup = Rollup(config)
    node = make_node("a001", name=HOSTILE, os_name="OS \x01 \x0b \ufffe end", model=HOSTILE)
    rollup.update(host_from_node(node, "Ready", config, WHEN))
    weird = replace(rollup.hosts["a001"], unique_id="a002", name="lone \ud800 surrogate")
    rollup.update(weird)
    xml, js = Glue(rollup).xml, Glue(rollup).json
    root = xml_valid(xml.tree())
    host = root.find("g:Cluster/g:SubCluster/g:Host[g:UniqueID='a001']", NS)
    assert host.findtext("g:Name", namespaces=NS) == HOSTILE  # \r survives as &#13;
    assert host.findtext("g:Processor/g:Model", namespaces=NS) == HOSTILE
    assert host.findtext("g:OperatingSystem/g:Name", namespaces=NS) == "OS \ufffd \ufffd \ufffd end"
    assert xml_valid(xml.entity("hosts", "a002") or b"").findtext("g:Name", namespaces=NS) == "lone \ufffd surrogate"
    tree = json_valid(js.tree())
    by_id = {h["unique_id"]: h for h in tree["hosts"]}
    assert by_id["a001"]["name"] == HOSTILE and by_id["a001"]["operating_system"]["name"] == "OS \x01 \x0b \ufffe end"
    assert by_id["a001"]["processor"]["model"] == HOSTILE
    assert js.tree().isascii()  # every non-ASCII character escaped: no encoding trouble, surrogate or not


_ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=12)  # surrogates and controls too
_SOME_TEXT = st.none() | _ANY_TEXT
_SOME_INT = st.none() | st.integers(-(1 << 40), 1 << 40)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(value: str | None) -> str | None:
    return None if value is None else _NOT_XML.sub("\ufffd", value)


def _xml_int(value: int | None) -> str | None:
    return None if value is None or value < 0 else str(value)


@settings(max_examples=150, deadline=None)
@given(unique_id=_ANY_TEXT.filter(bool), name=_ANY_TEXT, os_name=_SOME_TEXT, model=_SOME_TEXT, clock=_SOME_INT,
       cache=_SOME_INT, ram=_SOME_INT, root=_ANY_TEXT, fs_type=_SOME_TEXT, size=_SOME_INT, remote=st.booleans(),
       nic=_ANY_TEXT, ip=_SOME_TEXT, mtu=_SOME_INT, load=st.integers(-(1 << 33), 1 << 33),
       state=st.sampled_from(STATES))
def test_any_values_render_valid_and_read_back(unique_id: str, name: str, os_name: str | None, model: str | None,
                                               clock: int | None, cache: int | None, ram: int | None, root: str,
                                               fs_type: str | None, size: int | None, remote: bool, nic: str,
                                               ip: str | None, mtu: int | None, load: int, state: str) -> None:
    host = glue.Host(
        unique_id=unique_id, name=name, state=state, last_report=WHEN, cluster="c",
        operating_system=glue.OperatingSystem(name=os_name),
        processor=glue.Processor(model=model, clock_speed=clock, cache_l2=cache),
        main_memory=glue.MainMemory(ram_size=ram), file_systems=(glue.FileSystem(root, root, fs_type, False, size,
                                                                                 None, remote),),
        smp_load=glue.Load(load, 0, -load), network_adapters=(glue.NetworkAdapter(nic, ip, mtu),))
    rollup = Rollup(SiteConfig())
    rollup.update(host)
    root_el = xml_valid(Glue(rollup).xml.tree())
    el = root_el.find("g:Cluster/g:SubCluster/g:Host", NS)
    assert el is not None
    text = el.findtext
    assert text("g:UniqueID", namespaces=NS) == _xml_text(unique_id)
    assert text("g:Name", namespaces=NS) == _xml_text(name)
    assert text("g:OperatingSystem/g:Name", namespaces=NS) == _xml_text(os_name)
    assert text("g:Processor/g:Model", namespaces=NS) == _xml_text(model)
    assert text("g:Processor/g:ClockSpeed", namespaces=NS) == _xml_int(clock)
    assert text("g:Processor/g:CacheL2", namespaces=NS) == _xml_int(cache)
    assert text("g:MainMemory/g:RAMSize", namespaces=NS) == _xml_int(ram)
    fs_tag = "g:RemoteFileSystem" if remote else "g:FileSystem"
    assert text(f"{fs_tag}/g:Root", namespaces=NS) == _xml_text(root)
    assert text(f"{fs_tag}/g:Type", namespaces=NS) == _xml_text(fs_type)
    assert text(f"{fs_tag}/g:Size", namespaces=NS) == _xml_int(size)
    assert text("g:NetworkAdapter/g:Name", namespaces=NS) == _xml_text(nic)
    assert text("g:NetworkAdapter/g:IPAddress", namespaces=NS) == _xml_text(ip)
    assert text("g:NetworkAdapter/g:MTU", namespaces=NS) == _xml_int(mtu)
    assert text("g:SMPLoad/g:Load1min", namespaces=NS) == (str(load) if abs(load) < 1 << 31 else None)

    tree = json_valid(Glue(rollup).json.tree())
    (out,) = tree["hosts"]
    assert (out["unique_id"], out["name"]) == (unique_id, name)
    assert out["operating_system"].get("name") == os_name and out["processor"].get("model") == model
    assert out["processor"].get("clock_speed") == (None if clock is None or clock < 0 else clock)
    assert out["main_memory"].get("ram_size") == (None if ram is None or ram < 0 else ram)
    assert out["file_systems"][0]["root"] == root and out["file_systems"][0].get("type") == fs_type
    assert out["file_systems"][0].get("size") == (None if size is None or size < 0 else size)
    assert out["network_adapters"][0] == {k: v for k, v in (("name", nic), ("ip_address", ip), ("mtu", mtu))
                                          if v is not None and not (k == "mtu" and v < 0)}


def test_negative_loads_and_implausible_numbers(config: SiteConfig) -> None:
    rollup = Rollup(config)
    busy = host_from_node(make_node("a001", cpus=2, loads=(7.5, 5.0, 2.0)), "Ready", config, WHEN)
    assert busy.smp_load == glue.Load(-550, -300, 0)
    rollup.update(busy)
    odd = replace(rollup.hosts["a001"], unique_id="a002",
                  network_adapters=(glue.NetworkAdapter("eth0", mtu=-7, outbound_ip=True, inbound_ip=False),),
                  processor_load=glue.Load(10**40, 0, 0), processor=glue.Processor(clock_speed=-1, cache_l1=-3))
    rollup.update(odd)
    xml, js = Glue(rollup).xml, Glue(rollup).json
    root = xml_valid(xml.tree())
    a1 = root.find("g:Cluster/g:SubCluster/g:Host[g:UniqueID='a001']", NS)
    assert ids(a1, "g:SMPLoad/*") == ["-550", "-300", "0"]
    assert ids(a1, "g:ProcessorLoad/*") == ["-275", "-150", "0"]
    a2 = xml_valid(xml.entity("hosts", "a002") or b"")
    assert a2.find("g:ProcessorLoad", NS) is None and a2.find("g:SMPLoad", NS) is not None
    assert a2.find("g:NetworkAdapter/g:MTU", NS) is None
    assert a2.findtext("g:NetworkAdapter/g:OutboundIP", namespaces=NS) == "true"
    assert a2.findtext("g:NetworkAdapter/g:InboundIP", namespaces=NS) == "false"
    assert len(a2.find("g:Processor", NS)) == 0
    hosts = {h["unique_id"]: h for h in json_valid(js.tree())["hosts"]}
    assert hosts["a001"]["processor_load"] == {"last_1min": -275, "last_5min": -150, "last_15min": 0}
    assert "processor_load" not in hosts["a002"] and hosts["a002"]["processor"] == {}
    assert hosts["a002"]["network_adapters"] == [{"name": "eth0", "outbound_ip": True, "inbound_ip": False}]


def test_cache_follows_changes(rollup: Rollup, config: SiteConfig) -> None:
    xml, js = Glue(rollup).xml, Glue(rollup).json
    first_xml, first_json = xml.tree(), js.tree()
    assert xml.tree() == first_xml and js.tree() == first_json
    cached = xml._cache["a001"][1]
    xml.tree()
    assert xml._cache["a001"][1] is cached  # reused, not rendered again

    # a new report with other values
    rollup.update(host_from_node(make_node("a001", memory_free=1234.0, loads=(0.0, 0.0, 0.0)), "Ready", config,
                                 "2024-05-01T12:01:00Z"))
    host = xml_valid(xml.entity("hosts", "a001") or b"")
    assert host.findtext("g:MainMemory/g:RAMAvailable", namespaces=NS) == "1234"
    assert host.findtext("g:LastReport", namespaces=NS) == "2024-05-01T12:01:00Z"
    tree = json_valid(js.tree())
    assert next(h for h in tree["hosts"] if h["unique_id"] == "a001")["main_memory"]["ram_available"] == 1234
    root = xml_valid(xml.tree())
    assert root.findtext("g:Cluster/g:SubCluster/g:Host[g:UniqueID='a001']/g:SMPLoad/g:Load1min",
                         namespaces=NS) == "400"

    # a state change: the host object is replaced, and the subcluster's totals follow
    rollup.set_state("a001", "Paused")
    root = xml_valid(xml.tree())
    assert root.findtext("g:Cluster/g:SubCluster/g:Host[g:UniqueID='a001']/g:State", namespaces=NS) == "Paused"
    assert next(h for h in json_valid(js.tree())["hosts"] if h["unique_id"] == "a001")["free_cpus"] == 0

    # new hardware: the host moves to another subcluster, and its JSON names the new one
    before = rollup.subcluster_of("a002")
    rollup.update(host_from_node(make_node("a002", cpus=32, memory=512000.0), "Ready", config, WHEN))
    after = rollup.subcluster_of("a002")
    assert before is not None and after is not None and before.unique_id != after.unique_id
    moved = json_valid(js.entity("hosts", "a002") or b"", "Host")
    assert moved["subcluster"] == after.unique_id and moved["total_cpus"] == 32
    root = xml_valid(xml.tree())
    assert ids(root, f"g:Cluster/g:SubCluster[g:UniqueID='{after.unique_id}']/g:Host/g:UniqueID") == ["a002"]

    # removal: gone from every rendering, and from the caches
    for gone in ("a003", "b01"):
        rollup.remove(gone)
    root = xml_valid(xml.tree())
    tree = json_valid(js.tree())
    assert "a003" not in ids(root, "g:Cluster/g:SubCluster/g:Host/g:UniqueID")
    assert "b01" not in {h["unique_id"] for h in tree["hosts"]}
    assert xml.entity("hosts", "a003") is None and js.entity("hosts", "b01") is None
    assert set(xml._cache) == set(rollup.hosts) == set(js._cache)


def test_warm_renders_ahead_of_the_read(rollup: Rollup, config: SiteConfig) -> None:
    xml, js = Glue(rollup).xml, Glue(rollup).json
    xml.tree(), js.tree()
    host = host_from_node(make_node("a007", memory_free=777.0), "Ready", config, "2024-05-01T12:02:00Z")
    rollup.update(host)
    xml.warm([host])
    js.warm([host])
    assert xml._cache["a007"][0] is host and js._cache["a007"][0] is host
    # a fresh Glue takes its own snapshot of the CE figures: the same one, but its time is read
    # anew, and the two reads may fall on either side of a second
    assert untimed(xml.tree()) == untimed(Glue(rollup).xml.tree())
    assert untimed(js.tree()) == untimed(Glue(rollup).json.tree())


def test_foreign_host_objects_are_rendered_not_cached(rollup: Rollup) -> None:
    xml, js = Glue(rollup).xml, Glue(rollup).json
    other = replace(rollup.hosts["a001"], name="not the roll-up's")
    root = xml_valid(xml.hosts([other]))
    assert root.findtext("g:Host/g:Name", namespaces=NS) == "not the roll-up's"
    listed = json_valid(js.hosts([other]), "Hosts")
    assert "subcluster" not in listed["hosts"][0]
    assert "a001" not in xml._cache and "a001" not in js._cache
    assert xml_valid(xml.entity("hosts", "a001") or b"").findtext("g:Name", namespaces=NS) == "a001"


def test_empty_site() -> None:
    rollup = Rollup(SiteConfig())
    root = xml_valid(Glue(rollup).xml.tree())
    assert ids(root, "g:Cluster/g:UniqueID") == ["default"]
    assert ids(root, "g:ComputingElement/g:ClusterRef") == ["default"]
    assert root.findtext("g:ComputingElement/g:Info/g:TotalCPUs", namespaces=NS) == "0"
    assert root.find("g:ComputingElement/g:InformationServiceURL", NS) is None
    tree = json_valid(Glue(rollup).json.tree())
    assert tree["subclusters"] == [] and tree["hosts"] == []
    assert tree["clusters"] == [{"unique_id": "default", "name": "default", "subclusters": []}]
    assert Glue(rollup).xml.entity("hosts", "x") is None and Glue(rollup).json.entity("subclusters", "x") is None
    xml_valid(Glue(rollup).xml.entity("clusters", "default") or b"")
    json_valid(Glue(rollup).json.entity("computing-elements", "default") or b"", "ComputingElement")


def test_unclaimed_hosts_and_unknown_clusters(config: SiteConfig) -> None:
    rollup = Rollup(config)
    rollup.update(host_from_node(make_node("stray.example.org"), "Ready", config, WHEN))
    rollup.update(replace(rollup.hosts["stray.example.org"], unique_id="ghost", cluster="ghost-cluster"))
    root = xml_valid(Glue(rollup).xml.tree())
    assert ids(root, "g:Cluster/g:UniqueID") == ["alpha", "beta", "empty", "default", "ghost-cluster"]
    assert ids(root, "g:Cluster[g:UniqueID='default']/g:SubCluster/g:Host/g:UniqueID") == ["stray.example.org"]
    assert ids(root, "g:Cluster[g:UniqueID='ghost-cluster']/g:SubCluster/g:Host/g:UniqueID") == ["ghost"]
    tree = json_valid(Glue(rollup).json.tree())
    assert {h["unique_id"] for h in tree["hosts"]} == {"stray.example.org", "ghost"}
    xml_valid(Glue(rollup).xml.entity("clusters", "ghost-cluster") or b"")


# --- SSS Node JSON ----------------------------------------------------------------------------

def test_node_json_from_the_real_agent_validates() -> None:
    from infosvc_agents.agent import HostAgent

    document = HostAgent.for_host().document()
    node = parse_node(document)
    entry = HostEntry(node.id, node, 1714564800.0, 1714564800.0, True, False)
    body = json.loads(entry.json())  # what GET /v1/nodes/{id} answers
    assert body["reported_at"] == "2024-05-01T12:00:00Z"
    json_validator(NODE_SCHEMA).validate(body)
    json_validator(NODE_SCHEMA, "NodeList").validate([body, body])
    # the agent's node is a GLUE host as well
    config = SiteConfig()
    rollup = Rollup(config)
    rollup.update(host_from_node(node, "Ready", config, WHEN))
    xml_valid(Glue(rollup).xml.tree())
    json_valid(Glue(rollup).json.tree())


def test_node_json_schema_refuses_what_it_should() -> None:
    entry = HostEntry("n1", make_node("n1"), 0.0, 0.0, True, False)
    body = json.loads(entry.json())
    validator = json_validator(NODE_SCHEMA)
    assert validator.is_valid(body)
    bad_resource = {"kind": "Resource", "value": 1}
    named_memory = {"kind": "Memory", "value": 1, "name": "x"}
    half_cpu = {"kind": "Processors", "value": 1.5}
    for broken in ({k: v for k, v in body.items() if k != "reported_at"}, {**body, "id": ""},
                   {**body, "reported_at": "noon"}, {**body, "configured": [bad_resource]},
                   {**body, "configured": [named_memory]}, {**body, "available": [half_cpu]},
                   {**body, "utilized": [{"kind": "Memory", "value": -1}]}, {**body, "extra": 1}):
        assert not validator.is_valid(broken), broken


# --- the publishing layer (infosvc/publish/glue.py, negotiation.py) -------------------------------

def test_one_kind_lookup_serves_every_format(rollup: Rollup) -> None:
    from infosvc.publish.glue import KINDS, find

    glue = Glue(rollup)
    for kind in KINDS:
        for rendering in glue.formats.values():
            assert rendering.entity(kind, "no-such-id") is None
    assert find(rollup, "nodes", "a001") is None and glue.json.entity("nodes", "a001") is None
    assert find(rollup, "hosts", "a001") is rollup.hosts["a001"]
    assert find(rollup, "clusters", "alpha") == rollup.cluster("alpha")


def test_a_changed_host_is_rendered_again_and_a_removed_one_dropped(rollup: Rollup, config: SiteConfig) -> None:
    glue = Glue(rollup)
    before = {name: r.tree() for name, r in glue.formats.items()}
    kept = {name: r._cache["a001"][2] for name, r in glue.formats.items()}
    host = host_from_node(make_node("a001", memory_free=4242.0), "Ready", config, "2024-05-01T12:03:00Z")
    rollup.update(host)
    for name, rendering in glue.formats.items():
        after = rendering.tree()
        assert after != before[name] and rendering._cache["a001"][2] != kept[name]
        assert rendering._cache["a001"][0] is host
    rollup.remove("a002")
    for rendering in glue.formats.values():
        rendering.tree()
        assert "a002" not in rendering._cache


def test_negotiation_in_one_place() -> None:
    import pytest

    from infosvc.publish.negotiation import choose
    from infosvc.hosts.query import QueryError

    assert choose(None, "") == "json"
    assert choose(None, "application/xml") == "xml" and choose(None, "text/xml;q=0.9") == "xml"
    assert choose(None, "application/xml, application/json") == "json"  # JSON named: JSON
    assert choose("xml", "application/json") == "xml"  # the parameter wins
    with pytest.raises(QueryError) as caught:
        choose("yaml", "")
    assert caught.value.parameter == "format" and "json or xml" in str(caught.value)
