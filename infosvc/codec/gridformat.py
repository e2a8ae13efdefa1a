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

from infosvc import __version__
from infosvc.model import glue
from infosvc.codec.glue_xml import Fragment
from infosvc.model.glue import GlueTree, Host, SubCluster

#: The site id when neither the reader nor the config's URLs give one.
DEFAULT_SITE: Final = "infosvc"
#: What the CE and the endpoint name as their implementation's version: this package's.
IMPLEMENTATION_VERSION: Final = __version__
#: The batch system's word for itself where a CE names its job manager (GLUE 1.3 GlueCEInfoJobManager).
JOB_MANAGER: Final = "infosvc"
_SITE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")
_VO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


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
    CE's host name, else DEFAULT_SITE; each only if it is a site id (`valid_site`). A CE's host
    name is free text, an upstream site's too: one holding a newline, written raw in GLUE 1.3's
    first comment line, added entries to the LDIF a BDII reads."""
    if options.site and valid_site(options.site):
        return options.site
    url = tree.information_service_url
    host = urlsplit(url).hostname if url else None
    if host and valid_site(host):
        return host
    for ce in tree.computing_elements():
        if ce.info.host_name and valid_site(ce.info.host_name):
            return ce.info.host_name
    return DEFAULT_SITE


#: How each LDIF document names what a grid client would miss (`infosvc ldif` shows them on standard error).
WARNING_PREFIX: Final = "# warning: "


def grid_gaps(information_service_url: str | None, ce_rules: Iterable[Iterable[str]]) -> list[str]:
    """What a site's config leaves a grid client without, one line each: the service's address,
    and the VOs its computing elements serve. check-config and the LDIF documents say the same."""
    gaps = []
    if not information_service_url:
        gaps.append("no [service] information_service_url: the site id is guessed and the job API is published "
                    "as https://SITE/v1/jobs; set it to the URL grid clients reach this service at")
    if not any(list(rules) for rules in ce_rules):
        gaps.append("no computing element has access_control: GLUE 2.0 publishes no MappingPolicy and no "
                    "AccessPolicy (errors in EGI's profile) and grid clients cannot find the site by VO; "
                    "give each computing element the VOs it serves")
    return gaps


def gap_comments(information_service_url: str | None, ces: Iterable[glue.ComputingElement]) -> str:
    """The site's gaps (grid_gaps) as LDIF comment lines, which a BDII ignores; `ces` those of the
    document's snapshot (read once for the document, not again here)."""
    gaps = grid_gaps(information_service_url, (ce.access_control_rules for ce in ces))
    return "".join(f"{WARNING_PREFIX}{gap}\n" for gap in gaps)


def jobs_url(tree: GlueTree, site: str) -> str:
    """The job API's URL, which the CEs' contact string and the GLUE 2.0 endpoint publish: at the
    scheme, host and port of the information service URL, else `https://SITE` (say so: check-config
    and `infosvc ldif` warn when the config gives no information_service_url)."""
    url = tree.information_service_url
    parts = urlsplit(url) if url else None
    base = f"{parts.scheme}://{parts.netloc}" if parts is not None and parts.netloc else f"https://{site}"
    return f"{base}/v1/jobs"


def all_subclusters(tree: GlueTree) -> list[SubCluster]:
    """The tree's subclusters, cluster by cluster (the order every rendering lists them in)."""
    return [sub for cluster in tree.clusters() for sub in tree.subclusters_of(cluster.unique_id)]


def subclusters_of_ce(tree: GlueTree, ce: glue.ComputingElement) -> list[SubCluster]:
    return [sub for cid in ce.clusters for sub in tree.subclusters_of(cid)]


def scaling_reference(subs: Iterable[SubCluster]) -> int | None:
    """The SpecInt2000 that CPU and wall time limits are counted in: the slowest benchmarked
    subcluster's, so that a limit holds on every host (a scaling factor of 1 there, more on faster
    ones); None when no subcluster has a benchmark (every factor 1)."""
    return min((s.benchmark.si00 for s in subs if s.benchmark is not None and s.benchmark.si00 > 0), default=None)


def scaling_factor(sub: SubCluster, reference: int | None) -> float:
    """How much more a second of this subcluster does than one of the reference's (1 when unknown)."""
    if reference is None or sub.benchmark is None or sub.benchmark.si00 <= 0:
        return 1.0
    return round(sub.benchmark.si00 / reference, 3)


def vo_of_rule(rule: str) -> str | None:
    """The VO a CE's access rule admits (`VO:atlas`, `VOMS:/atlas/Role=production` give `atlas`);
    None for a rule that names none (a DN, a DENY)."""
    kind, sep, rest = rule.strip().partition(":")
    kind = kind.upper()
    if not sep:
        return None
    name = rest if kind == "VO" else rest.split("/")[1] if kind == "VOMS" and rest.startswith("/") else ""
    return name if _VO_NAME.fullmatch(name) else None


class TreeDocuments:
    """A format that publishes the whole tree only: no per-host fragment, no entity documents (the
    routes that serve those do not offer it)."""

    media_type = "text/plain"

    def host(self, host: Host, sub_id: str | None) -> bytes:
        return b""

    def tree(self, tree: GlueTree, fragment: Fragment) -> bytes:
        raise NotImplementedError

    def tree_parts(self, tree: GlueTree, fragment: Fragment) -> list[bytes]:
        """The tree as one part: its documents hold no host of their own to keep apart."""
        return [self.tree(tree, fragment)]

    def host_parts(self, fragments: Iterable[bytes]) -> list[bytes]:
        raise ValueError("this format publishes the whole tree only")

    def host_document(self, fragment: bytes) -> bytes:
        raise ValueError("this format publishes the whole tree only")

    def subcluster_document(self, tree: GlueTree, sub: SubCluster, fragment: object) -> bytes:
        raise ValueError("this format publishes the whole tree only")

    def cluster_document(self, tree: GlueTree, cluster: glue.Cluster, fragment: object) -> bytes:
        raise ValueError("this format publishes the whole tree only")

    def computing_element_document(self, tree: GlueTree, ce: glue.ComputingElement) -> bytes:
        raise ValueError("this format publishes the whole tree only")
