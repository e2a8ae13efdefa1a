"""The host agent end to end: facts -> SSS Node -> valid document, on fixture trees and this host."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from infosvc.codec.node_xml import parse_node
from infosvc.model.node import Node
from infosvc_agents.agent import HostAgent
from infosvc_agents.collectors import CollectorRegistry
from infosvc_agents.collectors.filesystems import FileSystemCollector
from infosvc_agents.collectors.load import LoadCollector
from infosvc_agents.collectors.memory import MemoryCollector
from infosvc_agents.collectors.network import NetworkCollector
from infosvc_agents.collectors.processors import ProcessorCollector
from infosvc_agents.collectors.system import SystemCollector

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HOST1 = FIXTURES / "host1"
MB = 1 << 20


def meminfo_kib(path: Path, key: str) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


class FakeStatvfs:
    """statvfs for the fixture's mount points: 4 KiB blocks, sizes per mount point."""

    BLOCKS = {"/": 1_000_000, "/scratch": 5_000_000, "/home": 9_000_000, "/data/My Files": 200_000,
              "/tank": 3_000_000, "/mnt/blocky": 1_000, "/mnt/ovl": 10}

    def __call__(self, path: str) -> os.statvfs_result:
        blocks = self.BLOCKS[path]
        # f_bsize, f_frsize, f_blocks, f_bfree, f_bavail, f_files, f_ffree, f_favail, f_flag, f_namemax
        return os.statvfs_result((4096, 4096, blocks, blocks // 2, blocks // 4, 0, 0, 0, 0, 255))


def fixture_agent(root: Path | None = None, statvfs: Callable[[str], Any] | None = None,
                  **kwargs: object) -> HostAgent:
    """The agent of the host1 fixture (or of `root`, a tree like it), its statvfs FakeStatvfs's or `statvfs`."""
    root = root or HOST1
    registry = CollectorRegistry()
    registry.extend([
        ProcessorCollector(proc_root=str(root / "proc"), sys_root=str(root / "sys"), cpuinfo=lambda: {}),
        MemoryCollector(proc_root=str(root / "proc")),
        LoadCollector(proc_root=str(root / "proc")),
        FileSystemCollector(proc_root=str(root / "proc"), statvfs=statvfs or FakeStatvfs()),
        NetworkCollector(proc_root=str(root / "proc"), sys_root=str(root / "sys"),
                         addresses=lambda: {"eth0": ["10.0.0.21", "fe80::1"], "lo": ["127.0.0.1"]}),
        SystemCollector(etc_root=str(root / "etc"), proc_root=str(root / "proc"),
                        uname=lambda: os.uname_result(("Linux", "cn017.example.org", "5.14.0-362", "#1 SMP", "x86_64"))),
    ])
    return HostAgent(registry, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def host1() -> Node:
    # Through the document, so what is checked is what the aggregator would read.
    return parse_node(fixture_agent(features=("BigMem", "IB")).document())


def test_fixture_identity(host1: Node) -> None:
    assert (host1.id, host1.name, host1.opsys, host1.arch) == ("cn017.example.org", "cn017", "Linux", "x86_64")
    assert host1.features == ["BigMem", "IB"]
    assert host1.extensions_of("OperatingSystem") == {
        "Name": "Rocky Linux", "Release": "9.3", "Version": "9.3 (Blue Onyx)",
        "KernelRelease": "5.14.0-362", "KernelVersion": "#1 SMP"}
    assert host1.extension("SampleTime", "Agent").endswith("Z")


def test_fixture_processors(host1: Node) -> None:
    assert host1.configured.get("Processors").value == 4
    utilized = host1.utilized.get("Processors")
    available = host1.available.get("Processors")
    assert available.value + utilized.value == 4
    assert utilized.metric == "Average" and 0.0 <= utilized.consumption_rate <= 1.0
    assert host1.state in ("Idle", "Busy")
    processor = host1.extensions_of("Processor")
    assert processor["Sockets"] == "2"
    assert "sse4_2" in processor["Flags"].split()


def test_fixture_memory_matches_meminfo(host1: Node) -> None:
    meminfo = HOST1 / "proc" / "meminfo"
    total = meminfo_kib(meminfo, "MemTotal") * 1024
    assert host1.configured.get("Memory").amount("byte") == total
    assert host1.available.get("Memory").amount("byte") == meminfo_kib(meminfo, "MemAvailable") * 1024
    assert host1.configured.get("Swap").amount("byte") == meminfo_kib(meminfo, "SwapTotal") * 1024


def test_fixture_load(host1: Node) -> None:
    loads = {r.type: r.value for r in host1.utilized.resources("Load")}
    assert loads == {"1min": 3.52, "5min": 2.10, "15min": 1.05}


def test_fixture_filesystems(host1: Node) -> None:
    sizes = {r.type: r.amount("byte") for r in host1.configured.resources("FileSystem")}
    # real ones only, a device mounted thrice reported once, the escaped space undone
    assert set(sizes) == {"/", "/scratch", "/home", "/data/My Files", "/tank", "/mnt/blocky"}
    assert sizes["/scratch"] == 5_000_000 * 4096
    home = host1.extensions_of("FileSystem:/home")
    assert home["Kind"] == "remote" and home["Type"] == "nfs4"
    assert host1.extensions_of("FileSystem:/data/My Files")["ReadOnly"] == "true"
    local = [mp for mp in sizes if host1.extensions_of(f"FileSystem:{mp}")["Kind"] == "local"]
    assert host1.configured.get("Disk").amount("byte") == sum(sizes[mp] for mp in local)
    free = {r.type: r.amount("byte") for r in host1.available.resources("FileSystem")}
    assert free["/scratch"] == 5_000_000 // 4 * 4096  # available to users: f_bavail


def test_fixture_network(host1: Node) -> None:
    assert {r.type for r in host1.configured.resources("NetworkAdapter")} == {"eth0", "ib0", "lo"}
    bytes_in = {r.type: r.value for r in host1.utilized.resources("NetworkBytesIn")}
    assert bytes_in["eth0"] == 987654321 and bytes_in["ib0"] == 5000000000
    eth0 = [e for e in host1.extensions if e.type == "NetworkAdapter:eth0"]
    assert [e.value for e in eth0 if e.name == "Address"] == ["10.0.0.21", "fe80::1"]


def test_failed_collector_is_noted_and_the_sample_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    agent = fixture_agent()
    agent.registry.collectors["memory"] = MemoryCollector(proc_root=str(HOST1 / "no-such-proc"))
    with caplog.at_level(logging.WARNING):
        node = parse_node(agent.document())
    assert node.configured.get("Memory") is None
    assert node.configured.get("Processors").value == 4
    failed = node.extension("CollectorFailed", "Agent")
    assert failed.startswith("memory: ") and "meminfo" in failed
    assert any("memory" in record.getMessage() for record in caplog.records)


def test_host_id_override() -> None:
    assert parse_node(fixture_agent(host_id="node007").document()).id == "node007"


# --- this machine --------------------------------------------------------------------------

def online_cpus() -> int:
    text = Path("/sys/devices/system/cpu/online").read_text().strip()
    count = 0
    for part in text.split(","):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


def run_agent(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "infosvc_agents", *args], capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def this_host() -> Node:
    result = run_agent("--once")
    assert result.returncode == 0, result.stderr.decode()
    return parse_node(result.stdout)


def test_live_document_agrees_with_proc(this_host: Node) -> None:
    assert this_host.configured.get("Processors").value == online_cpus()
    mem_total = meminfo_kib(Path("/proc/meminfo"), "MemTotal") * 1024
    assert this_host.configured.get("Memory").amount("byte") == mem_total
    assert this_host.id == os.uname().nodename
    assert (this_host.opsys, this_host.arch) == (os.uname().sysname, os.uname().machine)


def test_live_document_has_root_and_loopback(this_host: Node) -> None:
    assert "/" in {r.type for r in this_host.configured.resources("FileSystem")}
    assert this_host.extensions_of("NetworkAdapter:lo")["State"] == "up"
    assert this_host.extension("CollectorFailed") is None


def test_cli_features_and_pretty() -> None:
    result = run_agent("--once", "--pretty", "--feature", "BigMem,GPU", "--feature", "IB")
    assert result.returncode == 0
    assert b"\n  <Id>" in result.stdout
    assert parse_node(result.stdout).features == ["BigMem", "GPU", "IB"]


def test_cli_without_once_says_what_to_do() -> None:
    result = run_agent()
    assert result.returncode == 2 and b"--once" in result.stderr


def test_cli_on_a_fixture_tree() -> None:
    result = run_agent("--once", "--proc-root", str(HOST1 / "proc"), "--sys-root", str(HOST1 / "sys"),
                       "--etc-root", str(HOST1 / "etc"))
    assert result.returncode == 0, result.stderr.decode()
    node = parse_node(result.stdout)
    assert node.configured.get("Memory").amount("byte") == meminfo_kib(HOST1 / "proc" / "meminfo", "MemTotal") * 1024
    assert node.extensions_of("OperatingSystem")["Name"] == "Rocky Linux"


def test_the_agents_log_keeps_each_record_on_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Whatever a value holds (a job's file name, a server's answer: ESC, C1, bidi, a newline), it
    is written as an escape on its record's line, and a traceback's lines are each marked: the
    log of an agent run as root cannot be given a line it did not write (docs/security.md)."""
    from infosvc_agents.cli import configure_logging

    root = logging.getLogger()
    kept, level = root.handlers[:], root.level
    try:
        configure_logging(logging.INFO)
        log = logging.getLogger("infosvc-agent.executor")
        log.info("job %s ended (%s)", "1", "x\x1b[2J\ninfosvc-agent: WARNING forged\u202e\u009b\r")
        try:
            raise ValueError("bad\ninfosvc-agent: WARNING forged too")
        except ValueError:
            log.exception("round failed")
    finally:
        root.handlers[:], root.level = kept, level
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "infosvc-agent: INFO job 1 ended (x\\x1b[2J\\ninfosvc-agent: WARNING forged\\u202e\\x9b\\r)"
    assert lines[1] == "infosvc-agent: ERROR round failed"
    assert all(line.startswith("  | ") for line in lines[2:]) and len(lines) > 3
    assert lines[-2:] == ["  | ValueError: bad", "  | infosvc-agent: WARNING forged too"]


def test_the_agent_process_loads_no_library_it_needs_only_at_start_or_for_https(serve_app) -> None:  # type: ignore[no-untyped-def]
    """Its resident memory is part of what a site pays on every host: py-cpuinfo runs in a child
    at start, addresses come from rtnetlink, and HTTP is the agent's own (infosvc_agents/http1.py),
    its samples are named from os.urandom, so neither py-cpuinfo (with ctypes and multiprocessing),
    psutil, ssl, hashlib (OpenSSL's libcrypto: 4 MiB), the email package nor http.client stays loaded
    in an agent that samples and pushes to an http server."""
    import subprocess
    import sys

    server = serve_app({}, agents=1)
    script = (
        "import sys\n"
        "from infosvc_agents.agent import HostAgent\n"
        "from infosvc_agents.push import PushLoop, Sample, Sender\n"
        "agent = HostAgent.for_host(host_id='modules.example.org')\n"
        f"loop = PushLoop(lambda: Sample(agent.node()), Sender({server.url!r}, {server.agent_token()!r}), interval=0.01)\n"
        "loop.run(samples=3)\n"
        "assert (loop.delivered, loop.deltas) == (3, 2), (loop.delivered, loop.deltas)\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('cpuinfo', 'psutil', 'ssl', 'email', 'multiprocessing', 'ctypes', 'hashlib', '_hashlib', 'secrets')"
        " or m == 'http.client')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", done.stdout
