"""The GLUE tree as XML, valid against schemas/glue-ce-1.1.xsd (infosvc's rendering of GLUE CE 1.1).

`XmlDocuments` writes the documents of GET /v1/glue: the whole <Glue> tree, one ComputingElement,
Cluster, SubCluster or Host as a document of its own, a <Hosts> list; docs/glue-rendering.md
describes the shape. It renders a host's fragment on request and is handed the fragments back
to join: caching them is the publishing layer's (infosvc/publish/glue.py).

The writer builds the text directly, as node_xml does. The groups most hosts share (Architecture
to Processor) are kept by value here, as they are the same text for every host that has them.

Text is escaped; characters XML 1.0 cannot carry (control characters, lone surrogates,
U+FFFE/U+FFFF) are replaced with U+FFFD, so one odd string in a config or a report cannot make
the whole document unreadable. A number the schema cannot carry (a negative size, a load beyond
xs:int, a port beyond 65535) is left out, as "not published".
"""

from __future__ import annotations

import re
from typing import Callable, Final, Iterable

from infosvc.model import glue
from infosvc.model.glue import GlueTree, Host, SubCluster
from infosvc.model.snapshot import Snapshot, SnapshotView

NAMESPACE: Final = "urn:infosvc:glue:ce:1.1"
SCHEMA_FILE: Final = "glue-ce-1.1.xsd"
#: The host states a subcluster counts, in the order its Totals lists them.
HOST_STATES: Final = ("Pending", "Ready", "Paused", "Unreachable")

_DECLARATION: Final = b"<?xml version='1.0' encoding='UTF-8'?>\n"
_INT_MIN: Final = -(1 << 31)
_INT_MAX: Final = (1 << 31) - 1

# What a text value may need: an escape, or a replacement for a character XML cannot carry at
# all (control characters, lone surrogates, U+FFFE, U+FFFF). One search per value; most find nothing.
_TEXT_SPECIAL = re.compile("[&<>\r\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]").search
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_NOT_XML_SUB = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]").sub
#: Bound on the fragments kept by value (the groups many hosts share); cleared when reached.
SHARED_CACHE_MAX: Final = 4096
_shared_cache: dict[tuple[object, ...], str] = {}

#: A host's fragment in a rendering, given the subcluster it is shown in.
Fragment = Callable[[Host, "str | None"], bytes]


def _text(value: str) -> str:
    """Character data: escaped, and any character XML cannot carry replaced with U+FFFD."""
    if _TEXT_SPECIAL(value):
        return _NOT_XML_SUB("\ufffd", value.translate(_TEXT_ESCAPES))
    return value


def _bool(value: bool) -> str:
    return "true" if value else "false"


def count(value: int | None) -> int | None:
    """A value for a non-negative schema type, or None (not published) when it is not one."""
    return value if value is not None and value >= 0 else None


def availability(load: glue.Load | None) -> glue.Load | None:
    """A ProcessorLoad / SMPLoad whose three values fit xs:int, or None."""
    if load is None:
        return None
    for value in (load.last_1min, load.last_5min, load.last_15min):
        if not _INT_MIN <= value <= _INT_MAX:
            return None
    return load


def port(value: int | None) -> int | None:
    return value if value is not None and 0 < value < 65536 else None


# --- the parts --------------------------------------------------------------------------------

def _opt(parts: list[str], tag: str, value: str | int | None) -> None:
    if value is not None:
        parts.append(f"<{tag}>{_text(value) if isinstance(value, str) else value}</{tag}>")


def _size(tag: str, value: int | None) -> str:
    """An optional non-negative integer element."""
    return f"<{tag}>{value}</{tag}>" if value is not None and value >= 0 else ""


def _shared_groups(architecture: glue.Architecture, operating_system: glue.OperatingSystem,
                   benchmark: glue.Benchmark | None, software: glue.ApplicationSoftware | None,
                   processor: glue.Processor) -> str:
    """Architecture to Processor: the groups a SubCluster and a Host both carry, in the schema's order.

    Kept by value: the hosts of a subcluster share them, and a host's next report repeats them.
    """
    key = (architecture, operating_system, benchmark, software, processor)
    text = _shared_cache.get(key)
    if text is not None:
        return text
    parts = ["<Architecture>"]
    _opt(parts, "PlatformType", architecture.platform_type)
    _opt(parts, "SMPSize", count(architecture.smp_size))
    parts.append("</Architecture><OperatingSystem>")
    _opt(parts, "Name", operating_system.name)
    _opt(parts, "Release", operating_system.release)
    _opt(parts, "Version", operating_system.version)
    parts.append("</OperatingSystem>")
    if benchmark is not None:
        parts.append(f"<Benchmark><SI00>{max(0, benchmark.si00)}</SI00><SF00>{max(0, benchmark.sf00)}</SF00></Benchmark>")
    if software is not None:
        parts.append("<ApplicationSoftware>")
        parts.extend(f"<RunTimeEnvironment>{_text(rte)}</RunTimeEnvironment>" for rte in software.runtime_environment)
        parts.append("</ApplicationSoftware>")
    p = processor
    parts.append("<Processor>")
    _opt(parts, "Vendor", p.vendor)
    _opt(parts, "Model", p.model)
    _opt(parts, "Version", p.version)
    _opt(parts, "ClockSpeed", count(p.clock_speed))
    _opt(parts, "ComputerISA", p.instruction_set)
    _opt(parts, "Features", p.features)
    _opt(parts, "CacheL1", count(p.cache_l1))
    _opt(parts, "CacheL1I", count(p.cache_l1i))
    _opt(parts, "CacheL1D", count(p.cache_l1d))
    _opt(parts, "CacheL2", count(p.cache_l2))
    parts.append("</Processor>")
    text = "".join(parts)
    if len(_shared_cache) >= SHARED_CACHE_MAX:
        _shared_cache.clear()
    _shared_cache[key] = text
    return text


def _main_memory(m: glue.MainMemory) -> str:
    return (f"<MainMemory>{_size('RAMSize', m.ram_size)}{_size('RAMAvailable', m.ram_available)}"
            f"{_size('VirtualSize', m.virtual_size)}{_size('VirtualAvailable', m.virtual_available)}</MainMemory>")


def _file_system(tag: str, fs: glue.FileSystem) -> str:
    kind = f"<Type>{_text(fs.type)}</Type>" if fs.type is not None else ""
    return (f"<{tag}><Root>{_text(fs.root)}</Root><Name>{_text(fs.name)}</Name>{kind}"
            f"<ReadOnly>{_bool(fs.read_only)}</ReadOnly>{_size('Size', fs.size)}"
            f"{_size('AvailableSpace', fs.available_space)}</{tag}>")


def _network_adapter(nic: glue.NetworkAdapter) -> str:
    address = f"<IPAddress>{_text(nic.ip_address)}</IPAddress>" if nic.ip_address is not None else ""
    outbound = f"<OutboundIP>{_bool(nic.outbound_ip)}</OutboundIP>" if nic.outbound_ip is not None else ""
    inbound = f"<InboundIP>{_bool(nic.inbound_ip)}</InboundIP>" if nic.inbound_ip is not None else ""
    return (f"<NetworkAdapter><Name>{_text(nic.name)}</Name>{address}{_size('MTU', nic.mtu)}{outbound}{inbound}"
            "</NetworkAdapter>")


def _admin_xml(host: Host) -> str:
    """The agent's own State and an admin's pause and reason: infosvc additions, each when present."""
    said = f"<ReportedState>{_text(host.reported_state)}</ReportedState>" if host.reported_state else ""
    said += "<Paused>true</Paused>" if host.paused else ""
    return said + (f"<Reason>{_text(host.reason)}</Reason>" if host.reason else "")


def host_fragment(host: Host) -> bytes:
    """One <Host> element, without a namespace declaration (it inherits its parent's)."""
    parts = [f"<Host><UniqueID>{_text(host.unique_id)}</UniqueID><Name>{_text(host.name)}</Name>"
             f"<State>{_text(host.state)}</State><LastReport>{_text(host.last_report)}</LastReport>",
             _admin_xml(host),
             _shared_groups(host.architecture, host.operating_system, host.benchmark, host.application_software,
                            host.processor),
             _main_memory(host.main_memory)]
    file_systems = host.file_systems
    parts.extend(_file_system("FileSystem", fs) for fs in file_systems if not fs.remote)
    parts.extend(_file_system("RemoteFileSystem", fs) for fs in file_systems if fs.remote)
    if (load := availability(host.processor_load)) is not None:
        parts.append(f"<ProcessorLoad><Last1min>{load.last_1min}</Last1min><Last5min>{load.last_5min}</Last5min>"
                     f"<Last15min>{load.last_15min}</Last15min></ProcessorLoad>")
    if (load := availability(host.smp_load)) is not None:
        parts.append(f"<SMPLoad><Load1min>{load.last_1min}</Load1min><Load5min>{load.last_5min}</Load5min>"
                     f"<Load15min>{load.last_15min}</Load15min></SMPLoad>")
    parts.extend(map(_network_adapter, host.network_adapters))
    parts.append("</Host>")
    return "".join(parts).encode()


def computing_element_xml(ce: glue.ComputingElement, namespace: str = "", snapshot: Snapshot | None = None) -> str:
    """One <ComputingElement> element; its State names `snapshot` when given."""
    parts = [f"<ComputingElement{namespace}><UniqueID>{_text(ce.unique_id)}</UniqueID><Name>{_text(ce.name)}</Name>"]
    _opt(parts, "InformationServiceURL", ce.information_service_url)
    info, policy, state = ce.info, ce.policy, ce.state
    parts.append(f"<Queue>{_text(ce.queue)}</Queue><Info><LRMSType>{_text(info.lrms_type)}</LRMSType>")
    _opt(parts, "LRMSVersion", info.lrms_version)
    _opt(parts, "GRAMVersion", info.gram_version)
    _opt(parts, "HostName", info.host_name)
    _opt(parts, "GatekeeperPort", port(info.gatekeeper_port))
    parts.append(
        f"<TotalCPUs>{max(0, info.total_cpus)}</TotalCPUs></Info>"
        f"<Policy><MaxWallClockTime>{max(0, policy.max_wall_clock_time)}</MaxWallClockTime>"
        f"<MaxCPUTime>{max(0, policy.max_cpu_time)}</MaxCPUTime>"
        f"<MaxTotalJobs>{max(0, policy.max_total_jobs)}</MaxTotalJobs>"
        f"<MaxRunningJobs>{max(0, policy.max_running_jobs)}</MaxRunningJobs>"
        f"<Priority>{policy.priority}</Priority></Policy>"
        f"<State><RunningJobs>{max(0, state.running_jobs)}</RunningJobs><TotalJobs>{max(0, state.total_jobs)}</TotalJobs>"
        f"<Status>{_text(state.status)}</Status><WaitingJobs>{max(0, state.waiting_jobs)}</WaitingJobs>"
        f"<WorstResponseTime>{max(0, state.worst_response_time)}</WorstResponseTime>"
        f"<EstimatedResponseTime>{max(0, state.estimated_response_time)}</EstimatedResponseTime>"
        f"<FreeCPUs>{max(0, state.free_cpus)}</FreeCPUs>"
        + (f"<Snapshot>{snapshot.id}</Snapshot><SnapshotTime>{snapshot.time}</SnapshotTime>" if snapshot else "")
        + "</State><AccessControlBase>")
    parts.extend(f"<Rule>{_text(rule)}</Rule>" for rule in ce.access_control_rules)
    parts.append("</AccessControlBase>")
    for job in ce.jobs:
        parts.append("<Job>")
        _opt(parts, "LocalOwner", job.local_owner)
        _opt(parts, "GlobalOwner", job.global_owner)
        parts.append(f"<LocalID>{_text(job.local_id)}</LocalID>")
        _opt(parts, "GlobalID", job.global_id)
        parts.append(f"<Status>{_text(job.status)}</Status>")
        _opt(parts, "SchedulerSpecific", job.scheduler_specific)
        parts.append("</Job>")
    parts.extend(f"<ClusterRef>{_text(cid)}</ClusterRef>" for cid in ce.clusters)
    parts.append("</ComputingElement>")
    return "".join(parts)


def subcluster_head(sub: SubCluster, url: str | None, namespace: str = "") -> str:
    """A <SubCluster> element up to its first Host."""
    parts = [f"<SubCluster{namespace}><UniqueID>{_text(sub.unique_id)}</UniqueID><Name>{_text(sub.name)}</Name>"]
    _opt(parts, "InformationServiceURL", url)
    parts.append(f"<SubClusterCount>{max(0, sub.host_count)}</SubClusterCount>")
    parts.append(_shared_groups(sub.architecture, sub.operating_system, sub.benchmark, sub.application_software,
                                sub.processor))
    parts.append(_main_memory(sub.main_memory))
    states = sub.states
    parts.append(f"<Totals><LiveHosts>{max(0, sub.live_hosts)}</LiveHosts><TotalCPUs>{max(0, sub.total_cpus)}</TotalCPUs>"
                 f"<FreeCPUs>{max(0, sub.free_cpus)}</FreeCPUs><RAMAvailable>{max(0, sub.ram_available)}</RAMAvailable>")
    parts.extend(f"<{state}Hosts>{max(0, states.get(state, 0))}</{state}Hosts>" for state in HOST_STATES)
    parts.append("</Totals>")
    return "".join(parts)


def cluster_head(cluster: glue.Cluster, namespace: str = "") -> str:
    parts = [f"<Cluster{namespace}><UniqueID>{_text(cluster.unique_id)}</UniqueID><Name>{_text(cluster.name)}</Name>"]
    _opt(parts, "InformationServiceURL", cluster.information_service_url)
    return "".join(parts)


# --- documents --------------------------------------------------------------------------------

class XmlDocuments:
    """The GLUE documents in XML, from a tree and its hosts' fragments (`fragment(host, subcluster
    id)`, which the publishing layer caches: infosvc/publish/glue.py)."""

    media_type: Final = "application/xml"
    _xmlns: Final = f' xmlns="{NAMESPACE}"'

    def host(self, host: Host, sub_id: str | None) -> bytes:
        return host_fragment(host)

    def _subcluster(self, tree: GlueTree, sub: SubCluster, fragment: Fragment, out: list[bytes],
                    namespace: str = "") -> None:
        out.append(subcluster_head(sub, tree.information_service_url, namespace).encode())
        sub_id = sub.unique_id
        out.extend(fragment(host, sub_id) for host in tree.hosts_of(sub_id))
        out.append(b"</SubCluster>")

    def _cluster(self, tree: GlueTree, cluster: glue.Cluster, fragment: Fragment, out: list[bytes],
                 namespace: str = "") -> None:
        out.append(cluster_head(cluster, namespace).encode())
        for sub in tree.subclusters_of(cluster.unique_id):
            self._subcluster(tree, sub, fragment, out)
        out.append(b"</Cluster>")

    def tree(self, tree: GlueTree, fragment: Fragment) -> bytes:
        """The whole tree: a <Glue> document with every computing element, then every cluster."""
        return b"".join(self.tree_parts(tree, fragment))

    def tree_parts(self, tree: GlueTree, fragment: Fragment) -> list[bytes]:
        """The whole tree as parts to write in turn: each host's fragment one of them, as given."""
        out = [_DECLARATION, f"<Glue{self._xmlns}>".encode()]
        snap = tree.snapshot if isinstance(tree, SnapshotView) else None
        out.append("".join(computing_element_xml(ce, snapshot=snap) for ce in tree.computing_elements()).encode())
        for cluster in tree.clusters():
            self._cluster(tree, cluster, fragment, out)
        out.append(b"</Glue>\n")
        return out

    def host_parts(self, fragments: Iterable[bytes]) -> list[bytes]:
        """A <Hosts> document of these hosts' fragments, in the order given, as parts to write in turn."""
        return [_DECLARATION, f"<Hosts{self._xmlns}>".encode(), *fragments, b"</Hosts>\n"]

    def host_document(self, fragment: bytes) -> bytes:
        return b"".join((_DECLARATION, f"<Host{self._xmlns}>".encode(), fragment[len(b"<Host>"):], b"\n"))

    def subcluster_parts(self, tree: GlueTree, sub: SubCluster, fragment: Fragment) -> list[bytes]:
        """A subcluster as a document of its own, holding its hosts as in the tree, as parts to
        write in turn (each host's fragment one of them, as given)."""
        out = [_DECLARATION]
        self._subcluster(tree, sub, fragment, out, self._xmlns)
        out.append(b"\n")
        return out

    def cluster_parts(self, tree: GlueTree, cluster: glue.Cluster, fragment: Fragment) -> list[bytes]:
        """A cluster as a document of its own, holding its subclusters and hosts as in the tree,
        as parts to write in turn."""
        out = [_DECLARATION]
        self._cluster(tree, cluster, fragment, out, self._xmlns)
        out.append(b"\n")
        return out

    def subcluster_document(self, tree: GlueTree, sub: SubCluster, fragment: Fragment) -> bytes:
        return b"".join(self.subcluster_parts(tree, sub, fragment))

    def cluster_document(self, tree: GlueTree, cluster: glue.Cluster, fragment: Fragment) -> bytes:
        return b"".join(self.cluster_parts(tree, cluster, fragment))

    def computing_element_document(self, tree: GlueTree, ce: glue.ComputingElement) -> bytes:
        """A computing element as a document of its own: it names its clusters by ClusterRef."""
        snap = tree.snapshot if isinstance(tree, SnapshotView) else None
        return b"".join((_DECLARATION, computing_element_xml(ce, self._xmlns, snap).encode(), b"\n"))
