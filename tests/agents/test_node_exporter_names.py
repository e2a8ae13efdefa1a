"""The agent's node_exporter names, checked against the real node_exporter on the same host.

Debian's `prometheus-node-exporter` runs on a free loopback port beside `infosvc-agent
--metrics-listen`; both are scraped, and every `node_*` family the agent exposes must be one
node_exporter exposes too, with the same type, the same label names and overlapping label values
(the same CPUs and modes; the agent's file systems among node_exporter's). Labels are compared as
Prometheus stores them: a label whose value is empty is no label at all.

node_exporter runs with upstream's defaults for what the agent also selects (Debian's package
changes two of them: it leaves out lo and mounts under /mnt, /media and /run), and with only the
collectors whose families the agent has. Without the binary the test is skipped locally, with the
reason; under CI (CI=true, as .ci/run sets, which installs the package) it fails instead.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support import ROOT
from support.server import free_port, stop_process, wait_for

NODE_EXPORTER = "prometheus-node-exporter"
#: The node_exporter collectors whose families the agent exposes.
COLLECTORS = ("cpu", "loadavg", "meminfo", "filesystem", "netdev", "netclass", "uname", "os")
#: node_exporter's upstream defaults for the file systems it leaves out; the agent's own selection of
#: real file systems differs (it keeps an overlay at / and mounts under /run, /mnt), so what these
#: leave out is set aside before the agent's file systems are looked for among node_exporter's.
MOUNT_POINTS_EXCLUDE = r"^/(dev|proc|run/credentials/.+|sys|var/lib/docker/.+|var/lib/containers/storage/.+)($|/)"
FS_TYPES_EXCLUDE = (r"^(autofs|binfmt_misc|bpf|cgroup2?|configfs|debugfs|devpts|devtmpfs|fusectl|hugetlbfs|iso9660"
                    r"|mqueue|nsfs|overlay|proc|procfs|pstore|rpc_pipefs|securityfs|selinuxfs|squashfs|sysfs|tracefs)$")
#: Labels whose values name the same things on both sides, so that they must overlap.
SHARED_VALUES = ("cpu", "mode", "device", "mountpoint", "fstype")
#: Labels whose values must be the very same set: the CPUs online and node_exporter's modes.
SAME_VALUES = ("cpu", "mode")
#: One sample, labels describing the host itself: all its labels must be equal.
INFO_FAMILIES = ("node_uname_info", "node_os_info")
#: Families whose values do not move between two scrapes a moment apart: equal where both have the labels.
STABLE_FAMILIES = ("node_memory_MemTotal_bytes", "node_memory_SwapTotal_bytes", "node_filesystem_size_bytes",
                   "node_filesystem_readonly", "node_network_mtu_bytes", "node_network_up")


def binary(name: str) -> str:
    """The path of a binary a test runs; under CI its absence fails the test, locally it skips."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{name} not found on PATH under CI: .ci/run installs the Debian package {name!r}")
        pytest.skip(f"{name} not installed (apt-get install {name}); CI is not set, so skipped")
    return path


@dataclass
class Family:
    type: str
    samples: list[dict[str, str]] = field(default_factory=list)  # each sample's labels, empty values dropped
    values: dict[tuple[tuple[str, str], ...], float] = field(default_factory=dict)

    @property
    def label_names(self) -> set[str]:
        return {name for labels in self.samples for name in labels}

    def label_values(self, name: str) -> set[str]:
        return {labels[name] for labels in self.samples if name in labels}


def families(text: str) -> dict[str, Family]:
    """{family name: Family} from the text exposition (a counter's family name without its _total)."""
    found: dict[str, Family] = {}
    for parsed in text_string_to_metric_families(text):
        family = found.setdefault(parsed.name, Family(parsed.type))
        for sample in parsed.samples:
            labels = {k: v for k, v in sample.labels.items() if v != ""}
            family.samples.append(labels)
            family.values[tuple(sorted(labels.items()))] = sample.value
    return found


def _set_aside(labels: dict[str, str]) -> bool:
    """A file system node_exporter's defaults leave out."""
    return (re.search(MOUNT_POINTS_EXCLUDE, labels.get("mountpoint", "")) is not None
            or re.search(FS_TYPES_EXCLUDE, labels.get("fstype", "")) is not None)


def mismatches(ours: dict[str, Family], theirs: dict[str, Family]) -> list[str]:
    """What in our node_* families node_exporter's exposition contradicts, one line each."""
    found = []
    for name, family in sorted(ours.items()):
        if not name.startswith("node_"):
            continue
        other = theirs.get(name)
        if other is None:
            found.append(f"{name}: node_exporter has no such family")
            continue
        if family.type != other.type:
            found.append(f"{name}: type {family.type}, node_exporter's is {other.type}")
        if family.label_names != other.label_names:
            found.append(f"{name}: labels {sorted(family.label_names)}, node_exporter's are {sorted(other.label_names)}")
            continue
        if name in INFO_FAMILIES:
            if family.samples != other.samples:
                found.append(f"{name}: {family.samples}, node_exporter says {other.samples}")
            continue
        if name.startswith("node_filesystem_"):
            # each of our file systems, as (device, fstype, mountpoint), is one of node_exporter's
            theirs_fs = {tuple(sorted(labels.items())) for labels in other.samples}
            extra = [labels for labels in family.samples
                     if not _set_aside(labels) and tuple(sorted(labels.items())) not in theirs_fs]
            if extra:
                found.append(f"{name}: node_exporter has none of {extra}")
        for label in sorted(family.label_names & set(SHARED_VALUES)):
            ours_values, theirs_values = family.label_values(label), other.label_values(label)
            if label in SAME_VALUES and ours_values != theirs_values:
                found.append(f"{name}: {label} values {sorted(ours_values)}, node_exporter's {sorted(theirs_values)}")
            elif theirs_values and not ours_values & theirs_values and not all(map(_set_aside, family.samples)):
                found.append(f"{name}: {label} values {sorted(ours_values)}, none of node_exporter's "
                             f"{sorted(theirs_values)}")
    return found


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
def node_exporter_port() -> Iterator[int]:
    path = binary(NODE_EXPORTER)
    port = free_port()
    args = [path, f"--web.listen-address=127.0.0.1:{port}", "--web.disable-exporter-metrics",
            "--collector.disable-defaults", *(f"--collector.{name}" for name in COLLECTORS),
            f"--collector.filesystem.mount-points-exclude={MOUNT_POINTS_EXCLUDE}",
            f"--collector.filesystem.fs-types-exclude={FS_TYPES_EXCLUDE}",
            "--collector.netdev.device-exclude=^$"]  # upstream excludes no device; Debian's package excludes lo
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: process.poll() is not None or get_metrics(port), timeout=30,
                 message="node_exporter's /metrics")
        if process.poll() is not None:
            assert process.stderr is not None
            pytest.fail(f"node_exporter exited {process.returncode}: {process.stderr.read()[-2000:]}")
        yield port
    finally:
        stop_process(process)
        assert process.stderr is not None
        process.stderr.close()


@pytest.fixture
def agent_port() -> Iterator[int]:
    port = free_port()
    agent = subprocess.Popen([sys.executable, "-m", "infosvc_agents", "--interval", "0.5",
                              "--metrics-listen", f"127.0.0.1:{port}"],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield port
    finally:
        stop_process(agent)


def test_the_agents_node_families_are_node_exporters(node_exporter_port: int, agent_port: int) -> None:
    def sampled() -> str | None:
        text = get_metrics(agent_port)
        return text if text is not None and "infosvc_agent_sample_timestamp_seconds " in text else None

    # ours first, then node_exporter's: its counters are read later, so they are at least ours
    ours = families(wait_for(sampled, timeout=60, message="the agent's /metrics after a sample"))
    theirs_text = get_metrics(node_exporter_port)
    scraped_at = time.time()
    assert theirs_text is not None
    theirs = families(theirs_text)

    assert mismatches(ours, theirs) == []
    for name in ("node_cpu_seconds", "node_cpu_guest_seconds", "node_load1", "node_memory_MemTotal_bytes",
                 "node_network_receive_bytes", "node_network_mtu_bytes", "node_uname_info"):
        assert name in ours, f"the agent does not expose {name}: nothing compared"

    # the same meaning: what does not move has the same value (node_network_up is operstate "up" alone)
    for name in STABLE_FAMILIES:
        if name in ours:
            differ = {labels: (value, theirs[name].values[labels]) for labels, value in ours[name].values.items()
                      if labels in theirs[name].values and value != theirs[name].values[labels]}
            assert not differ, f"{name}: (ours, node_exporter's) {differ}"

    # the same counters in the same unit: per CPU, node_exporter's later reading is ahead of ours by no
    # more than the wall time between the two (a CPU spends one second per second in all modes together)
    sampled_at = ours["infosvc_agent_sample_timestamp_seconds"].values[()]
    elapsed = scraped_at - sampled_at
    assert 0 <= elapsed < 30
    cpu_seconds, their_seconds = ours["node_cpu_seconds"].values, theirs["node_cpu_seconds"].values
    ahead: dict[str, float] = {}
    for labels, value in cpu_seconds.items():
        step = their_seconds[labels] - value
        assert step >= -0.05, (labels, value, their_seconds[labels])  # a tick of idle jitter at most
        cpu = dict(labels)["cpu"]
        ahead[cpu] = ahead.get(cpu, 0.0) + step
    # + 1 s: the agent read /proc/stat before it stamped the sample, and both round to ticks
    assert all(step <= elapsed + 1.0 for step in ahead.values()), (ahead, elapsed)


def test_the_comparison_finds_what_differs() -> None:
    """The comparison itself can fail: each kind of difference node_exporter's exposition can show."""
    theirs = families(
        "# TYPE node_cpu_seconds_total counter\n"
        'node_cpu_seconds_total{cpu="0",mode="user"} 5\nnode_cpu_seconds_total{cpu="1",mode="user"} 5\n'
        "# TYPE node_uname_info gauge\n"
        'node_uname_info{domainname="(none)",machine="x86_64",nodename="h",release="6",sysname="Linux",version="#1"} 1\n'
        "# TYPE node_filesystem_size_bytes gauge\n"
        'node_filesystem_size_bytes{device="/dev/vda",fstype="ext4",mountpoint="/",device_error=""} 9\n'
        "# TYPE node_load1 gauge\nnode_load1 0.5\n"
        "# TYPE node_network_up gauge\n"
        'node_network_up{device="eth0"} 1\n')
    same = families(
        "# TYPE node_cpu_seconds_total counter\n"
        'node_cpu_seconds_total{cpu="0",mode="user"} 4\nnode_cpu_seconds_total{cpu="1",mode="user"} 4\n'
        "# TYPE node_uname_info gauge\n"
        'node_uname_info{domainname="(none)",machine="x86_64",nodename="h",release="6",sysname="Linux",version="#1"} 1\n'
        "# TYPE node_filesystem_size_bytes gauge\n"
        'node_filesystem_size_bytes{device="/dev/vda",fstype="ext4",mountpoint="/"} 9\n'
        'node_filesystem_size_bytes{device="overlay",fstype="overlay",mountpoint="/"} 9\n'
        "# TYPE node_load1 gauge\nnode_load1 0.4\n"
        "# TYPE infosvc_node_processors gauge\ninfosvc_node_processors 2\n")
    assert mismatches(same, theirs) == []  # an empty label is none; an overlay root is set aside; infosvc_* ours
    differ = families(
        "# TYPE node_cpu_seconds_total counter\n"
        'node_cpu_seconds_total{cpu="0",mode="busy"} 4\n'
        "# TYPE node_uname_info gauge\n"
        'node_uname_info{machine="x86_64",nodename="h",release="6",sysname="Linux",version="#1"} 1\n'
        "# TYPE node_filesystem_size_bytes gauge\n"
        'node_filesystem_size_bytes{device="/dev/vdb",fstype="ext4",mountpoint="/"} 9\n'
        "# TYPE node_load1 counter\nnode_load1_total 0.4\n"
        "# TYPE node_network_up gauge\n"
        'node_network_up{device="eth9"} 1\n'
        "# TYPE node_cpu_busy gauge\nnode_cpu_busy 1\n")
    found = "\n".join(mismatches(differ, theirs))
    for expected in ("node_cpu_busy: node_exporter has no such family",
                     "node_cpu_seconds: cpu values ['0'], node_exporter's ['0', '1']",
                     "node_cpu_seconds: mode values ['busy']",
                     "node_uname_info: labels ['machine', 'nodename', 'release', 'sysname', 'version']",
                     "node_filesystem_size_bytes: node_exporter has none of",
                     "node_load1: type counter, node_exporter's is gauge",
                     "node_network_up: device values ['eth9'], none of node_exporter's ['eth0']"):
        assert expected in found, (expected, found)
