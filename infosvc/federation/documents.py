"""The union's GLUE documents: the site's own JSON and XML (infosvc/codec/glue_json.py,
glue_xml.py) over the union tree, with what a top level adds.

JSON: every entity names its `site` (the upstream's name, or `local` for the top's own hosts),
and the whole tree ends with `sites`, each upstream's status (url, last good pull, stale), as
schemas/glue.schema.json describes. XML is GLUE 1.1 as the schema has it, with nothing added.
The whole documents are made by the `Publisher`, in a worker thread, after each change of the
union (a new union built there too) and, for JSON, after each pull (which moves `sites`); reads
are answered the last ones made, without waiting: a top level is read far more often than its
sites change, and the union of 190,000 hosts took seconds to build and render, which the event
loop spent when it was done at the first read. Each site's share of the JSON is kept until that
site changes, so a change of one site renders its hosts alone. A document is kept as its parts,
the hosts' cached fragments among them, and written a slice at a time (web.pretty.Joined): never
joined, it costs a reference a host, not a copy of the union (two, with each site's share).
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime, timezone
from json.encoder import encode_basestring_ascii as _string
from typing import Any

from infosvc.codec.glue_json import JsonDocuments, cluster_json, computing_element_json, subcluster_json
from infosvc.codec.glue_xml import Fragment, XmlDocuments, subcluster_head
from infosvc.publish.glue import Parts, Rendering
from infosvc.model import glue
from infosvc.model.glue import GlueTree, Host, SubCluster
from infosvc.config import LOCAL_SITE
from infosvc.federation.pull import Federation
from infosvc.federation.tree import SiteTree, UnionTree

log = logging.getLogger("infosvc.federation")

_dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
#: a site's share of the union's JSON: its CEs and clusters (objects), subclusters, and hosts (each
#: host's cached fragment followed by a comma: the document's parts, never joined)
_Part = tuple[list[dict[str, Any]], list[dict[str, Any]], list[bytes], list[bytes]]


def iso(when: float | None) -> str | None:
    return None if when is None else datetime.fromtimestamp(when, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def site_status(federation: Federation) -> list[dict[str, Any]]:
    """Each site of the top level: the top's own first (when it has hosts), then each upstream."""
    found: list[dict[str, Any]] = []
    local_hosts = len(federation.local.hosts)
    if local_hosts:  # current, not pulled: no last_success
        found.append({"name": LOCAL_SITE, "url": federation.url, "state": "ok", "stale": False,
                      "last_success": None, "hosts": local_hosts})
    for site in federation.sites:
        entry: dict[str, Any] = {
            "name": site.name, "url": site.upstream.url,
            "state": "ok" if site.error is None and site.last_success is not None
            else "stale" if site.stale else "failing",
            "stale": site.stale, "last_success": iso(site.last_success), "hosts": site.hosts}
        if site.error is not None:
            entry["error"] = site.error
        found.append(entry)
    return found


def _url_of(union: UnionTree, site: str | None) -> str | None:
    """The InformationServiceURL a site's subclusters publish: the site's own, in the union too."""
    return union.urls.get(site) if site is not None else None


def _with_site(body: bytes, site: str | None) -> bytes:
    """A JSON object with `"site"` added as its last member."""
    return body if site is None else body[:-1] + b',"site":' + _string(site).encode() + b"}"


class FederatedJson(JsonDocuments):
    """GLUE JSON of the union: each entity's site, the sites' status, the tree kept per version."""

    def __init__(self, federation: Federation, union: UnionTree | None = None,
                 publisher: Publisher | None = None) -> None:
        self.federation = federation
        #: a fixed union to name the sites from (a rendering in a worker thread), else the current one
        self.fixed = union
        #: where the whole document comes from, made (the app's); None: made here (the publisher's)
        self.publisher = publisher
        #: site -> (its tree in the union, its share of the document)
        self._parts: dict[str, tuple[SiteTree, _Part]] = {}

    def _site(self, kind: str, ident: str) -> str | None:
        return (self.fixed or self.federation.union).site_of[kind].get(ident)

    def host(self, host: Host, sub_id: str | None) -> bytes:
        return _with_site(super().host(host, sub_id), self._site("hosts", host.unique_id))

    def _subcluster(self, tree: GlueTree, sub: SubCluster, ids: list[str]) -> bytes:
        site = self._site("subclusters", sub.unique_id)
        return _with_site(subcluster_json(sub, _url_of(self.fixed or self.federation.union, site), ids), site)

    def _cluster(self, tree: GlueTree, cluster: glue.Cluster) -> dict[str, Any]:
        out = cluster_json(cluster, [s.unique_id for s in tree.subclusters_of(cluster.unique_id)])
        site = self._site("clusters", cluster.unique_id)
        return {**out, "site": site} if site is not None else out

    def _computing_element(self, ce: glue.ComputingElement) -> dict[str, Any]:
        out = computing_element_json(ce)
        site = self._site("computing-elements", ce.unique_id)
        return {**out, "site": site} if site is not None else out

    def whole(self, tree: GlueTree, fragment: Fragment, sites: list[dict[str, Any]]) -> list[bytes]:
        """The tree and these `sites`, as parts to write in turn (web.pretty.Joined), never joined."""
        return self._document([self._site_part(tree, fragment)], sites)

    @staticmethod
    def _document(shares: list[_Part], sites: list[dict[str, Any]]) -> list[bytes]:
        """The document of these sites' shares: the few entities joined, the hosts' fragments as they are."""
        hosts = [part for share in shares for part in share[3]]
        return [b'{"computing_elements":', _dumps([ce for share in shares for ce in share[0]]).encode(),
                b',"clusters":', _dumps([c for share in shares for c in share[1]]).encode(),
                b',"subclusters":[', b",".join(s for share in shares for s in share[2]), b'],"hosts":[',
                *hosts[:-1], b'],"sites":', _dumps(sites).encode(), b"}\n"]

    def _site_part(self, part: GlueTree, fragment: Fragment) -> _Part:
        """One site's share of the union's document, from its tree as the union publishes it."""
        ces = [self._computing_element(ce) for ce in part.computing_elements()]
        clusters, subclusters = [], []
        hosts: list[bytes] = []
        for cluster in part.clusters():
            clusters.append(self._cluster(part, cluster))
            for sub in part.subclusters_of(cluster.unique_id):
                ids = []
                for host in part.hosts_of(sub.unique_id):
                    ids.append(host.unique_id)
                    hosts += (fragment(host, sub.unique_id), b",")
                subclusters.append(self._subcluster(part, sub, ids))
        return ces, clusters, subclusters, hosts

    def tree_parts(self, tree: GlueTree, fragment: Fragment) -> list[bytes]:
        """The union's whole document as parts: the publisher's last (the app's), or made now over
        the fixed union (the publisher's, in its worker thread), else the last union."""
        if self.publisher is not None:
            return self.publisher.json
        return self.union_document(self.fixed or self.federation.union, fragment, site_status(self.federation))

    def union_document(self, union: UnionTree, fragment: Fragment, sites: list[dict[str, Any]]) -> list[bytes]:
        """The union's tree and `sites`, as parts; each site's share kept until that site changes.
        The hosts' parts are their cached fragments (the publisher's renderings keep them), so the
        document costs a reference a part, not a copy of the union."""
        parts: dict[str, tuple[SiteTree, _Part]] = {}
        for name, part in union.parts:
            kept = self._parts.get(name)
            parts[name] = kept if kept is not None and kept[0] is part else (part, self._site_part(part, fragment))
        self._parts = parts
        return self._document([share for _, share in parts.values()], sites)

    def subcluster_document(self, tree: GlueTree, sub: SubCluster, fragment: Fragment) -> bytes:
        return self._subcluster(tree, sub, [h.unique_id for h in tree.hosts_of(sub.unique_id)])

    def cluster_document(self, tree: GlueTree, cluster: glue.Cluster, fragment: Fragment) -> bytes:
        return _dumps(self._cluster(tree, cluster)).encode()

    def computing_element_document(self, tree: GlueTree, ce: glue.ComputingElement) -> bytes:
        return _dumps(self._computing_element(ce)).encode()


class KeptXml(XmlDocuments):
    """GLUE 1.1 XML of the union: the publisher's last (the app's), or made over a fixed union."""

    def __init__(self, federation: Federation, publisher: Publisher | None = None) -> None:
        super().__init__()
        self.federation = federation
        self.publisher = publisher
        #: the union being rendered (the publisher's, in its worker thread)
        self.fixed: UnionTree | None = None

    def _subcluster(self, tree: GlueTree, sub: SubCluster, fragment: Fragment, out: list[bytes],
                    namespace: str = "") -> None:
        union = self.fixed or self.federation.union  # each subcluster with its own site's InformationServiceURL
        url = _url_of(union, union.site_of["subclusters"].get(sub.unique_id))
        out.append(subcluster_head(sub, url, namespace).encode())
        out.extend(fragment(host, sub.unique_id) for host in tree.hosts_of(sub.unique_id))
        out.append(b"</SubCluster>")

    def tree_parts(self, tree: GlueTree, fragment: Fragment) -> list[bytes]:
        if self.publisher is not None:
            return self.publisher.xml
        return super().tree_parts(tree, fragment)


class Publisher:
    """The union and its whole JSON and XML documents, made in a worker thread after each change
    (the module doc): `run()` for the app's life, woken by the federation's `stirred`; `json` and
    `xml` are the last made, as the parts of each document (the hosts' cached fragments among
    them, written in turn: web.pretty.Joined), and `federation.union` the union they were made of."""

    def __init__(self, federation: Federation) -> None:
        self.federation = federation
        self._json = FederatedJson(federation)
        self._xml = KeptXml(federation)
        # their host fragments, kept per host object while the union holds it
        self._json_hosts = Rendering(federation, self._json)
        self._xml_hosts = Rendering(federation, self._xml)
        self.json = Parts()
        self.xml = Parts()
        #: trees replaced before the last union, to take apart at the next publication
        self._retiring: list[SiteTree] = []
        #: documents made (for tests and /metrics-minded readers)
        self.made = 0

    def _make(self, union: UnionTree, rebuilt: bool) -> tuple[Parts, Parts]:
        self._json.fixed = self._xml.fixed = union
        self._json_hosts.source = self._xml_hosts.source = union
        body = Parts.in_chunks(self._json_hosts.tree_parts())
        xml = Parts.in_chunks(self._xml_hosts.tree_parts()) if rebuilt or not self.xml else self.xml
        return body, xml

    async def publish(self) -> None:
        """Build the union if it changed, and the documents, in a worker thread; then put them in place."""
        federation = self.federation
        inputs = federation.union_inputs()  # on the loop: the top's own tree is copied here
        last = federation.installed
        doomed: list[SiteTree] = []
        if inputs is not None:
            # The trees replaced since the last union (and their renamed copies in it) are held by
            # that union until the new one is in place: taken apart at the next publication, in
            # its thread, once the union that held them is gone; the Host objects they alone hold
            # are then freed one at a time there, not all at once on the event loop.
            retired = [tree for tree in federation.retired if tree is not None]
            federation.retired.clear()
            gone = {id(tree) for tree in retired}
            renamed = [part for tree, _, part in (last.renamed_trees.values() if last is not None else ())
                       if id(tree) in gone]
            doomed, self._retiring = self._retiring, [*retired, *renamed]

        def build() -> tuple[UnionTree, Parts, Parts]:
            union = federation.build_union(inputs) if inputs is not None else last
            assert union is not None
            made = self._make(union, inputs is not None)
            for tree in doomed:  # only this thread reads them: no union holds them any more
                tree.dismantle()
            return (union, *made)

        union, body, xml = await asyncio.to_thread(build)
        if union is not last:
            federation.install(union)
        replaced = [self.json, self.xml]
        self.json, self.xml = body, xml
        self.made += 1
        # The documents replaced hold the last references to the fragments of the hosts that
        # changed (the renderings dropped them in the thread): let go of in a thread too, they are
        # freed there, not one at a time on the event loop (a read still writing one frees it after).
        await asyncio.to_thread(replaced.clear)

    async def run(self) -> None:
        """Publish after each change, until cancelled; changes during a publication make one more."""
        stirred = self.federation.stirred
        while True:
            await stirred.wait()
            stirred.clear()
            try:
                await self.publish()
            except Exception:  # noqa: BLE001 - the publisher must outlive a bug in one publication
                log.exception("federation: building the union's documents failed; the last ones are served")
