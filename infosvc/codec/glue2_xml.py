"""The site as GLUE 2.0 XML, valid against OGF's schemas/glue2/glue2.xsd: one <GLUE2> document, its
entities flat in the schema's order (domain, service, endpoint, shares, manager, execution
environments, policies, benchmarks, application environments), each naming the others in
<Associations>.
The entities are infosvc.codec.glue2's; every one has the snapshot's time as CreationTime.
"""

from __future__ import annotations

from typing import Final

from infosvc.codec.glue2 import XB, Entity, Value, build
from infosvc.codec.glue_xml import Fragment, _text
from infosvc.codec.gridformat import GridOptions, TreeDocuments
from infosvc.model.glue import GlueTree

NAMESPACE: Final = "http://schemas.ogf.org/glue/2009/03/spec_2.0_r1"
SCHEMA_FILE: Final = "glue2/glue2.xsd"
_DECLARATION: Final = "<?xml version='1.0' encoding='UTF-8'?>\n"


def _values(value: Value) -> list[str]:
    if isinstance(value, list):
        return [_text(v) for v in value]
    if isinstance(value, XB):
        return ["undefined" if value.value is None else ("true" if value.value else "false")]
    if isinstance(value, float):
        return [repr(value)]
    return [_text(value) if isinstance(value, str) else str(value)]


def entity_xml(e: Entity, time: str) -> str:
    base = f' BaseType="{e.base}"' if e.base else ""
    parts = [f'<{e.kind}{base} CreationTime="{time}"><ID>{_text(e.id)}</ID>']
    if e.name is not None:
        parts.append(f"<Name>{_text(e.name)}</Name>")
    parts.extend(f"<OtherInfo>{_text(info)}</OtherInfo>" for info in e.other_info)
    for name, value in (*e.base_attrs, *e.attrs):
        parts.extend(f"<{name}>{text}</{name}>" for text in _values(value))
    parts.append("<Associations>")
    for assoc in e.assoc:
        parts.extend(f"<{assoc.xml}>{_text(v)}</{assoc.xml}>" for v in assoc.values)
    parts.append(f"</Associations></{e.kind}>")
    return "".join(parts)


class Glue2Xml(TreeDocuments):
    """The tree as GLUE 2.0 XML (`format=glue2-xml`)."""

    media_type = "application/xml"

    def __init__(self, options: GridOptions = GridOptions()) -> None:
        self.options = options

    def tree(self, tree: GlueTree, fragment: Fragment) -> bytes:
        site = build(tree, self.options)
        time = site.snapshot.time
        out = [_DECLARATION, f'<GLUE2 xmlns="{NAMESPACE}">',
               f"<!-- infosvc: CE figures of snapshot {site.snapshot.id} at {time} -->",
               entity_xml(site.domain, time)]
        out.extend(entity_xml(e, time) for e in site.entities)
        out.append("</GLUE2>\n")
        return "".join(out).encode()
