"""The computing elements' state figures as of one moment: a snapshot with an id and a time, so that
every rendering of the site (GLUE 1.1 XML and JSON, GLUE 1.3 and 2.0 LDIF, GLUE 2.0 XML and JSON)
publishes the same free CPUs, running and waiting jobs and response times, and says which snapshot
they are.

The id is a digest of the figures: two renderings that carry the same id carry the same numbers,
whichever process or tree made them. The time is when these figures were first read (a keeper of
snapshots passes the previous one back, so figures that have not moved keep their time).
`SnapshotView` is a GLUE tree whose computing elements are the snapshot's.
"""

from __future__ import annotations

import hashlib
import time as _time
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

from infosvc.model.glue import Cluster, ComputingElement, GlueTree, Host, SubCluster


@dataclass(frozen=True, slots=True)
class Snapshot:
    id: str  # 12 hex digits
    time: str  # ISO 8601 UTC, whole seconds
    computing_elements: tuple[ComputingElement, ...]


def _digest(ces: Sequence[ComputingElement]) -> str:
    h = hashlib.blake2b(digest_size=6)
    for ce in ces:
        s = ce.state
        h.update(repr((ce.unique_id, s.status, ce.info.total_cpus, s.free_cpus, s.running_jobs, s.waiting_jobs,
                       s.estimated_response_time, s.worst_response_time, ce.by_vo)).encode())
    return h.hexdigest()


def iso(seconds: float) -> str:
    return _time.strftime("%Y-%m-%dT%H:%M:%SZ", _time.gmtime(seconds))


def take(tree: GlueTree, previous: Snapshot | None = None, now: float | None = None) -> Snapshot:
    """The tree's CE figures now; `previous` itself when they have not changed since it. The id
    and time are the figures' (what changes them is a new snapshot), but the CEs are always the
    tree's own: a CE whose policy, rules or clusters changed while its figures stood (a Slurm
    partition's new MaxTime) was published as it had been, for as long as they stood."""
    ces = tuple(tree.computing_elements())
    ident = _digest(ces)
    if previous is not None and previous.id == ident:
        return previous if previous.computing_elements == ces else Snapshot(ident, previous.time, ces)
    return Snapshot(ident, iso(_time.time() if now is None else now), ces)


class SnapshotView:
    """A GLUE tree whose computing elements are those of one snapshot; the rest is the tree's."""

    def __init__(self, tree: GlueTree, snapshot: Snapshot) -> None:
        self.source = tree
        self.snapshot = snapshot

    @property
    def hosts(self) -> Mapping[str, Host]:
        return self.source.hosts

    @property
    def subclusters(self) -> Mapping[str, SubCluster]:
        return self.source.subclusters

    @property
    def information_service_url(self) -> str | None:
        return self.source.information_service_url

    def clusters(self) -> Sequence[Cluster]:
        return self.source.clusters()

    def cluster(self, cluster_id: str) -> Cluster | None:
        return self.source.cluster(cluster_id)

    def subclusters_of(self, cluster_id: str) -> Sequence[SubCluster]:
        return self.source.subclusters_of(cluster_id)

    def hosts_of(self, sub_id: str) -> Iterable[Host]:
        return self.source.hosts_of(sub_id)

    def subcluster_of(self, host_id: str) -> SubCluster | None:
        return self.source.subcluster_of(host_id)

    def computing_elements(self) -> Sequence[ComputingElement]:
        return self.snapshot.computing_elements

    def computing_element(self, ce_id: str) -> ComputingElement | None:
        return next((ce for ce in self.snapshot.computing_elements if ce.unique_id == ce_id), None)


class FrozenTree:
    """A copy of what the grid's renderings read of a tree (its clusters, its subclusters in order,
    their totals, its CEs), taken on the event loop in O(subclusters), so that a worker thread can
    render it while the live tree changes. It holds no hosts (those formats publish none) unless
    asked (`hosts`): then the tree's hosts (a copy of its map of Host objects, which are frozen)
    and each subcluster's host ids in order, for the GLUE 1.1 JSON and XML of the whole tree
    (0.11 ms at 10,000 hosts, 1.1 ms at 50,000: copies made in C, where a list of each
    subcluster's Host objects took 0.7 and 9 ms).

    Given the snapshot the rendering publishes, its CEs are the snapshot's. Two copies are equal
    when a rendering reads the same of both, so a document rendered from one is that of the
    other: what lets a reader be answered the document of an earlier copy (infosvc/web/gridquery.py)
    as long as the tree has not changed since, however little time or much has passed."""

    __hash__ = None  # type: ignore[assignment]  # equal copies are compared, never looked up

    def __init__(self, tree: GlueTree, snapshot: Snapshot | None = None, hosts: bool = False) -> None:
        self._clusters = list(tree.clusters())
        self._subs = {c.unique_id: [replace(s, states=dict(s.states)) for s in tree.subclusters_of(c.unique_id)]
                      for c in self._clusters}
        self.subclusters: dict[str, SubCluster] = {s.unique_id: s for subs in self._subs.values() for s in subs}
        #: the tree and its count of changes when copied (a roll-up counts them): a tree that has
        #: not changed since matches without a comparison
        self._source, self._generation = tree, getattr(tree, "generation", None)
        self._members: dict[str, list[str]] | None = None
        self.hosts: dict[str, Host] = {}
        if hosts:
            self.hosts = dict(tree.hosts)
            self._members = {sub_id: _member_ids(tree, sub_id) for sub_id in self.subclusters}
        self.information_service_url = tree.information_service_url
        self.snapshot = snapshot
        self._ces = list(tree.computing_elements() if snapshot is None else snapshot.computing_elements)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FrozenTree):
            return NotImplemented
        # A keeper of snapshots hands back the same one while the figures stand (`take`): then the
        # CEs compare by identity, and the subclusters, few, field by field.
        return (self.snapshot == other.snapshot and self.information_service_url == other.information_service_url
                and self._clusters == other._clusters and self._subs == other._subs and self._ces == other._ces
                and self._members == other._members and self.hosts == other.hosts)

    def matches(self, tree: GlueTree, snapshot: Snapshot | None = None) -> bool:
        """Whether a copy of `tree` now (with `snapshot`) would equal this one, without making it:
        a read answered from what is kept pays the comparison, not the copy too (copy and compare
        took 68 ms on the event loop for a tree of 10,000 subclusters, this 9)."""
        if self.snapshot != snapshot or self.information_service_url != tree.information_service_url:
            return False
        if tree is self._source and self._generation is not None and getattr(tree, "generation", None) == self._generation:
            return True  # nothing changed since the copy
        if list(tree.clusters()) != self._clusters:
            return False
        if any(list(tree.subclusters_of(cid)) != subs for cid, subs in self._subs.items()):
            return False
        if self._members is not None and (tree.hosts != self.hosts or any(
                _member_ids(tree, sub_id) != members for sub_id, members in self._members.items())):
            return False
        return list(tree.computing_elements() if snapshot is None else snapshot.computing_elements) == self._ces

    def clusters(self) -> Sequence[Cluster]:
        return self._clusters

    def cluster(self, cluster_id: str) -> Cluster | None:
        return next((c for c in self._clusters if c.unique_id == cluster_id), None)

    def subclusters_of(self, cluster_id: str) -> Sequence[SubCluster]:
        return self._subs.get(cluster_id, [])

    def hosts_of(self, sub_id: str) -> Iterable[Host]:
        return () if self._members is None else map(self.hosts.__getitem__, self._members.get(sub_id, ()))

    def subcluster_of(self, host_id: str) -> SubCluster | None:
        return None

    def computing_elements(self) -> Sequence[ComputingElement]:
        return self._ces

    def computing_element(self, ce_id: str) -> ComputingElement | None:
        return next((ce for ce in self._ces if ce.unique_id == ce_id), None)


def _member_ids(tree: GlueTree, sub_id: str) -> list[str]:
    """A subcluster's host ids in order: from the roll-up's own index where it has one (a copy in C)."""
    member_ids = getattr(tree, "member_ids", None)
    if member_ids is not None:
        return list(member_ids(sub_id))
    return [host.unique_id for host in tree.hosts_of(sub_id)]


def snapshot_of(tree: GlueTree) -> Snapshot:
    """The snapshot a view carries, or one taken of the tree now."""
    return tree.snapshot if isinstance(tree, SnapshotView) else take(tree)
