"""Host collectors on fixture trees with known values, on the live machine, and on bad input."""

from __future__ import annotations

import collections
import dataclasses
import logging
import re
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from infosvc_agents.collectors import CollectorRegistry, CollectorRun, default_collectors
from infosvc_agents.collectors.filesystems import FileSystem, FileSystemCollector, unescape
from infosvc_agents.collectors.load import LoadCollector, LoadSample
from infosvc_agents.collectors.memory import MemoryCollector, MemorySample
from infosvc_agents.collectors.network import (
    NetworkAdapter, NetworkCollector, netlink_addresses, psutil_addresses,
)
from infosvc_agents.collectors.processors import (
    STAT_MODES, ProcessorCollector, ProcessorInfo, ProcessorSample, parse_cpu_list, parse_stat_cpus,
)
from infosvc_agents.collectors.system import SystemCollector, SystemInfo, parse_os_release
from infosvc_agents.host_node import build_node

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HOST1 = FIXTURES / "host1"  # 2-socket x86_64 server
HOST2 = FIXTURES / "host2"  # aarch64, old meminfo, container mounts, os-release only in /usr/lib
HZ = os.sysconf("SC_CLK_TCK")
KIB = 1024

H1_ADDRESSES = {"lo": ["127.0.0.1", "::1"], "eth0": ["10.0.0.21", "fe80::3eec:efff:fe12:3456"],
                "ib0": ["192.168.100.21"]}


def no_py_cpuinfo() -> dict[str, Any]:
    return {}


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def vfs(blocks: int, bfree: int, bavail: int, frsize: int = 4096) -> os.statvfs_result:
    return os.statvfs_result((frsize, frsize, blocks, bfree, bavail, 1000, 500, 500, 0, 255))


def fake_statvfs(table: dict[str, os.statvfs_result] | None = None) -> Callable[[str], os.statvfs_result]:
    def statvfs(path: str) -> os.statvfs_result:
        return (table or {}).get(path, vfs(1000, 600, 500))
    return statvfs


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# --- processors -----------------------------------------------------------------------------------


def test_processor_info_from_x86_proc_and_sys_fixture() -> None:
    info = ProcessorCollector(str(HOST1 / "proc"), str(HOST1 / "sys"), cpuinfo=no_py_cpuinfo).info
    assert (info.logical, info.physical, info.sockets) == (4, 2, 2)  # HT pairs share core id 0 per socket
    assert info.vendor == "GenuineIntel"
    assert info.model == "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz"
    assert info.version == "family 6 model 85 stepping 4"
    assert info.clock_mhz == 2100.0  # the model name's rating, not "cpu MHz" (1000.123) that scaling moves
    assert info.isa == "x86_64"
    assert info.flags == tuple(sorted(info.flags)) and {"avx512f", "lm", "sse4_2"} <= set(info.flags)
    assert info.caches == {"L1d": 32 * KIB, "L1i": 32 * KIB, "L2": 1024 * KIB, "L3": 22528 * KIB}


def test_py_cpuinfo_facts_win_and_sysfs_caches_still_do() -> None:
    py = {"vendor_id_raw": "GenuineIntel", "brand_raw": "Intel(R) Xeon(R) Gold 6130 (py-cpuinfo)",
          "hz_advertised": [2100000000, 0], "arch_string_raw": "x86_64", "family": 6, "model": 85,
          "stepping": 7, "l2_cache_size": 16 * 1024 * KIB}
    info = ProcessorCollector(str(HOST1 / "proc"), str(HOST1 / "sys"), cpuinfo=lambda: py).info
    assert info.model == "Intel(R) Xeon(R) Gold 6130 (py-cpuinfo)"
    assert info.clock_mhz == 2100.0
    assert info.version == "family 6 model 85 stepping 7"
    assert info.caches["L2"] == 1024 * KIB  # per-instance sysfs size, not py-cpuinfo's total


def test_the_clock_is_the_nominal_one_whatever_the_current_one(tmp_path: Path) -> None:
    """Frequency scaling moves /proc/cpuinfo's "cpu MHz": the published clock, and with it the
    host's subcluster, must not move."""
    from infosvc.model.hostid import host_id
    from infosvc.config.site import parse_config
    from infosvc.hosts.rollup import host_from_node, subcluster_key

    from infosvc_agents.collectors import CollectorRegistry, CollectorRun, default_collectors
    from infosvc_agents.host_node import build_node

    keys, clocks = set(), set()
    for mhz in ("1000.123", "3699.998"):
        root = copy_tree(HOST1, tmp_path / mhz)
        cpuinfo = root / "proc" / "cpuinfo"
        cpuinfo.write_text(re.sub(r"cpu MHz\t\t: [\d.]+", f"cpu MHz\t\t: {mhz}", cpuinfo.read_text()))
        info = ProcessorCollector(str(root / "proc"), str(root / "sys"), cpuinfo=no_py_cpuinfo).info
        clocks.add(info.clock_mhz)
        registry = CollectorRegistry()
        registry.extend(default_collectors(str(root / "proc"), str(root / "sys"), str(root / "etc")))
        node = build_node(registry.run(), host_id=host_id("h1"))
        keys.add(subcluster_key(host_from_node(node, "Ready", parse_config({}), "2026-01-01T00:00:00Z")))
    assert clocks == {2100.0}
    assert len(keys) == 1


def test_no_rating_no_cpufreq_no_clock(tmp_path: Path) -> None:
    root = copy_tree(HOST1, tmp_path / "host")
    cpuinfo = root / "proc" / "cpuinfo"
    cpuinfo.write_text(cpuinfo.read_text().replace(" @ 2.10GHz", ""))
    info = ProcessorCollector(str(root / "proc"), str(root / "sys"), cpuinfo=no_py_cpuinfo).info
    assert info.clock_mhz is None  # rather none than the current one
    rated = ProcessorCollector(str(root / "proc"), str(root / "sys"),
                               cpuinfo=lambda: {"brand_raw": "Some CPU @ 800 MHz"}).info
    assert rated.clock_mhz == 800.0


def test_py_cpuinfo_failure_warns_and_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("cpuid blew up")

    with caplog.at_level(logging.WARNING):
        info = ProcessorCollector(str(HOST1 / "proc"), str(HOST1 / "sys"), cpuinfo=broken).info
    assert any("py-cpuinfo failed" in m and "cpuid blew up" in m for m in warnings_of(caplog))
    assert info.model == "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz" and info.clock_mhz == 2100.0


def test_py_cpuinfo_caches_are_the_fallback(tmp_path: Path) -> None:
    (tmp_path / "sys").mkdir()
    py = {"l1_data_cache_size": 48 * KIB, "l1_instruction_cache_size": "32 KiB", "l2_cache_size": "2 MiB",
          "l3_cache_size": 0}
    info = ProcessorCollector(str(HOST1 / "proc"), str(tmp_path / "sys"), cpuinfo=lambda: py).info
    assert info.caches == {"L1d": 48 * KIB, "L1i": 32 * KIB, "L2": 2048 * KIB}
    assert info.logical == 4  # no sysfs "online": counted from /proc/cpuinfo


def test_fixture_roots_do_not_ask_py_cpuinfo_about_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    import cpuinfo

    def forbidden() -> dict[str, Any]:
        raise AssertionError("py-cpuinfo called for a fixture tree")

    monkeypatch.setattr(cpuinfo, "get_cpu_info", forbidden)
    info = ProcessorCollector(str(HOST1 / "proc"), str(HOST1 / "sys")).info
    assert info.model == "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz"


def test_aarch64_cpuinfo_without_model_name() -> None:
    info = ProcessorCollector(str(HOST2 / "proc"), str(HOST2 / "sys"), cpuinfo=no_py_cpuinfo).info
    assert info == ProcessorInfo(
        logical=4, physical=4, sockets=1,  # topology from sysfs: aarch64 cpuinfo has none
        vendor="ARM", model=None,
        version="implementer 0x41 architecture 8 variant 0x3 part 0xd0c revision 1",
        clock_mhz=2600.0, isa="aarch64",
        flags=tuple(sorted("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm "
                           "lrcpc dcpop asimddp ssbs".split())),
        caches={"L1d": 64 * KIB, "L1i": 64 * KIB, "L2": 1024 * KIB},
    )


def test_processor_usage_between_two_samples(tmp_path: Path) -> None:
    root = copy_tree(HOST1, tmp_path / "host")
    collector = ProcessorCollector(str(root / "proc"), str(root / "sys"), cpuinfo=no_py_cpuinfo)
    first = collector.collect()
    assert isinstance(first, ProcessorSample) and first.info.logical == 4
    # Since boot: busy 1500 of 9600 jiffies over 4 CPUs.
    assert first.usage.busy == pytest.approx(1500 / 9600 * 4)
    assert first.usage.seconds == pytest.approx(9600 / 4 / HZ)
    (root / "proc" / "stat").write_text((root / "proc" / "stat.next").read_text())
    second = collector.collect()
    # Deltas: user 600, system 200, idle 1000, iowait 100, softirq 100 (guest 50 is inside user).
    assert second.usage.busy == pytest.approx(900 / 2000 * 4)
    assert second.usage.seconds == pytest.approx(2000 / 4 / HZ)
    # Unchanged counters (two samples within a jiffy): the last answer again, not a division by zero.
    assert collector.collect().usage == second.usage


def test_processor_times_per_cpu(tmp_path: Path) -> None:
    root = copy_tree(HOST1, tmp_path / "host")
    collector = ProcessorCollector(str(root / "proc"), str(root / "sys"), cpuinfo=no_py_cpuinfo)

    def seconds(cpu: str) -> dict[str, float]:
        times = {t.cpu: t.seconds for t in collector.collect().times}
        return dict(zip(STAT_MODES, times[cpu]))

    first = collector.collect().times
    assert [t.cpu for t in first] == ["0", "1", "2", "3"]
    assert first[0].seconds == tuple(v / HZ for v in (250, 0, 125, 2000, 25, 0, 0, 0, 0, 0))
    (root / "proc" / "stat").write_text((root / "proc" / "stat.next").read_text())
    cpu0 = seconds("0")
    assert (cpu0["user"], cpu0["guest"], cpu0["idle"]) == (400 / HZ, 50 / HZ, 2250 / HZ)  # guest also in user
    # idle and iowait stepping back a jiffy (NO_HZ accounting): a counter holds its value
    (root / "proc" / "stat").write_text("cpu  1 0 1 1 1 0 0 0 0 0\ncpu0 410 0 175 2249 49 0 25 0 50 0\n")
    cpu0 = seconds("0")
    assert (cpu0["user"], cpu0["idle"], cpu0["iowait"]) == (410 / HZ, 2250 / HZ, 50 / HZ)
    # idle far behind (the CPU went offline and came back): the counters start over from the kernel's
    (root / "proc" / "stat").write_text("cpu  1 0 1 1 1 0 0 0 0 0\ncpu0 5 0 3 20 1 0 0 0 0 0\ncpu2 1 1 1 1\n")
    assert seconds("0")["idle"] == 20 / HZ and seconds("0")["user"] == 5 / HZ
    # only the CPUs online are listed; an old kernel's missing columns are 0
    assert [t.cpu for t in collector.collect().times] == ["0", "2"]
    assert seconds("2")["steal"] == 0 and seconds("2")["idle"] == 1 / HZ


def test_parse_stat_cpus() -> None:
    text = "cpu  9 9 9 9\ncpu0 1 2 3 4 5 6 7 8 9 10 11\ncpu1 1 x 3 4\ncpu7 4 3 2 1\nintr 5 cpu9 1\ncpu8 1 1 1 1\n"
    # extra columns of a newer kernel ignored, a broken line skipped, nothing read past the cpu lines
    assert parse_stat_cpus(text) == [("0", (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)), ("7", (4, 3, 2, 1, 0, 0, 0, 0, 0, 0))]
    assert parse_stat_cpus("cpu  1 2 3 4") == []


def test_malformed_proc_stat_raises(tmp_path: Path) -> None:
    root = copy_tree(HOST1, tmp_path / "host")
    collector = ProcessorCollector(str(root / "proc"), str(root / "sys"), cpuinfo=no_py_cpuinfo)
    (root / "proc" / "stat").write_text("intr 1 2 3\ncpu0 1 2 3 4\n")
    with pytest.raises(ValueError, match="aggregate cpu line"):
        collector.collect()
    (root / "proc" / "stat").write_text("cpu  10 x 30 40 50\n")
    with pytest.raises(ValueError, match="non-integer"):
        collector.collect()


def test_parse_cpu_list() -> None:
    assert parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpu_list("0") == [0]


# --- memory and load ------------------------------------------------------------------------------


def test_memory_fixture() -> None:
    assert MemoryCollector(str(HOST1 / "proc")).collect() == MemorySample(
        total=196608000 * KIB, available=150000000 * KIB, swap_total=8388604 * KIB, swap_free=8000000 * KIB)


def test_memory_without_memavailable_uses_free_buffers_cached() -> None:
    sample = MemoryCollector(str(HOST2 / "proc")).collect()
    assert sample.total == 8000000 * KIB
    assert sample.available == (1000000 + 200000 + 3000000) * KIB
    assert (sample.swap_total, sample.swap_free) == (0, 0)


def test_memory_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        MemoryCollector(str(tmp_path)).collect()


def test_memory_malformed_used_line_raises_and_others_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "meminfo").write_text("MemTotal:       1024 kB\nNonsense line without colon\nMemFree: 12 kB\n"
                                      "Weird:  lots of words\nSwapTotal: 0 kB\nSwapFree: 0 kB\n")
    assert MemoryCollector(str(tmp_path)).collect() == MemorySample(1024 * KIB, 12 * KIB, 0, 0)
    (tmp_path / "meminfo").write_text("MemTotal:       lots kB\nMemFree: 12 kB\n")
    with pytest.raises(ValueError, match="MemTotal"):
        MemoryCollector(str(tmp_path)).collect()
    (tmp_path / "meminfo").write_text("MemFree: 12 kB\n")
    with pytest.raises(ValueError, match="no MemTotal"):
        MemoryCollector(str(tmp_path)).collect()


def test_load_fixture_and_malformed(tmp_path: Path) -> None:
    assert LoadCollector(str(HOST1 / "proc")).collect() == LoadSample(3.52, 2.10, 1.05, 2, 345)
    for bad in ("", "0.1 0.2 0.3 7 99\n", "0.1 0.2 zero 1/2 3\n"):
        (tmp_path / "loadavg").write_text(bad)
        with pytest.raises(ValueError, match="malformed /proc/loadavg"):
            LoadCollector(str(tmp_path)).collect()


# --- file systems ---------------------------------------------------------------------------------

H1_STATS = {
    "/": vfs(25_000_000, 10_000_000, 9_000_000),
    "/scratch": vfs(900_000_000, 800_000_000, 800_000_000),
    "/home": vfs(2_000_000_000, 1_500_000_000, 1_400_000_000, frsize=1 << 20),
    "/data/My Files": vfs(100, 0, 0),
    "/tank": vfs(50_000, 40_000, 40_000, frsize=131072),
    "/mnt/blocky": vfs(10, 5, 5),
}
H1_MOUNTS = ["/", "/data/My Files", "/home", "/mnt/blocky", "/scratch", "/tank"]


def fs_collector(root: Path, statvfs: Callable[[str], Any], timeout: float = 1.0) -> Iterator[FileSystemCollector]:
    collector = FileSystemCollector(str(root / "proc"), statvfs=statvfs, timeout=timeout)
    try:
        yield collector
    finally:
        collector.close()


@pytest.fixture
def host1_fs() -> Iterator[FileSystemCollector]:
    yield from fs_collector(HOST1, fake_statvfs(H1_STATS))


def test_filesystems_fixture(host1_fs: FileSystemCollector) -> None:
    result = host1_fs.collect()
    assert [f.mount_point for f in result] == H1_MOUNTS
    by_mount = {f.mount_point: f for f in result}
    assert by_mount["/"] == FileSystem("/", "/dev/sda2", "ext4", 25_000_000 * 4096, 10_000_000 * 4096,
                                       9_000_000 * 4096, read_only=False, remote=False)
    assert by_mount["/home"] == FileSystem("/home", "fileserver.example.org:/export/home", "nfs4",
                                           2_000_000_000 << 20, 1_500_000_000 << 20, 1_400_000_000 << 20,
                                           read_only=False, remote=True)
    # \040 unescaped; ro from the per-mount options.
    assert by_mount["/data/My Files"].read_only and by_mount["/data/My Files"].device == "/dev/sdb1"
    # One entry for 8:3 (/scratch, /prj bind of /projects, /mnt/scratch-again): the fs root first, then
    # the shortest path.
    assert by_mount["/scratch"].fstype == "xfs"
    assert by_mount["/tank"].fstype == "zfs" and by_mount["/tank"].size == 50_000 * 131072
    # Not in the lists above: /proc/filesystems decides (blockyfs has a device, mysteryfs is nodev).
    assert "/mnt/pseudo" not in by_mount
    # Excluded: proc, sysfs, devtmpfs, devpts, tmpfs, cgroup2, docker overlay, overlay off "/",
    # /tmp (a bind mount of the root file system's /var/tmp), and the real file systems under
    # /var/lib/docker and /var/lib/kubelet.
    assert result == host1_fs.collect()  # second sample from the cached mount table


def test_filesystems_in_a_container_and_a_malformed_line(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        for collector in fs_collector(HOST2, fake_statvfs()):
            result = collector.collect()
    assert [(f.mount_point, f.fstype, f.remote) for f in result] == [
        ("/", "overlay", False),           # a container's root is the overlay
        ("/data", "ext4", False),          # a volume; /etc/hosts & co. (binds of the host disk) are not
        ("/mnt/newfs", "weirdfs", False),  # unknown type with a block device
        ("/mnt/sshfs", "fuse.sshfs", True),
    ]                                      # fuse.mystery: unknown, no device
    assert any("malformed" in m and "this line is not mountinfo" in m for m in warnings_of(caplog))


def test_mount_table_change_is_seen(tmp_path: Path) -> None:
    root = copy_tree(HOST1, tmp_path / "host")
    for collector in fs_collector(root, fake_statvfs(H1_STATS)):
        assert "/home" in {f.mount_point for f in collector.collect()}
        mountinfo = root / "proc" / "self" / "mountinfo"
        mountinfo.write_text("".join(line for line in mountinfo.read_text().splitlines(keepends=True)
                                     if " /home " not in line))
        assert [f.mount_point for f in collector.collect()] == [m for m in H1_MOUNTS if m != "/home"]


def test_a_mount_over_another_hides_it(tmp_path: Path) -> None:
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "mountinfo").write_text(
        "28 1 8:2 / / rw,relatime - ext4 /dev/sda2 rw\n"
        "29 28 8:17 / /data rw,relatime - ext4 /dev/sdb1 rw\n"
        "30 29 8:33 / /data ro,relatime - xfs /dev/sdc1 ro\n")
    for collector in fs_collector(tmp_path, fake_statvfs()):
        assert [(f.mount_point, f.device, f.read_only) for f in collector.collect()] == [
            ("/", "/dev/sda2", False), ("/data", "/dev/sdc1", True)]


def test_unescape() -> None:
    assert unescape(r"/data/My\040Files") == "/data/My Files"
    assert unescape(r"a\011b\012c\134d") == "a\tb\nc\\d"
    assert unescape(r"/caf\303\251") == "/café"  # escaped byte by byte
    assert unescape("/plain") == "/plain"


def test_vanished_mount_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    ok = fake_statvfs(H1_STATS)

    def statvfs(path: str) -> os.statvfs_result:
        if path == "/scratch":
            raise FileNotFoundError(2, "No such file or directory", path)
        return ok(path)

    with caplog.at_level(logging.WARNING):
        for collector in fs_collector(HOST1, statvfs):
            result = collector.collect()
    assert [f.mount_point for f in result] == [m for m in H1_MOUNTS if m != "/scratch"]
    assert any("/scratch" in m and "FileNotFoundError" in m for m in warnings_of(caplog))


def wait_until(condition: Callable[[], bool], seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_hung_statvfs_costs_one_timeout_and_the_mount_comes_back(caplog: pytest.LogCaptureFixture) -> None:
    timeout = 0.3
    release = threading.Event()
    calls: collections.Counter[str] = collections.Counter()
    ok = fake_statvfs(H1_STATS)

    def statvfs(path: str) -> os.statvfs_result:
        calls[path] += 1
        if path == "/home":
            release.wait(10)  # an NFS server that went away
        return ok(path)

    try:
        for collector in fs_collector(HOST1, statvfs, timeout=timeout):
            with caplog.at_level(logging.WARNING):
                started = time.monotonic()
                result = collector.collect()
                elapsed = time.monotonic() - started
            assert timeout <= elapsed < timeout + 0.5
            # Local file systems are statted before network ones, so they all made it.
            assert [f.mount_point for f in result] == [m for m in H1_MOUNTS if m != "/home"]
            assert any("statvfs(/home) did not return" in m for m in warnings_of(caplog))
            assert collector.hung == {"/home"}

            # Still hung: skipped at once, not called again.
            started = time.monotonic()
            result = collector.collect()
            assert time.monotonic() - started < timeout
            assert "/home" not in {f.mount_point for f in result} and calls["/home"] == 1

            release.set()  # the server is back; the stuck call returns and the mark is cleared
            assert wait_until(lambda: not collector.hung)
            result = collector.collect()
            assert [f.mount_point for f in result] == H1_MOUNTS and calls["/home"] == 2
    finally:
        release.set()


def test_mounts_queued_behind_a_hung_one_are_skipped_for_that_sample_only(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "mountinfo").write_text(
        "28 1 8:2 / / rw,relatime - ext4 /dev/sda2 rw\n"
        "31 28 0:45 / /home rw,relatime - nfs4 fs1:/home rw\n"
        "32 28 0:46 / /work rw,relatime - lustre 10.0.0.9@o2ib:/work rw\n")
    release = threading.Event()

    def statvfs(path: str) -> os.statvfs_result:
        if path == "/home":
            release.wait(10)
        return vfs(100, 50, 40)

    try:
        for collector in fs_collector(tmp_path, statvfs, timeout=0.2):
            with caplog.at_level(logging.WARNING):
                assert [f.mount_point for f in collector.collect()] == ["/"]
            assert any("/work" in m and "queued behind" in m for m in warnings_of(caplog))
            assert collector.hung == {"/home"}  # /work was only owed, not hung
            # A fresh worker serves the next sample; /home is still skipped.
            assert [f.mount_point for f in collector.collect()] == ["/", "/work"]
    finally:
        release.set()


# --- network --------------------------------------------------------------------------------------


def test_network_fixture() -> None:
    adapters = NetworkCollector(str(HOST1 / "proc"), str(HOST1 / "sys"), addresses=lambda: H1_ADDRESSES).collect()
    assert adapters == (
        NetworkAdapter("eth0", "3c:ec:ef:12:34:56", ("10.0.0.21", "fe80::3eec:efff:fe12:3456"), 1500, 10000,
                       True, bytes_in=987654321, bytes_out=123456789, packets_in=1234567, packets_out=654321,
                       operstate="up"),
        NetworkAdapter("ib0", "80:00:02:08:fe:80:00:00:00:00:00:00:b8:59:9f:03:00:a1:b2:c3", ("192.168.100.21",),
                       2044, None, False,  # speed -1 -> None; operstate down
                       bytes_in=5000000000, bytes_out=6000000000, packets_in=4000000, packets_out=3000000,
                       operstate="down"),
        # operstate "unknown" with IFF_UP in flags is up; all-zero MAC and no speed file are None.
        NetworkAdapter("lo", None, ("127.0.0.1", "::1"), 65536, None, True,
                       bytes_in=1234567, bytes_out=1234567, packets_in=8901, packets_out=8901, operstate="unknown"),
    )


def test_network_missing_sysfs_files_spoil_only_their_adapter(tmp_path: Path) -> None:
    root = copy_tree(HOST1, tmp_path / "host")
    (root / "sys" / "class" / "net" / "eth0" / "mtu").unlink()
    shutil.rmtree(root / "sys" / "class" / "net" / "ib0")
    adapters = {a.name: a for a in NetworkCollector(str(root / "proc"), str(root / "sys"), addresses=dict).collect()}
    assert adapters["eth0"].mtu is None and adapters["eth0"].up and adapters["eth0"].speed_mbps == 10000
    assert (adapters["ib0"].mac, adapters["ib0"].mtu, adapters["ib0"].up) == (None, None, False)
    assert adapters["ib0"].bytes_in == 5000000000
    assert adapters["lo"].up and adapters["lo"].mtu == 65536


def test_network_bad_address_provider_and_malformed_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = copy_tree(HOST1, tmp_path / "host")
    dev = root / "proc" / "net" / "dev"
    dev.write_text(dev.read_text() + "  bad0: 1 2 three\n")

    def broken() -> dict[str, list[str]]:
        raise OSError("getifaddrs failed")

    with caplog.at_level(logging.WARNING):
        adapters = NetworkCollector(str(root / "proc"), str(root / "sys"), addresses=broken).collect()
    assert [a.name for a in adapters] == ["eth0", "ib0", "lo"]
    assert all(a.addresses == () for a in adapters)
    messages = warnings_of(caplog)
    assert any("getifaddrs failed" in m for m in messages) and any("bad0" in m for m in messages)


def test_network_link_facts_are_reread_when_the_state_changes(tmp_path: Path) -> None:
    root = copy_tree(HOST1, tmp_path / "host")
    eth0 = root / "sys" / "class" / "net" / "eth0"
    collector = NetworkCollector(str(root / "proc"), str(root / "sys"), addresses=dict)
    assert {a.name: a for a in collector.collect()}["eth0"].speed_mbps == 10000
    (eth0 / "speed").write_text("25000\n")
    # Within link_refresh and with the same operstate the cached link facts stand ...
    assert {a.name: a for a in collector.collect()}["eth0"].speed_mbps == 10000
    (eth0 / "operstate").write_text("down\n")
    eth0_now = {a.name: a for a in collector.collect()}["eth0"]
    # ... a state change re-reads them at once.
    assert (eth0_now.up, eth0_now.speed_mbps) == (False, 25000)
    (eth0 / "mtu").write_text("9000\n")
    fresh = NetworkCollector(str(root / "proc"), str(root / "sys"), addresses=dict, link_refresh=0)
    assert {a.name: a for a in fresh.collect()}["eth0"].mtu == 9000


# --- system ---------------------------------------------------------------------------------------

FAKE_UNAME = os.uname_result(("Linux", "node17.cluster.example.org", "5.14.0-362.8.1.el9_3.x86_64",
                              "#1 SMP PREEMPT_DYNAMIC Wed Nov 8 17:36:32 UTC 2023", "x86_64"))


def test_system_fixture() -> None:
    collector = SystemCollector(str(HOST1 / "etc"), uname=lambda: FAKE_UNAME, proc_root=str(HOST1 / "proc"))
    info = collector.collect()
    # the whole os-release, for node_os_info's labels
    assert info.release_fields["ID"] == "rocky" and info.release_fields["ID_LIKE"] == "rhel centos fedora"
    assert info.release_fields["PRETTY_NAME"] == "Rocky Linux 9.3 (Blue Onyx)" and len(info.release_fields) == 11
    assert dataclasses.replace(info, release_fields={}) == SystemInfo(
        sysname="Linux", kernel_release="5.14.0-362.8.1.el9_3.x86_64",
        kernel_version="#1 SMP PREEMPT_DYNAMIC Wed Nov 8 17:36:32 UTC 2023", machine="x86_64",
        os_name="Rocky Linux", os_release="9.3", os_version="9.3 (Blue Onyx)",  # no VERSION_CODENAME
        hostname="node17.cluster.example.org", domainname="hpc-nis")
    assert collector.collect() is collector.collect()
    # no domainname file (a kernel without it, a fixture tree): unknown, not an error
    assert SystemCollector(str(HOST2 / "etc"), uname=lambda: FAKE_UNAME,
                           proc_root=str(HOST2 / "proc")).collect().domainname is None


def test_system_os_release_fallbacks(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    info = SystemCollector(str(HOST2 / "etc"), uname=lambda: FAKE_UNAME).collect()
    assert (info.os_name, info.os_release, info.os_version) == ("Ubuntu", "22.04", "jammy")
    (tmp_path / "etc").mkdir()
    with caplog.at_level(logging.WARNING):
        info = SystemCollector(str(tmp_path / "etc"), uname=lambda: FAKE_UNAME).collect()
    assert (info.os_name, info.os_release, info.os_version) == (None, None, None)
    assert info.hostname == "node17.cluster.example.org"
    assert any("no os-release" in m for m in warnings_of(caplog))


def test_a_proc_root_tree_gives_its_own_architecture_not_this_machines(tmp_path: Path) -> None:
    """An ARM host's files read on an x86_64 machine: PlatformType and InstructionSet both aarch64."""
    arm = SystemCollector(str(HOST2 / "etc"), uname=lambda: FAKE_UNAME, proc_root=str(HOST2 / "proc")).collect()
    assert (FAKE_UNAME.machine, arm.machine) == ("x86_64", "aarch64")  # from its cpuinfo ("CPU architecture: 8")
    processors = ProcessorCollector(str(HOST2 / "proc"), str(HOST2 / "sys"), cpuinfo=dict).collect()
    node = build_node({"system": CollectorRun("system", arm), "processors": CollectorRun("processors", processors)})
    assert node.arch == "aarch64" and [e.value for e in node.extensions if e.name == "InstructionSet"] == ["aarch64"]
    # the kernel's own name (/proc/sys/kernel/arch, Linux 6.1+) comes first, then the cpuinfo's
    root = tmp_path / "ppc"
    shutil.copytree(HOST2, root)
    (root / "proc" / "sys" / "kernel").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "arch").write_text("ppc64le\n")
    assert SystemCollector(str(root / "etc"), uname=lambda: FAKE_UNAME, proc_root=str(root / "proc")).info.machine == (
        "ppc64le")
    (root / "proc" / "cpuinfo").write_text("processor\t: 0\ncpu\t\t: POWER9 (raw), altivec supported\n")
    assert ProcessorCollector(str(root / "proc"), str(root / "sys"), cpuinfo=dict).info.isa == "ppc64le"
    # neither: unknown (the Node then has no Arch), never this machine's
    (root / "proc" / "sys" / "kernel" / "arch").unlink()
    assert SystemCollector(str(root / "etc"), uname=lambda: FAKE_UNAME, proc_root=str(root / "proc")).info.machine is (
        None)
    assert ProcessorCollector(str(root / "proc"), str(root / "sys"), cpuinfo=dict).info.isa is None
    # this machine's own /proc: uname, as before
    assert SystemCollector(str(HOST2 / "etc"), uname=lambda: FAKE_UNAME).info.machine == "x86_64"


def test_parse_os_release_quoting() -> None:
    parsed = parse_os_release('# comment\nNAME="Foo \\"Bar\\" Linux"\nVERSION_ID=\'1.0\'\nID=foo\n\nbroken line\n')
    assert parsed == {"NAME": 'Foo "Bar" Linux', "VERSION_ID": "1.0", "ID": "foo"}


# --- registry and defaults ------------------------------------------------------------------------


def test_registry_records_a_failed_collector_and_keeps_the_others(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    registry = CollectorRegistry()
    registry.extend([MemoryCollector(str(tmp_path)), LoadCollector(str(HOST1 / "proc"))])
    with caplog.at_level(logging.WARNING):
        runs = registry.run()
    assert not runs["memory"].ok and runs["memory"].error is not None
    assert runs["memory"].error.startswith("FileNotFoundError")
    assert runs["load"].ok and runs["load"].facts == LoadSample(3.52, 2.10, 1.05, 2, 345)
    assert any("collector memory failed" in m for m in warnings_of(caplog))


def test_default_collectors_on_a_fixture_tree(tmp_path: Path) -> None:
    collectors = default_collectors(str(HOST1 / "proc"), str(HOST1 / "sys"), str(HOST1 / "etc"))
    assert [c.name for c in collectors] == ["processors", "memory", "load", "filesystems", "network", "system", "gpus"]
    processors, memory, load, _, _, system, gpus = (c.collect() for c in collectors)
    assert processors.info.logical == 4 and memory.total == 196608000 * KIB
    assert load.tasks == 345 and system.os_name == "Rocky Linux" and gpus == ()


# --- the live machine -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live() -> Iterator[dict[str, Any]]:
    collectors = default_collectors()  # py-cpuinfo runs here, once for the whole module
    yield {c.name: c for c in collectors}
    for collector in collectors:
        close = getattr(collector, "close", None)
        if close is not None:
            close()


def test_live_processors_agree_with_the_kernel(live: dict[str, Any]) -> None:
    sample = live["processors"].collect()
    online = parse_cpu_list(Path("/sys/devices/system/cpu/online").read_text())
    assert sample.info.logical == os.cpu_count() == len(online)
    assert sample.info.physical is None or 1 <= sample.info.physical <= sample.info.logical
    assert sample.info.isa == os.uname().machine
    assert 0.0 <= live["processors"].collect().usage.busy <= sample.info.logical


def test_live_memory_total_matches_meminfo(live: dict[str, Any]) -> None:
    kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal:"))
    sample = live["memory"].collect()
    assert sample.total == kib * 1024
    assert 0 < sample.available <= sample.total and 0 <= sample.swap_free <= sample.swap_total


def test_live_load_filesystems_network_system(live: dict[str, Any]) -> None:
    load = live["load"].collect()
    assert load.one >= 0 and 1 <= load.runnable <= load.tasks  # this process is running
    filesystems = {f.mount_point: f for f in live["filesystems"].collect()}
    assert "/" in filesystems
    assert 0 <= filesystems["/"].available <= filesystems["/"].free <= filesystems["/"].size
    adapters = {a.name: a for a in live["network"].collect()}
    assert adapters["lo"].up and "127.0.0.1" in adapters["lo"].addresses
    system = live["system"].collect()
    assert (system.sysname, system.kernel_release, system.hostname) == (
        os.uname().sysname, os.uname().release, os.uname().nodename)


def test_live_registry_runs_everything(live: dict[str, Any]) -> None:
    registry = CollectorRegistry()
    registry.extend(live.values())
    runs = registry.run()
    assert [name for name, run in runs.items() if not run.ok] == []


def test_live_addresses_have_no_link_layer_or_zone(live: dict[str, Any]) -> None:
    addresses = psutil_addresses()
    assert "127.0.0.1" in addresses["lo"] and "00:00:00:00:00:00" not in addresses["lo"]
    assert not any("%" in a for values in addresses.values() for a in values)


def test_rtnetlink_lists_the_addresses_psutil_does() -> None:
    """The agent asks rtnetlink itself rather than load psutil: the same addresses, in the same
    order, for every interface that has one (psutil lists the others empty)."""
    try:
        ours = netlink_addresses()
    except OSError as exc:
        pytest.skip(f"no rtnetlink here: {exc}")
    theirs = {name: found for name, found in psutil_addresses().items() if found}
    assert ours == theirs
    assert "127.0.0.1" in ours["lo"]


def test_live_addresses_are_listed_again_only_on_change() -> None:
    collector = NetworkCollector()
    try:
        if collector._watch is None or not collector._watch.active:
            pytest.skip("no rtnetlink notifications here")
        calls = 0

        def counting() -> dict[str, list[str]]:
            nonlocal calls
            calls += 1
            return psutil_addresses()

        collector._addresses = counting
        for _ in range(5):
            collector.collect()
        assert 1 <= calls < 5  # unless the host's addresses kept changing meanwhile
    finally:
        collector.close()


def test_live_sample_is_cheap(live: dict[str, Any]) -> None:
    collectors = list(live.values())
    for _ in range(20):
        for collector in collectors:
            collector.collect()
    rounds = 200
    started = time.process_time()
    for _ in range(rounds):
        for collector in collectors:
            collector.collect()
    per_sample = (time.process_time() - started) / rounds
    # The budget is ~0.6 ms; this only catches gross regressions (py-cpuinfo per sample, etc.).
    assert per_sample < 0.003, f"{per_sample * 1e3:.2f} ms CPU per sample"
