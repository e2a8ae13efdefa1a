"""File systems a host's users mount, and hosts of many mounts (a review's findings; docs/operations.md,
The agents).

Any user can mount FUSE file systems with the setuid fusermount, of a type of their choosing
(`fuse.sshfs`), in a directory of their own: the agent reported them as the host's remote file
systems, so 300 of them took every report of the host past the aggregator's `[reports]
max_file_systems` (413 for each: the host went Unreachable and left scheduling), and 8 of
4,000-character paths past its `max_extension_chars`. A FUSE mount is now reported only when root
made it (mountinfo's `user_id=0`), and whatever root mounts the agent reports at most
MAX_FILE_SYSTEMS file systems, described in at most MAX_FILE_SYSTEM_CHARS characters, each name
within bounds: local disks first, then the file systems that stand alone (the site's) before
crowds of them side by side (per-user automounted homes); its /metrics has the same ones.

Every test runs the agent's own collectors on a copy of the host1 fixture's /proc with mounts added
to its mountinfo, as the kernel writes them."""

from __future__ import annotations

import logging
import os
import random
import shutil
from pathlib import Path
from typing import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from infosvc.codec.node_xml import parse_node
from infosvc.config.site import parse_config
from infosvc.hosts.reportcaps import measure
from infosvc.model.node import Node
from infosvc_agents.agent import HostAgent
from infosvc_agents.collectors.filesystems import FileSystemCollector
from infosvc_agents.node_metrics import NodeMetrics
from support.server import Server, ServerFactory
from test_agent import HOST1, fixture_agent

#: the file systems of the host1 fixture: its local disks, and /home (NFS)
H1_MOUNTS = {"/", "/scratch", "/home", "/data/My Files", "/tank", "/mnt/blocky"}
#: the aggregator's default caps on one report ([reports] in infosvc/config/site.py)
DEFAULT_CAPS = parse_config({}).reports


def any_statvfs(calls: list[str] | None = None) -> Callable[[str], os.statvfs_result]:
    """statvfs of any path (4 KiB blocks), each call noted in `calls`."""
    def statvfs(path: str) -> os.statvfs_result:
        if calls is not None:
            calls.append(path)
        return os.statvfs_result((4096, 4096, 1000, 500, 250, 0, 0, 0, 0, 255))
    return statvfs


def host_with(tmp_path: Path, lines: list[str], name: str = "host") -> Path:
    """host1's tree with `lines` added to its mountinfo."""
    root = tmp_path / name
    shutil.copytree(HOST1, root, symlinks=True)
    with open(root / "proc" / "self" / "mountinfo", "a") as mountinfo:
        mountinfo.writelines(line + "\n" for line in lines)
    return root


def fuse(n: int, mount_point: str, fstype: str, source: str, super_options: str) -> str:
    return f"{900 + n} 28 0:{300 + n} / {mount_point} rw,nosuid,nodev,relatime - {fstype} {source} {super_options}"


def users_sshfs(count: int, path_chars: int = 20) -> list[str]:
    """The review's mounts: alice's sshfs mounts in her home directory (fusermount's super options)."""
    return [fuse(n, f"/home/alice/m{n:04d}" + "x" * max(0, path_chars - 17), "fuse.sshfs", "alice@evil:/",
                 "rw,user_id=1000,group_id=1000") for n in range(count)]


def nfs(n: int, mount_point: str, source: str | None = None, fstype: str = "nfs4") -> str:
    """A network file system root mounted (autofs, fstab)."""
    return (f"{2000 + n} 28 0:{2000 + n} / {mount_point} rw,relatime - {fstype} "
            f"{source or 'fileserver.example.org:/export' + mount_point} rw,vers=4.2,sec=sys")


def file_systems(node: Node) -> set[str]:
    return {r.type for r in node.configured.resources("FileSystem") if r.type is not None}


def metrics_mounts(agent: HostAgent) -> set[str]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NodeMetrics(lambda: agent.last_runs, sampled_at=lambda: agent.sampled_at))
    text = generate_latest(registry).decode()
    return {sample.labels["mountpoint"] for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == "node_filesystem_size_bytes"}


def test_fuse_mounts_of_users_other_than_root_are_neither_reported_nor_statted(tmp_path: Path) -> None:
    root = host_with(tmp_path, [
        *users_sshfs(2),
        # allow_other (user_allow_other in /etc/fuse.conf) shows it to others; still alice's to make at will
        fuse(10, "/home/alice/bucket", "fuse.s3fs", "s3fs", "rw,user_id=1000,group_id=1000,allow_other"),
        fuse(11, "/scratch/bob/drive", "fuse.rclone", "gdrive:", "rw,user_id=1001,group_id=1001"),
        # a FUSE mount that does not say who made it: the kernel always writes user_id, so not one to trust
        fuse(12, "/mnt/unsaid", "fuse.sshfs", "x@y:/", "rw"),
        # root's: the site's software (CernVM-FS) and an sshfs of the admins'
        fuse(13, "/cvmfs/atlas.cern.ch", "fuse.cvmfs2", "cvmfs2",
             "ro,user_id=0,group_id=0,default_permissions,allow_other"),
        fuse(14, "/mnt/site-sshfs", "fuse.sshfs", "admin@nas:/export", "rw,user_id=0,group_id=0"),
    ])
    calls: list[str] = []
    agent = fixture_agent(root, any_statvfs(calls))
    node = parse_node(agent.document())
    assert file_systems(node) == H1_MOUNTS | {"/cvmfs/atlas.cern.ch", "/mnt/site-sshfs"}
    assert node.extensions_of("FileSystem:/cvmfs/atlas.cern.ch")["Kind"] == "remote"
    # never statted: a user's sshfs to a host that does not answer hung the sample's remote mounts behind it
    assert not [path for path in calls if path.startswith(("/home/alice", "/scratch/bob", "/mnt/unsaid"))], calls
    assert metrics_mounts(agent) == file_systems(node)


# what a host mounts: (its mountinfo lines, the file systems that must be in its report)
SCENARIOS: dict[str, tuple[list[str], set[str]]] = {
    # the review's: 300 of a user's sshfs mounts (each report refused: 306 file systems)
    "300 users' FUSE mounts": (users_sshfs(300), H1_MOUNTS),
    # and 8 of 4,000-character paths (each report refused: 131,344 characters of Extensions)
    "8 users' FUSE mounts of 4,000-character paths": (users_sshfs(8, 4000), H1_MOUNTS),
    # root's own: automounted homes of 300 users logged in, and the site's parallel file systems
    "300 automounted homes": (
        [nfs(n, f"/home/u{n:04d}") for n in range(300)]
        + [nfs(400, "/lustre/work", "10.0.0.9@o2ib:/work", "lustre"), nfs(401, "/gpfs/projects", "projects", "gpfs")],
        H1_MOUNTS | {"/lustre/work", "/gpfs/projects"}),
    "root's mounts of 4,000-character paths": (
        [nfs(n, f"/mnt/deep{n}/" + "/".join(["dir"] * 1000)) for n in range(8)] + [nfs(50, "/work")],
        H1_MOUNTS | {"/work"}),
    "root's mounts of 900-character paths and devices": (
        [nfs(n, f"/mnt/p{n:03d}/" + "p" * 890, "srv:/" + "e" * 900) for n in range(200)], H1_MOUNTS),
    # names within the bounds on names, of what XML writes as references (&quot; is 6 bytes): the bytes bound them
    "root's mounts of 1,000-character paths XML escapes": (
        [nfs(n, f"/mnt/q{n:03d}/" + '"&<' * 330, "srv:/" + '"' * 250) for n in range(200)], H1_MOUNTS),
    "block devices of 500-character types": (
        [f"{3000 + n} 28 259:{n} / /mnt/t{n:03d} rw - {'t' * 500} /dev/nvme0n{n} rw" for n in range(200)], H1_MOUNTS),
}


@pytest.fixture(scope="module")
def aggregator(module_serve_app: ServerFactory) -> Server:
    """The real aggregator with its default [reports] caps, a token for each scenario."""
    return module_serve_app(agents=len(SCENARIOS))


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_report_of_a_host_of_many_mounts_is_taken_by_an_aggregator_of_default_caps(
        scenario: str, aggregator: Server, tmp_path: Path) -> None:
    lines, kept = SCENARIOS[scenario]
    agent = fixture_agent(host_with(tmp_path, lines), any_statvfs(), host_id=f"h{list(SCENARIOS).index(scenario)}")
    document = agent.document()
    reply = aggregator.post_node(document, aggregator.agent_token())
    assert reply.status == 200, (reply.status, reply.body[:300])
    node = parse_node(document)
    reported = file_systems(node)
    assert kept <= reported, sorted(kept - reported)  # the local disks and the site's file systems first
    assert not any(fs.startswith("/home/alice") for fs in reported)
    caps = measure(node)
    assert all(caps[key] <= getattr(DEFAULT_CAPS, key) for key in caps), caps
    assert metrics_mounts(agent) == reported  # its /metrics: the same file systems


def collect(root: Path) -> Iterator[FileSystemCollector]:
    collector = FileSystemCollector(str(root / "proc"), statvfs=any_statvfs())
    try:
        yield collector
    finally:
        collector.close()


def test_which_are_left_out_is_stable_the_most_useful_kept_and_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from infosvc_agents.collectors.filesystems import MAX_FILE_SYSTEMS

    homes = [nfs(n, f"/home/u{n:04d}") for n in range(300)]
    site = [nfs(400, "/lustre/work", "10.0.0.9@o2ib:/work", "lustre"),
            fuse(401, "/cvmfs/atlas.cern.ch", "fuse.cvmfs2", "cvmfs2", "ro,user_id=0,group_id=0,allow_other")]
    shuffled = homes + site
    random.Random(7).shuffle(shuffled)
    chosen = []
    for n, lines in enumerate((homes + site, shuffled)):
        root = host_with(tmp_path, lines, f"host{n}")
        with caplog.at_level(logging.WARNING, logger="infosvc_agents.collectors.filesystems"):
            for collector in collect(root):
                mounts = [fs.mount_point for fs in collector.collect()]
                assert mounts == sorted(mounts)  # in the report's order, by mount point
                assert len(mounts) == MAX_FILE_SYSTEMS
                assert H1_MOUNTS | {"/lustre/work", "/cvmfs/atlas.cern.ch"} <= set(mounts)
                # the homes kept are the first by name, whatever the order of the mount table
                assert [m for m in mounts if m.startswith("/home/")] == [
                    f"/home/u{n:04d}" for n in range(MAX_FILE_SYSTEMS - len(H1_MOUNTS) - 2)]
                chosen.append(mounts)
                # the mount table changes at each sample (a user logs in, then another): said once
                for more in range(5):
                    with open(root / "proc" / "self" / "mountinfo", "a") as file:
                        file.write(nfs(500 + more, f"/home/v{more}") + "\n")
                    assert len(collector.collect()) == MAX_FILE_SYSTEMS
        said = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
        assert len(said) == 1, said
        assert f"{len(H1_MOUNTS) + 302 - MAX_FILE_SYSTEMS} of" in said[0], said[0]
        caplog.clear()
    assert chosen[0] == chosen[1]


@pytest.mark.parametrize("mount_point, device, fstype", [
    ("/scratch", "/dev/sda3", "xfs"),
    ('/mnt/"q&a"<\t>\r', 'srv:/"e"&\n', "nfs4"),  # written as references: &quot; &amp; &lt; &#9; ...
    ("/mnt/M\udcfcller\x1b[31m", "dev\x00ice", "fuse.x\u2028"),  # made XML-safe first: \xfc, \x1b, \x00
    ("/mnt/caf\u00e9/\U0001f600", "\u4e00", "ext4"),  # two and four bytes of UTF-8 a character
])
def test_the_bytes_a_file_system_is_counted_are_those_it_takes_in_the_report(
        mount_point: str, device: str, fstype: str) -> None:
    from infosvc.codec.node_xml import node_to_xml
    from infosvc_agents.collectors import CollectorRun
    from infosvc_agents.collectors.filesystems import FileSystem
    from infosvc_agents.host_node import build_node, file_system_bytes

    def document(*filesystems: FileSystem) -> bytes:
        return node_to_xml(build_node({"filesystems": CollectorRun("filesystems", facts=filesystems)}, host_id="h"))

    fs = FileSystem(mount_point, device, fstype, 1 << 60, 1 << 59, 1 << 58, read_only=False, remote=True)
    written = len(document(fs)) - len(document())
    cost = file_system_bytes(mount_point, device, fstype)
    assert written <= cost <= written + 2 * 24  # its two sizes counted at their longest
    assert measure(parse_node(document(fs)))["max_file_system_chars"] <= cost
