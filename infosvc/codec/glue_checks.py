"""What a top level refuses of a site's GLUE JSON beyond each member's type (infosvc/codec/glue_read.py
reads it): ids that a directory or an XML document cannot carry, two entities that a directory
takes for one, lists whose repeats multiply the union's output, and references to clusters the
document does not publish. A site's config and roll-up make none of these (its ids are checked
as the config is read, and every cluster a CE names or a host is in is published), so a document
holding one is broken or hostile: it is refused whole, and only that site is marked failing.

Ids are told apart as a directory tells them (infosvc.model.glue.directory_key), as the union
(infosvc/federation/tree.py), GLUE 1.3's VOViews and the site's config do.
"""

from __future__ import annotations

from typing import Final, Iterable, Sequence

from infosvc.errors import excerpt
from infosvc.model import glue
from infosvc.model.glue import Host, SubCluster, directory_key


#: The longest id or access rule a site's document may hold: a host's DNS name is at most 253,
#: a subcluster's its cluster's id and 41 more, a CE's `host:port/jobmanager-lrms-queue`
MAX_ID_CHARS: Final = 255
#: The most kinds of accelerator (GPU, FPGA, ...) a site's document may name: GLUE 2.1 writes one
#: share's figures a kind and CE (400 CEs and 1,000 kinds, 0.29 MB of JSON, were 103 MB)
MAX_ACCELERATOR_TYPES: Final = 16
#: The most pairs of a CE and a subcluster it serves that a site's document may hold: each is a
#: share's reference to an execution environment in GLUE 2.0 and back (a site of 100 CEs over
#: 1,000 kinds of host is at the bound)
MAX_SHARE_ENVIRONMENTS: Final = 100_000


class GlueReadError(ValueError):
    """The document is not the GLUE JSON a site publishes; says where."""


def _quoted(text: str) -> str:
    # repr escapes what is not printable: the error goes to /healthz and the log as it is
    return repr(excerpt(text, 80))


def check_id(value: str, where: str) -> str:
    """`value` (an id, an access rule) when it is printable and not blank; else GlueReadError.
    Not printable: a lone surrogate (no UTF-8 encodes it, and a rendering of the union failed on
    it), NUL and the other controls, line breaks (no XML 1.0 document holds most of them, and an
    LDIF line or a DN must not break), line and paragraph separators, format characters (bidi
    overrides make one id look like another)."""
    if len(value) > MAX_ID_CHARS:
        # written once per pair of a share and an environment in GLUE 2.0, escaped there (a
        # character LocalID lacks takes seven): 100-character ids made 0.47 MB of JSON 161 MB of LDIF
        raise GlueReadError(f"{where}: {_quoted(value)} is {len(value):,} characters long, more than the "
                            f"{MAX_ID_CHARS} an id or rule may have")
    if value.isprintable() and not value.isspace() and value:
        return value
    raise GlueReadError(f"{where}: {_quoted(value)} is blank or holds a character that is not printable "
                        "(a control character, a line break, a lone surrogate, ...): no directory entry or "
                        "XML document can carry it as an id")


class Unique:
    """The ids of one kind of entity in one document, told apart as a directory tells them apart
    (`directory_key`): an entity listed twice is rendered twice (a cluster, with every subcluster
    and host of its id, each time), and two ids one to a directory are one entry, the second refused."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._seen: dict[str, str] = {}

    def add(self, ident: str, where: str) -> None:
        key = directory_key(ident)
        other = self._seen.get(key)
        if other is None:
            self._seen[key] = ident
            return
        if other == ident:
            raise GlueReadError(f"{where}: {self.kind} {_quoted(ident)} is listed twice")
        raise GlueReadError(f"{where}: {self.kind} {_quoted(ident)} differs only in case or spaces from "
                            f"{_quoted(other)}: one entry to a directory, which compares ids ignoring both")


def check_rules(rules: Sequence[str], where: str) -> tuple[str, ...]:
    """A CE's access rules, refused as the site's config refuses them (infosvc/config/site.py):
    each must be an id `check_id` takes, and two that are one value to a directory (ignoring
    case and runs of spaces) are refused, since a directory refuses the CE's entry that holds them."""
    seen: dict[str, str] = {}
    for k, rule in enumerate(rules):
        here = f"{where}.access_control_base.rules[{k}]"
        check_id(rule, here)
        key = directory_key(rule)
        if key in seen:
            raise GlueReadError(f"{here}: {_quoted(rule)} repeats {_quoted(seen[key])} (a directory compares rules "
                                "ignoring case and runs of spaces, and would refuse the CE's entry)")
        seen[key] = rule
    return tuple(rules)


def check_references(known: set[str], subclusters: Sequence[tuple[SubCluster, list[str]]], hosts: Iterable[Host],
                     computing_elements: Sequence[glue.ComputingElement]) -> None:
    """Every cluster a CE lists (each once), a subcluster is in or a host is in must be one of
    `known` (the document's own clusters). At a top level a reference to a cluster the document does not
    publish is either dangling (the union's GLUE 1.1 XML then fails its own schema's keyref) or
    another site's cluster (whose GLUE 1.3 entry then lists this site's CE, and whose GLUE 2
    execution environments this site's share claims): refused, never taken as a join across sites."""
    for i, ce in enumerate(computing_elements):
        listed: set[str] = set()
        for j, cid in enumerate(ce.clusters):
            if cid not in known:
                raise GlueReadError(f"computing_elements[{i}].clusters[{j}]: no cluster {_quoted(cid)} in the document")
            if cid in listed:
                # each share of GLUE 2 names every execution environment of every cluster its CE
                # lists, and each of those every share: 122 kB of JSON gave 88 MB of LDIF
                raise GlueReadError(f"computing_elements[{i}].clusters[{j}]: {_quoted(cid)} is listed twice")
            listed.add(cid)
    in_cluster: dict[str, int] = {}
    for i, (sub, _) in enumerate(subclusters):
        if sub.cluster not in known:
            raise GlueReadError(f"subclusters[{i}]: 'cluster': no cluster {_quoted(sub.cluster)} in the document")
        in_cluster[sub.cluster] = in_cluster.get(sub.cluster, 0) + 1
    # GLUE 2.0 writes each CE's share with every execution environment (subcluster) of its
    # clusters, and each of those with every share: pairs no rule above bounds (400 CEs over 300
    # subclusters, under 0.5 MB of JSON, were 120,000 pairs written twice at each read)
    kinds = {a.type for sub, _ in subclusters for a in sub.accelerators}
    if len(kinds) > MAX_ACCELERATOR_TYPES:
        raise GlueReadError(f"subclusters: their accelerators are of {len(kinds):,} types, more than the "
                            f"{MAX_ACCELERATOR_TYPES} a site may publish (GPU, FPGA, ...)")
    pairs = sum(in_cluster.get(cid, 0) for ce in computing_elements for cid in ce.clusters)
    if pairs > MAX_SHARE_ENVIRONMENTS:
        raise GlueReadError(f"computing_elements: their clusters' subclusters make {pairs:,} pairs of a CE and a "
                            f"subcluster it serves, more than the {MAX_SHARE_ENVIRONMENTS:,} a site may publish")
    for i, host in enumerate(hosts):
        if host.cluster not in known:
            raise GlueReadError(f"hosts[{i}]: 'cluster': no cluster {_quoted(host.cluster)} in the document")
