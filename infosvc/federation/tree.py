"""The GLUE trees of a top level: one site's (`SiteTree`, from the JSON it published or from the
top's own roll-up) and their union (`UnionTree`), each a `GlueTree` (infosvc.model.glue), so the
publishing layer renders the union with the same renderers as a site's own tree.

Ids: GLUE UniqueIDs are meant to be unique across the grid, but a site's cluster and CE are
`default` unless its config names them, and two sites can publish the same host. An id that two
or more sites publish for the same kind (for clusters, subclusters and CEs, ignoring case and runs
of spaces, as a directory compares them) is published as `SITE/ID` for every one of them, the
references to it (a host's cluster, a CE's clusters) rewritten with it, and the clash logged once;
an id that is another site's SITE/ID is renamed as well; an id no other site publishes stays as
it is. So no two sites' entities are merged, and which
site is renamed does not depend on the order of the config.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Iterable, Mapping, Sequence

from infosvc.codec.glue_read import GlueDocument
from infosvc.model import glue
from infosvc.model.glue import GlueTree, Host, SubCluster, directory_key

log = logging.getLogger("infosvc.federation")

KINDS = ("hosts", "subclusters", "clusters", "computing-elements")
#: The kinds whose ids are directory entries' (GLUE 1.3 GlueSubClusterUniqueID, GlueClusterUniqueID,
#: GlueCEUniqueID), which a directory compares ignoring case and runs of spaces: `CE1` of one site
#: and `ce1` of another were one entry, the second refused by ldapadd. Hosts are no entry: exact.
FOLDED = frozenset({"subclusters", "clusters", "computing-elements"})


def _key(kind: str, ident: str) -> str:
    """What tells two ids of `kind` apart in the union."""
    return directory_key(ident) if kind in FOLDED else ident


def _keys(kind: str, ids: Iterable[str]) -> Iterable[str]:
    return map(directory_key, ids) if kind in FOLDED else ids


def _having(kind: str, ids: Iterable[str], keys: set[str]) -> list[str]:
    """The ids of `ids` whose key is one of `keys` (no call per host: a site may have 200,000)."""
    if not keys:
        return []
    if kind in FOLDED:
        return [i for i in ids if directory_key(i) in keys]
    return [i for i in ids if i in keys]


def dismantle(*containers: dict[Any, Any] | list[Any]) -> None:
    """Empty these containers an item at a time, in this (worker) thread. Freeing a large site's
    tree as the last reference to it goes is one C call of ~0.1 s at 40,000 hosts that holds the GIL
    all along, and the event loop with it; taken apart item by item, the loop gets its turn between
    two. Objects the items share with others live on."""
    for container in containers:
        if isinstance(container, dict):
            for _ in range(len(container)):
                container.popitem()
        else:
            for _ in range(len(container)):
                container.pop()


class SiteTree:
    """One site's GLUE tree, fixed: what it published at one pull (or the top's own roll-up, copied)."""

    def __init__(self, clusters: Sequence[glue.Cluster], subclusters: Iterable[tuple[SubCluster, Iterable[Host]]],
                 computing_elements: Sequence[glue.ComputingElement], url: str | None = None,
                 loose_hosts: Iterable[Host] = ()) -> None:
        self._clusters = list(clusters)
        self._cluster_by_id = {c.unique_id: c for c in self._clusters}
        self._subclusters: dict[str, SubCluster] = {}
        self._subs_of: dict[str, list[SubCluster]] = {}
        self._hosts: dict[str, Host] = {}
        self._members: dict[str, list[Host]] = {}
        self._sub_of: dict[str, SubCluster] = {}
        for sub, hosts in subclusters:
            self._subclusters[sub.unique_id] = sub
            self._subs_of.setdefault(sub.cluster, []).append(sub)
            members = self._members[sub.unique_id] = []
            for host in hosts:
                if host.unique_id not in self._hosts:
                    self._hosts[host.unique_id] = host
                    self._sub_of[host.unique_id] = sub
                    members.append(host)
        for host in loose_hosts:  # hosts no subcluster lists: published, in no subcluster
            self._hosts.setdefault(host.unique_id, host)
        self._ces = list(computing_elements)
        self._ce_by_id = {ce.unique_id: ce for ce in self._ces}
        self._url = url

    @classmethod
    def of_document(cls, doc: GlueDocument) -> SiteTree:
        """A site's tree from its JSON, read (infosvc.codec.glue_read)."""
        hosts = doc.hosts
        subs = [(sub, [hosts[h] for h in ids if h in hosts]) for sub, ids in doc.subclusters]
        return cls(doc.clusters, subs, doc.computing_elements, doc.information_service_url, hosts.values())

    @classmethod
    def of_tree(cls, tree: GlueTree) -> SiteTree:
        """A copy of a live tree's structure (the top's own roll-up) as it is now."""
        subs = [(sub, list(tree.hosts_of(sub.unique_id))) for c in tree.clusters()
                for sub in tree.subclusters_of(c.unique_id)]
        return cls(tree.clusters(), subs, tree.computing_elements(), tree.information_service_url,
                   tree.hosts.values())

    # --- GlueTree ---

    @property
    def hosts(self) -> Mapping[str, Host]:
        return self._hosts

    @property
    def subclusters(self) -> Mapping[str, SubCluster]:
        return self._subclusters

    @property
    def information_service_url(self) -> str | None:
        return self._url

    def clusters(self) -> Sequence[glue.Cluster]:
        return self._clusters

    def cluster(self, cluster_id: str) -> glue.Cluster | None:
        return self._cluster_by_id.get(cluster_id)

    def subclusters_of(self, cluster_id: str) -> Sequence[SubCluster]:
        return self._subs_of.get(cluster_id, [])

    def hosts_of(self, sub_id: str) -> Iterable[Host]:
        return self._members.get(sub_id, [])

    def subcluster_of(self, host_id: str) -> SubCluster | None:
        return self._sub_of.get(host_id)

    def computing_elements(self) -> Sequence[glue.ComputingElement]:
        return self._ces

    def computing_element(self, ce_id: str) -> glue.ComputingElement | None:
        return self._ce_by_id.get(ce_id)

    def dismantle(self) -> None:
        """Take this tree apart (`dismantle`), once nothing will read it again."""
        dismantle(self._members, self._sub_of, self._subs_of, self._subclusters, self._hosts)

    # --- for the union ---

    def ids(self) -> dict[str, Iterable[str]]:
        return {"hosts": self._hosts, "subclusters": self._subclusters, "clusters": self._cluster_by_id,
                "computing-elements": self._ce_by_id}

    def renamed(self, site: str, clashing: Mapping[str, set[str]]) -> SiteTree:
        """This tree with each of its ids in `clashing` (kind -> ids) as SITE/ID, references too."""
        def new(kind: str, ident: str) -> str:
            return f"{site}/{ident}" if ident in clashing[kind] else ident

        clusters = [dataclasses.replace(c, unique_id=new("clusters", c.unique_id)) for c in self._clusters]
        hosts = {h.unique_id: dataclasses.replace(h, unique_id=new("hosts", h.unique_id),
                                                  cluster=new("clusters", h.cluster)) for h in self._hosts.values()}
        subs = [(dataclasses.replace(sub, unique_id=new("subclusters", sub.unique_id),
                                     cluster=new("clusters", sub.cluster), states=dict(sub.states)),
                 [hosts[h.unique_id] for h in self._members.get(sub.unique_id, [])])
                for sub in self._subclusters.values()]
        ces = [dataclasses.replace(ce, unique_id=new("computing-elements", ce.unique_id),
                                   clusters=tuple(new("clusters", c) for c in ce.clusters)) for ce in self._ces]
        return SiteTree(clusters, subs, ces, self._url, hosts.values())


class UnionTree(SiteTree):
    """The union of named sites' trees, in the order given, with clashing ids renamed (module doc),
    and which site each entity came from."""

    def __init__(self, sites: Sequence[tuple[str, SiteTree]], url: str | None = None,
                 renamed_before: Mapping[str, tuple[SiteTree, frozenset[tuple[str, str]], SiteTree]] | None = None
                 ) -> None:
        # counted, and clashing, by their keys (_key): two ids a directory takes for one clash
        seen: dict[str, dict[str, int]] = {kind: {} for kind in KINDS}
        for _, tree in sites:
            for kind, ids in tree.ids().items():
                counts = seen[kind]
                for key in _keys(kind, ids):
                    counts[key] = counts.get(key, 0) + 1
        clashing = {kind: {i for i, n in counts.items() if n > 1} for kind, counts in seen.items()}
        # A site's id that is another's SITE/ID once renamed clashes too (no site's id may take the
        # place of another's), and is renamed in its turn; each round lengthens the new ids, so the
        # rounds end (site names hold no `/`: SITE/ID is one site's one id)
        while True:
            taken = {kind: {_key(kind, f"{name}/{i}") for name, tree in sites
                            for i in _having(kind, tree.ids()[kind], clashing[kind])} for kind in KINDS}
            more = {kind: (seen[kind].keys() & taken[kind]) - clashing[kind] for kind in KINDS}
            if not any(more.values()):
                break
            for kind in KINDS:
                clashing[kind] |= more[kind]
        # the ids to rename, as the sites publish them
        clashing = {kind: {i for _, tree in sites for i in _having(kind, tree.ids()[kind], keys)}
                    for kind, keys in clashing.items()}
        #: site -> (its tree, the clashes it was renamed for, the renamed tree): kept, so that a site
        #: whose tree and clashes did not change keeps its renamed objects (and their renderings)
        self.renamed_trees: dict[str, tuple[SiteTree, frozenset[tuple[str, str]], SiteTree]] = {}
        self.site_of: dict[str, dict[str, str]] = {kind: {} for kind in KINDS}
        #: site -> its InformationServiceURL, which its subclusters publish
        self.urls = {name: tree.information_service_url for name, tree in sites}
        self.clashes = sorted((kind, ident) for kind, ids in clashing.items() for ident in ids)
        parts: list[SiteTree] = []
        #: each site's tree as published in the union (renamed or its own), in order
        self.parts: list[tuple[str, SiteTree]] = []
        for name, tree in sites:
            own = frozenset((kind, i) for kind, ids in tree.ids().items() for i in ids if i in clashing[kind])
            if own:
                before = (renamed_before or {}).get(name)
                if before is not None and before[0] is tree and before[1] == own:
                    part = before[2]
                else:
                    part = tree.renamed(name, clashing)
                self.renamed_trees[name] = (tree, own, part)
            else:
                part = tree
            parts.append(part)
            self.parts.append((name, part))
            for kind, ids in part.ids().items():
                self.site_of[kind].update(dict.fromkeys(ids, name))
        super().__init__([], [], [], url)
        for part in parts:
            self._clusters.extend(part.clusters())
            self._cluster_by_id.update((c.unique_id, c) for c in part.clusters())
            self._hosts.update(part.hosts)
            self._subclusters.update(part.subclusters)
            for cluster in part.clusters():
                self._subs_of.setdefault(cluster.unique_id, []).extend(part.subclusters_of(cluster.unique_id))
            for sub in part.subclusters.values():
                members = self._members[sub.unique_id] = list(part.hosts_of(sub.unique_id))
                self._sub_of.update((h.unique_id, sub) for h in members)
            self._ces.extend(part.computing_elements())
            self._ce_by_id.update((ce.unique_id, ce) for ce in part.computing_elements())
