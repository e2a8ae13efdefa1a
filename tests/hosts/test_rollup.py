"""The GLUE roll-up: SSS Node -> Host mapping, homogeneous subclusters, clusters and CEs, incrementality."""

from __future__ import annotations

import copy
import tomllib
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.model import glue
from infosvc.model.glue import Host, SubCluster
from infosvc.model.node import Consumable, Extension, Node
from infosvc.hosts.rollup import Rollup, host_from_node, ram_class_mb, subcluster_key
from infosvc.config.site import DEFAULT_CLUSTER, SiteConfig, parse_config

NOW = "2024-05-01T12:00:00Z"
STATES = ("Ready", "Paused", "Unreachable", "Pending")


# --- a builder of SSS Nodes the way infosvc-agent writes them (docs/node-mapping.md) -------------

@dataclass(frozen=True)
class Kind:
    """One kind of machine: what makes hosts homogeneous, plus some detail that does not."""

    vendor: str
    model: str
    clock: int  # MHz
    cpus: int
    ram_gib: int
    os_name: str
    os_release: str
    arch: str = "x86_64"


INTEL = Kind("GenuineIntel", "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", 2500, 40, 192, "Rocky Linux", "9.3")
AMD = Kind("AuthenticAMD", "AMD EPYC 7763 64-Core Processor", 2450, 128, 512, "Rocky Linux", "9.3")
GPU_A = Kind("AuthenticAMD", "AMD EPYC 7413 24-Core Processor", 2650, 48, 256, "Ubuntu", "22.04")
GPU_B = Kind("AuthenticAMD", "AMD EPYC 7413 24-Core Processor", 2650, 48, 256, "Ubuntu", "24.04")
BIGMEM = Kind("GenuineIntel", "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", 2300, 80, 2048, "Rocky Linux", "9.3")
ARM = Kind("ARM", "Neoverse-N1", 3000, 80, 256, "Ubuntu", "22.04", arch="aarch64")
SMALL = Kind("GenuineIntel", "Intel(R) Core(TM) i5", 3200, 4, 16, "Debian GNU/Linux", "12")


@dataclass(frozen=True)
class FS:
    mount: str
    fstype: str
    device: str
    size_mb: float
    available_mb: float
    remote: bool = False
    read_only: bool = False


@dataclass(frozen=True)
class NIC:
    name: str
    addresses: tuple[str, ...]
    mtu: int | None = 1500
    speed: int = 0
    up: bool = True


DEFAULT_FS = (
    FS("/", "xfs", "/dev/sda2", 102_400.0, 80_000.5),
    FS("/scratch", "ext4", "/dev/nvme0n1p1", 1_907_729.0, 1_500_000.0),
    FS("/home", "nfs4", "nas01:/export/home", 10_485_760.0, 4_000_000.0, remote=True),
    FS("/cvmfs/sw.example.org", "fuse.cvmfs", "cvmfs2", 40_960.0, 20_480.0, remote=True, read_only=True),
)
DEFAULT_NICS = (
    NIC("lo", ("127.0.0.1", "::1"), mtu=65536),
    NIC("eth0", ("fe80::5054:ff:fe12:3456", "10.1.0.5"), mtu=9000, speed=25000),
    NIC("ib0", ("fe80::2",), mtu=2044, speed=100000),
)


def make_node(host_id: str, kind: Kind, *, ram_mb: float | None = None, busy: int = 0,
              load: tuple[float, float, float] = (1.5, 1.25, 1.0), isa: str | None = None,
              file_systems: Iterable[FS] = DEFAULT_FS, nics: Iterable[NIC] = DEFAULT_NICS) -> Node:
    """An SSS Node as host_node.build_node makes one from a sample of facts."""
    total = ram_mb if ram_mb is not None else kind.ram_gib * 1024 - 350.25  # kernel reservations
    node = Node(id=host_id, name=host_id.split(".", 1)[0], opsys="Linux", arch=kind.arch,
                state="Busy" if busy >= kind.cpus else "Idle")
    ext = node.extensions
    ext.append(Extension("SampleTime", NOW, "Agent"))
    ext.append(Extension("AgentVersion", "0.1.0", "Agent"))
    for name, value in (("Name", kind.os_name), ("Release", kind.os_release), ("Version", "Blue Onyx"),
                        ("KernelRelease", "5.14.0-362.el9.x86_64"), ("KernelVersion", "#1 SMP PREEMPT_DYNAMIC")):
        ext.append(Extension(name, value, "OperatingSystem"))
    for name, value in (("Vendor", kind.vendor), ("Model", kind.model), ("Version", "6/85/7"),
                        ("InstructionSet", isa or kind.arch), ("ClockSpeed", str(kind.clock)),
                        ("PhysicalCores", str(kind.cpus // 2)), ("Sockets", "2"), ("CacheL1D", "32"),
                        ("CacheL1I", "32"), ("CacheL2", "1024"), ("CacheL3", "28160"), ("Flags", "fpu vme sse2 avx2")):
        ext.append(Extension(name, value, "Processor"))
    used = min(busy, kind.cpus)
    node.configured.add(Consumable("Processors", kind.cpus))
    node.available.add(Consumable("Processors", kind.cpus - used))
    node.utilized.add(Consumable("Processors", used, metric="Average", wall_duration="PT10S",
                                 consumption_rate=round(used / kind.cpus, 4)))
    node.configured.add(Consumable("Memory", total, units="MB"))
    node.available.add(Consumable("Memory", total * 0.75, units="MB"))
    node.utilized.add(Consumable("Memory", total * 0.25, units="MB"))
    node.configured.add(Consumable("Swap", 4096.0, units="MB"))
    node.available.add(Consumable("Swap", 4000.0, units="MB"))
    node.utilized.add(Consumable("Swap", 96.0, units="MB"))
    for span, average in zip(("1min", "5min", "15min"), load):
        node.utilized.add(Consumable("Resource", average, metric="Average", name="Load", type=span))
    disk = disk_free = 0.0
    for fs in file_systems:
        node.configured.add(Consumable("Resource", fs.size_mb, units="MB", name="FileSystem", type=fs.mount))
        node.available.add(Consumable("Resource", fs.available_mb, units="MB", name="FileSystem", type=fs.mount))
        context = f"FileSystem:{fs.mount}"
        ext.append(Extension("Type", fs.fstype, context))
        ext.append(Extension("ReadOnly", "true" if fs.read_only else "false", context))
        ext.append(Extension("Kind", "remote" if fs.remote else "local", context))
        ext.append(Extension("Device", fs.device, context))
        if not fs.remote:
            disk, disk_free = disk + fs.size_mb, disk_free + fs.available_mb
    node.configured.add(Consumable("Disk", disk, units="MB"))
    node.available.add(Consumable("Disk", disk_free, units="MB"))
    bandwidth = 0
    for nic in nics:
        node.configured.add(Consumable("Resource", nic.speed, units="Mbit/s", name="NetworkAdapter", type=nic.name))
        node.utilized.add(Consumable("Resource", 12345, units="byte", metric="Total", name="NetworkBytesIn",
                                     type=nic.name))
        context = f"NetworkAdapter:{nic.name}"
        ext.append(Extension("State", "up" if nic.up else "down", context))
        if nic.mtu is not None:
            ext.append(Extension("MTU", str(nic.mtu), context))
        ext.append(Extension("MAC", "52:54:00:12:34:56", context))
        for address in nic.addresses:
            ext.append(Extension("Address", address, context))
        if nic.up and nic.speed and nic.name != "lo":
            bandwidth += nic.speed
    if bandwidth:
        node.configured.add(Consumable("Network", bandwidth, units="Mbit/s"))
    return node


def config_of(text: str) -> SiteConfig:
    return parse_config(tomllib.loads(text))


def host(node: Node, config: SiteConfig, state: str = "Ready") -> Host:
    return host_from_node(node, state, config, NOW)


# --- host_from_node ----------------------------------------------------------------------------

def test_host_maps_every_group() -> None:
    config = SiteConfig()
    node = make_node("cn017.example.org", INTEL, ram_mb=196_258.5, busy=10, load=(2.5, 30.0, 45.75))
    h = host(node, config)

    assert (h.unique_id, h.name, h.state, h.last_report, h.cluster) == (
        "cn017.example.org", "cn017", "Ready", NOW, DEFAULT_CLUSTER)
    assert h.architecture == glue.Architecture(platform_type="x86_64", smp_size=40)
    assert h.operating_system == glue.OperatingSystem("Rocky Linux", "9.3", "Blue Onyx")
    assert h.processor == glue.Processor(
        vendor="GenuineIntel", model=INTEL.model, version="6/85/7", clock_speed=2500, instruction_set="x86_64",
        features="fpu vme sse2 avx2", cache_l1=None, cache_l1i=32, cache_l1d=32, cache_l2=1024)
    # Whole MB, the fraction dropped.
    assert h.main_memory == glue.MainMemory(ram_size=196_258, ram_available=int(196_258.5 * 0.75),
                                            virtual_size=4096, virtual_available=4000)
    assert h.total_cpus == 40 and h.available_cpus == 30 and h.free_cpus == 30 and h.live
    # No Benchmark or ApplicationSoftware unless the config gives them.
    assert h.benchmark is None and h.application_software is None


def test_processor_and_smp_load_are_availability_times_100() -> None:
    h = host(make_node("h1", INTEL, load=(2.5, 30.0, 45.75)), SiteConfig())
    # SMPLoad: (CPUs - runnable) x 100 for the node; ProcessorLoad: the same per processor.
    assert h.smp_load == glue.Load(round((40 - 2.5) * 100), round((40 - 30.0) * 100), round((40 - 45.75) * 100))
    assert h.smp_load == glue.Load(3750, 1000, -575)
    assert h.processor_load == glue.Load(94, 25, round(-575 / 40))
    # A single-CPU node has the two equal.
    one = replace(SMALL, cpus=1)
    h1 = host(make_node("h2", one, load=(0.25, 1.0, 2.0)), SiteConfig())
    assert h1.smp_load == h1.processor_load == glue.Load(75, 0, -100)


def test_load_missing_or_incomplete_is_not_published() -> None:
    node = make_node("h1", INTEL)
    node.utilized.items = [i for i in node.utilized.items if not (i.name == "Load" and i.type == "15min")]
    h = host(node, SiteConfig())
    assert h.processor_load is None and h.smp_load is None


def test_file_systems_local_and_remote() -> None:
    h = host(make_node("h1", INTEL), SiteConfig())
    by_root = {fs.root: fs for fs in h.file_systems}
    assert set(by_root) == {"/", "/scratch", "/home", "/cvmfs/sw.example.org"}
    assert by_root["/"] == glue.FileSystem(root="/", name="/dev/sda2", type="xfs", read_only=False, size=102_400,
                                          available_space=80_000, remote=False)
    assert by_root["/scratch"].size == 1_907_729 and not by_root["/scratch"].remote
    assert by_root["/home"] == glue.FileSystem(root="/home", name="nas01:/export/home", type="nfs4", read_only=False,
                                              size=10_485_760, available_space=4_000_000, remote=True)
    cvmfs = by_root["/cvmfs/sw.example.org"]
    assert cvmfs.remote and cvmfs.read_only and cvmfs.type == "fuse.cvmfs"
    assert [fs.root for fs in h.file_systems if fs.remote] == ["/home", "/cvmfs/sw.example.org"]


def test_network_adapters_skip_loopback_and_prefer_ipv4() -> None:
    h = host(make_node("h1", INTEL), SiteConfig())
    assert h.network_adapters == (
        glue.NetworkAdapter(name="eth0", ip_address="10.1.0.5", mtu=9000),
        glue.NetworkAdapter(name="ib0", ip_address="fe80::2", mtu=2044),  # IPv6 when it is all there is
    )
    no_address = host(make_node("h2", INTEL, nics=(NIC("eth1", (), mtu=None),)), SiteConfig())
    assert no_address.network_adapters == (glue.NetworkAdapter(name="eth1", ip_address=None, mtu=None),)


def test_every_field_lands_in_its_place() -> None:
    """host_from_node builds GLUE objects positionally (for speed): a value of its own in every
    field, the expectation spelt with keywords, tells any swap."""
    config = config_of("""
        [[clusters]]
        id = "c1"
        nodes = "n1"
        [[benchmarks]]
        nodes = "n1"
        si00 = 11
        sf00 = 22
        [[software]]
        nodes = "n1"
        runtime_environment = ["RE"]
    """)
    node = Node(id="n1", name="one", opsys="Linux", arch="x86_64")
    for name, value, context in (
            ("Name", "OS", "OperatingSystem"), ("Release", "R", "OperatingSystem"), ("Version", "V", "OperatingSystem"),
            ("Vendor", "Ven", "Processor"), ("Model", "Mod", "Processor"), ("Version", "PV", "Processor"),
            ("ClockSpeed", "1001", "Processor"), ("InstructionSet", "ISA", "Processor"), ("Flags", "F", "Processor"),
            ("CacheL1", "1", "Processor"), ("CacheL1I", "2", "Processor"), ("CacheL1D", "3", "Processor"),
            ("CacheL2", "4", "Processor"),
            ("Device", "dev-a", "FileSystem:/a"), ("Type", "ta", "FileSystem:/a"), ("ReadOnly", "true", "FileSystem:/a"),
            ("Kind", "local", "FileSystem:/a"),
            ("Device", "dev-b", "FileSystem:/b"), ("Type", "tb", "FileSystem:/b"), ("ReadOnly", "false", "FileSystem:/b"),
            ("Kind", "remote", "FileSystem:/b"),
            ("MTU", "9000", "NetworkAdapter:eth0"), ("Address", "fe80::1", "NetworkAdapter:eth0"),
            ("Address", "10.0.0.1", "NetworkAdapter:eth0")):
        node.extensions.append(Extension(name, value, context))
    for category, items in (
            (node.configured, (Consumable("Processors", 8), Consumable("Memory", 1000.0, "MB"),
                               Consumable("Swap", 3000.0, "MB"),
                               Consumable("Resource", 5000.0, "MB", name="FileSystem", type="/a"),
                               Consumable("Resource", 7000.0, "MB", name="FileSystem", type="/b"),
                               Consumable("Resource", 0, "Mbit/s", name="NetworkAdapter", type="eth0"))),
            (node.available, (Consumable("Processors", 6), Consumable("Memory", 2000.0, "MB"),
                              Consumable("Swap", 4000.0, "MB"),
                              Consumable("Resource", 6000.0, "MB", name="FileSystem", type="/a"),
                              Consumable("Resource", 8000.0, "MB", name="FileSystem", type="/b"))),
            (node.utilized, tuple(Consumable("Resource", v, name="Load", type=t)
                                  for v, t in ((1.0, "1min"), (2.0, "5min"), (3.0, "15min"))))):
        for item in items:
            category.add(item)

    assert host_from_node(node, "Ready", config, NOW) == Host(
        unique_id="n1", name="one", state="Ready", last_report=NOW, cluster="c1",
        architecture=glue.Architecture(platform_type="x86_64", smp_size=8),
        operating_system=glue.OperatingSystem(name="OS", release="R", version="V"),
        benchmark=glue.Benchmark(si00=11, sf00=22),
        application_software=glue.ApplicationSoftware(runtime_environment=("RE",)),
        processor=glue.Processor(vendor="Ven", model="Mod", version="PV", clock_speed=1001, instruction_set="ISA",
                                 features="F", cache_l1=1, cache_l1i=2, cache_l1d=3, cache_l2=4),
        main_memory=glue.MainMemory(ram_size=1000, ram_available=2000, virtual_size=3000, virtual_available=4000),
        file_systems=(
            glue.FileSystem(root="/a", name="dev-a", type="ta", read_only=True, size=5000, available_space=6000,
                            remote=False),
            glue.FileSystem(root="/b", name="dev-b", type="tb", read_only=False, size=7000, available_space=8000,
                            remote=True)),
        processor_load=glue.Load(last_1min=88, last_5min=75, last_15min=62),
        smp_load=glue.Load(last_1min=700, last_5min=600, last_15min=500),
        network_adapters=(glue.NetworkAdapter(name="eth0", ip_address="10.0.0.1", mtu=9000),),
        total_cpus=8, available_cpus=6)


def test_bare_node_maps_to_an_empty_host() -> None:
    h = host(Node(id="bare"), SiteConfig())
    assert h.name == "bare" and h.total_cpus == 0 and h.available_cpus == 0
    assert h.architecture == glue.Architecture() and h.main_memory == glue.MainMemory()
    assert h.file_systems == () and h.network_adapters == () and h.processor_load is None
    rollup = Rollup(SiteConfig())
    sub = rollup.update(h)
    assert sub.host_count == 1 and sub.total_cpus == 0


def test_sizes_in_units_that_are_no_size_are_not_published() -> None:
    """Units are free text in a valid SSS document; a committed report must still publish."""
    node = make_node("odd", INTEL)
    node.configured.items = [replace(i, units="furlongs") if i.kind == "Memory" else i for i in node.configured.items]
    node.configured.items = [replace(i, units=None) if i.name == "FileSystem" and i.type == "/" else i
                             for i in node.configured.items]
    h = host(node, SiteConfig())
    assert h.main_memory.ram_size is None and h.main_memory.ram_available is not None
    assert {fs.root: fs.size for fs in h.file_systems}["/"] is None


def test_operating_system_name_falls_back_to_opsys() -> None:
    node = make_node("h1", INTEL)
    node.extensions = [e for e in node.extensions if e.type != "OperatingSystem"]
    h = host(node, SiteConfig())
    assert h.operating_system == glue.OperatingSystem(name="Linux", release=None, version=None)


def test_benchmark_and_software_from_config() -> None:
    config = config_of("""
        [[benchmarks]]
        nodes = "cn[001-010]"
        si00 = 1500
        sf00 = 1700
        [[benchmarks]]
        nodes = "cn[001-100]"
        si00 = 1
        [[software]]
        nodes = "cn[001-100]"
        runtime_environment = ["VO-atlas-release-21", "MPI"]
        [[software]]
        nodes = "cn[001-005]"
        runtime_environment = ["MPI", "GCC-12"]
    """)
    first = host(make_node("cn003", INTEL), config)
    assert first.benchmark == glue.Benchmark(si00=1500, sf00=1700)  # the first entry naming the host
    assert first.application_software == glue.ApplicationSoftware(("VO-atlas-release-21", "MPI", "GCC-12"))
    later = host(make_node("cn050", INTEL), config)
    assert later.benchmark == glue.Benchmark(si00=1, sf00=0)
    assert later.application_software == glue.ApplicationSoftware(("VO-atlas-release-21", "MPI"))
    other = host(make_node("gpu01", INTEL), config)
    assert other.benchmark is None and other.application_software is None

    # They are part of what subcluster members share, and published there.
    rollup = Rollup(config)
    for i in range(1, 21):
        rollup.update(host(make_node(f"cn{i:03d}", INTEL), config))
    subs = sorted(rollup.subclusters.values(), key=lambda s: s.host_count)
    assert [s.host_count for s in subs] == [5, 5, 10]
    assert {(s.benchmark, s.application_software) for s in subs} == {
        (glue.Benchmark(1500, 1700), glue.ApplicationSoftware(("VO-atlas-release-21", "MPI", "GCC-12"))),
        (glue.Benchmark(1500, 1700), glue.ApplicationSoftware(("VO-atlas-release-21", "MPI"))),
        (glue.Benchmark(1, 0), glue.ApplicationSoftware(("VO-atlas-release-21", "MPI"))),
    }


# --- a site of a few thousand hosts --------------------------------------------------------------

SITE = """
[[clusters]]
id = "compute"
name = "Compute nodes"
nodes = "node[0001-1600]"

[[clusters]]
id = "gpu"
nodes = "gpu[001-300]"

[[clusters]]
id = "bigmem"
nodes = "bm[01-64]"

[[clusters]]
id = "spare"
nodes = "spare[01-10]"

[[computing_elements]]
id = "ce.example.org:2119/jobmanager-slurm-batch"
name = "batch"
queue = "batch"
lrms_type = "slurm"
lrms_version = "23.11"
clusters = ["compute", "gpu"]

[[computing_elements]]
id = "ce.example.org:2119/jobmanager-slurm-fat"
queue = "fat"
lrms_type = "slurm"
clusters = ["bigmem", "spare"]
[computing_elements.policy]
max_wall_clock_time = 2880
max_running_jobs = 64

[[computing_elements]]
id = "ce.example.org:2119/jobmanager-slurm-test"
queue = "test"
status = "Draining"
access_control = ["VO:ops", "VO:dteam"]
"""

#: host id -> its kind; the expected subclusters are (cluster, kind) pairs
SITE_HOSTS: dict[str, tuple[str, Kind]] = {}
for _i in range(1, 1601):
    SITE_HOSTS[f"node{_i:04d}"] = ("compute", INTEL if _i <= 1000 else AMD)
for _i in range(1, 301):
    SITE_HOSTS[f"gpu{_i:03d}"] = ("gpu", (GPU_A, GPU_B, ARM)[_i % 3] if _i <= 150 else GPU_A)
for _i in range(1, 41):  # bm41-64 configured but never reporting
    SITE_HOSTS[f"bm{_i:02d}"] = ("bigmem", BIGMEM)
for _i in range(1, 6):  # named by no cluster
    SITE_HOSTS[f"login{_i}"] = (DEFAULT_CLUSTER, SMALL)


def site_node(host_id: str, kind: Kind | None = None, **kwargs: Any) -> Node:
    kind = kind or SITE_HOSTS[host_id][1]
    # Identical machines differ by a few MB of kernel reservations, and each is as busy as it is.
    n = int("".join(c for c in host_id if c.isdigit()) or 0)
    kwargs.setdefault("ram_mb", kind.ram_gib * 1024 - 200 - (n * 37) % 300 + 0.5)
    kwargs.setdefault("busy", n % (kind.cpus + 1))
    return make_node(host_id, kind, **kwargs)


@pytest.fixture(scope="module")
def site_config() -> SiteConfig:
    return config_of(SITE)


@pytest.fixture(scope="module")
def site_hosts(site_config: SiteConfig) -> dict[str, Host]:
    return {h: host(site_node(h), site_config) for h in SITE_HOSTS}


@pytest.fixture
def site(site_config: SiteConfig, site_hosts: dict[str, Host]) -> Rollup:
    rollup = Rollup(site_config)
    for h in site_hosts.values():
        rollup.update(h)
    return rollup


def check_invariants(rollup: Rollup) -> None:
    """Every host in exactly one subcluster; every aggregate equal to a sum over its hosts."""
    members: Counter[str] = Counter()
    for sub_id, sub in rollup.subclusters.items():
        hosts = list(rollup.hosts_of(sub_id))
        assert hosts, f"empty subcluster {sub_id} published"
        members.update(h.unique_id for h in hosts)
        assert {subcluster_key(h) for h in hosts} == {subcluster_key(hosts[0])}
        assert all(h.cluster == sub.cluster for h in hosts)
        assert sub.host_count == len(hosts)
        assert sub.live_hosts == sum(h.live for h in hosts)
        assert sub.total_cpus == sum(h.total_cpus for h in hosts if h.live)
        assert sub.free_cpus == sum(h.free_cpus for h in hosts)
        assert sub.ram_available == sum(h.main_memory.ram_available or 0 for h in hosts if h.live)
        assert sub.states == dict(Counter(h.state for h in hosts))
        assert sub.unique_id in {s.unique_id for s in rollup.subclusters_of(sub.cluster)}
    assert set(members) == set(rollup.hosts) and set(members.values()) <= {1}
    assert sum(s.host_count for s in rollup.subclusters.values()) == len(rollup)
    for host_id in rollup.hosts:
        found = rollup.subcluster_of(host_id)
        assert found is not None and host_id in {h.unique_id for h in rollup.hosts_of(found.unique_id)}


def test_site_subclusters(site: Rollup) -> None:
    assert len(site) == len(SITE_HOSTS) == 1945
    check_invariants(site)
    expected = Counter(SITE_HOSTS.values())
    found = Counter({(s.cluster, kind_of(s)): s.host_count for s in site.subclusters.values()})
    assert found == expected
    per_cluster = Counter(s.cluster for s in site.subclusters.values())
    assert per_cluster == {"compute": 2, "gpu": 3, "bigmem": 1, DEFAULT_CLUSTER: 1}
    assert site.subclusters_of("spare") == []
    for host_id, (cluster, _) in SITE_HOSTS.items():
        assert site.hosts[host_id].cluster == cluster


def kind_of(sub: SubCluster) -> Kind:
    """The kind whose hosts the subcluster holds, from the shared attributes it publishes."""
    found = [k for k in (INTEL, AMD, GPU_A, GPU_B, ARM, BIGMEM, SMALL)
             if (k.model, k.clock, k.cpus, k.ram_gib * 1024, k.os_name, k.os_release, k.arch) == (
                 sub.processor.model, sub.processor.clock_speed, sub.architecture.smp_size, sub.main_memory.ram_size,
                 sub.operating_system.name, sub.operating_system.release, sub.architecture.platform_type)]
    assert len(found) == 1, sub
    return found[0]


def test_subcluster_publishes_only_shared_attributes(site: Rollup) -> None:
    sub = site.subcluster_of("node0001")
    assert sub is not None
    assert sub.cluster == "compute" and sub.unique_id.startswith("compute-")
    assert sub.name == f"x86_64 40cpu {INTEL.model} 2500MHz 192GiB Rocky Linux 9.3"
    assert sub.architecture == glue.Architecture("x86_64", 40)
    member = site.hosts["node0001"].processor
    # outside the key, what every member shares is published too (vendor, version, caches, OS version)
    assert sub.operating_system == glue.OperatingSystem("Rocky Linux", "9.3", "Blue Onyx")
    assert sub.processor == glue.Processor(vendor="GenuineIntel", model=INTEL.model, version=member.version,
                                           clock_speed=2500, instruction_set="x86_64", cache_l1=member.cache_l1,
                                           cache_l1i=member.cache_l1i, cache_l1d=member.cache_l1d,
                                           cache_l2=member.cache_l2)
    assert member.version and member.cache_l2  # the fixture gives them: the test would tell a lost one
    assert sub.main_memory == glue.MainMemory(ram_size=192 * 1024)
    assert sub.benchmark is None and sub.application_software is None


def test_subcluster_ids_are_stable(site: Rollup, site_config: SiteConfig, site_hosts: dict[str, Host]) -> None:
    again = Rollup(site_config)
    for h in reversed(list(site_hosts.values())):
        again.update(h)
    assert set(again.subclusters) == set(site.subclusters)
    assert len(set(site.subclusters)) == len(site.subclusters)


def test_ram_within_rounding_stays_in_one_subcluster(site_config: SiteConfig) -> None:
    rollup = Rollup(site_config)
    for i, ram in enumerate((16384 - 480, 16384 - 300.25, 16384.0, 16384 + 400), start=1):
        rollup.update(host(make_node(f"node{i:04d}", SMALL, ram_mb=ram), site_config))
    assert len(rollup.subclusters) == 1
    (sub,) = rollup.subclusters.values()
    assert sub.host_count == 4 and sub.main_memory.ram_size == 16384
    assert ram_class_mb(16384 - 480) == ram_class_mb(16384 + 400) == 16384
    # A GiB more is other hardware.
    rollup.update(host(make_node("node0005", SMALL, ram_mb=17408 - 300), site_config))
    assert sorted(s.host_count for s in rollup.subclusters.values()) == [1, 4]


def test_hardware_change_moves_host_and_empty_subcluster_disappears(site: Rollup, site_config: SiteConfig) -> None:
    before = {s.unique_id: s.host_count for s in site.subclusters.values()}
    intel = site.subcluster_of("node0001")
    amd = site.subcluster_of("node1001")
    assert intel is not None and amd is not None

    # More RAM: a new subcluster of one.
    site.update(host(site_node("node0001", ram_mb=384 * 1024 - 300), site_config))
    upgraded = site.subcluster_of("node0001")
    assert upgraded is not None and upgraded.unique_id not in before
    assert upgraded.host_count == 1 and upgraded.main_memory.ram_size == 384 * 1024
    assert intel.host_count == 999 and site.subclusters[intel.unique_id] is intel
    check_invariants(site)

    # Another CPU: it joins the AMD hosts and the subcluster of one is gone.
    site.update(host(site_node("node0001", AMD), site_config))
    assert site.subcluster_of("node0001") is amd and amd.host_count == 601
    assert upgraded.unique_id not in site.subclusters
    assert upgraded.unique_id not in {s.unique_id for s in site.subclusters_of("compute")}
    assert {s.unique_id: s.host_count for s in site.subclusters.values()} == {
        **before, intel.unique_id: 999, amd.unique_id: 601}
    check_invariants(site)

    # Back to what it was: the same subcluster id as before it left.
    site.update(host(site_node("node0001", INTEL), site_config))
    assert {s.unique_id: s.host_count for s in site.subclusters.values()} == before
    # A new subcluster for a previously emptied key is made afresh and found again by its key.
    site.update(host(site_node("node0001", ram_mb=384 * 1024 - 300), site_config))
    site.update(host(site_node("node0002", ram_mb=384 * 1024 - 100), site_config))
    again = site.subcluster_of("node0002")
    assert again is site.subcluster_of("node0001") and again is not None and again.host_count == 2
    assert again.unique_id == upgraded.unique_id
    check_invariants(site)


def test_removing_hosts(site: Rollup) -> None:
    for i in range(1, 41):
        site.remove(f"bm{i:02d}")
    site.remove("bm01")  # twice: nothing
    site.remove("nobody")
    assert site.subclusters_of("bigmem") == []
    assert len(site) == 1905
    check_invariants(site)
    # The configured cluster stays published, empty: GLUE is top down.
    assert "bigmem" in {c.unique_id for c in site.clusters()}


def test_state_changes_update_cpus(site: Rollup) -> None:
    sub = site.subcluster_of("node1001")
    assert sub is not None
    h = site.hosts["node1001"]
    assert h.state == "Ready" and h.total_cpus == 128 and 0 < h.free_cpus < 128
    total, free, live, ram = sub.total_cpus, sub.free_cpus, sub.live_hosts, sub.ram_available
    ram_h = h.main_memory.ram_available or 0
    assert ram_h > 0

    assert site.set_state("node1001", "Paused") is not None
    assert (sub.total_cpus, sub.free_cpus, sub.live_hosts, sub.ram_available) == (total, free - h.free_cpus, live, ram)
    assert sub.states == {"Ready": 599, "Paused": 1}
    site.set_state("node1001", "Unreachable")
    assert (sub.total_cpus, sub.free_cpus, sub.live_hosts, sub.ram_available) == (
        total - 128, free - h.free_cpus, live - 1, ram - ram_h)
    assert sub.states == {"Ready": 599, "Unreachable": 1}
    site.set_state("node1001", "Pending")
    assert (sub.total_cpus, sub.free_cpus, sub.live_hosts) == (total - 128, free - h.free_cpus, live - 1)
    assert sub.states == {"Ready": 599, "Pending": 1}
    site.set_state("node1001", "Ready")
    assert (sub.total_cpus, sub.free_cpus, sub.live_hosts, sub.ram_available) == (total, free, live, ram)
    assert sub.states == {"Ready": 600}
    assert site.set_state("node1001", "Ready") is site.hosts["node1001"]  # no change
    assert site.set_state("nobody", "Paused") is None

    # A report in a new state counts the new state; its subcluster's aggregates follow.
    paused = replace(h, state="Paused", available_cpus=128)
    site.update(paused)
    assert sub.free_cpus == free - h.free_cpus and sub.total_cpus == total
    check_invariants(site)


def test_ce_totals_are_sums_over_their_clusters(site: Rollup) -> None:
    site.set_state("node0001", "Paused")
    site.set_state("gpu001", "Unreachable")
    site.set_state("bm01", "Pending")
    check_invariants(site)

    def sums(clusters: Iterable[str]) -> tuple[int, int]:
        subs = [s for s in site.subclusters.values() if s.cluster in set(clusters)]
        return sum(s.total_cpus for s in subs), sum(s.free_cpus for s in subs)

    def from_hosts(clusters: Iterable[str]) -> tuple[int, int]:
        hosts = [h for h in site.hosts.values() if h.cluster in set(clusters)]
        return sum(h.total_cpus for h in hosts if h.state in ("Ready", "Paused")), \
            sum(h.available_cpus for h in hosts if h.state == "Ready")

    ces = {ce.queue: ce for ce in site.computing_elements()}
    assert set(ces) == {"batch", "fat", "test"}
    batch, fat, test = ces["batch"], ces["fat"], ces["test"]
    assert batch.clusters == ("compute", "gpu") and fat.clusters == ("bigmem", "spare")
    assert (batch.info.total_cpus, batch.state.free_cpus) == sums(("compute", "gpu")) == from_hosts(("compute", "gpu"))
    # gpu: 250 x 48 CPUs and 50 ARM x 80, less gpu001 (48, unreachable)
    assert batch.info.total_cpus == 1000 * 40 + 600 * 128 + 250 * 48 + 50 * 80 - 48
    assert (fat.info.total_cpus, fat.state.free_cpus) == sums(("bigmem",)) == from_hosts(("bigmem",))
    assert fat.info.total_cpus == 39 * 80  # bm01 pending
    totals = site.totals(("compute", "gpu"))
    assert (totals.hosts, totals.live_hosts) == (1900, 1899)

    # A CE without clusters is published, with nothing in it.
    assert test.clusters == () and test.info.total_cpus == 0 and test.state.free_cpus == 0
    assert test.state.status == "Draining" and test.access_control_rules == ("VO:ops", "VO:dteam")
    # The rest of the CE comes from the config.
    assert batch.unique_id == "ce.example.org:2119/jobmanager-slurm-batch" and batch.name == "batch"
    assert batch.info.lrms_type == "slurm" and batch.info.lrms_version == "23.11"
    assert batch.info.gram_version is None and batch.info.host_name is None and batch.info.gatekeeper_port is None
    assert batch.state.status == "Production" and batch.policy == glue.CEPolicy()
    assert fat.name == fat.unique_id and fat.policy == glue.CEPolicy(max_wall_clock_time=2880, max_running_jobs=64)
    assert site.computing_element(batch.unique_id) == batch and site.computing_element("nope") is None


def test_clusters_published_top_down(site: Rollup) -> None:
    clusters = site.clusters()
    # Configured ones in order, the empty "spare" too; then "default" for the hosts no cluster names.
    assert [(c.unique_id, c.name) for c in clusters] == [
        ("compute", "Compute nodes"), ("gpu", "gpu"), ("bigmem", "bigmem"), ("spare", "spare"),
        (DEFAULT_CLUSTER, DEFAULT_CLUSTER)]
    assert site.cluster("spare") == glue.Cluster("spare", "spare") and site.subclusters_of("spare") == []
    assert site.totals(("spare",)).hosts == 0
    assert {h.unique_id for s in site.subclusters_of(DEFAULT_CLUSTER) for h in site.hosts_of(s.unique_id)} == {
        f"login{i}" for i in range(1, 6)}
    for i in range(1, 6):
        site.remove(f"login{i}")
    # "default" goes once it holds no host.
    assert DEFAULT_CLUSTER not in {c.unique_id for c in site.clusters()}
    assert site.cluster(DEFAULT_CLUSTER) is None


def test_default_config_one_cluster_one_ce_over_all(site_hosts: dict[str, Host]) -> None:
    config = SiteConfig()
    rollup = Rollup(config)
    for host_id in SITE_HOSTS:
        rollup.update(host(site_node(host_id), config))
    check_invariants(rollup)
    assert rollup.clusters() == [glue.Cluster(DEFAULT_CLUSTER, DEFAULT_CLUSTER)]
    assert {s.cluster for s in rollup.subclusters.values()} == {DEFAULT_CLUSTER}
    # INTEL, AMD, GPU_A, GPU_B, ARM, BIGMEM, SMALL: the hardware alone now.
    assert len(rollup.subclusters) == 7
    (ce,) = rollup.computing_elements()
    assert (ce.unique_id, ce.name, ce.queue, ce.clusters) == (DEFAULT_CLUSTER,) * 3 + ((DEFAULT_CLUSTER,),)
    assert ce.info.total_cpus == sum(h.total_cpus for h in site_hosts.values())
    assert ce.state.free_cpus == sum(h.available_cpus for h in site_hosts.values())
    assert ce.state.status == "Production" and ce.info.lrms_type == "infosvc"


def test_default_ce_covers_configured_and_default_clusters() -> None:
    config = config_of("""
        [service]
        information_service_url = "https://info.example.org/v1/glue"
        [[clusters]]
        id = "a"
        nodes = "a[1-4]"
    """)
    rollup = Rollup(config)
    for name in ("a1", "a2", "x1"):
        rollup.update(host(make_node(name, SMALL), config))
    (ce,) = rollup.computing_elements()
    assert ce.clusters == ("a", DEFAULT_CLUSTER) and ce.info.total_cpus == 12
    assert ce.information_service_url == "https://info.example.org/v1/glue"
    assert all(c.information_service_url == "https://info.example.org/v1/glue" for c in rollup.clusters())


def test_catch_all_cluster_takes_only_unclaimed_hosts() -> None:
    config = config_of("""
        [[clusters]]
        id = "main"
        [[clusters]]
        id = "gpu"
        nodes = "gpu[1-4]"
    """)
    rollup = Rollup(config)
    for name in ("gpu1", "gpu2", "cn1", "cn2"):
        rollup.update(host(make_node(name, SMALL), config))
    assert rollup.hosts["gpu1"].cluster == "gpu" and rollup.hosts["cn1"].cluster == "main"
    assert [c.unique_id for c in rollup.clusters()] == ["main", "gpu"]


def test_instruction_set_is_shared_in_a_subcluster() -> None:
    config = SiteConfig()
    rollup = Rollup(config)
    rollup.update(host(make_node("a", SMALL, isa="x86_64"), config))
    rollup.update(host(make_node("b", SMALL, isa="x86_64-v4"), config))
    assert sorted(s.processor.instruction_set or "" for s in rollup.subclusters.values()) == ["x86_64", "x86_64-v4"]


# --- incrementality ------------------------------------------------------------------------------

def test_update_touches_only_its_subclusters(site: Rollup, site_config: SiteConfig,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    touched: list[str] = []
    account = Rollup._account

    def spy(sub: SubCluster, h: Host, sign: int) -> None:
        touched.append(sub.unique_id)
        account(sub, h, sign)

    monkeypatch.setattr(Rollup, "_account", staticmethod(spy))
    intel = site.subcluster_of("node0002")
    amd = site.subcluster_of("node1001")
    assert intel is not None and amd is not None
    others = {s.unique_id: s for s in site.subclusters.values() if s not in (intel, amd)}
    snapshot = copy.deepcopy(others)

    site.update(host(site_node("node0002", busy=0, load=(0.0, 0.0, 0.0)), site_config))  # a new report
    assert touched == [intel.unique_id] * 2
    site.set_state("node0002", "Paused")
    site.update(host(site_node("node0002", AMD), site_config))  # other hardware
    assert set(touched) == {intel.unique_id, amd.unique_id}
    site.remove("node0002")
    assert set(touched) == {intel.unique_id, amd.unique_id}

    assert {s.unique_id: s for s in site.subclusters.values() if s not in (intel, amd)} == snapshot
    for sub_id, sub in others.items():
        assert site.subclusters[sub_id] is sub  # the very objects, not rebuilt
    monkeypatch.undo()
    check_invariants(site)


@dataclass(frozen=True)
class Variant:
    kind: Kind
    ram_delta: float
    busy: int


POOL_IDS = tuple(f"a{i}" for i in range(1, 7)) + tuple(f"b{i}" for i in range(1, 4)) + ("x1", "x2", "x3")
POOL_CONFIG = parse_config(tomllib.loads("""
[[clusters]]
id = "a"
nodes = "a[1-6]"
[[clusters]]
id = "b"
nodes = "b[1-9]"
[[benchmarks]]
nodes = "a[4-6],x1"
si00 = 1200
"""))
VARIANTS = tuple(Variant(k, d, b) for k in (SMALL, INTEL, GPU_A, GPU_B) for d in (-500.0, 0.0, 380.0) for b in (0, 3))
POOL: dict[tuple[str, int], Host] = {
    (h, v): host_from_node(make_node(h, var.kind, ram_mb=var.kind.ram_gib * 1024 + var.ram_delta, busy=var.busy),
                           "Ready", POOL_CONFIG, NOW)
    for h in POOL_IDS for v, var in enumerate(VARIANTS)
}

operations = st.lists(st.one_of(
    st.tuples(st.just("update"), st.sampled_from(POOL_IDS), st.integers(0, len(VARIANTS) - 1),
              st.sampled_from(STATES)),
    st.tuples(st.just("state"), st.sampled_from(POOL_IDS), st.just(0), st.sampled_from(STATES)),
    st.tuples(st.just("remove"), st.sampled_from(POOL_IDS), st.just(0), st.just("")),
), max_size=60)


def published(rollup: Rollup) -> dict[str, tuple[object, ...]]:
    return {s.unique_id: (s.name, s.cluster, s.host_count, s.total_cpus, s.free_cpus, s.live_hosts, s.ram_available,
                          s.states, s.architecture, s.operating_system, s.processor, s.main_memory, s.benchmark,
                          s.application_software, frozenset(h.unique_id for h in rollup.hosts_of(s.unique_id)))
            for s in rollup.subclusters.values()}


@settings(max_examples=300, deadline=None)
@given(ops=operations, order=st.randoms(use_true_random=False))
def test_incremental_equals_recompute(ops: list[tuple[str, str, int, str]], order: Any) -> None:
    rollup = Rollup(POOL_CONFIG)
    for op, host_id, variant, state in ops:
        if op == "update":
            rollup.update(replace(POOL[host_id, variant], state=state))
        elif op == "state":
            rollup.set_state(host_id, state)
        else:
            rollup.remove(host_id)
    check_invariants(rollup)

    final = list(rollup.hosts.values())
    order.shuffle(final)
    fresh = Rollup(POOL_CONFIG)
    for h in final:
        fresh.update(h)
    assert published(rollup) == published(fresh)
    for cluster in ("a", "b", DEFAULT_CLUSTER):
        assert {s.unique_id for s in rollup.subclusters_of(cluster)} == {s.unique_id for s in fresh.subclusters_of(cluster)}
    assert rollup.clusters() == fresh.clusters()
    assert rollup.computing_elements() == fresh.computing_elements()


def test_default_cluster_named_by_a_ce_is_published_while_empty() -> None:
    config = config_of("""
        [[clusters]]
        id = "a"
        nodes = "a[1-4]"
        [[computing_elements]]
        id = "ce"
        clusters = ["a", "default"]
    """)
    rollup = Rollup(config)
    rollup.update(host(make_node("a1", SMALL), config))
    assert [c.unique_id for c in rollup.clusters()] == ["a", DEFAULT_CLUSTER]
    assert rollup.cluster(DEFAULT_CLUSTER) is not None and rollup.subclusters_of(DEFAULT_CLUSTER) == []


@pytest.mark.parametrize("text", ["1e400", "inf", "-7", "nan", "3e12", "fast"])
def test_counts_that_are_no_measurement_are_not_published(text: str) -> None:
    node = make_node("h1", INTEL)
    node.extensions = [Extension(e.name, text if e.name in ("ClockSpeed", "CacheL2") else e.value, e.type)
                       for e in node.extensions]
    h = host(node, SiteConfig())
    assert h.processor.clock_speed is None and h.processor.cache_l2 is None
    assert h.processor.cache_l1d == 32  # the others still are


def test_a_host_never_has_more_processors_free_than_it_has() -> None:
    node = make_node("h1", INTEL)  # 40 processors
    node.available.items = [Consumable("Processors", 1000) if c.kind == "Processors" else c
                            for c in node.available.items]
    h = host(node, SiteConfig())
    assert h.total_cpus == 40 and h.available_cpus == 40 and h.free_cpus == 40
    rollup = Rollup(SiteConfig())
    rollup.update(h)
    (ce,) = rollup.computing_elements()
    assert ce.state.free_cpus == 40  # a CE's figure is a sum of its hosts'


@pytest.mark.parametrize("load", [float("inf"), 1e300, -1.0])
def test_absurd_loads_are_not_published(load: float) -> None:
    h = host(make_node("h1", INTEL, load=(load, 1.0, 1.0)), SiteConfig())
    assert h.processor_load is None and h.smp_load is None


class QueueBoard:
    """A job queue as the roll-up sees it (model.glue.CEQueueFigures): asked, never written to."""

    def __init__(self) -> None:
        #: (running, waiting, held processors, estimated and worst response time, jobs), or None
        self.figures: tuple[int, int, int, int, int, tuple[glue.CEJob, ...]] | None = None
        self.asked: list[str] = []

    def ce_state(self, ce_id: str, status: str, free_cpus: int, total_cpus: int) -> glue.CEQueued | None:
        self.asked.append(ce_id)
        if self.figures is None:
            return None
        running, waiting, held, estimated, worst, jobs = self.figures
        state = glue.CEState(status, running, waiting, worst, estimated, max(0, min(free_cpus, total_cpus - held)))
        return glue.CEQueued(state, jobs, (glue.VOFigures("atlas", running, 0),))


def test_the_ces_read_the_queue_s_figures_at_each_rendering() -> None:
    config = SiteConfig()
    board = QueueBoard()
    rollup = Rollup(config, board)
    for name in ("a1", "a2"):
        rollup.update(host(make_node(name, SMALL), config))
    (ce,) = rollup.computing_elements()
    total = ce.info.total_cpus
    assert (ce.state.running_jobs, ce.state.waiting_jobs, ce.state.free_cpus, ce.jobs) == (0, 0, total, ())
    job = glue.CEJob("7", "RUNNING")
    board.figures = (2, 3, total - 1, 60, 600, (job,))
    (ce,) = rollup.computing_elements()  # read now, not a copy taken when the queue was given
    state = ce.state
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (2, 3, 5)
    assert (state.estimated_response_time, state.worst_response_time, ce.jobs) == (60, 600, (job,))
    assert ce.by_vo == (glue.VOFigures("atlas", 2, 0),)
    assert state.free_cpus == 1 and state.status == "Production"  # the roll-up's status and processors
    # a filtered view (GET /v1/glue with host filters) reads the same queue
    (part,) = rollup.of_hosts([rollup.hosts["a1"]]).computing_elements()
    assert part.state.running_jobs == 2 and part.state.free_cpus == 0
    assert board.asked == [DEFAULT_CLUSTER] * 3
    other = QueueBoard()
    rollup.read_queue(other)
    assert rollup.computing_elements()[0].state.running_jobs == 0 and other.asked == [DEFAULT_CLUSTER]


def test_details_outside_the_key_are_published_while_every_member_shares_them(site_config: SiteConfig) -> None:
    rollup = Rollup(site_config)
    for i in (1, 2, 3):
        rollup.update(host(site_node(f"node{i:04d}"), site_config))
    (sub,) = rollup.subclusters.values()
    assert sub.processor.vendor == "GenuineIntel" and sub.operating_system.version == "Blue Onyx"
    odd = host(site_node("node0004"), site_config)
    odd = replace(odd, processor=replace(odd.processor, vendor="AuthenticAMD"),
                  operating_system=replace(odd.operating_system, version="Green Obsidian"))
    rollup.update(odd)
    assert rollup.subcluster_of("node0004") is sub and sub.host_count == 4
    assert sub.processor.vendor is None and sub.operating_system.version is None  # no longer shared
    assert sub.processor.model == INTEL.model  # what the key holds stays
    rollup.remove("node0004")
    assert sub.processor.vendor == "GenuineIntel" and sub.operating_system.version == "Blue Onyx"
    kept = sub.processor
    rollup.update(host(site_node("node0002"), site_config))  # a report that changes nothing of it
    assert sub.processor is kept


def test_two_kinds_whose_ids_collide_stay_two_subclusters(monkeypatch: pytest.MonkeyPatch) -> None:
    # a review: subcluster ids are 40 bits of a digest, and the roll-up took an id already made for
    # another kind as that kind's: a colliding report (2^20 tries for some pair, 2^40 for a given
    # one) took over the victims' subcluster (its members, its figures, its processor model)
    import hashlib

    from infosvc.hosts import rollup as rollup_module

    # every digest begins alike: any two kinds collide in their first 40 bits, never in all 160
    monkeypatch.setattr(rollup_module, "_digest", lambda text: "a" * 10 + hashlib.sha1(text.encode()).hexdigest()[10:])
    config = SiteConfig()
    rollup = Rollup(config)
    for name in ("victim1", "victim2"):
        rollup.update(host(make_node(f"{name}.example.org", INTEL), config))
    rollup.update(host(make_node("evil.example.org", AMD), config))
    subs = {sub.unique_id: sub for sub in rollup.subclusters.values()}
    assert len(subs) == 2
    victims = rollup.subclusters[rollup._sub_of["victim1.example.org"]]
    evil = rollup.subclusters[rollup._sub_of["evil.example.org"]]
    assert victims.unique_id != evil.unique_id and len(evil.unique_id) > len(victims.unique_id)
    assert victims.processor.model == INTEL.model and victims.host_count == 2
    assert evil.processor.model == AMD.model and evil.host_count == 1
    assert rollup._sub_of["victim2.example.org"] == victims.unique_id


def test_every_change_of_the_tree_counts_a_generation() -> None:
    """What tells a kept GLUE document from the tree now (infosvc/web/gridquery.py, WholeTrees): a
    change that no generation counted would be answered as it was before it."""
    config = SiteConfig()
    rollup = Rollup(config)
    seen = [rollup.generation]

    def moved() -> bool:
        seen.append(rollup.generation)
        return seen[-1] != seen[-2]

    first = host(make_node("n1", INTEL), config)
    rollup.update(first)
    assert moved()
    rollup.update(replace(first, last_report="2024-05-01T12:01:00Z"))  # a report: same subcluster
    assert moved()
    rollup.update(host(make_node("n1", AMD), config))  # another subcluster
    assert moved()
    assert rollup.set_state("n1", rollup.hosts["n1"].state) is not None and not moved()  # nothing changed
    rollup.set_state("n1", "Unreachable")
    assert moved()
    rollup.set_state("n1", "Ready", paused=True, reason="maintenance")
    assert moved()
    rollup.remove("n1")
    assert moved()
    rollup.remove("n1")  # not there: nothing changed
    assert not moved()
    rollup.read_lrms(lambda: [])
    assert moved()
