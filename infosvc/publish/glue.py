"""GLUE for readers: the kind lookup and the cache of host renderings, once, over any GLUE tree
(the model's `GlueTree` Protocol, which the site's roll-up keeps), for every format.

A format is a codec's documents object (`XmlDocuments`, `JsonDocuments`; the grid's GLUE 1.3 and
2.0 LDIF and GLUE 2.0 XML and JSON, made with the reader's options: one module each, and one line
in GRID_FORMATS). A site's documents are mostly its
hosts, so each host's rendering is kept while the tree still holds that very Host object in the
same subcluster (Host is frozen, and the roll-up replaces it on every change), and dropped when
the host goes. Subclusters, clusters and computing elements are few and rendered on every read.
`warm(hosts)`, called as hosts report, moves a changed host's rendering from the next read to
the report.
"""

from __future__ import annotations

from typing import Callable, Iterable, Protocol

from infosvc.codec.glue_json import JsonDocuments
from infosvc.codec.glue13_ldif import Glue13Ldif
from infosvc.codec.glue2_json import Glue2Json
from infosvc.codec.glue2_ldif import Glue2Ldif, GlueLdif
from infosvc.codec.glue2_xml import Glue2Xml
from infosvc.codec.glue_xml import Fragment, XmlDocuments
from infosvc.codec.gridformat import GridOptions
from infosvc.model import glue
from infosvc.model.glue import GlueTree, Host, SubCluster
from infosvc.model.snapshot import FrozenTree, Snapshot, SnapshotView, take

#: The kinds of GET /v1/glue/{kind}/{id}.
KINDS = ("computing-elements", "clusters", "subclusters", "hosts")

Entity = Host | SubCluster | glue.Cluster | glue.ComputingElement


class Parts(list[bytes]):
    """A document as the parts to write in turn, with its size counted once, where it is made: a
    top level's union is hundreds of thousands of parts, and counting them on each read would hold
    the event loop (27 ms at 190,000 hosts)."""

    def __init__(self, parts: Iterable[bytes] = ()) -> None:
        super().__init__(parts)
        self.size = sum(map(len, self))

    @classmethod
    def in_chunks(cls, parts: Iterable[bytes], chunk: int = 1 << 13) -> Parts:
        """The parts joined into chunks of about `chunk` bytes, in the thread that makes them: a
        read then writes a chunk per few dozen hosts rather than walking a part per host on the event
        loop (a top level's union of 30,000 hosts held /healthz's p99 at 80-130 ms while read, 30 ms
        whole), at the cost of the union's bytes held once more beside the hosts' fragments."""
        chunks: list[bytes] = []
        batch: list[bytes] = []
        size = 0
        for part in parts:
            batch.append(part)
            size += len(part)
            if size >= chunk:
                chunks.append(b"".join(batch))
                batch, size = [], 0
        if batch:
            chunks.append(b"".join(batch))
        return cls(chunks)


class Documents(Protocol):
    """What a codec offers the publishing layer for one format."""

    @property
    def media_type(self) -> str: ...

    def host(self, host: Host, sub_id: str | None) -> bytes: ...

    def tree(self, tree: GlueTree, fragment: Fragment) -> bytes: ...

    def tree_parts(self, tree: GlueTree, fragment: Fragment) -> list[bytes]: ...

    def host_parts(self, fragments: Iterable[bytes]) -> list[bytes]: ...

    def host_document(self, fragment: bytes) -> bytes: ...

    def subcluster_document(self, tree: GlueTree, sub: SubCluster, fragment: Fragment) -> bytes: ...

    def cluster_document(self, tree: GlueTree, cluster: glue.Cluster, fragment: Fragment) -> bytes: ...

    def computing_element_document(self, tree: GlueTree, ce: glue.ComputingElement) -> bytes: ...


#: The grid's formats (they publish the whole tree only, with the CE figures of one snapshot), by name.
GRID_FORMATS: dict[str, Callable[[GridOptions], Documents]] = {
    "ldif-1.3": Glue13Ldif, "ldif-2.0": Glue2Ldif, "ldif": GlueLdif, "glue2-xml": Glue2Xml, "glue2-json": Glue2Json}


def find(tree: GlueTree, kind: str, ident: str) -> Entity | None:
    """The entity of `kind` (one of KINDS) with this id, or None."""
    if kind == "hosts":
        return tree.hosts.get(ident)
    if kind == "subclusters":
        return tree.subclusters.get(ident)
    if kind == "clusters":
        return tree.cluster(ident)
    if kind == "computing-elements":
        return tree.computing_element(ident)
    return None


class Rendering:
    """One format's documents of one tree, with each host's rendering cached."""

    def __init__(self, tree: GlueTree, documents: Documents,
                 snapshot: Callable[[], Snapshot] | None = None) -> None:
        self.source = tree
        self.documents = documents
        #: where the whole tree's CE figures come from (the `Glue` it belongs to); None: the tree
        self.snapshot = snapshot
        self.media_type = documents.media_type
        #: host id -> (the Host rendered, the subcluster it was shown in, its rendering)
        self._cache: dict[str, tuple[Host, str | None, bytes]] = {}

    def _view(self) -> GlueTree:
        """The tree, with its CE figures of the current snapshot when this rendering has a keeper."""
        return self.source if self.snapshot is None else SnapshotView(self.source, self.snapshot())

    def fragment(self, host: Host, sub_id: str | None) -> bytes:
        entry = self._cache.get(host.unique_id)
        if entry is not None and entry[0] is host and entry[1] == sub_id:
            return entry[2]
        fragment = self.documents.host(host, sub_id)
        if self.source.hosts.get(host.unique_id) is host:  # a host not of the tree is rendered, not kept
            self._cache[host.unique_id] = (host, sub_id, fragment)
        return fragment

    def _fragment_in_tree(self, host: Host) -> bytes:
        sub = self.source.subcluster_of(host.unique_id) if self.source.hosts.get(host.unique_id) is host else None
        return self.fragment(host, sub.unique_id if sub is not None else None)

    def prune(self) -> None:
        """Drop the fragments of hosts the tree no longer holds (on the event loop: `parts_of` and
        `entity_parts_of`, in a worker thread, leave it to their caller)."""
        hosts, cache = self.source.hosts, self._cache
        if len(cache) > len(hosts):
            # list(): one step under the GIL, as a worker thread may add to the cache meanwhile
            # (`parts_of`)
            for host_id in [h for h in list(cache) if h not in hosts]:
                cache.pop(host_id, None)

    def tree(self) -> bytes:
        """The whole tree."""
        body = self.documents.tree(self._view(), self.fragment)
        self.prune()
        return body

    def tree_parts(self) -> list[bytes]:
        """The whole tree as the parts of one document (each host's cached fragment among them:
        written in turn, never joined, web.pretty.Joined)."""
        parts = self.documents.tree_parts(self._view(), self.fragment)
        self.prune()
        return parts

    def parts_of(self, frozen: FrozenTree) -> Parts:
        """The whole tree as `frozen` (a copy of this rendering's tree taken with its hosts) holds
        it, as parts, each host's fragment from this rendering's cache (rendered, and kept while
        the tree holds that host, where it is not there yet): for a worker thread, while the live
        tree changes on the event loop (the cache's reads and writes are each one step; the
        pruning is the loop's, at its next read of the live tree)."""
        snapshot = frozen.snapshot
        view = frozen if snapshot is None else SnapshotView(frozen, snapshot)
        return Parts(self.documents.tree_parts(view, self.fragment))

    def entity_parts_of(self, frozen: FrozenTree, kind: str, ident: str) -> Parts | None:
        """A cluster or subcluster as `frozen` (taken with its hosts) holds it, as `parts_of` makes
        the whole tree: in XML its hosts' fragments are parts of their own, never joined (a
        cluster of 10,000 hosts was a 21 MB body a read, held until its client read it); None
        when there is no such one."""
        found = find(frozen, kind, ident)
        documents = self.documents
        if isinstance(found, SubCluster):
            if isinstance(documents, XmlDocuments):
                return Parts(documents.subcluster_parts(frozen, found, self.fragment))
            return Parts([documents.subcluster_document(frozen, found, self.fragment)])
        if isinstance(found, glue.Cluster):
            if isinstance(documents, XmlDocuments):
                return Parts(documents.cluster_parts(frozen, found, self.fragment))
            return Parts([documents.cluster_document(frozen, found, self.fragment)])
        return None

    def entity(self, kind: str, ident: str) -> bytes | None:
        """One entity as a document of its own, or None when there is no such kind or id."""
        tree = self._view() if kind == "computing-elements" else self.source  # only a CE has figures
        found = find(tree, kind, ident)
        if found is None:
            return None
        documents = self.documents
        if isinstance(found, Host):
            body = documents.host_document(self._fragment_in_tree(found))
        elif isinstance(found, SubCluster):
            body = documents.subcluster_document(tree, found, self.fragment)
        elif isinstance(found, glue.Cluster):
            body = documents.cluster_document(tree, found, self.fragment)
        else:
            body = documents.computing_element_document(tree, found)
        self.prune()
        return body

    def host_parts(self, hosts: Iterable[Host]) -> list[bytes]:
        """These hosts, in the order given, as the parts of one document (each host's cached
        fragment among them: written in turn, never joined, web.pretty.Joined)."""
        parts = self.documents.host_parts([self._fragment_in_tree(host) for host in hosts])
        self.prune()
        return parts

    def hosts(self, hosts: Iterable[Host]) -> bytes:
        """These hosts, in the order given, as one document."""
        return b"".join(self.host_parts(hosts))

    def warm(self, hosts: Iterable[Host]) -> None:
        """Render now these hosts of the tree (say, as they report), not at the next read."""
        known = self.source.hosts
        for host in hosts:
            if known.get(host.unique_id) is host:
                self._fragment_in_tree(host)


class Glue:
    """Every format's GLUE documents of one tree."""

    def __init__(self, tree: GlueTree) -> None:
        self.tree = tree
        self._snapshot: Snapshot | None = None
        self.xml = Rendering(tree, XmlDocuments(), self.snapshot)
        self.json = Rendering(tree, JsonDocuments(), self.snapshot)
        #: the formats by the name `?format=` gives them
        self.formats: dict[str, Rendering] = {"json": self.json, "xml": self.xml}

    def snapshot(self) -> Snapshot:
        """The CE figures now, as one snapshot (infosvc.model.snapshot): the previous one while
        they have not changed, so every rendering of the same figures names the same id and time."""
        self._snapshot = take(self.tree, self._snapshot)
        return self._snapshot

    def rendering(self, name: str, options: GridOptions = GridOptions()) -> Rendering:
        """The format `name`: one of `formats`, or a grid format (GRID_FORMATS) with these options."""
        found = self.formats.get(name)
        if found is not None:
            return found
        return Rendering(self.tree, GRID_FORMATS[name](options), self.snapshot)

    def warm(self, hosts: Iterable[Host]) -> None:
        hosts = list(hosts)
        for rendering in self.formats.values():
            rendering.warm(hosts)
