"""The site as GLUE 2.0 LDIF (schemas/glue2/GLUE20.schema), where a resource BDII's providers put
it: below `GLUE2GroupID=resource,o=glue`, the service's endpoint, shares, manager and execution
environments below the service, benchmarks below their execution environment, application
environments below the manager, a share's MappingPolicy below the share and the endpoint's
AccessPolicy below the endpoint (as gLite's CE providers place them). The AdminDomain is the site
BDII's, so it is not written here.

Attribute names follow the schema's LDAP rendering: an entity's own attributes carry its class
(GLUE2ComputingShareRunningJobs), inherited ones the class that defines them (GLUE2ShareID,
GLUE2EntityCreationTime), associations are ForeignKey attributes.
"""

from __future__ import annotations

from infosvc.codec import ldif
from infosvc.codec.glue13_ldif import Glue13Ldif
from infosvc.codec.glue2 import GROUP, SUFFIX, XB, Entity, Value, build
from infosvc.codec.glue_xml import Fragment
from infosvc.codec.gridformat import GridOptions, TreeDocuments, gap_comments
from infosvc.model.glue import GlueTree
from infosvc.model.snapshot import SnapshotView, take


def base_entries() -> str:
    """The BDII's own entries above the providers' (written only on request)."""
    return (ldif.entry(SUFFIX, [("objectClass", "organization"), ("o", "glue")])
            + ldif.entry(GROUP, [("objectClass", "GLUE2Group"), ("GLUE2GroupID", "resource")]))


def _text(value: Value) -> list[str]:
    if isinstance(value, list):
        return value
    if isinstance(value, XB):
        return ["undefined" if value.value is None else ("true" if value.value else "false")]
    if isinstance(value, float):
        return [repr(value) if value != int(value) else str(int(value))]
    return [str(value)]


def entity_entry(e: Entity, time: str) -> str:
    attrs: ldif.Attributes = []
    if e.base:
        attrs.append(("objectClass", f"GLUE2{e.base}"))
    attrs.append(("objectClass", f"GLUE2{e.kind}"))
    attrs.append((f"GLUE2{e.base or e.kind}ID", e.id))
    attrs.append(("GLUE2EntityCreationTime", time))
    if e.name is not None:
        attrs.append(("GLUE2EntityName", e.name))
    attrs += [("GLUE2EntityOtherInfo", info) for info in e.other_info]
    for prefix, pairs in ((e.base, e.base_attrs), (e.kind, e.attrs)):
        for name, value in pairs:
            attrs += [(f"GLUE2{prefix}{name}", text) for text in _text(value)]
    attrs += e.keys
    return ldif.entry(e.dn, attrs)


class Glue2Ldif(TreeDocuments):
    """The tree as GLUE 2.0 LDIF (`format=ldif&schema=2.0`)."""

    media_type = "text/plain"

    def __init__(self, options: GridOptions = GridOptions()) -> None:
        self.options = options

    def tree(self, tree: GlueTree, fragment: Fragment) -> bytes:
        site = build(tree, self.options)
        snap = site.snapshot
        out = [f"# GLUE 2.0 of site {site.site} by infosvc; CE figures of snapshot {snap.id} at {snap.time}\n",
               gap_comments(tree.information_service_url, snap.computing_elements), "\n"]
        if self.options.base:
            out.append(base_entries())
        out.extend(entity_entry(e, snap.time) for e in site.entities)
        return "".join(out).encode()


class GlueLdif(TreeDocuments):
    """GLUE 1.3 then GLUE 2.0 LDIF of one snapshot (`format=ldif` without `schema`): what a resource
    BDII's provider prints, as bdii-update sorts entries by suffix."""

    media_type = "text/plain"

    def __init__(self, options: GridOptions = GridOptions()) -> None:
        self.parts = (Glue13Ldif(options), Glue2Ldif(options))

    def tree(self, tree: GlueTree, fragment: Fragment) -> bytes:
        if not isinstance(tree, SnapshotView):
            tree = SnapshotView(tree, take(tree))  # one snapshot for both
        return b"".join(part.tree(tree, fragment) for part in self.parts)
