"""What the grid's renderings share (GLUE 1.3 and 2.0 LDIF, GLUE 2.0 XML and JSON): the options a
reader gives (the site's id, the BDII's base entries), the site id when none is given, and the base
of their documents objects, which publish the whole tree only.

These formats publish a site as grid clients read it: computing elements, clusters, and
subclusters (GLUE 2.0: execution environments), not one entry per host, so they keep no per-host
fragment; a host's own facts stay in the GLUE 1.1 XML and JSON.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Iterable
from urllib.parse import urlsplit

from infosvc.model import glue
from infosvc.model.glue import GlueTree, Host, SubCluster

#: The site id when neither the reader nor the config's URLs give one.
DEFAULT_SITE: Final = "infosvc"
_SITE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")


@dataclass(frozen=True, slots=True)
class GridOptions:
    #: the site's id (GlueSiteUniqueID, GLUE 2.0 AdminDomain ID); None: from the tree
    site: str | None = None
    #: print the BDII's own base entries too (mds-vo-name=resource,o=grid; GLUE2GroupID=resource,o=glue)
    base: bool = False


def valid_site(text: str) -> bool:
    """A site id as GOCDB names sites: letters, digits, '_', '.', '-', at most 100."""
    return _SITE.fullmatch(text) is not None


def site_id(tree: GlueTree, options: GridOptions) -> str:
    """The site's id: the reader's, else the host of the information service URL, else the first
    CE's host name, else DEFAULT_SITE."""
    if options.site:
        return options.site
    url = tree.information_service_url
    host = urlsplit(url).hostname if url else None
    if host:
        return host
    for ce in tree.computing_elements():
        if ce.info.host_name:
            return ce.info.host_name
    return DEFAULT_SITE


class TreeDocuments:
    """A format that publishes the whole tree only: no per-host fragment, no entity documents (the
    routes that serve those do not offer it)."""

    media_type = "text/plain"

    def host(self, host: Host, sub_id: str | None) -> bytes:
        return b""

    def hosts(self, fragments: Iterable[bytes]) -> bytes:
        raise ValueError("this format publishes the whole tree only")

    def host_document(self, fragment: bytes) -> bytes:
        raise ValueError("this format publishes the whole tree only")

    def subcluster_document(self, tree: GlueTree, sub: SubCluster, fragment: object) -> bytes:
        raise ValueError("this format publishes the whole tree only")

    def cluster_document(self, tree: GlueTree, cluster: glue.Cluster, fragment: object) -> bytes:
        raise ValueError("this format publishes the whole tree only")

    def computing_element_document(self, tree: GlueTree, ce: glue.ComputingElement) -> bytes:
        raise ValueError("this format publishes the whole tree only")
