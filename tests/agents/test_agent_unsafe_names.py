"""Host names the kernel keeps as bytes, not text: a mount point or a device with a byte that is not
UTF-8 (read back as a surrogate: \\udcfc) or a control character (ESC: mountinfo does not escape
it), an interface, an operating system named so. XML 1.0 cannot carry them, and the document that
named one could not be written: `--once` failed, the pushing agent ended at its first sample. Each
is written as a backslash escape instead (\\xfc, \\x1b), so that two such names stay two; and a
sample that cannot be written whatever the reason is dropped with a log line, the agent going on."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from infosvc.codec.node_xml import parse_node
from infosvc.codec.xmltext import NOT_XML
from infosvc.model.node import Node
from infosvc_agents.agent import HostAgent
from infosvc_agents.collectors import CollectorRegistry as Collectors
from infosvc_agents.collectors.filesystems import FileSystemCollector
from infosvc_agents.collectors.network import NetworkCollector
from infosvc_agents.collectors.system import SystemCollector
from infosvc_agents.host_node import xml_safe
from infosvc_agents.node_metrics import NodeMetrics
from infosvc_agents.push import PushLoop, Sample, Sender
from support.documents import node_document
from support.scripted import ScriptedFactory
from test_agent import HOST1

BYTE = "\udcfc"  # the byte 0xfc of a Latin-1 name, as os and surrogateescape read it back
MOUNTS = {  # mountinfo's field (octal escapes as the kernel writes them) -> the name read back
    b"/mnt/latin1-M\\374ller": f"/mnt/latin1-M{BYTE}ller",
    b"/mnt/latin1-M\\375ller": "/mnt/latin1-M\udcfdller",
    b"/mnt/esc-\x1b[31mred": "/mnt/esc-\x1b[31mred",
}


def _host(tmp_path: Path, under: bytes = b"") -> Path:
    """host1's tree with three mounts (under `under`) and an interface of such names, and an ESC in
    os-release."""
    root = tmp_path / "host"
    shutil.copytree(HOST1, root)
    with open(root / "proc" / "self" / "mountinfo", "ab") as mountinfo:
        for n, field in enumerate(MOUNTS):
            mountinfo.write(b"%d 28 0:%d / %s%s rw shared:1 - nfs srv:/export/\x1b%d rw\n"
                            % (900 + n, 900 + n, under, field, n))
    with open(root / "proc" / "net" / "dev", "ab") as dev:
        dev.write(b"  e\xfc\x1b0: 1 2 0 0 0 0 0 0 3 4 0 0 0 0 0 0\n")
    release = root / "etc" / "os-release"
    release.write_bytes(release.read_bytes().replace(b'NAME="Rocky Linux"', b'NAME="Rocky\x1b Linux \xfc"', 1))
    return root


def _agent(root: Path) -> HostAgent:
    registry = Collectors()
    registry.extend([
        FileSystemCollector(proc_root=str(root / "proc"),
                            statvfs=lambda _path: os.statvfs_result((4096, 4096, 100, 50, 25, 0, 0, 0, 0, 255))),
        NetworkCollector(proc_root=str(root / "proc"), sys_root=str(root / "sys"), addresses=lambda: {}),
        SystemCollector(etc_root=str(root / "etc"), proc_root=str(root / "proc"),
                        uname=lambda: os.uname_result(("Linux", f"cn\x1b{BYTE}.example.org", "5.14", "#1", "x86_64"))),
    ])
    return HostAgent(registry)


def test_xml_safe_escapes_what_xml_cannot_carry_and_nothing_else() -> None:
    assert xml_safe(f"/mnt/M{BYTE}ller") == "/mnt/M\\xfcller"
    assert xml_safe("/mnt/esc-\x1b[31m") == "/mnt/esc-\\x1b[31m"
    assert xml_safe("a\x00b\x7fc\ufffe\ud800") == "a\\x00b\x7fc\\ufffe\\ud800"
    plain = "/data/My Files/Müller\t\n日本"
    assert xml_safe(plain) is plain  # what XML carries stays as it is, and costs no copy
    everything = "".join(map(chr, range(0x110000)))
    assert NOT_XML(xml_safe(everything)) is None
    # a byte and the character of the same number are two names, and so are two bytes
    assert len({xml_safe(f"M{BYTE}"), xml_safe("M\u00fc"), xml_safe("M\udcfd")}) == 3


def test_a_sample_of_such_names_is_written_with_them_escaped(tmp_path: Path) -> None:
    node = parse_node(_agent(_host(tmp_path)).document())
    contexts = {e.type for e in node.extensions if e.type and e.type.startswith("FileSystem:")}
    assert {"FileSystem:/mnt/latin1-M\\xfcller", "FileSystem:/mnt/latin1-M\\xfdller",
            "FileSystem:/mnt/esc-\\x1b[31mred"} <= contexts
    devices = {e.value for e in node.extensions if e.name == "Device" and e.type
               and e.type.startswith(("FileSystem:/mnt/latin1", "FileSystem:/mnt/esc"))}
    assert devices == {"srv:/export/\\x1b0", "srv:/export/\\x1b1", "srv:/export/\\x1b2"}
    assert node.configured.get("Resource", name="FileSystem", type="/mnt/latin1-M\\xfcller") is not None
    assert "NetworkAdapter:e\\xfc\\x1b0" in {e.type for e in node.extensions}
    assert node.extension("Name", "OperatingSystem") == "Rocky\\x1b Linux \\xfc"
    assert node.id == "cn\\x1b\\xfc.example.org" and node.name == "cn\\x1b\\xfc"


def test_once_prints_the_document_of_such_a_host(tmp_path: Path) -> None:
    under = os.fsencode(tmp_path)
    root = _host(tmp_path, under)
    for name in MOUNTS.values():  # real directories, for the agent's own statvfs
        os.makedirs(os.fsencode(tmp_path) + os.fsencode(name))
    done = subprocess.run([sys.executable, "-m", "infosvc_agents", "--once", "--proc-root", str(root / "proc"),
                           "--sys-root", str(root / "sys"), "--etc-root", str(root / "etc")],
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    for escaped in (b"/mnt/latin1-M\\xfcller", b"/mnt/latin1-M\\xfdller", b"/mnt/esc-\\x1b[31mred"):
        assert b'"FileSystem:%s%s"' % (under, escaped) in done.stdout
    parse_node(done.stdout)


def test_the_metrics_of_such_a_host_can_be_scraped(tmp_path: Path) -> None:
    agent = _agent(_host(tmp_path))
    agent.node()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NodeMetrics(lambda: agent.last_runs, sampled_at=lambda: agent.sampled_at))
    text = generate_latest(registry).decode()
    assert 'mountpoint="/mnt/latin1-M\\\\xfcller"' in text  # the exposition's own escape of the backslash


def test_the_push_loop_goes_on_past_a_sample_it_cannot_write(scripted: ScriptedFactory,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    server = scripted([])
    good = node_document("good.example.org")
    samples = iter([Sample(Node(id="bad\x1b.example.org")), good])  # built bypassing host_node's escapes
    loop = PushLoop(lambda: next(samples), Sender(server.url, "t"), interval=0.05)
    thread = threading.Thread(target=loop.run, kwargs={"samples": 2}, daemon=True)
    with caplog.at_level(logging.ERROR, logger="infosvc_agents.push"):
        thread.start()
        thread.join(timeout=15)
    assert not thread.is_alive()
    assert loop.delivered == 1 and loop.dropped == 1 and not loop.kept
    assert [body for _, body in server.received] == [good]
    assert any("cannot be written" in record.getMessage() for record in caplog.records)
