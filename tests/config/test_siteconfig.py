"""The site config: parsing, defaults, errors that name the key, and docs/configuration.md kept complete."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any, Iterator

import pytest
from ClusterShell.NodeSet import NodeSet

from support.configspy import ONE_OF_EACH, Accepted, keys_of, path_of
from infosvc.config.site import (DEFAULT_CLUSTER, DEFAULT_LISTEN, Benchmark, ClusterConfig, ComputingElementConfig,
                                ConfigError, LifecycleConfig, Policy, PrometheusConfig, ReportsConfig, SchedulerConfig,
                                ServiceConfig, SiteConfig, Software, StoreConfig, load_config, parse_config)
from infosvc.config.federation import FederationConfig, Upstream
from infosvc.config.lrms import LrmsConfig
from infosvc.config.resources import ResourceEntry

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"

FULL = """
[service]
listen = "0.0.0.0:9000"
db = "/var/lib/infosvc/infosvc.sqlite"
max_body_bytes = 524288
body_timeout_seconds = 2.5
read_token_required = true
information_service_url = "https://info.example.org/v1/glue"
cors_origins = ["https://portal.example.org", "http://localhost:3000"]

[store]
history_per_host = 7

[lifecycle]
heartbeat_seconds = 30            # an integer is a number too
missed_heartbeats = 5
require_approval = true

[prometheus]
exporter_port = 9101

[[clusters]]
id = "compute"
name = "Compute nodes"
nodes = "node[001-128]"

[[clusters]]
id = "gpu"
nodes = "gpu[01-16].example.org"

[[clusters]]
id = "rest"

[[computing_elements]]
id = "ce.example.org:2119/jobmanager-slurm-long"
name = "long queue"
queue = "long"
lrms_type = "slurm"
lrms_version = "23.11.4"
gram_version = "2"
host_name = "ce.example.org"
gatekeeper_port = 2119
status = "Draining"
access_control = ["VO:atlas", "/DC=org/DC=example/CN=Jane Doe"]
clusters = ["compute", "gpu", "default"]

[computing_elements.policy]
max_wall_clock_time = 2880
max_cpu_time = 1440
max_total_jobs = 5000
max_running_jobs = 1000
priority = -5

[[computing_elements]]
id = "test"

[[benchmarks]]
nodes = "node[001-064]"
si00 = 1500
sf00 = 1700

[[benchmarks]]
nodes = "node[001-128]"
sf00 = 900

[[software]]
nodes = "node[001-128]"
runtime_environment = ["VO-atlas-release-21", "MPICH"]

[[software]]
nodes = "node[001-010],gpu[01-16].example.org"
runtime_environment = ["MPICH", "CUDA-12.4"]
"""


def parse(text: str) -> SiteConfig:
    return parse_config(tomllib.loads(text))


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse(text)
    return str(info.value)


# --- a full config -------------------------------------------------------------------------------

def test_full_example() -> None:
    config = parse(FULL)
    assert config.service == ServiceConfig(listen="0.0.0.0:9000", db="/var/lib/infosvc/infosvc.sqlite",
                                           max_body_bytes=524288, body_timeout_seconds=2.5, read_token_required=True,
                                           information_service_url="https://info.example.org/v1/glue",
                                           cors_origins=("https://portal.example.org", "http://localhost:3000"))
    assert config.store == StoreConfig(history_per_host=7)
    assert config.lifecycle == LifecycleConfig(heartbeat_seconds=30.0, missed_heartbeats=5, require_approval=True)
    assert isinstance(config.lifecycle.heartbeat_seconds, float)
    assert config.prometheus == PrometheusConfig(exporter_port=9101)

    compute, gpu, rest = config.clusters
    assert (compute.id, compute.name, compute.nodes) == ("compute", "Compute nodes", NodeSet("node[001-128]"))
    assert (gpu.id, gpu.name, len(gpu.nodes or ())) == ("gpu", "gpu", 16)
    assert (rest.id, rest.name, rest.nodes) == ("rest", "rest", None)

    long, test = config.computing_elements
    assert long == ComputingElementConfig(
        id="ce.example.org:2119/jobmanager-slurm-long", name="long queue", queue="long", lrms_type="slurm",
        lrms_version="23.11.4", gram_version="2", host_name="ce.example.org", gatekeeper_port=2119, status="Draining",
        policy=Policy(max_wall_clock_time=2880, max_cpu_time=1440, max_total_jobs=5000, max_running_jobs=1000,
                      priority=-5),
        access_control=("VO:atlas", "/DC=org/DC=example/CN=Jane Doe"), clusters=("compute", "gpu", DEFAULT_CLUSTER))
    assert test == ComputingElementConfig(id="test", name="test", queue="test")
    assert not long.all_clusters and not test.all_clusters

    assert config.benchmarks == (Benchmark(NodeSet("node[001-064]"), 1500, 1700), Benchmark(NodeSet("node[001-128]"), 0, 900))
    assert config.software == (Software(NodeSet("node[001-128]"), ("VO-atlas-release-21", "MPICH")),
                               Software(NodeSet("node[001-010],gpu[01-16].example.org"), ("MPICH", "CUDA-12.4")))


def test_full_example_assigns_hosts() -> None:
    config = parse(FULL)
    assert config.cluster_of("node007").id == "compute"
    assert config.cluster_of("gpu03.example.org").id == "gpu"
    assert config.cluster_of("gpu03").id == "rest"  # the Id must match as written
    assert config.cluster_of("login1").id == "rest"
    assert config.benchmark_of("node007") == Benchmark(NodeSet("node[001-064]"), 1500, 1700)
    assert config.benchmark_of("node100") == Benchmark(NodeSet("node[001-128]"), 0, 900)
    assert config.benchmark_of("gpu01.example.org") is None
    assert config.software_of("node005") == ("VO-atlas-release-21", "MPICH", "CUDA-12.4")
    assert config.software_of("node050") == ("VO-atlas-release-21", "MPICH")
    assert config.software_of("gpu01.example.org") == ("MPICH", "CUDA-12.4")
    assert config.software_of("login1") == ()


def test_catch_all_cluster_is_last_resort_wherever_it_stands() -> None:
    config = parse("""
        [[clusters]]
        id = "main"
        [[clusters]]
        id = "gpu"
        nodes = "gpu[1-4]"
        [[clusters]]
        id = "second-catch-all"
    """)
    assert config.cluster_of("gpu2").id == "gpu"
    assert config.cluster_of("cn1").id == "main"
    # Without a catch-all, unnamed hosts go to `default`.
    config = parse('[[clusters]]\nid = "gpu"\nnodes = "gpu[1-4]"\n')
    assert config.cluster_of("cn1") == ClusterConfig(DEFAULT_CLUSTER, DEFAULT_CLUSTER, None)
    # The first of two clusters naming a host wins.
    config = parse('[[clusters]]\nid = "a"\nnodes = "n[1-4]"\n[[clusters]]\nid = "b"\nnodes = "n[3-8]"\n')
    assert config.cluster_of("n3").id == "a" and config.cluster_of("n5").id == "b"


def test_config_nodesets_name_hosts_without_regard_to_case() -> None:
    # Host Ids are kept lower case (infosvc.model.hostid): a config written `GPU[1-4]` still names them.
    config = parse('[[clusters]]\nid = "gpu"\nnodes = "GPU[1-4].Example.ORG"\n')
    assert config.cluster_of("gpu2.example.org").id == "gpu"


def test_host_names_that_are_no_nodeset_match_nothing() -> None:
    config = parse('[[clusters]]\nid = "a"\nnodes = "n[1-4]"\n[[benchmarks]]\nnodes = "n[1-4]"\nsi00 = 1\n')
    assert config.cluster_of("n[1").id == DEFAULT_CLUSTER
    assert config.benchmark_of("n[1") is None


# --- defaults ------------------------------------------------------------------------------------

def test_defaults() -> None:
    for config in (parse(""), load_config(None), SiteConfig()):
        assert config == SiteConfig()
        assert config.service.listen == DEFAULT_LISTEN == "127.0.0.1:8080"
        assert config.service.db == "infosvc.sqlite"
        assert config.service.max_body_bytes == 256 * 1024 and config.service.body_timeout_seconds == 10.0
        assert not config.service.read_token_required and config.service.information_service_url == ""
        assert config.service.cors_origins == ()  # no CORS
        assert config.store.history_per_host == 100
        assert config.lifecycle == LifecycleConfig(60.0, 3, False)
        assert config.clusters == (ClusterConfig(DEFAULT_CLUSTER, DEFAULT_CLUSTER, None),)
        (ce,) = config.computing_elements
        assert (ce.id, ce.name, ce.queue, ce.all_clusters, ce.clusters) == (
            DEFAULT_CLUSTER, DEFAULT_CLUSTER, DEFAULT_CLUSTER, True, ())
        assert (ce.lrms_type, ce.status, ce.policy, ce.access_control) == ("infosvc", "Production", Policy(), ())
        assert config.benchmarks == () and config.software == ()
        assert config.prometheus.exporter_port == 9100  # node_exporter's
        assert config.cluster_of("anything").id == DEFAULT_CLUSTER


def test_empty_tables_are_defaults() -> None:
    assert parse("[service]\n[store]\n[lifecycle]\n[prometheus]\n") == SiteConfig()


def test_clusters_without_ces_get_the_default_ce_and_vice_versa() -> None:
    config = parse('[[clusters]]\nid = "a"\nnodes = "a[1-2]"\n')
    assert [c.id for c in config.clusters] == ["a"]
    (ce,) = config.computing_elements
    assert ce.id == DEFAULT_CLUSTER and ce.all_clusters
    config = parse('[[computing_elements]]\nid = "q"\n')
    assert config.clusters == (ClusterConfig(DEFAULT_CLUSTER, DEFAULT_CLUSTER, None),)
    assert [(c.id, c.clusters, c.all_clusters) for c in config.computing_elements] == [("q", (), False)]


def test_ids_are_stripped() -> None:
    config = parse('[[clusters]]\nid = " a "\n[[computing_elements]]\nid = "q "\nclusters = ["a"]\n')
    assert config.clusters[0].id == "a" and config.clusters[0].name == "a"
    assert config.computing_elements[0].id == "q"


# --- errors --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    ('servise = {}', "unknown key(s): servise"),
    ('colour = "blue"\nzebra = 1', "unknown key(s): colour, zebra"),
    ('[service]\nlistne = "x"', "service: unknown key(s): listne"),
    ('[store]\nhistory = 3', "store: unknown key(s): history"),
    ('[lifecycle]\nheartbeat = 3', "lifecycle: unknown key(s): heartbeat"),
    ('[[clusters]]\nid = "a"\nnode = "n1"', "clusters[0]: unknown key(s): node"),
    ('[[clusters]]\nid = "a"\n[[clusters]]\nid = "b"\nhosts = "n1"', "clusters[1]: unknown key(s): hosts"),
    ('[[computing_elements]]\nid = "a"\nqueues = ["x"]', "computing_elements[0]: unknown key(s): queues"),
    ('[[computing_elements]]\nid = "a"\n[computing_elements.policy]\nmax_wallclock = 1',
     "computing_elements[0].policy: unknown key(s): max_wallclock"),
    ('[[benchmarks]]\nnodes = "n1"\nsi2k = 1', "benchmarks[0]: unknown key(s): si2k"),
    ('[[software]]\nnodes = "n1"\nruntime = ["x"]', "software[0]: unknown key(s): runtime"),
])
def test_unknown_keys_are_named(text: str, message: str) -> None:
    assert error_of(text) == message


@pytest.mark.parametrize("text, message", [
    ('[service]\nmax_body_bytes = true', "service.max_body_bytes: expected an integer, got True"),
    ('[store]\nhistory_per_host = false', "store.history_per_host: expected an integer, got False"),
    ('[lifecycle]\nmissed_heartbeats = true', "lifecycle.missed_heartbeats: expected an integer, got True"),
    ('[lifecycle]\nheartbeat_seconds = true', "lifecycle.heartbeat_seconds: expected a number, got True"),
    ('[[computing_elements]]\nid = "a"\ngatekeeper_port = true',
     "computing_elements[0].gatekeeper_port: expected an integer, got True"),
    ('[[computing_elements]]\nid = "a"\n[computing_elements.policy]\npriority = true',
     "computing_elements[0].policy.priority: expected an integer, got True"),
    ('[[benchmarks]]\nnodes = "n1"\nsi00 = true', "benchmarks[0].si00: expected an integer, got True"),
    ('[store]\nhistory_per_host = 1.5', "store.history_per_host: expected an integer, got 1.5"),
    ('[store]\nhistory_per_host = "10"', "store.history_per_host: expected an integer, got '10'"),
    ('[service]\nlisten = 8080', "service.listen: expected a string, got 8080"),
    ('[service]\nread_token_required = 1', "service.read_token_required: expected true or false, got 1"),
    ('[service]\ncors_origins = "*"', "service.cors_origins: expected a list of strings, got '*'"),
    ('[service]\ncors_origins = ["https://a.example.org", 443]', "service.cors_origins: expected a list of strings"),
    ('[service]\nread_token_required = "yes"', "service.read_token_required: expected true or false, got 'yes'"),
    ('[service]\nbody_timeout_seconds = "5"', "service.body_timeout_seconds: expected a number, got '5'"),
    ('[[clusters]]\nid = 7', "clusters[0].id: expected a string, got 7"),
    ('[[clusters]]\nid = "a"\nnodes = ["n1", "n2"]', "clusters[0].nodes: expected a string, got ['n1', 'n2']"),
    ('[[computing_elements]]\nid = "a"\naccess_control = "VO:atlas"',
     "computing_elements[0].access_control: expected a list of strings, got 'VO:atlas'"),
    ('[[computing_elements]]\nid = "a"\naccess_control = ["VO:atlas", 1]',
     "computing_elements[0].access_control: expected a list of strings"),
    ('[[computing_elements]]\nid = "a"\naccess_control = ["VO:atlas", "vo:ATLAS"]',
     "computing_elements[0].access_control: 'vo:ATLAS' repeats 'VO:atlas'"
     " (directories compare rules ignoring case and repeated spaces: a BDII would refuse the CE)"),
    ('[[computing_elements]]\nid = "a"\naccess_control = ["VO:a b", "VO:a  b"]',
     "computing_elements[0].access_control: 'VO:a  b' repeats 'VO:a b'"
     " (directories compare rules ignoring case and repeated spaces: a BDII would refuse the CE)"),
    ('[[computing_elements]]\nid = "a"\naccess_control = [" VO:atlas"]',
     "computing_elements[0].access_control: ' VO:atlas': a rule is printable text without spaces at its ends"),
    ('[[computing_elements]]\nid = "a"\naccess_control = [""]',
     "computing_elements[0].access_control: '': a rule is printable text without spaces at its ends"),
    ('[[software]]\nnodes = "n1"\nruntime_environment = [["x"]]',
     "software[0].runtime_environment: expected a list of strings"),
    ('service = 1', "service: expected a table"),
    ('[[computing_elements]]\nid = "a"\npolicy = 3', "computing_elements[0].policy: expected a table"),
    ('[clusters]\nid = "a"', "clusters: expected an array of tables ([[clusters]])"),
    ('clusters = ["a"]', "clusters[0]: expected a table"),
])
def test_wrong_types_are_named(text: str, message: str) -> None:
    assert error_of(text) == message


@pytest.mark.parametrize("text, message", [
    ('[service]\nmax_body_bytes = 1023', "service.max_body_bytes: must be at least 1024, got 1023"),
    ('[service]\nbody_timeout_seconds = 0', "service.body_timeout_seconds: must be greater than 0, got 0"),
    ('[service]\nbody_timeout_seconds = nan', "service.body_timeout_seconds: must be greater than 0, got nan"),
    ('[store]\nhistory_per_host = 0', "store.history_per_host: must be at least 1, got 0"),
    ('[lifecycle]\nheartbeat_seconds = -1.5', "lifecycle.heartbeat_seconds: must be greater than 0, got -1.5"),
    ('[lifecycle]\nmissed_heartbeats = 0', "lifecycle.missed_heartbeats: must be at least 1, got 0"),
    ('[[computing_elements]]\nid = "a"\ngatekeeper_port = -1',
     "computing_elements[0].gatekeeper_port: must be at least 0, got -1"),
    ('[[computing_elements]]\nid = "ce"\ngatekeeper_port = 65536',
     "computing_elements[0].gatekeeper_port: must be at most 65535, got 65536"),
    ('[[computing_elements]]\nid = "a"\n[computing_elements.policy]\nmax_cpu_time = -1',
     "computing_elements[0].policy.max_cpu_time: must be at least 0, got -1"),
    ('[[benchmarks]]\nnodes = "n1"\nsf00 = -3', "benchmarks[0].sf00: must be at least 0, got -3"),
    ('[prometheus]\nexporter_port = 0', "prometheus.exporter_port: must be at least 1, got 0"),
    ('[prometheus]\nexporter_port = 65536', "prometheus.exporter_port: must be at most 65535, got 65536"),
    # inf passed every `*_seconds` key, turning its timeout off: each is finite, and at most a day
    ('[service]\nbody_timeout_seconds = inf', "service.body_timeout_seconds: must be a finite number, got inf"),
    ('[service]\nkeepalive_seconds = inf', "service.keepalive_seconds: must be a finite number, got inf"),
    ('[service]\nheader_timeout_seconds = inf', "service.header_timeout_seconds: must be a finite number, got inf"),
    ('[lifecycle]\nheartbeat_seconds = inf', "lifecycle.heartbeat_seconds: must be a finite number, got inf"),
    ('[scheduler]\nstart_timeout_seconds = inf', "scheduler.start_timeout_seconds: must be a finite number, got inf"),
    ('[lrms]\ntimeout_seconds = inf', "lrms.timeout_seconds: must be a finite number, got inf"),
    ('[lrms]\ninterval_seconds = inf', "lrms.interval_seconds: must be a finite number, got inf"),
    ('[federation]\ntimeout_seconds = inf', "federation.timeout_seconds: must be a finite number, got inf"),
    ('[federation]\ndelete_delay_seconds = inf', "federation.delete_delay_seconds: must be a finite number, got inf"),
    ('[service]\nbody_timeout_seconds = -inf', "service.body_timeout_seconds: must be greater than 0, got -inf"),
    ('[service]\nbody_timeout_seconds = 86401', "service.body_timeout_seconds: must be at most 86400, got 86401"),
    ('[lrms]\ntimeout_seconds = 1e300', "lrms.timeout_seconds: must be at most 86400, got 1e+300"),
    ('[scheduler]\nstart_timeout_seconds = 86400.5',
     "scheduler.start_timeout_seconds: must be at most 86400, got 86400.5"),
])
def test_out_of_range_values(text: str, message: str) -> None:
    assert error_of(text) == message


@pytest.mark.parametrize("origins", [
    [], ["*"], ["https://portal.example.org"], ["http://localhost:3000", "https://portal.example.org:8443"],
    ["http://127.0.0.1:5500", "http://[::1]:8080", "https://[2001:db8::1]", "https://xn--bcher-kva.example"],
])
def test_cors_origins(origins: list[str]) -> None:
    config = parse(f"[service]\ncors_origins = {origins!r}".replace("'", '"'))
    assert config.service.cors_origins == tuple(origins)


@pytest.mark.parametrize("origin, problem", [
    ("https://portal.example.org/", "an origin has no path, query or fragment (not even a final '/')"),
    ("https://portal.example.org/app", "an origin has no path, query or fragment"),
    ("https://portal.example.org?x=1", "an origin has no path, query or fragment"),
    ("https://*.example.org", "no wildcards in an origin: list each one, or '*' alone for any origin"),
    ("https://portal.*", "no wildcards in an origin"),
    ("portal.example.org", "not an origin: expected http:// or https://, a host and an optional port"),
    ("ftp://portal.example.org", "not an origin"),
    ("null", "not an origin"),
    (" https://portal.example.org", "not an origin"),
    ("https://user@portal.example.org", "not an origin"),
    ("https://portal..example.org", "not an origin"),
    ("https://portal.example.org:0", "the port must be 1 to 65535, got 0"),
    ("https://portal.example.org:65536", "the port must be 1 to 65535, got 65536"),
    ("https://Portal.example.org", "a browser sends it as 'https://portal.example.org', and the header is "
                                   "compared as written: write that"),
    ("HTTPS://portal.example.org", "a browser sends it as 'https://portal.example.org'"),
    ("https://portal.example.org:443", "a browser sends it as 'https://portal.example.org'"),
    ("http://portal.example.org:80", "a browser sends it as 'http://portal.example.org'"),
    ("http://portal.example.org:08080", "a browser sends it as 'http://portal.example.org:8080'"),
    ("http://[0:0::1]:8080", "a browser sends it as 'http://[::1]:8080'"),
    ("http://[::g]", "not an origin"),
    ("http://[1:2]", "[1:2] is no IPv6 address"),
])
def test_bad_cors_origins_are_named(origin: str, problem: str) -> None:
    message = error_of(f'[service]\ncors_origins = ["https://ok.example.org", "{origin}"]')
    assert message.startswith(f"service.cors_origins: {origin!r}: {problem}"), message


@pytest.mark.parametrize("origins, message", [
    ('["*", "https://a.example.org"]', "'*' (any origin) must be the only entry, got ['*', 'https://a.example.org']"),
    ('["https://a.example.org", "*"]', "'*' (any origin) must be the only entry"),
    ('["https://a.example.org", "https://a.example.org"]', "'https://a.example.org' is listed twice"),
])
def test_cors_origins_as_a_whole(origins: str, message: str) -> None:
    assert error_of(f"[service]\ncors_origins = {origins}").startswith(f"service.cors_origins: {message}")


def test_negative_priority_is_allowed() -> None:
    config = parse('[[computing_elements]]\nid = "a"\n[computing_elements.policy]\npriority = -2147483648\n')
    assert config.computing_elements[0].policy.priority == -(1 << 31)
    message = error_of('[[computing_elements]]\nid = "a"\n[computing_elements.policy]\npriority = -2147483649\n')
    assert message.startswith("computing_elements[0].policy.priority: must be at least")


@pytest.mark.parametrize("text, where", [
    ('[[clusters]]\nid = "a"\nnodes = "node[001-"', "clusters[0].nodes: not a NodeSet"),
    ('[[clusters]]\nid = "a"\nnodes = "node[9-1]"', "clusters[0].nodes: not a NodeSet"),
    ('[[clusters]]\nid = "a"\nnodes = "a,,b"', "clusters[0].nodes: not a NodeSet"),
    ('[[benchmarks]]\nnodes = "n[1-x]"', "benchmarks[0].nodes: not a NodeSet"),
    ('[[software]]\nnodes = "n[[1]]"', "software[0].nodes: not a NodeSet"),
])
def test_bad_nodesets(text: str, where: str) -> None:
    assert error_of(text).startswith(where)


@pytest.mark.parametrize("table", ["benchmarks", "software"])
def test_host_groups_need_nodes(table: str) -> None:
    assert error_of(f"[[{table}]]\n") == f"{table}[0].nodes: required (a NodeSet such as node[001-128])"


@pytest.mark.parametrize("text, message", [
    ('[[clusters]]\nname = "a"', "clusters[0].id: required, a non-blank string"),
    ('[[clusters]]\nid = "  "', "clusters[0].id: required, a non-blank string"),
    ('[[computing_elements]]\nqueue = "q"', "computing_elements[0].id: required, a non-blank string"),
    ('[[clusters]]\nid = "a"\n[[clusters]]\nid = "b"\n[[clusters]]\nid = "a"', "clusters: id 'a' is used twice"),
    ('[[computing_elements]]\nid = "q"\n[[computing_elements]]\nid = "q"', "computing_elements: id 'q' is used twice"),
    ('[[clusters]]\nid = "a"\n[[computing_elements]]\nid = "q"\nclusters = ["a", "a"]',
     "computing_elements[0].clusters: id 'a' is used twice"),
])
def test_ids_required_and_unique(text: str, message: str) -> None:
    assert error_of(text) == message


def test_ce_naming_an_unknown_cluster() -> None:
    text = '[[clusters]]\nid = "a"\n[[computing_elements]]\nid = "q"\n[[computing_elements]]\nid = "r"\nclusters = ["a", "gpu"]'
    assert error_of(text) == "computing_elements[1].clusters: no cluster 'gpu' is configured"
    # Without configured clusters only `default` exists.
    assert error_of('[[computing_elements]]\nid = "q"\nclusters = ["a"]') == \
        "computing_elements[0].clusters: no cluster 'a' is configured"
    assert parse('[[computing_elements]]\nid = "q"\nclusters = ["default"]').computing_elements[0].clusters == ("default",)
    # `default` may be named beside configured clusters: it holds the hosts they do not name.
    assert parse('[[clusters]]\nid = "a"\nnodes = "a1"\n[[computing_elements]]\nid = "q"\nclusters = ["a", "default"]'
                 ).computing_elements[0].clusters == ("a", "default")


@pytest.mark.parametrize("status", ["production", "Open", "", "Queueing "])
def test_bad_ce_status(status: str) -> None:
    assert error_of(f'[[computing_elements]]\nid = "q"\nstatus = "{status}"') == (
        f"computing_elements[0].status: one of Queueing, Production, Closed, Draining, got {status!r}")


@pytest.mark.parametrize("status", ["Queueing", "Production", "Closed", "Draining"])
def test_ce_statuses(status: str) -> None:
    assert parse(f'[[computing_elements]]\nid = "q"\nstatus = "{status}"').computing_elements[0].status == status


def test_resources() -> None:
    config = parse('[[clusters]]\nid = "compute"\nnodes = "cn[01-08]"\n'
                   '[[resources]]\nclusters = ["compute", "default"]\nlicenses = { matlab = 4, "ansys-cfd" = 2 }\n'
                   '[[resources]]\nnodes = "CN[01-02]"\nconsumables = { gpu = 2, scratch_gb = 500.5 }\n'
                   '[[resources]]\n')
    pools, gpus, everything = config.resources
    assert (pools.nodes, pools.clusters, pools.licenses, pools.consumables) == (
        None, ("compute", "default"), {"matlab": 4, "ansys-cfd": 2}, {})
    assert gpus.nodes == NodeSet("cn[01-02]") and gpus.consumables == {"gpu": 2, "scratch_gb": 500.5}
    assert everything == ResourceEntry()
    assert parse("").resources == ()


@pytest.mark.parametrize(("text", "error"), [
    ('nodes = "a1"\nclusters = ["default"]', "resources[0]: nodes or clusters, not both (neither: every host)"),
    ('clusters = ["gpu"]', "resources[0].clusters: no cluster 'gpu' is configured"),
    ('clusters = ["default", "default"]', "resources[0].clusters: id 'default' is used twice"),
    ('nodes = "a[1-"', "resources[0].nodes: not a NodeSet: "),
    ("licenses = 4", "resources[0].licenses: expected a table of name = amount, got 4"),
    ("licenses = { matlab = 0 }", "resources[0].licenses: matlab: a license count is an integer 1 .. 999999999, got 0"),
    ("licenses = { matlab = 2.5 }", "resources[0].licenses: matlab: a license count is an integer 1 .. 999999999, "
                                    "got 2.5"),
    ("licenses = { matlab = true }", "resources[0].licenses: matlab: a license count is an integer 1 .. 999999999, "
                                     "got True"),
    ("licenses = { matlab = 1000000000 }", "resources[0].licenses: matlab: a license count is an integer 1 .. "
                                           "999999999, got 1000000000"),
    ('licenses = { "mat lab" = 1 }', "resources[0].licenses: license feature 'mat lab' is not a CCS feature name "
                                     "(1 to 64 characters, no ':', ',' or white space)"),
    ('licenses = { "a:b" = 1 }', "resources[0].licenses: license feature 'a:b' is not a CCS feature name"),
    ("consumables = { gpu = 0 }", "resources[0].consumables: gpu: an amount is a number greater than 0 and at most "
                                  "2^53, got 0"),
    ("consumables = { gpu = nan }", "resources[0].consumables: gpu: an amount is a number greater than 0"),
    ('consumables = { gpu = "2" }', "resources[0].consumables: gpu: an amount is a number greater than 0"),
    ("consumables = { license = 1 }", "resources[0].consumables: consumable 'license': the name is taken"),
    ('consumables = { "a/b" = 1 }', "resources[0].consumables: consumable 'a/b' is not a name of 1 to 64 letters"),
    ("licence = { matlab = 1 }", "resources[0]: unknown key(s): licence"),
])
def test_bad_resources(text: str, error: str) -> None:
    assert error_of(f"[[resources]]\n{text}").startswith(error)


def test_resources_bounded() -> None:
    many = ", ".join(f"f{i} = 1" for i in range(65))
    assert error_of(f"[[resources]]\nlicenses = {{ {many} }}") == "resources[0].licenses: 65 names; at most 64 per entry"


def test_scheduler_policy() -> None:
    assert parse("").scheduler.policy == "easy"
    assert parse('[scheduler]\npolicy = "fcfs"').scheduler.policy == "fcfs"
    assert parse('[scheduler]\npolicy = "predictive"').scheduler.policy == "predictive"
    assert error_of('[scheduler]\npolicy = "sjf"') == "scheduler.policy: one of easy, fcfs, predictive, got 'sjf'"
    assert error_of('[scheduler]\npolicy = 1') == "scheduler.policy: expected a string, got 1"


# --- files ---------------------------------------------------------------------------------------

def test_load_config_file(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text(FULL, encoding="utf-8")
    assert load_config(path) == parse(FULL)
    assert load_config(str(path)) == parse(FULL)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=r"nope\.toml: cannot read: No such file or directory"):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path)  # a directory


@pytest.mark.parametrize("content", [b'[service\nlisten = "x"\n', b'a = \n', b'a = 1\na = 2\n',
                                     b'name = "\xff\xfe"\n', b'\xef\xbb\xbf[service]\n' + b'listen = "x"\x00\n'])
def test_invalid_toml(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "site.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=r"site\.toml: not valid TOML: "):
        load_config(path)


def test_deeply_nested_toml_is_invalid_toml(tmp_path: Path) -> None:
    """tomllib recurses per nesting level: a RecursionError was a traceback in check-config and serve."""
    path = tmp_path / "site.toml"
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match=r"site\.toml: not valid TOML: .*nested"):
        load_config(path)


def test_errors_in_a_file_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text('[service]\nlisten = "127.0.0.1:8080"\nport = 80\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: service: unknown key(s): port"


# --- docs/configuration.md lists every key ------------------------------------------------------

def documented() -> dict[str, dict[str, str]]:
    """docs/configuration.md: section (a `[table]` or `[[table]]` heading) -> key -> default cell."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^#+ `\[{1,2}([a-z_.]+)\]{1,2}`\s*$", line)
        if heading:
            current = sections.setdefault(heading.group(1), {})
        elif line.startswith("#"):
            current = None
        elif current is not None and (row := re.match(r"^\| `([a-z_0-9]+)` \| (.*?) \|", line)):
            assert row.group(1) not in current, f"{row.group(1)} documented twice"
            current[row.group(1)] = row.group(2)
    return sections


def test_accepted_keys_are_what_the_dataclasses_hold(accepted: Accepted) -> None:
    """The recorder sees every key: the same as the config dataclasses' fields."""
    def fields(cls: type, *leave_out: str) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)} - set(leave_out)

    assert accepted.scalars == {
        "service": fields(ServiceConfig), "store": fields(StoreConfig), "lifecycle": fields(LifecycleConfig),
        "clusters": fields(ClusterConfig),
        "computing_elements": fields(ComputingElementConfig, "policy", "all_clusters"),
        "computing_elements.policy": fields(Policy),
        "benchmarks": fields(Benchmark), "software": fields(Software), "prometheus": fields(PrometheusConfig),
        "scheduler": fields(SchedulerConfig), "resources": fields(ResourceEntry),
        "federation": fields(FederationConfig, "upstreams"), "federation.upstreams": fields(Upstream),
        "reports": fields(ReportsConfig), "lrms": fields(LrmsConfig, "accounts"),
    }
    assert accepted.tables == {"service", "store", "lifecycle", "clusters", "computing_elements",
                               "computing_elements.policy", "benchmarks", "software", "prometheus", "scheduler",
                               "resources", "federation", "federation.upstreams", "reports", "lrms",
                               "lrms.accounts"}
    assert accepted.tables == {f.name for f in dataclasses.fields(SiteConfig)} | {"computing_elements.policy",
                                                                                "federation.upstreams",
                                                                                "lrms.accounts"}


def test_every_key_is_documented(accepted: Accepted) -> None:
    docs = documented()
    assert set(docs) == accepted.tables, "a section per table, and none for a table that does not exist"
    for table, keys in accepted.scalars.items():
        assert set(docs[table]) == keys, f"[{table}]: documented {sorted(docs[table])}, accepted {sorted(keys)}"


def _value(config: SiteConfig, table: str, key: str) -> Any:
    owner: Any = {"service": config.service, "store": config.store, "lifecycle": config.lifecycle,
                  "clusters": config.clusters[0], "computing_elements": config.computing_elements[0],
                  "computing_elements.policy": config.computing_elements[0].policy,
                  "benchmarks": config.benchmarks[0], "software": config.software[0],
                  "prometheus": config.prometheus, "scheduler": config.scheduler,
                  "resources": config.resources[0], "federation": config.federation,
                  "federation.upstreams": config.federation.upstreams[0], "reports": config.reports,
                  "lrms": config.lrms}[table]
    return getattr(owner, key)


def test_documented_defaults_are_the_defaults() -> None:
    config = parse_config(ONE_OF_EACH)
    checked = 0
    for table, keys in documented().items():
        for key, default in keys.items():
            literal = re.fullmatch(r"`(.*)`", default)
            value = _value(config, table, key)
            if literal is None:  # "required", "the `id`", "none"
                assert default in ("required", "the `id`", "none"), (table, key, default)
                if default == "the `id`":
                    assert value == _value(config, table, "id")
                elif default == "none":
                    assert value is None
                continue
            expected = tomllib.loads(f"v = {literal.group(1)}")["v"]
            assert (list(value) if isinstance(value, tuple) else value) == expected, (table, key)
            assert type(value) in (type(expected), tuple), (table, key)
            checked += 1
    assert checked >= 26  # every default that is a TOML value


def _toml_blocks() -> Iterator[str]:
    yield from re.findall(r"```toml\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)


def test_documented_example_parses_and_uses_every_key(accepted: Accepted) -> None:
    (example,) = _toml_blocks()
    data = tomllib.loads(example)
    config = parse_config(data)
    assert len(config.clusters) == 3 and len(config.computing_elements) == 2
    every = {path_of(t, k) for t, keys in accepted.scalars.items() for k in keys} | accepted.tables
    assert keys_of(data) == every


def test_each_setting_is_declared_once_with_its_default_and_help() -> None:
    """SETTINGS declares each plain key once: the dataclasses' defaults are its defaults, and
    docs/configuration.md documents every one of them with that default."""
    from infosvc.config.site import SETTINGS

    owners = {"service": ServiceConfig, "store": StoreConfig, "lifecycle": LifecycleConfig,
              "prometheus": PrometheusConfig, "scheduler": SchedulerConfig, "reports": ReportsConfig}
    docs = documented()
    for table, settings in SETTINGS.items():
        assert [s.key for s in settings] == [f.name for f in dataclasses.fields(owners[table])], table
        for setting in settings:
            field = next(f for f in dataclasses.fields(owners[table]) if f.name == setting.key)
            assert field.default == setting.default and setting.help.strip(), (table, setting.key)
            cell = re.fullmatch(r"`(.*)`", docs[table][setting.key])
            assert cell is not None, setting
            documented_default = tomllib.loads(f"v = {cell.group(1)}")["v"]
            if isinstance(setting.default, tuple):  # a TOML array, read as a tuple
                documented_default = tuple(documented_default)
            assert documented_default == setting.default, setting
