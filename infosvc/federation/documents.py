"""The union's GLUE documents: the site's own JSON and XML (infosvc/codec/glue_json.py,
glue_xml.py) over the union tree, with what a top level adds.

JSON: every entity names its `site` (the upstream's name, or `local` for the top's own hosts),
and the whole tree ends with `sites`, each upstream's status (url, last good pull, stale), as
schemas/glue.schema.json describes. XML is GLUE 1.1 as the schema has it, with nothing added.
Both keep the whole tree's rendering until the union changes (`Federation.version`; for JSON,
also until a pull ends, which moves `sites`): a top level is read far more often than its sites
change, and 20,000 hosts' fragments are then joined once per change, not per read.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from json.encoder import encode_basestring_ascii as _string
from typing import Any

from infosvc.codec.glue_json import JsonDocuments, cluster_json, computing_element_json, subcluster_json
from infosvc.codec.glue_xml import Fragment, XmlDocuments, subcluster_head
from infosvc.model import glue
from infosvc.model.glue import GlueTree, Host, SubCluster
from infosvc.site.federation_config import LOCAL_SITE
from infosvc.federation.pull import Federation
from infosvc.federation.tree import SiteTree, UnionTree

_dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
#: a site's share of the union's JSON: its CEs and clusters (objects), subclusters, hosts (joined)
_Part = tuple[list[dict[str, Any]], list[dict[str, Any]], list[bytes], bytes]


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

    def __init__(self, federation: Federation, union: UnionTree | None = None) -> None:
        self.federation = federation
        #: a fixed union to name the sites from (a rendering in a worker thread), else the current one
        self.fixed = union
        self._kept: tuple[tuple[int, int], bytes] | None = None
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

    def whole(self, tree: GlueTree, fragment: Fragment, sites: list[dict[str, Any]]) -> bytes:
        """The tree and these `sites`, joined once (the union's document is tens of megabytes)."""
        ces, clusters, subclusters, hosts = self._site_part(tree, fragment)
        return b"".join((b'{"computing_elements":', _dumps(ces).encode(), b',"clusters":', _dumps(clusters).encode(),
                         b',"subclusters":[', b",".join(subclusters), b'],"hosts":[', hosts,
                         b'],"sites":', _dumps(sites).encode(), b"}\n"))

    def _site_part(self, part: GlueTree, fragment: Fragment) -> _Part:
        """One site's share of the union's document, from its tree as the union publishes it."""
        ces = [self._computing_element(ce) for ce in part.computing_elements()]
        clusters, subclusters, hosts = [], [], []
        for cluster in part.clusters():
            clusters.append(self._cluster(part, cluster))
            for sub in part.subclusters_of(cluster.unique_id):
                ids = []
                for host in part.hosts_of(sub.unique_id):
                    ids.append(host.unique_id)
                    hosts.append(fragment(host, sub.unique_id))
                subclusters.append(self._subcluster(part, sub, ids))
        return ces, clusters, subclusters, b",".join(hosts)

    def tree(self, tree: GlueTree, fragment: Fragment) -> bytes:
        """The union's tree and `sites`, kept until the union or a site's status changes; each
        site's share kept until that site changes, so a change of one site renders its hosts alone."""
        union = self.federation.union  # rebuilt first if a site changed, so the version is current
        key = (self.federation.version, self.federation.pulls)
        if self._kept is None or self._kept[0] != key:
            parts: dict[str, tuple[SiteTree, _Part]] = {}
            for name, part in union.parts:
                kept = self._parts.get(name)
                parts[name] = kept if kept is not None and kept[0] is part else (part, self._site_part(part, fragment))
            self._parts = parts
            shares = [share for _, share in parts.values()]
            hosts: list[bytes] = []
            for share in shares:
                if share[3]:
                    hosts += (share[3], b",")
            body = b"".join((  # one copy of the whole: the sites' host lists are joined here, not before
                b'{"computing_elements":', _dumps([ce for share in shares for ce in share[0]]).encode(),
                b',"clusters":', _dumps([c for share in shares for c in share[1]]).encode(),
                b',"subclusters":[', b",".join(s for share in shares for s in share[2]), b'],"hosts":[',
                *hosts[:-1], b'],"sites":', _dumps(site_status(self.federation)).encode(), b"}\n"))
            self._kept = (key, body)
        return self._kept[1]

    def subcluster_document(self, tree: GlueTree, sub: SubCluster, fragment: Fragment) -> bytes:
        return self._subcluster(tree, sub, [h.unique_id for h in tree.hosts_of(sub.unique_id)])

    def cluster_document(self, tree: GlueTree, cluster: glue.Cluster, fragment: Fragment) -> bytes:
        return _dumps(self._cluster(tree, cluster)).encode()

    def computing_element_document(self, tree: GlueTree, ce: glue.ComputingElement) -> bytes:
        return _dumps(self._computing_element(ce)).encode()


class KeptXml(XmlDocuments):
    """GLUE 1.1 XML of the union, the whole tree kept until the union changes."""

    def __init__(self, federation: Federation) -> None:
        super().__init__()
        self.federation = federation
        self._kept: tuple[int, bytes] | None = None

    def _subcluster(self, tree: GlueTree, sub: SubCluster, fragment: Fragment, out: list[bytes],
                    namespace: str = "") -> None:
        union = self.federation.union  # each subcluster with its own site's InformationServiceURL
        url = _url_of(union, union.site_of["subclusters"].get(sub.unique_id))
        out.append(subcluster_head(sub, url, namespace).encode())
        out.extend(fragment(host, sub.unique_id) for host in tree.hosts_of(sub.unique_id))
        out.append(b"</SubCluster>")

    def tree(self, tree: GlueTree, fragment: Fragment) -> bytes:
        self.federation.union
        version = self.federation.version
        if self._kept is None or self._kept[0] != version:
            self._kept = (version, super().tree(tree, fragment))
        return self._kept[1]

