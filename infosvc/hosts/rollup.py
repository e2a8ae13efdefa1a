"""The GLUE roll-up: SSS Nodes -> GLUE Hosts -> homogeneous SubClusters -> Clusters -> CEs.

`host_from_node` is the SSS -> GLUE mapping of one host (docs/glue-mapping.md), a pure function.
`Rollup` keeps the tree incrementally: `update` with one host changes that host and the running
aggregates of its subcluster (and of the one it left, when its hardware changed); clusters and
computing elements are summed from their subclusters when asked, which costs the number of
subclusters, not of hosts.

A subcluster is the set of hosts of one cluster that share the homogeneity key: processor model
and clock, CPU count, RAM size (to the nearest GiB: identical machines differ by a few MB of
kernel reservations), OS name and release, architecture and ISA, and the Benchmark,
ApplicationSoftware, licenses and consumables the site config gives them. Its id is derived from
the cluster and the key, so it is the same across restarts and on every aggregator with the same
hosts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Iterable, Iterator, KeysView

from infosvc.model import glue
from infosvc.model.glue import NO_QUEUE, CEQueueFigures, Host, SubCluster
from infosvc.model.node import Consumable, Node
from infosvc.config import SiteConfig
from infosvc.config import cluster_licenses, resources_of

MB = "MB"


#: Larger counts (MHz, KB, bytes of MTU, tasks) are no measurement of a real host.
_MAX_COUNT = 1 << 31


def _int(text: str | None) -> int | None:
    """A non-negative count written in an Extension (free text); None when it is not one."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if 0 <= value < _MAX_COUNT else None


def _mb(item: Consumable | None) -> int | None:
    """`item` in whole MB; None when absent or in units that are no size (units is free text in an
    SSS document, and a report the store has committed must not fail to publish)."""
    if item is None:
        return None
    try:
        if item.units == MB:
            # What the agent writes: the same number as item.amount(MB) gives (a shift by 2^0),
            # without its unit lookups.
            return int(float(item.value))
        return int(item.amount(MB))
    except (ValueError, OverflowError):
        return None


_SPANS = ("1min", "5min", "15min")


def _load(loads: dict[str | None, float], cpus: int) -> tuple[glue.Load, glue.Load] | None:
    """ProcessorLoad and SMPLoad as GLUE defines them: (available CPUs - runnable tasks) x 100.

    `loads` is the load average by span. SMPLoad is for the whole node; ProcessorLoad is the same
    per processor, so that nodes of different sizes compare (a single-CPU node has the two equal).
    """
    if len(loads) != 3 or cpus <= 0:
        return None
    l1, l5, l15 = loads["1min"], loads["5min"], loads["15min"]
    if not (0 <= l1 < _MAX_COUNT and 0 <= l5 < _MAX_COUNT and 0 <= l15 < _MAX_COUNT):
        return None
    # Positional: glue.Load(last_1min, last_5min, last_15min).
    return (glue.Load(round((cpus - l1) * 100 / cpus), round((cpus - l5) * 100 / cpus),
                      round((cpus - l15) * 100 / cpus)),
            glue.Load(round((cpus - l1) * 100), round((cpus - l5) * 100), round((cpus - l15) * 100)))


def _address(first: str | None, others: Iterable[str]) -> str | None:
    """The address GLUE publishes for an adapter: its first IPv4 one, else its first (of `first`
    and then `others`, in document order)."""
    # Prefer IPv4: GLUE 1.1 predates IPv6 in practice, and consumers expect a dotted quad.
    if first is None or ":" not in first:
        return first
    return next((a for a in others if ":" not in a), first)


@lru_cache(maxsize=1024)
def _processor(vendor: str | None, model: str | None, version: str | None, clock_speed: str | None,
               instruction_set: str | None, flags: str | None, cache_l1: str | None, cache_l1i: str | None,
               cache_l1d: str | None, cache_l2: str | None) -> glue.Processor:
    """The Processor group from its Extensions' text.

    Memoized, as are the other groups a host repeats in every report and shares with the hosts
    of its kind: a frozen dataclass's __init__ sets each field with an object.__setattr__ call,
    which makes this one cost several times the look-up; being frozen, one object serves every
    host. Keyed by the text, so that a hit also skips parsing the counts. Bounded: a site of more
    kinds than that only loses some of the saving.
    """
    return glue.Processor(vendor, model, version, _int(clock_speed), instruction_set, flags, _int(cache_l1),
                          _int(cache_l1i), _int(cache_l1d), _int(cache_l2))


# Memoized like _processor. typed=True where a number is an argument: 1 and 1.0 are one key to a
# plain lru_cache, and the group must hold what was asked for.
_architecture = lru_cache(maxsize=1024, typed=True)(glue.Architecture)
_operating_system = lru_cache(maxsize=1024)(glue.OperatingSystem)
_benchmark = lru_cache(maxsize=1024, typed=True)(glue.Benchmark)
_application_software = lru_cache(maxsize=1024)(glue.ApplicationSoftware)

_NONE: dict[str, str] = {}  # the Extensions of a context the node does not have (never written to)


def host_from_node(node: Node, state: str, config: SiteConfig, last_report: str, paused: bool = False,
                   reason: str | None = None, clock_skew: float | None = None) -> Host:
    """The GLUE Host of an SSS Node as the agent writes it (docs/node-mapping.md).

    It runs for every report ingested and for every host at start, so it reads each list of the
    node once (the Extensions, then each category's consumables) rather than once per value it
    needs, and builds the GLUE objects with positional arguments: keywords cost a third more in
    a frozen dataclass's __init__. The arguments are in glue's field order, named in comments;
    tests/site/test_rollup.py gives every field a value of its own, which tells a swap.
    """
    # context (Extension type) -> name -> value of the first Extension of that name, as
    # Node.extensions_of has it. The one name that repeats in a context is an adapter's Address
    # (one per address): its further values go to `more`, in document order, so that the common
    # case costs no test of the name. The agent writes the Extensions of a context together, so
    # the context's dict is looked up only when the context changes.
    by_type: dict[str | None, dict[str, str]] = {}
    more: dict[tuple[str | None, str], list[str]] = {}
    current: str | None = None
    found = by_type[None] = {}  # untyped Extensions: kept, never read
    for ext in node.extensions:
        context = ext.type
        if context != current:
            current = context
            found = by_type.setdefault(context, {})
        name = ext.name
        if name not in found:
            found[name] = ext.value
        else:
            more.setdefault((context, name), []).append(ext.value)

    # Of Processors, Memory and Swap the first of a category counts, as Properties.get has it; of
    # a FileSystem resource the last of a mount point, in the place of the first.
    configured: dict[str, Consumable] = {}
    sizes: dict[str | None, Consumable] = {}
    nics: list[str] = []
    for item in node.configured.items:
        kind = item.kind
        if kind == "Resource":
            if item.name == "FileSystem":
                sizes[item.type] = item
            elif item.name == "NetworkAdapter" and item.type and item.type != "lo":
                nics.append(item.type)
        elif kind not in configured:
            configured[kind] = item
    available: dict[str, Consumable] = {}
    frees: dict[str | None, Consumable] = {}
    for item in node.available.items:
        kind = item.kind
        if kind == "Resource":
            if item.name == "FileSystem":
                frees[item.type] = item
        elif kind not in available:
            available[kind] = item
    loads: dict[str | None, float] = {}
    for item in node.utilized.items:
        # The name first: most utilized items are adapter counters, and only a Resource has one.
        if item.name == "Load" and item.kind == "Resource" and item.type in _SPANS:
            loads[item.type] = float(item.value)

    processors = configured.get("Processors")
    cpus = int(processors.value) if processors is not None else 0
    free = available.get("Processors")

    file_systems = []
    for root, size in sizes.items():
        if root is None:
            continue
        fs_ext = by_type.get(f"FileSystem:{root}", _NONE)
        # root, name, type, read_only, size, available_space, remote
        file_systems.append(glue.FileSystem(
            root, fs_ext.get("Device", root), fs_ext.get("Type"), fs_ext.get("ReadOnly", "false").lower() == "true",
            _mb(size), _mb(frees.get(root)), fs_ext.get("Kind") == "remote"))

    adapters = []
    for nic in nics:
        context = f"NetworkAdapter:{nic}"
        nic_ext = by_type.get(context, _NONE)
        address = _address(nic_ext.get("Address"), more.get((context, "Address"), ()))
        # name, ip_address, mtu
        adapters.append(glue.NetworkAdapter(nic, address, _int(nic_ext.get("MTU"))))

    os_ext = by_type.get("OperatingSystem", _NONE)
    cpu = by_type.get("Processor", _NONE)
    load = _load(loads, cpus)
    cluster = config.cluster_of(node.id)
    bench = config.benchmark_of(node.id)
    software = config.software_of(node.id)
    return Host(
        node.id, node.name or node.id, state, last_report, cluster.id,  # unique_id, name, state, last_report, cluster
        _architecture(node.arch, cpus or None),
        _operating_system(os_ext.get("Name") or node.opsys, os_ext.get("Release"), os_ext.get("Version")),
        _benchmark(bench.si00, bench.sf00) if bench is not None else None,
        _application_software(software) if software else None,
        _processor(cpu.get("Vendor"), cpu.get("Model"), cpu.get("Version"), cpu.get("ClockSpeed"),
                   cpu.get("InstructionSet") or node.arch, cpu.get("Flags"), cpu.get("CacheL1"), cpu.get("CacheL1I"),
                   cpu.get("CacheL1D"), cpu.get("CacheL2")),
        # ram_size, ram_available, virtual_size, virtual_available
        glue.MainMemory(_mb(configured.get("Memory")), _mb(available.get("Memory")), _mb(configured.get("Swap")),
                        _mb(available.get("Swap"))),
        tuple(file_systems),
        load[0] if load else None, load[1] if load else None,  # processor_load, smp_load
        tuple(adapters),
        cpus, max(0, int(free.value)) if free is not None else 0,  # total_cpus, available_cpus
        node.state, paused, reason,  # reported_state, paused, reason
        resources=resources_of(config.resources, node.id, cluster.id), clock_skew_seconds=clock_skew,
    )


def ram_class_mb(ram_size: int | None) -> int | None:
    """RAM size as the homogeneity key sees it: to the nearest GiB, in MB (at least 1 GiB)."""
    if ram_size is None:
        return None
    return max(1, round(ram_size / 1024)) * 1024


def subcluster_key(host: Host) -> tuple[object, ...]:
    p, os_ = host.processor, host.operating_system
    # ComputerISA is in the key because the subcluster publishes it: every member must share it.
    return (host.cluster, p.model, p.clock_speed, host.architecture.smp_size, ram_class_mb(host.main_memory.ram_size),
            os_.name, os_.release, host.architecture.platform_type, p.instruction_set, host.benchmark,
            host.application_software, host.resources)


def _subcluster_for(host: Host, key: tuple[object, ...]) -> SubCluster:
    # Without resources the digest is that of the key before they were in it: ids stay as they were.
    digest = hashlib.sha1(repr(key[1:] if key[-1] is not None else key[1:-1]).encode()).hexdigest()[:10]
    p, os_, arch = host.processor, host.operating_system, host.architecture
    ram = ram_class_mb(host.main_memory.ram_size)
    words = [arch.platform_type or "unknown-arch", f"{arch.smp_size or 0}cpu", p.model or "unknown-cpu",
             f"{p.clock_speed}MHz" if p.clock_speed else None, f"{ram // 1024}GiB" if ram else None,
             " ".join(filter(None, (os_.name, os_.release))) or None]
    return SubCluster(
        unique_id=f"{host.cluster}-{digest}", name=" ".join(w for w in words if w), cluster=host.cluster,
        architecture=arch, operating_system=glue.OperatingSystem(os_.name, os_.release, None),
        # Only what every member shares by construction of the key is published at this level.
        processor=glue.Processor(model=p.model, clock_speed=p.clock_speed, instruction_set=p.instruction_set),
        main_memory=glue.MainMemory(ram_size=ram), benchmark=host.benchmark,
        application_software=host.application_software, resources=host.resources)


@dataclass(frozen=True, slots=True)
class Totals:
    hosts: int = 0
    live_hosts: int = 0
    total_cpus: int = 0
    free_cpus: int = 0


class Rollup:
    """The GLUE tree of a site, kept current one host at a time."""

    def __init__(self, config: SiteConfig, queue: CEQueueFigures = NO_QUEUE) -> None:
        self.config = config
        self.hosts: dict[str, Host] = {}
        self.subclusters: dict[str, SubCluster] = {}
        self._members: dict[str, dict[str, None]] = {}  # subcluster -> its hosts, in arrival order
        self._sub_of: dict[str, str] = {}  # host -> subcluster
        self._key_of: dict[tuple[object, ...], str] = {}  # homogeneity key -> subcluster
        self._key_by_sub: dict[str, tuple[object, ...]] = {}  # and back
        self._subs_of_cluster: dict[str, dict[str, None]] = {}
        #: where the CEs' job figures are read at each rendering (the site's job queue)
        self._queue = queue

    # --- changes ------------------------------------------------------------------------------

    def update(self, host: Host) -> SubCluster:
        """Put `host` in the tree (new, or replacing its previous report); returns its subcluster."""
        old = self.hosts.get(host.unique_id)
        key = subcluster_key(host)
        sub_id = self._key_of.get(key)
        if old is not None:
            old_sub = self._sub_of[host.unique_id]
            self._account(self.subclusters[old_sub], old, -1)
            if old_sub != sub_id:
                self._leave(host.unique_id, old_sub)
        if sub_id is None:
            sub = _subcluster_for(host, key)
            sub_id = sub.unique_id
            self._key_of[key] = sub_id
            self._key_by_sub[sub_id] = key
            self.subclusters[sub_id] = sub
            self._members[sub_id] = {}
            self._subs_of_cluster.setdefault(host.cluster, {})[sub_id] = None
        sub = self.subclusters[sub_id]
        self._members[sub_id][host.unique_id] = None
        self._sub_of[host.unique_id] = sub_id
        self.hosts[host.unique_id] = host
        self._account(sub, host, +1)
        return sub

    def read_queue(self, queue: CEQueueFigures) -> None:
        """Publish the CEs with this queue's figures from now on (the site's wiring, once at start)."""
        self._queue = queue

    def of_hosts(self, hosts: Iterable[Host]) -> Rollup:
        """A roll-up of these hosts alone, with this one's config and queue figures (a filtered view)."""
        part = Rollup(self.config, self._queue)
        for host in hosts:
            part.update(host)
        return part

    def set_state(self, host_id: str, state: str, paused: bool | None = None, reason: str | None = None) -> Host | None:
        """The host's life-cycle state changed, or what an admin decided (`paused`, `reason`)."""
        old = self.hosts.get(host_id)
        if old is None:
            return None
        paused = old.paused if paused is None else paused
        if (old.state, old.paused, old.reason) == (state, paused, reason):
            return old
        sub = self.subclusters[self._sub_of[host_id]]
        self._account(sub, old, -1)
        new = replace(old, state=state, paused=paused, reason=reason)
        self.hosts[host_id] = new
        self._account(sub, new, +1)
        return new

    def remove(self, host_id: str) -> None:
        old = self.hosts.pop(host_id, None)
        if old is None:
            return
        sub_id = self._sub_of[host_id]
        self._account(self.subclusters[sub_id], old, -1)
        self._leave(host_id, sub_id)
        del self._sub_of[host_id]

    def _leave(self, host_id: str, sub_id: str) -> None:
        members = self._members[sub_id]
        members.pop(host_id, None)
        if not members:
            sub = self.subclusters.pop(sub_id)
            del self._members[sub_id]
            del self._key_of[self._key_by_sub.pop(sub_id)]
            self._subs_of_cluster[sub.cluster].pop(sub_id, None)

    @staticmethod
    def _account(sub: SubCluster, host: Host, sign: int) -> None:
        sub.host_count += sign
        sub.states[host.state] = sub.states.get(host.state, 0) + sign
        if not sub.states[host.state]:
            del sub.states[host.state]
        if host.live:
            sub.live_hosts += sign
            sub.total_cpus += sign * host.total_cpus
            sub.ram_available += sign * (host.main_memory.ram_available or 0)
        sub.free_cpus += sign * host.free_cpus

    # --- reading ------------------------------------------------------------------------------

    @property
    def information_service_url(self) -> str | None:
        """Where the site's information service is, as the GLUE renderings publish it."""
        return self.config.service.information_service_url or None

    def subcluster_of(self, host_id: str) -> SubCluster | None:
        sub_id = self._sub_of.get(host_id)
        return self.subclusters.get(sub_id) if sub_id is not None else None

    def hosts_of(self, sub_id: str) -> Iterator[Host]:
        hosts = self.hosts
        return (hosts[h] for h in self._members.get(sub_id, ()))

    def member_ids(self, sub_id: str) -> KeysView[str]:
        """The ids of a subcluster's hosts in their order: a live view, for infosvc.matching.hostcolumns."""
        return self._members.get(sub_id, {}).keys()

    def subclusters_of(self, cluster_id: str) -> list[SubCluster]:
        return [self.subclusters[s] for s in self._subs_of_cluster.get(cluster_id, ())]

    def clusters(self) -> list[glue.Cluster]:
        """Configured clusters (empty ones too: GLUE is top down), then any other that holds hosts
        or that a computing element names (`default`, for hosts no NodeSet names), by its id."""
        url = self.config.service.information_service_url or None
        pools = self.config.resources
        found = [glue.Cluster(c.id, c.name, url, cluster_licenses(pools, c.id)) for c in self.config.clusters]
        known = {c.unique_id for c in found}
        named = [cid for ce in self.config.computing_elements for cid in ce.clusters]
        holding = [cid for cid, subs in self._subs_of_cluster.items() if subs]
        for cid in dict.fromkeys(named + holding):
            if cid not in known:
                found.append(glue.Cluster(cid, cid, url, cluster_licenses(pools, cid)))
        return found

    def cluster(self, cluster_id: str) -> glue.Cluster | None:
        return next((c for c in self.clusters() if c.unique_id == cluster_id), None)

    def totals(self, cluster_ids: Iterable[str]) -> Totals:
        hosts = live = total = free = 0
        for cid in cluster_ids:
            for sub in self.subclusters_of(cid):
                hosts += sub.host_count
                live += sub.live_hosts
                total += sub.total_cpus
                free += sub.free_cpus
        return Totals(hosts, live, total, free)

    def computing_elements(self) -> list[glue.ComputingElement]:
        url = self.config.service.information_service_url or None
        all_ids = tuple(c.unique_id for c in self.clusters())
        found = []
        for ce in self.config.computing_elements:
            clusters = all_ids if ce.all_clusters else ce.clusters
            totals = self.totals(clusters)
            queued = self._queue.ce_queue_state(ce.id)
            if queued is None:
                state = glue.CEState(status=ce.status, free_cpus=totals.free_cpus)
                jobs: tuple[glue.CEJob, ...] = ()
            else:
                # free: what the hosts report free, and no more than the queue's jobs leave (the
                # hold is the last pass's; the hosts' figures are this moment's)
                state = glue.CEState(status=ce.status, running_jobs=queued.running_jobs,
                                     waiting_jobs=queued.waiting_jobs,
                                     worst_response_time=queued.worst_response_time,
                                     estimated_response_time=queued.estimated_response_time,
                                     free_cpus=max(0, min(totals.free_cpus, totals.total_cpus - queued.held_cpus)))
                jobs = queued.jobs
            found.append(glue.ComputingElement(
                unique_id=ce.id, name=ce.name, queue=ce.queue,
                info=glue.CEInfo(lrms_type=ce.lrms_type, lrms_version=ce.lrms_version or None,
                                 gram_version=ce.gram_version or None, host_name=ce.host_name or None,
                                 gatekeeper_port=ce.gatekeeper_port or None, total_cpus=totals.total_cpus),
                policy=ce.policy, state=state, access_control_rules=ce.access_control, jobs=jobs,
                clusters=clusters, information_service_url=url))
        return found

    def computing_element(self, ce_id: str) -> glue.ComputingElement | None:
        return next((c for c in self.computing_elements() if c.unique_id == ce_id), None)

    def __len__(self) -> int:
        return len(self.hosts)
