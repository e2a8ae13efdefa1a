"""The GLUE tree as XML, valid against schemas/glue-ce-1.1.xsd (infosvc's rendering of GLUE CE 1.1).

GlueXml(rollup) answers GET /v1/glue: tree() is the whole <Glue> document, entity(kind, id) one
ComputingElement, Cluster, SubCluster or Host as a document of its own, hosts(hosts) a <Hosts>
list. docs/glue-rendering.md describes the shape.

The writer builds the text directly, as node_xml does. A site's document is mostly its hosts,
so each host's fragment is rendered once and kept while the roll-up still holds that very Host
object (Host is frozen, and the roll-up replaces it on every change); removed hosts' fragments
are dropped. The groups most hosts share (Architecture to Processor) are also kept by value.
Subclusters, clusters and computing elements are few and are rendered on every call. A host
that reported since the last read is rendered again on the next one; warm(hosts), called as
hosts report, moves that cost from the read to the report.

Text is escaped; characters XML 1.0 cannot carry (control characters, lone surrogates,
U+FFFE/U+FFFF) are replaced with U+FFFD, so one odd string in a config or a report cannot make
the whole document unreadable. A number the schema cannot carry (a negative size, a load beyond
xs:int, a port beyond 65535) is left out, as "not published".
"""

from __future__ import annotations

import re
from typing import Final, Iterable, TypeVar

from infosvc.model import glue
from infosvc.model.glue import Host, SubCluster
from infosvc.site.rollup import Rollup

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

E = TypeVar("E")


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


def prune(cache: dict[str, E], hosts: dict[str, Host]) -> None:
    """Drop cached fragments of hosts the roll-up no longer holds."""
    if len(cache) > len(hosts):
        for host_id in [h for h in cache if h not in hosts]:
            del cache[host_id]


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


def host_fragment(host: Host) -> bytes:
    """One <Host> element, without a namespace declaration (it inherits its parent's)."""
    parts = [f"<Host><UniqueID>{_text(host.unique_id)}</UniqueID><Name>{_text(host.name)}</Name>"
             f"<State>{_text(host.state)}</State><LastReport>{_text(host.last_report)}</LastReport>",
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


def computing_element_xml(ce: glue.ComputingElement, namespace: str = "") -> str:
    """One <ComputingElement> element."""
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
        f"<FreeCPUs>{max(0, state.free_cpus)}</FreeCPUs></State><AccessControlBase>")
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

class GlueXml:
    """XML renderings of one roll-up's GLUE tree, with each host's fragment cached."""

    def __init__(self, rollup: Rollup) -> None:
        self.rollup = rollup
        self._cache: dict[str, tuple[Host, bytes]] = {}
        self._xmlns = f' xmlns="{NAMESPACE}"'

    def _host(self, host: Host) -> bytes:
        entry = self._cache.get(host.unique_id)
        if entry is not None and entry[0] is host:
            return entry[1]
        fragment = host_fragment(host)
        if self.rollup.hosts.get(host.unique_id) is host:
            self._cache[host.unique_id] = (host, fragment)
        return fragment

    def _subcluster(self, sub: SubCluster, out: list[bytes], namespace: str = "") -> None:
        url = self.rollup.config.service.information_service_url or None
        out.append(subcluster_head(sub, url, namespace).encode())
        get = self._cache.get
        for host in self.rollup.hosts_of(sub.unique_id):
            entry = get(host.unique_id)
            out.append(entry[1] if entry is not None and entry[0] is host else self._host(host))
        out.append(b"</SubCluster>")

    def _cluster(self, cluster: glue.Cluster, out: list[bytes], namespace: str = "") -> None:
        out.append(cluster_head(cluster, namespace).encode())
        for sub in self.rollup.subclusters_of(cluster.unique_id):
            self._subcluster(sub, out)
        out.append(b"</Cluster>")

    def tree(self) -> bytes:
        """The whole tree: a <Glue> document with every computing element, then every cluster."""
        rollup = self.rollup
        out = [_DECLARATION, f"<Glue{self._xmlns}>".encode()]
        out.append("".join(computing_element_xml(ce) for ce in rollup.computing_elements()).encode())
        for cluster in rollup.clusters():
            self._cluster(cluster, out)
        out.append(b"</Glue>\n")
        prune(self._cache, rollup.hosts)
        return b"".join(out)

    def entity(self, kind: str, id: str) -> bytes | None:
        """One entity as a document of its own, or None when there is no such `kind` or id.

        A cluster or subcluster document holds its subclusters and hosts, as in the tree; a
        computing element names its clusters by ClusterRef.
        """
        rollup = self.rollup
        out = [_DECLARATION]
        if kind == "hosts":
            host = rollup.hosts.get(id)
            if host is None:
                return None
            fragment = self._host(host)
            out += [f"<Host{self._xmlns}>".encode(), fragment[len(b"<Host>"):]]
        elif kind == "subclusters":
            sub = rollup.subclusters.get(id)
            if sub is None:
                return None
            self._subcluster(sub, out, self._xmlns)
        elif kind == "clusters":
            cluster = next((c for c in rollup.clusters() if c.unique_id == id), None)
            if cluster is None:
                return None
            self._cluster(cluster, out, self._xmlns)
        elif kind == "computing-elements":
            ce = rollup.computing_element(id)
            if ce is None:
                return None
            out.append(computing_element_xml(ce, self._xmlns).encode())
        else:
            return None
        out.append(b"\n")
        prune(self._cache, rollup.hosts)
        return b"".join(out)

    def warm(self, hosts: Iterable[Host]) -> None:
        """Render now the fragments of these hosts of the roll-up (say, as they report), not at the next read."""
        for host in hosts:
            self._host(host)

    def hosts(self, hosts: Iterable[Host]) -> bytes:
        """A <Hosts> document listing `hosts`, in the order given."""
        out = [_DECLARATION, f"<Hosts{self._xmlns}>".encode()]
        out.extend(self._host(host) for host in hosts)
        out.append(b"</Hosts>\n")
        prune(self._cache, self.rollup.hosts)
        return b"".join(out)
