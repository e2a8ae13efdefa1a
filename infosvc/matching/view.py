"""What the matcher reads of a site: the `SiteView` protocol (a live roll-up, a snapshot of one,
or a simulator's site), the computing elements serving each cluster (`Site`), and the copies a
match in a worker thread reads instead of the live roll-up (`SiteSnapshot`, `SyncedColumns`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping, Protocol

from infosvc.matching.hostcolumns import Columns
from infosvc.model.glue import ComputingElement, Host
from infosvc.model.node import Node

__all__ = ["SubclusterView", "SiteView", "CE", "Site", "SiteSnapshot", "SyncedColumns"]


class SubclusterView(Protocol):
    """What the matcher reads of a subcluster: the cluster it belongs to (whose CEs serve it)."""

    @property
    def cluster(self) -> str: ...


class SiteView(Protocol):
    """What the matcher reads of a site: infosvc.hosts.rollup.Rollup has it, so has a SiteSnapshot, and a
    simulator can have it without a live roll-up.

    `match` visits `subclusters` in their order and each one's `hosts_of` in theirs; `Site.of`
    reads `computing_elements()`; the columns path (infosvc.matching.hostcolumns) reads `hosts` (in the
    dict's order) and `member_ids`.
    """

    @property
    def subclusters(self) -> Mapping[str, SubclusterView]: ...

    @property
    def hosts(self) -> Mapping[str, Host]: ...

    def hosts_of(self, sub_id: str) -> Iterable[Host]: ...

    def member_ids(self, sub_id: str) -> Iterable[str]: ...

    def computing_elements(self) -> Iterable[ComputingElement]: ...


@dataclass(frozen=True, slots=True)
class CE:
    """What the matcher reads of a computing element."""

    id: str
    lrms_type: str
    queue: str
    #: GLUE Policy MaxWallClockTime, minutes (GLUE 1.1); 0: not specified, so no limit
    max_wall_clock_time: int = 0


@dataclass(frozen=True, slots=True)
class Site:
    """What a host's cluster offers beyond the host: the CEs that serve each cluster."""

    #: cluster id -> the computing elements serving it, in configuration order
    ces: Mapping[str, tuple[CE, ...]] = field(default_factory=dict)

    @property
    def computing_elements(self) -> dict[str, tuple[str, ...]]:
        """cluster id -> ids of the computing elements serving it, in configuration order."""
        return {cluster: tuple(ce.id for ce in found) for cluster, found in self.ces.items()}

    @classmethod
    def of(cls, rollup: SiteView) -> Site:
        """From a Rollup (any SiteView): its computing elements by cluster."""
        ces: dict[str, list[CE]] = {}
        for ce in rollup.computing_elements():
            summary = CE(ce.unique_id, ce.info.lrms_type, ce.queue, ce.policy.max_wall_clock_time)
            for cluster in ce.clusters:
                ces.setdefault(cluster, []).append(summary)
        return cls({k: tuple(v) for k, v in ces.items()})


class SiteSnapshot:
    """What `match` reads of a roll-up and its nodes, copied at one instant (~1 ms per 3,000 hosts),
    so that a match can run in a worker thread while the roll-up changes on the event loop. The
    Host objects are frozen and the nodes are replaced, never changed, on each report: copying the
    containers is enough. A SiteView itself: `hosts` and `member_ids` are made from the copy when
    asked (only the columns path reads them; the server hands it SyncedColumns instead)."""

    def __init__(self, rollup: SiteView, node_of: Callable[[str], Node | None],
                 host_as: Callable[[Host], Host] | None = None) -> None:
        """`host_as`: each host as the match is to read it (the scheduler's free processors for
        the reported ones: infosvc.queue.dryrun)."""
        self.subclusters: dict[str, SubclusterView] = dict(rollup.subclusters)
        self._members = {sub_id: tuple(rollup.hosts_of(sub_id) if host_as is None else map(host_as, rollup.hosts_of(sub_id)))
                         for sub_id in self.subclusters}
        self._nodes = {host.unique_id: node_of(host.unique_id) for members in self._members.values()
                       for host in members}
        self._ces = tuple(rollup.computing_elements())

    @property
    def hosts(self) -> dict[str, Host]:
        return {host.unique_id: host for members in self._members.values() for host in members}

    def hosts_of(self, sub_id: str) -> Iterator[Host]:
        return iter(self._members.get(sub_id, ()))

    def member_ids(self, sub_id: str) -> list[str]:
        return [host.unique_id for host in self._members.get(sub_id, ())]

    def computing_elements(self) -> tuple[ComputingElement, ...]:
        return self._ces

    def node_of(self, host_id: str) -> Node | None:
        return self._nodes.get(host_id)

    def __len__(self) -> int:
        return len(self._nodes)


class SyncedColumns:
    """Columns synced on the event loop (HostColumns.sync reads the live roll-up), handed to a
    match in a worker thread as `match(columns=)`: its sync is the snapshot taken."""

    def __init__(self, columns: Columns) -> None:
        self.columns = columns

    def sync(self, rollup: SiteView, node_of: Callable[[str], Node | None]) -> Columns:
        return self.columns
