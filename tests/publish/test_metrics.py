"""GET /metrics: the aggregator's Prometheus view, checked by value, by `promtool check metrics`,
and scraped by a real Prometheus (the Debian package `prometheus`, which also has promtool).

Without the binaries the Prometheus tests are skipped locally, with the reason; under CI
(CI=true, as .ci/run sets, which installs the package) they fail instead.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any, Iterator

import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from support import ROOT

from support.documents import GPUs, make_node

from support.server import Server, ServerFactory, free_port, request, stop_process, wait_for
from infosvc.codec.node_xml import node_to_xml
from infosvc.publish.prometheus import METRICS, AggregatorCollector
from infosvc.model.node import Consumable

SITE = """
[lifecycle]
heartbeat_seconds = {heartbeat}
missed_heartbeats = 1
require_approval = true

[[clusters]]
id = "alpha"
nodes = "a[01-09]"

[[clusters]]
id = "beta"
nodes = "b[01-09]"

[[computing_elements]]
id = "ce-alpha"
queue = "alpha"
clusters = ["alpha"]

[[computing_elements]]
id = "ce-all"
queue = "all"
clusters = ["alpha", "beta"]
"""


def binary(name: str) -> str:
    """The path of a Prometheus binary; under CI its absence fails the test, locally it skips."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{name} not found on PATH under CI: .ci/run installs the Debian package 'prometheus'")
        pytest.skip(f"{name} not installed (apt-get install prometheus); CI is not set, so skipped")
    return path


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, from the text exposition format."""
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[s.name, tuple(sorted(s.labels.items()))] = s.value
    return found


def scrape(server: Server, **kwargs: Any) -> str:
    reply = server.get("/metrics", **kwargs)
    assert reply.status == 200, (reply.status, reply.body)
    assert reply.headers["content-type"] == CONTENT_TYPE_LATEST
    return reply.body.decode()


def test_metrics_carry_what_hosts_reported(serve_app: ServerFactory) -> None:
    server = serve_app()
    node = make_node("h1", processors=24, free_processors=6, memory_mb=4096, free_memory_mb=1024,
                     gpus=GPUs(count=2, busy=1))
    node.utilized.add(Consumable("Memory", 3, units="GB"))
    for span, load in (("1min", 1.5), ("5min", 2.25), ("15min", 3.0)):
        node.utilized.add(Consumable("Resource", load, metric="Average", name="Load", type=span))
    assert server.post_node(node_to_xml(node), server.agent_token()).status == 200
    token = server.agent_token()
    server.report("h2", token, processors=8)
    server.report("h2", token, processors=8)
    assert server.post_node(b"<Node><Id>broken", server.agent_token()).status == 400
    assert server.post_node(b"<Node/>", "no-such-token").status == 401
    found = samples(scrape(server))

    def value(name: str, **labels: str) -> float:
        return found[name, tuple(sorted(labels.items()))]

    assert value("infosvc_host_processors_configured", node="h1") == 24
    assert value("infosvc_host_processors_available", node="h1") == 6
    assert value("infosvc_host_processors_utilized", node="h1") == 18
    assert value("infosvc_host_memory_configured_bytes", node="h1") == 4096 * 2**20
    assert value("infosvc_host_memory_available_bytes", node="h1") == 1024 * 2**20
    assert value("infosvc_host_memory_utilized_bytes", node="h1") == 3 * 2**30
    assert (value("infosvc_host_load1", node="h1"), value("infosvc_host_load5", node="h1"),
            value("infosvc_host_load15", node="h1")) == (1.5, 2.25, 3.0)
    assert value("infosvc_host_state", node="h1", state="Ready") == 1
    assert value("infosvc_host_state", node="h1", state="Pending") == 0
    assert value("infosvc_host_gpus", node="h1", model=GPUs.model) == 2
    assert value("infosvc_host_gpus_utilized", node="h1", model=GPUs.model) == 1
    assert value("infosvc_host_gpu_utilization_ratio", node="h1", gpu="0000:18:00.0") == 0.87
    assert 0 <= value("infosvc_host_report_age_seconds", node="h1") < 60
    assert value("infosvc_cluster_hosts", cluster="default", state="Ready") == 2
    assert value("infosvc_cluster_cpus", cluster="default") == 32
    assert value("infosvc_cluster_free_cpus", cluster="default") == 14
    assert value("infosvc_computing_element_cpus", computing_element="default") == 32
    assert value("infosvc_reports_accepted_total") == 3
    assert value("infosvc_reports_rejected_total", reason="invalid") == 1
    assert value("infosvc_reports_rejected_total", reason="unauthorized") == 1
    assert value("infosvc_reports_rejected_total", reason="store") == 0
    assert value("infosvc_report_ingest_duration_seconds_count") == 3
    assert value("infosvc_store_size_bytes") > 0
    assert value("infosvc_metrics_collect_success") == 1
    # Every declared metric has a sample (the oldest-live-report gauge too: hosts are live).
    names = {name for name, _ in found}
    for spec in METRICS:
        wanted = spec.name + ("_count" if spec.type == "histogram" else "")
        assert wanted in names, spec.name


def test_metrics_need_a_token_when_reads_do(serve_app: ServerFactory) -> None:
    server = serve_app({"service": {"read_token_required": True}})
    assert server.get("/metrics").is_error(401)
    scrape(server, token=server.tokens["admin"])


def test_every_metric_is_documented() -> None:
    api = (ROOT / "docs" / "api.md").read_text()
    missing = [m.name for m in METRICS if f"`{m.name}`" not in api]
    assert not missing, f"docs/api.md does not list {missing}"


def test_a_failing_collector_is_marked_not_fatal() -> None:
    class Broken:
        clock = staticmethod(time.time)

        @property
        def table(self) -> Any:
            raise RuntimeError("boom")

    families = {f.name: f for f in AggregatorCollector(Broken()).collect()}  # type: ignore[arg-type]
    assert families["infosvc_metrics_collect_success"].samples[0].value == 0
    assert "infosvc_host_state" not in families


def several_states(serve_app: ServerFactory) -> Server:
    """A server with hosts in two clusters, in every life-cycle state."""
    heartbeat = 3.0
    server = serve_app(start=False, agents=8)
    server.config_file.write_text(SITE.format(heartbeat=heartbeat))
    server.start()
    server.report("b09", server.agent_token(), processors=2)
    assert server.admin("b09", "approve").status == 200
    wait_for(lambda: server.state_of("b09") == "Unreachable", timeout=heartbeat * 4, message="b09 Unreachable")
    for host, cpus in (("a01", 16), ("a02", 16), ("a03", 32), ("b01", 64), ("b02", 8), ("c01", 4)):
        server.report(host, server.agent_token(), processors=cpus, free_processors=cpus // 2)
    for host in ("a01", "a02", "a03", "b01", "c01"):
        assert server.admin(host, "approve").status == 200
    assert server.admin("a02", "pause").status == 200
    states = {h: server.state_of(h) for h in ("a01", "a02", "b02", "b09")}
    assert states == {"a01": "Ready", "a02": "Paused", "b02": "Pending", "b09": "Unreachable"}, states
    return server


def test_promtool_check_metrics(serve_app: ServerFactory) -> None:
    promtool = binary("promtool")
    server = several_states(serve_app)
    text = scrape(server)
    found = samples(text)
    assert found["infosvc_host_state", (("node", "b09"), ("state", "Unreachable"))] == 1
    assert found["infosvc_cluster_hosts", (("cluster", "alpha"), ("state", "Paused"))] == 1
    assert found["infosvc_computing_element_hosts", (("computing_element", "ce-all"), ("state", "Pending"))] == 1
    assert found["infosvc_computing_element_cpus", (("computing_element", "ce-alpha"),)] == 64
    checked = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
    assert checked.returncode == 0 and not checked.stdout.strip() and not checked.stderr.strip(), (
        checked.stdout.decode() + checked.stderr.decode())


# --- a real Prometheus --------------------------------------------------------------------------

def http_json(port: int, path: str) -> Any:
    try:
        reply = request(port, "GET", path, timeout=5)
    except (OSError, http.client.HTTPException):
        return None
    return reply.json() if reply.status == 200 else None


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Any]:
    """prometheus(target_port) -> Prometheus' port, once it is ready; stopped at the end."""
    executable = binary("prometheus")
    processes: list[subprocess.Popen[bytes]] = []
    log = tmp_path / "prometheus.log"

    def start(target_port: int) -> int:
        config = tmp_path / "prometheus.yml"
        config.write_text(json.dumps({  # JSON is YAML
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "infosvc", "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}],
        }))
        port = free_port()
        with open(log, "ab") as out:
            processes.append(subprocess.Popen(
                [executable, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path))

        def ready() -> bool:
            if processes[-1].poll() is not None:
                pytest.fail(f"prometheus exited with {processes[-1].returncode}:\n{log.read_text()[-4000:]}")
            try:
                return request(port, "GET", "/-/ready", timeout=2).status == 200
            except (OSError, http.client.HTTPException):
                return False

        wait_for(ready, timeout=60, interval=0.1, message="prometheus ready")
        return port

    yield start
    for process in processes:
        stop_process(process, timeout=20)


def test_prometheus_scrapes_metrics(serve_app: ServerFactory, prometheus: Any) -> None:
    # an executor bound to the host: jobs are placed only where one runs them
    server = serve_app(executors={"exec-h1": "h1.example.org"})
    server.report("h1.example.org", server.agent_token(), processors=24, free_processors=6)
    port = prometheus(server.port)

    def target_up() -> Any:
        data = http_json(port, "/api/v1/targets")
        if not data:
            return None
        active = data["data"]["activeTargets"]
        up = [t for t in active if t["health"] == "up" and t["scrapeUrl"] == f"{server.url}/metrics"]
        return up or None

    (target,) = wait_for(target_up, timeout=60, interval=0.2, message="infosvc target up in prometheus")
    assert not target["lastError"]

    query = urllib.parse.quote('infosvc_host_processors_configured{node="h1.example.org"}')

    def series() -> Any:
        data = http_json(port, f"/api/v1/query?query={query}")
        return data and data["status"] == "success" and data["data"]["result"]

    (result,) = wait_for(series, timeout=60, interval=0.2, message="the host's series in prometheus")
    assert result["metric"]["job"] == "infosvc"
    assert float(result["value"][1]) == 24
    # the job queue's figures per CE: one job running on the host (exclusive), one waiting
    job = b"<Job><Id>j</Id><Executable>/bin/true</Executable><Requested><Processors>1</Processors></Requested></Job>"
    for _ in range(2):
        assert server.request("POST", "/v1/jobs", job, token=server.tokens["submit"],
                              headers={"Content-Type": "application/xml"}).status == 201

    def ce_jobs() -> Any:
        found = {}
        for kind in ("running", "waiting"):
            query = urllib.parse.quote(f'infosvc_computing_element_{kind}_jobs{{computing_element="default"}}')
            data = http_json(port, f"/api/v1/query?query={query}")
            result = data and data["status"] == "success" and data["data"]["result"]
            if not result:
                return None
            found[kind] = float(result[0]["value"][1])
        return found if found == {"running": 1.0, "waiting": 1.0} else None

    wait_for(ce_jobs, timeout=60, interval=0.2, message="the CE's running and waiting jobs in prometheus")
    up = urllib.parse.quote('up{job="infosvc"}')
    (result,) = wait_for(lambda: http_json(port, f"/api/v1/query?query={up}")["data"]["result"], timeout=30,
                         message="up series")
    assert float(result["value"][1]) == 1


# --- the exposition against the reference collector ----------------------------------------------

def reference_text(agg: Any) -> str:
    """generate_latest of every family as plain prometheus_client families (AggregatorCollector,
    hosts=True), plus an empty ingest histogram: what the exposition must say."""
    from prometheus_client import CollectorRegistry, Histogram, generate_latest

    from infosvc.publish.prometheus import INGEST_BUCKETS

    registry = CollectorRegistry()
    Histogram("infosvc_report_ingest_duration_seconds", "x", buckets=INGEST_BUCKETS, registry=registry)
    registry.register(AggregatorCollector(agg, hosts=True))
    return generate_latest(registry).decode()


def sample_lines(text: str) -> set[str]:
    """The sample lines, but for the scrape's own timing, and the histogram's (created time)."""
    return {line for line in text.splitlines() if line and not line.startswith("#")
            and not line.startswith(("infosvc_metrics_collect_duration_seconds", "infosvc_report_ingest_"))}


def test_exposition_says_what_the_reference_collector_says(tmp_path: Path) -> None:
    import tomllib

    from infosvc.hosts.aggregator import Aggregator
    from infosvc.publish.prometheus import Metrics
    from infosvc.config.site import parse_config
    from infosvc.store import Store
    from infosvc.hosts.tokens import Tokens

    config = parse_config(tomllib.loads(SITE.format(heartbeat=60)))
    agg = Aggregator(config, Store(tmp_path / "m.sqlite"), Tokens())
    frozen = [1_800_000_000.0]
    agg.clock = lambda: frozen[0]
    metrics = Metrics()
    metrics.watch(agg)
    now = frozen[0]
    # Ids that need escaping in a label value, hosts without memory or load, every state.
    hosts = ['a01', 'a02', 'b01', 'c"quoted"', 'd\\back', 'e\u00e9t\u00e9']
    for i, host in enumerate(hosts):
        node = make_node(host, processors=4 * (i + 1), free_processors=i, memory_mb=1024.5 * (i + 1))
        if i % 2:
            node.utilized.add(Consumable("Resource", 0.25 * i, metric="Average", name="Load", type="1min"))
        if i == 5:
            node.available.items = [c for c in node.available.items if c.kind != "Memory"]
        if i == 4:  # schema-valid, and past any float in bytes: not exported, the scrape goes on
            node.configured.items = [c for c in node.configured.items if c.kind != "Memory"]
            node.configured.add(Consumable("Memory", 1e300, units="Doggabyte"))
        agg.table.report(node, now - i)
        if host != "b01":  # the config asks for approval: b01 stays Pending
            agg.table.set_flags(host, now, approved=True)
    agg.table.set_flags("a02", now, paused=True)

    def compare() -> None:
        text = metrics.exposition().decode()
        assert sample_lines(text) == sample_lines(reference_text(agg))
        found = samples(text)  # the exposition parses, and says the scrape succeeded
        assert found["infosvc_metrics_collect_success", ()] == 1
        assert found["infosvc_host_state", (("node", 'c"quoted"'), ("state", states['c"quoted"']))] == 1
        assert found["infosvc_host_state", (("node", "b01"), ("state", "Pending"))] == 1
        assert ("infosvc_host_memory_configured_bytes", (("node", hosts[4]),)) not in found
        assert found["infosvc_host_memory_configured_bytes", (("node", hosts[3]),)] == 4 * 1024.5 * 2**20

    states = {h: "Ready" for h in hosts} | {"a02": "Paused", "b01": "Pending"}

    compare()
    # A host that reports again, changes state or goes silent has its kept lines replaced.
    node = make_node("a01", processors=64, free_processors=63, memory_mb=2048)
    agg.table.report(node, now)
    agg.table.set_flags("a02", now, paused=False)
    frozen[0] = now + 10_000  # ages move, and everyone's heartbeat is missed
    assert agg.table.sweep(frozen[0])
    states = {h: "Unreachable" for h in hosts} | {"b01": "Pending"}
    compare()
    assert samples(metrics.exposition().decode())["infosvc_host_processors_configured", (("node", "a01"),)] == 64


def test_exposition_keeps_the_rest_when_the_host_lines_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import infosvc.publish.prometheus as metrics_module
    from infosvc.hosts.aggregator import Aggregator
    from infosvc.publish.prometheus import Metrics
    from infosvc.config.site import parse_config
    from infosvc.store import Store
    from infosvc.hosts.tokens import Tokens

    agg = Aggregator(parse_config({}), Store(tmp_path / "m.sqlite"), Tokens())
    node = make_node("h1")
    agg.table.report(node, agg.clock())
    metrics = Metrics()
    metrics.watch(agg)

    def broken(*args: Any) -> tuple[str, ...]:
        raise RuntimeError("boom")

    monkeypatch.setattr(metrics_module, "host_lines", broken)
    metrics.warm(list(agg.table))  # as GET /metrics does first: it must not raise either
    found = samples(metrics.exposition().decode())
    assert found["infosvc_metrics_collect_success", ()] == 0
    assert found["infosvc_cluster_cpus", (("cluster", "default"),)] == 4
    assert not any(name.startswith("infosvc_host_") for name, _ in found)


def test_a_host_with_a_size_past_any_float_does_not_break_the_scrape(serve_app: ServerFactory) -> None:
    server = serve_app()
    node = make_node("huge")
    node.configured.items = [c for c in node.configured.items if c.kind != "Memory"]
    node.configured.add(Consumable("Memory", 1e300, units="Doggabyte"))
    assert server.post_node(node_to_xml(node), server.agent_token()).status == 200
    server.report("plain", server.agent_token(), processors=8)
    found = samples(scrape(server))
    assert found["infosvc_metrics_collect_success", ()] == 1
    assert found["infosvc_host_processors_configured", (("node", "plain"),)] == 8
    assert ("infosvc_host_memory_configured_bytes", (("node", "huge"),)) not in found
