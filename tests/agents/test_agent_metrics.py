"""`infosvc-agent --metrics-listen`: this host's metrics with node_exporter's names, from the newest sample.

On the fixture host (in process, exact values), and end to end: a real aggregator, the agent
command pushing to it and serving /metrics, scraped over HTTP and linted with `promtool check
metrics` when promtool is installed.
"""

from __future__ import annotations

import http.client
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from support import ROOT

from support.server import Server, ServerFactory, free_port, stop_process, wait_for
from infosvc_agents.collectors.memory import MemoryCollector
from infosvc_agents.node_metrics import METRICS, NodeMetrics, split_listen
from test_agent import HOST1, fixture_agent

Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def parse(text: str) -> tuple[Samples, dict[str, str]]:
    """{sample name: {sorted labels: value}}, and {family name: type}."""
    samples: Samples = {}
    types = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples, types


def one(samples: Samples, metric: str, /, **labels: str) -> float:
    return samples[metric][tuple(sorted(labels.items()))]


def scrape_agent(agent_metrics: NodeMetrics) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(agent_metrics)
    return generate_latest(registry).decode()


def promtool_problems(text: str) -> list[str]:
    """promtool's complaints, less the camelCase of node_memory_*: node_exporter's own names, which its
    checkmetrics.sh lets through the same way."""
    promtool = shutil.which("promtool")
    assert promtool is not None
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    lines = (done.stdout + done.stderr).splitlines()
    return [line for line in lines if line.strip() and not line.startswith("node_memory_")]


# --- on the fixture host ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fixture_metrics() -> tuple[Samples, dict[str, str], str]:
    agent = fixture_agent()
    agent.node()
    text = scrape_agent(NodeMetrics(lambda: agent.last_runs, sampled_at=lambda: agent.sampled_at))
    samples, types = parse(text)
    return samples, types, text


def test_fixture_load_and_memory(fixture_metrics: tuple[Samples, dict[str, str], str]) -> None:
    samples, types, _ = fixture_metrics
    assert (one(samples, "node_load1"), one(samples, "node_load5"), one(samples, "node_load15")) == (3.52, 2.10, 1.05)
    assert one(samples, "node_memory_MemTotal_bytes") == 196608000 * 1024
    assert one(samples, "node_memory_MemAvailable_bytes") == 150000000 * 1024
    assert one(samples, "node_memory_SwapTotal_bytes") == 8388604 * 1024
    assert one(samples, "node_memory_SwapFree_bytes") == 8000000 * 1024
    assert one(samples, "infosvc_node_processors") == 4
    assert 0 <= one(samples, "infosvc_node_processors_busy") <= 4
    assert types["node_load1"] == "gauge"


def test_fixture_filesystems(fixture_metrics: tuple[Samples, dict[str, str], str]) -> None:
    samples, _, _ = fixture_metrics
    scratch = {"device": "/dev/sda3", "fstype": "xfs", "mountpoint": "/scratch"}
    assert one(samples, "node_filesystem_size_bytes", **scratch) == 5_000_000 * 4096
    assert one(samples, "node_filesystem_free_bytes", **scratch) == 5_000_000 // 2 * 4096
    assert one(samples, "node_filesystem_avail_bytes", **scratch) == 5_000_000 // 4 * 4096
    assert one(samples, "node_filesystem_readonly", **scratch) == 0
    mounts = {dict(labels)["mountpoint"] for labels in samples["node_filesystem_size_bytes"]}
    assert mounts == {"/", "/scratch", "/home", "/data/My Files", "/tank", "/mnt/blocky"}
    readonly = {dict(labels)["mountpoint"]: value for labels, value in samples["node_filesystem_readonly"].items()}
    assert readonly["/data/My Files"] == 1


def test_fixture_network_and_uname(fixture_metrics: tuple[Samples, dict[str, str], str]) -> None:
    samples, types, _ = fixture_metrics
    assert types["node_network_receive_bytes"] == "counter"  # exposed as node_network_receive_bytes_total
    assert one(samples, "node_network_receive_bytes_total", device="eth0") == 987654321
    assert one(samples, "node_network_receive_bytes_total", device="ib0") == 5000000000
    assert one(samples, "node_network_mtu_bytes", device="lo") == 65536
    assert one(samples, "node_network_speed_bytes", device="eth0") == 10000 * 125_000
    assert one(samples, "node_network_up", device="eth0") == 1
    # node_exporter's meaning: operstate "up" alone, so lo's "unknown" is 0 (the SSS Node has lo up, by IFF_UP)
    assert one(samples, "node_network_up", device="lo") == 0
    assert one(samples, "node_uname_info", domainname="hpc-nis", machine="x86_64", nodename="cn017.example.org",
               release="5.14.0-362", sysname="Linux", version="#1 SMP") == 1
    # every os-release label node_exporter has, empty where the file lacks the key
    assert one(samples, "node_os_info", build_id="", id="rocky", id_like="rhel centos fedora", image_id="",
               image_version="", name="Rocky Linux", pretty_name="Rocky Linux 9.3 (Blue Onyx)", variant="",
               variant_id="", version="9.3 (Blue Onyx)", version_codename="", version_id="9.3") == 1
    assert abs(one(samples, "infosvc_agent_sample_timestamp_seconds") - time.time()) < 600


def test_fixture_cpu_seconds(fixture_metrics: tuple[Samples, dict[str, str], str]) -> None:
    samples, types, _ = fixture_metrics
    hz = os.sysconf("SC_CLK_TCK")
    assert types["node_cpu_seconds"] == "counter" and types["node_cpu_guest_seconds"] == "counter"
    cpu_seconds = samples["node_cpu_seconds_total"]
    assert {dict(labels)["cpu"] for labels in cpu_seconds} == {"0", "1", "2", "3"}
    assert {dict(labels)["mode"] for labels in cpu_seconds} == {"user", "nice", "system", "idle", "iowait", "irq",
                                                                 "softirq", "steal"}
    assert one(samples, "node_cpu_seconds_total", cpu="2", mode="user") == 250 / hz
    assert one(samples, "node_cpu_seconds_total", cpu="2", mode="idle") == 2000 / hz
    assert one(samples, "node_cpu_seconds_total", cpu="2", mode="iowait") == 25 / hz
    assert {dict(labels)["mode"] for labels in samples["node_cpu_guest_seconds_total"]} == {"user", "nice"}
    assert one(samples, "node_cpu_guest_seconds_total", cpu="0", mode="user") == 0


def test_fixture_exposition_passes_promtool(fixture_metrics: tuple[Samples, dict[str, str], str]) -> None:
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (Debian's prometheus package has it)")
    assert promtool_problems(fixture_metrics[2]) == []


def test_failed_collector_is_marked_and_its_metrics_left_out() -> None:
    agent = fixture_agent()
    agent.registry.collectors["memory"] = MemoryCollector(proc_root=str(HOST1 / "no-such-proc"))
    agent.node()
    samples, _ = parse(scrape_agent(NodeMetrics(lambda: agent.last_runs, sampled_at=lambda: agent.sampled_at)))
    assert one(samples, "infosvc_agent_collector_success", collector="memory") == 0
    assert one(samples, "infosvc_agent_collector_success", collector="load") == 1
    assert "node_memory_MemTotal_bytes" not in samples
    assert "node_load1" in samples


def test_before_the_first_sample_there_is_nothing_to_say() -> None:
    samples, _ = parse(scrape_agent(NodeMetrics(dict, sampled_at=lambda: None)))
    assert samples == {}


def test_every_metric_is_documented() -> None:
    doc = (ROOT / "docs" / "node-mapping.md").read_text()
    missing = [name for name in METRICS if f"`{name}`" not in doc]
    assert not missing, f"docs/node-mapping.md does not list {missing}"


@pytest.mark.parametrize("listen, expected", [("127.0.0.1:9100", ("127.0.0.1", 9100)), ("[::1]:9100", ("::1", 9100)),
                                              ("0.0.0.0:0", ("0.0.0.0", 0))])
def test_split_listen(listen: str, expected: tuple[str, int]) -> None:
    assert split_listen(listen) == expected


@pytest.mark.parametrize("listen", ["9100", ":9100", "host:port", "host:70000"])
def test_split_listen_refuses(listen: str) -> None:
    with pytest.raises(ValueError):
        split_listen(listen)


@pytest.mark.parametrize("args", [["--metrics-listen", "nowhere"], ["--once", "--metrics-listen", "127.0.0.1:9100"]])
def test_agent_refuses_bad_metrics_options(args: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "infosvc_agents", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "metrics" in done.stderr


# --- end to end: the agent command, a real aggregator, a real scrape ------------------------------

def get_metrics(port: int) -> str | None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        return response.read().decode() if response.status == 200 else None
    except OSError:
        return None
    finally:
        connection.close()


@pytest.fixture
def agent_with_metrics(serve_app: ServerFactory, tmp_path: Path) -> Iterator[tuple[Server, int]]:
    server = serve_app()
    token_file = tmp_path / "token"
    token_file.write_text(server.agent_token() + "\n")
    port = free_port()
    agent = subprocess.Popen([sys.executable, "-m", "infosvc_agents", "--server", server.url, "--token-file",
                              str(token_file), "--id", "metrics01.example.org", "--interval", "0.5",
                              "--metrics-listen", f"127.0.0.1:{port}"],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield server, port
    finally:
        stop_process(agent)
        assert agent.stderr is not None
        agent.stderr.close()


def test_agent_serves_its_hosts_metrics(agent_with_metrics: tuple[Server, int]) -> None:
    server, port = agent_with_metrics
    def delivered_twice() -> str | None:
        text = get_metrics(port)
        if text is None:
            return None
        delivered = parse(text)[0].get("infosvc_agent_samples_delivered_total", {}).get((), 0.0)
        return text if delivered >= 2 else None

    text = wait_for(delivered_twice, timeout=30, message="the agent's /metrics after two delivered samples")
    samples, types = parse(text)
    # every family is one that METRICS declares, with the declared type
    for family, kind in types.items():
        name = family + "_total" if kind == "counter" else family
        assert name in METRICS and METRICS[name].type == kind, family
    for name in ("node_load1", "node_load5", "node_load15", "node_memory_MemTotal_bytes",
                 "node_memory_MemAvailable_bytes", "node_network_receive_bytes_total", "node_network_mtu_bytes",
                 "node_uname_info", "infosvc_node_processors"):
        assert name in samples, name
    total = one(samples, "node_memory_MemTotal_bytes")
    assert 0 < one(samples, "node_memory_MemAvailable_bytes") <= total
    assert all(v >= 0 for v in samples["node_load1"].values())
    assert one(samples, "node_network_mtu_bytes", device="lo") > 0
    for labels, size in samples.get("node_filesystem_size_bytes", {}).items():
        assert 0 <= samples["node_filesystem_avail_bytes"][labels] <= size
    assert all(v == 1 for v in samples["infosvc_agent_collector_success"].values())
    # the same host the aggregator has: its Configured Memory is MemTotal
    assert "metrics01.example.org" in server.node_ids()
    node = server.get("/v1/nodes/metrics01.example.org").json()
    memory = next(c for c in node["configured"] if c["kind"] == "Memory")
    assert memory["units"] == "MB" and abs(memory["value"] * (1 << 20) - total) < 1 << 20
    if shutil.which("promtool") is not None:
        assert promtool_problems(text) == []


def test_agent_stays_free_of_aiohttp() -> None:
    code = ("import sys\n"
            "import infosvc_agents.agent, infosvc_agents.cli, infosvc_agents.node_metrics, infosvc_agents.push\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'infosvc.web.app'))\n"
            "assert not loaded, loaded\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
