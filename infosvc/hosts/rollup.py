"""The GLUE roll-up: SSS Nodes -> GLUE Hosts -> homogeneous SubClusters -> Clusters -> CEs.

The SSS -> GLUE mapping of one host is infosvc.hosts.glue_host's. `Rollup` keeps the tree
incrementally: `update` with one host changes that host and the running aggregates of its subcluster (and of the one it left, when its hardware changed); clusters and
computing elements are summed from their subclusters when asked, which costs the number of
subclusters, not of hosts, and the CEs publish the job queue's figures, read at each rendering
through model.glue.CEQueueFigures.

A subcluster is the set of hosts of one cluster that share the homogeneity key: processor model
and clock, CPU count, RAM size (to the nearest GiB: identical machines differ by a few MB of
kernel reservations), OS name and release, architecture and ISA, and the Benchmark,
ApplicationSoftware, licenses and consumables the site config gives them, and the accelerators
each host has (model and count: a GPU host never shares a subcluster with a CPU host). Its id is derived from
the cluster and the key, so it is the same across restarts and on every aggregator with the same
hosts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields, replace
from typing import Callable, Iterable, Iterator, KeysView

from infosvc.config import SiteConfig, cluster_licenses
from infosvc.hosts.glue_host import host_from_node
from infosvc.hosts.slurm_hosts import SlurmWord, merged_state
from infosvc.model import glue
from infosvc.model.glue import NO_QUEUE, CEQueueFigures, Host, SubCluster

__all__ = ["Rollup", "Totals", "host_from_node", "ram_class_mb", "subcluster_key"]


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
            host.application_software, host.resources, host.accelerators)


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def _subcluster_for(host: Host, key: tuple[object, ...], *, whole: bool = False) -> SubCluster:
    """The subcluster of `key`, named by the first 40 bits of its digest; by all of it (`whole`)
    where those are another key's already."""
    # Without resources, and without accelerators, the digest is that of the key before they were
    # in it: ids stay as they were.
    core = key[1:-1]
    digest = _digest(repr((core if core[-1] is not None else core[:-1]) + ((key[-1],) if key[-1] else ())))
    if not whole:
        digest = digest[:10]
    p, os_, arch = host.processor, host.operating_system, host.architecture
    ram = ram_class_mb(host.main_memory.ram_size)
    words = [arch.platform_type or "unknown-arch", f"{arch.smp_size or 0}cpu", p.model or "unknown-cpu",
             f"{p.clock_speed}MHz" if p.clock_speed else None, f"{ram // 1024}GiB" if ram else None,
             " ".join(filter(None, (os_.name, os_.release))) or None,
             *_accelerator_words(host.accelerators)]
    return SubCluster(
        unique_id=f"{host.cluster}-{digest}", name=" ".join(w for w in words if w), cluster=host.cluster,
        architecture=arch, operating_system=glue.OperatingSystem(os_.name, os_.release, None),
        # Only what every member shares by construction of the key is published at this level.
        processor=glue.Processor(model=p.model, clock_speed=p.clock_speed, instruction_set=p.instruction_set),
        main_memory=glue.MainMemory(ram_size=ram), benchmark=host.benchmark,
        application_software=host.application_software, resources=host.resources,
        accelerators=host.accelerators)


#: A subcluster's name lists this many of its accelerator models and counts the rest: every
#: AcceleratorEnvironment (one a model) names its subcluster, so a name that listed them all made
#: the GLUE 2 answer grow as the square of the models (2,043 in one report: 105 MB)
NAMED_ACCELERATORS = 4


def _accelerator_words(accelerators: tuple[glue.Accelerator, ...]) -> list[str]:
    words = [f"{a.count}x {a.model}" for a in accelerators[:NAMED_ACCELERATORS]]
    if len(accelerators) > NAMED_ACCELERATORS:
        words.append(f"and {len(accelerators) - NAMED_ACCELERATORS} more accelerator models")
    return words


#: processor vendor, version, caches L1, L1I, L1D, L2; OS version: what a subcluster publishes when shared
Details = tuple[str | None, str | None, int | None, int | None, int | None, int | None, str | None]


def _publish_details(sub: SubCluster, shared: Details | None) -> None:
    vendor, version, l1, l1i, l1d, l2, os_version = shared or (None,) * 7
    p = sub.processor
    if (p.vendor, p.version, p.cache_l1, p.cache_l1i, p.cache_l1d, p.cache_l2, sub.operating_system.version) == (
            vendor, version, l1, l1i, l1d, l2, os_version):
        return  # a report that changed nothing of it: the same objects stay
    sub.processor = replace(sub.processor, vendor=vendor, version=version, cache_l1=l1, cache_l1i=l1i,
                            cache_l1d=l1d, cache_l2=l2)
    sub.operating_system = replace(sub.operating_system, version=os_version)


@dataclass(frozen=True, slots=True)
class Totals:
    hosts: int = 0
    live_hosts: int = 0
    total_cpus: int = 0
    free_cpus: int = 0
    total_accelerators: int = 0
    used_accelerators: int = 0
    free_accelerators: int = 0


def _summed(parts: list[Totals]) -> Totals:
    return Totals(*(sum(getattr(p, name) for p in parts) for name in _TOTALS))


_TOTALS = tuple(f.name for f in fields(Totals))


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
        #: subcluster -> how many of its hosts have each set of the details outside the key (processor
        #: vendor, version and caches, OS version): published while its hosts share one
        self._details: dict[str, dict[Details, int]] = {}
        #: where the CEs' job figures are read at each rendering (the site's job queue)
        self._queue = queue
        #: what the batch system (Slurm) says of the state of hosts an agent reports: it takes the
        #: place of theirs where stronger (infosvc.hosts.slurm_hosts.merged_state)
        self._words: dict[str, SlurmWord] = {}
        #: the CEs, made by the batch system at each rendering in place of the config's (None: the config's)
        self._lrms_ces: Callable[[], list[glue.ComputingElement]] | None = None
        #: counts the changes (a host, its state, one gone, the CEs' sources): a rendering made at
        #: one generation is the tree's while it stands (infosvc/web/gridquery.py, WholeTrees)
        self.generation = 0

    # --- changes ------------------------------------------------------------------------------

    def update(self, host: Host) -> SubCluster:
        """Put `host` in the tree (new, or replacing its previous report); returns its subcluster."""
        self.generation += 1
        word = self._words.get(host.unique_id)
        if word is not None:
            state, paused, reason = merged_state(host.state, host.paused, host.reason, word)
            if (state, paused, reason) != (host.state, host.paused, host.reason):
                host = replace(host, state=state, paused=paused, reason=reason)
        old = self.hosts.get(host.unique_id)
        key = subcluster_key(host)
        sub_id = self._key_of.get(key)
        # the details outside the key are counted again only when they (or the subcluster) change:
        # the groups are memoized in host_from_node, so the same text is the same object
        recount = old is None or old.processor is not host.processor \
            or old.operating_system is not host.operating_system
        if old is not None:
            old_sub = self._sub_of[host.unique_id]
            self._account(self.subclusters[old_sub], old, -1)
            recount = recount or old_sub != sub_id
            if recount:
                self._share_details(self.subclusters[old_sub], old, -1)
            if old_sub != sub_id:
                self._leave(host.unique_id, old_sub)
        if sub_id is None:
            sub = _subcluster_for(host, key)
            if sub.unique_id in self.subclusters:
                # another key's 40 bits: a collision (one found offline in ~2^20 tries for any
                # two, ~2^40 for a given one) took over that subcluster, its members and figures
                sub = _subcluster_for(host, key, whole=True)
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
        if recount:
            self._share_details(sub, host, +1)
        return sub

    def set_word(self, host_id: str, word: SlurmWord | None, own: tuple[str, bool, str | None]) -> Host | None:
        """The batch system's word on a host an agent reports (None: it says nothing any more);
        `own`: the host's own state, paused and reason, which the word is merged with."""
        if word is None:
            self._words.pop(host_id, None)
        else:
            self._words[host_id] = word
        return self.set_state(host_id, *own)

    def read_lrms(self, ces: Callable[[], list[glue.ComputingElement]] | None) -> None:
        """Publish the CEs the batch system makes (a Slurm cluster's partitions) from now on."""
        self.generation += 1
        self._lrms_ces = ces

    def read_queue(self, queue: CEQueueFigures) -> None:
        """Publish the CEs with this queue's figures from now on (the site's wiring, once at start)."""
        self.generation += 1
        self._queue = queue

    def of_hosts(self, hosts: Iterable[Host]) -> Rollup:
        """A roll-up of these hosts alone, with this one's config and queue figures (a filtered view)."""
        part = Rollup(self.config, self._queue)
        part._lrms_ces = self._lrms_ces
        for host in hosts:
            part.update(host)
        return part

    def set_state(self, host_id: str, state: str, paused: bool | None = None, reason: str | None = None) -> Host | None:
        """The host's life-cycle state changed, or what an admin decided (`paused`, `reason`)."""
        old = self.hosts.get(host_id)
        if old is None:
            return None
        paused = old.paused if paused is None else paused
        state, paused, reason = merged_state(state, paused, reason, self._words.get(host_id))
        if (old.state, old.paused, old.reason) == (state, paused, reason):
            return old
        self.generation += 1
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
        self.generation += 1
        sub_id = self._sub_of[host_id]
        self._account(self.subclusters[sub_id], old, -1)
        self._share_details(self.subclusters[sub_id], old, -1)
        self._leave(host_id, sub_id)
        del self._sub_of[host_id]

    def _leave(self, host_id: str, sub_id: str) -> None:
        members = self._members[sub_id]
        members.pop(host_id, None)
        if not members:
            sub = self.subclusters.pop(sub_id)
            del self._members[sub_id]
            self._details.pop(sub_id, None)
            del self._key_of[self._key_by_sub.pop(sub_id)]
            self._subs_of_cluster[sub.cluster].pop(sub_id, None)

    @staticmethod
    def _account(sub: SubCluster, host: Host, sign: int) -> None:
        sub.host_count += sign
        sub.states[host.state] = sub.states.get(host.state, 0) + sign
        if not sub.states[host.state]:
            del sub.states[host.state]
        if host.live:
            memory = host.main_memory
            sub.live_hosts += sign
            sub.total_cpus += sign * host.total_cpus
            sub.ram_available += sign * (memory.ram_available or 0)
            sub.ram_size += sign * (memory.ram_size or 0)
            sub.virtual_size += sign * ((memory.ram_size or 0) + (memory.virtual_size or 0))
            if host.physical_cpus:
                sub.physical_cpus += sign * host.physical_cpus
                sub.hosts_with_sockets += sign
            if host.accelerators:
                sub.total_accelerators += sign * host.total_accelerators
                sub.used_accelerators += sign * host.accelerators_used
        sub.free_cpus += sign * host.free_cpus
        if host.accelerators:
            sub.free_accelerators += sign * host.free_accelerators

    def _share_details(self, sub: SubCluster, host: Host, sign: int) -> None:
        """Count the host's details outside the key; when the members come to share one set, or stop
        to, the subcluster's Processor and OperatingSystem say so (a change of the set's count only
        costs the count)."""
        p, os_ = host.processor, host.operating_system
        details = (p.vendor, p.version, p.cache_l1, p.cache_l1i, p.cache_l1d, p.cache_l2, os_.version)
        counts = self._details.setdefault(sub.unique_id, {})
        before = len(counts)
        left = counts.get(details, 0) + sign
        if left:
            counts[details] = left
        else:
            counts.pop(details, None)
        if len(counts) != before:
            _publish_details(sub, next(iter(counts)) if len(counts) == 1 else None)

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
        hosts = live = total = free = accelerators = used_accelerators = free_accelerators = 0
        for cid in cluster_ids:
            for sub in self.subclusters_of(cid):
                hosts += sub.host_count
                live += sub.live_hosts
                total += sub.total_cpus
                free += sub.free_cpus
                accelerators += sub.total_accelerators
                used_accelerators += sub.used_accelerators
                free_accelerators += sub.free_accelerators
        return Totals(hosts, live, total, free, accelerators, used_accelerators, free_accelerators)

    def computing_elements(self) -> list[glue.ComputingElement]:
        if self._lrms_ces is not None:
            return self._lrms_ces()
        url = self.config.service.information_service_url or None
        all_ids = tuple(c.unique_id for c in self.clusters())
        found = []
        # each cluster summed once, each CE over its clusters' sums: CEs over the same clusters
        # (200 CEs over 500 subclusters) each summed every subcluster anew, 27 ms a read on the loop
        per_cluster: dict[str, Totals] = {}
        for ce in self.config.computing_elements:
            clusters = all_ids if ce.all_clusters else ce.clusters
            parts = []
            for cid in clusters:
                part = per_cluster.get(cid)
                if part is None:
                    part = per_cluster[cid] = self.totals((cid,))
                parts.append(part)
            totals = parts[0] if len(parts) == 1 else _summed(parts)
            queued = self._queue.ce_state(ce.id, ce.status, totals.free_cpus, totals.total_cpus) or glue.CEQueued(
                glue.CEState(status=ce.status, free_cpus=totals.free_cpus))
            state, jobs = queued.state, queued.jobs
            found.append(glue.ComputingElement(
                unique_id=ce.id, name=ce.name, queue=ce.queue,
                info=glue.CEInfo(lrms_type=ce.lrms_type, lrms_version=ce.lrms_version or None,
                                 gram_version=ce.gram_version or None, host_name=ce.host_name or None,
                                 gatekeeper_port=ce.gatekeeper_port or None, total_cpus=totals.total_cpus),
                policy=ce.policy, state=state, access_control_rules=ce.access_control, jobs=jobs,
                clusters=clusters, information_service_url=url, by_vo=queued.by_vo,
                accelerators=glue.AcceleratorFigures(totals.total_accelerators, totals.used_accelerators,
                                                     totals.free_accelerators)
                if totals.total_accelerators else None))
        return found

    def computing_element(self, ce_id: str) -> glue.ComputingElement | None:
        return next((c for c in self.computing_elements() if c.unique_id == ce_id), None)

    def __len__(self) -> int:
        return len(self.hosts)
