"""The site as GLUE 2.0 JSON, valid against OGF's schemas/glue2/json/Glue2.json (with its one patch,
schemas/glue2/README.md): an object of arrays by entity kind ("AdminDomain", "ComputingService",
"ComputingEndpoint", "ComputingShare", "ComputingManager", "ExecutionEnvironment", "AccessPolicy",
"MappingPolicy", "Benchmark", "ApplicationEnvironment"; a policy kind only when a CE has access
rules; GLUE 2.1's "AcceleratorEnvironment", "ComputingManagerAcceleratorInfo" and
"ComputingShareAcceleratorInfo" when hosts have accelerators, as XSEDE's IPF publishes them), each entity with its "Associations" as OGF's JSON names them.
ExtendedBoolean "undefined" is JSON null, as the schema types it.
"""

from __future__ import annotations

import json
from typing import Any

from infosvc.codec.glue2 import XB, Entity, Value, build
from infosvc.codec.glue2_accelerators import accelerator_entities
from infosvc.codec.glue_xml import Fragment
from infosvc.codec.gridformat import GridOptions, TreeDocuments, all_subclusters
from infosvc.model.glue import GlueTree

_dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def _value(value: Value) -> Any:
    return value.value if isinstance(value, XB) else value


def entity_json(e: Entity, time: str) -> dict[str, Any]:
    out: dict[str, Any] = {"CreationTime": time, "ID": e.id}
    if e.name is not None:
        out["Name"] = e.name
    if e.other_info:
        out["OtherInfo"] = list(e.other_info)
    for name, value in (*e.base_attrs, *e.attrs):
        out[name] = _value(value)
    out["Associations"] = {a.json: (a.values[0] if a.values else None) if a.single else list(a.values)
                           for a in e.assoc}
    return out


class Glue2Json(TreeDocuments):
    """The tree as GLUE 2.0 JSON (`format=glue2-json`)."""

    media_type = "application/json"

    def __init__(self, options: GridOptions = GridOptions()) -> None:
        self.options = options

    def tree(self, tree: GlueTree, fragment: Fragment) -> bytes:
        site = build(tree, self.options)
        time = site.snapshot.time
        doc: dict[str, list[dict[str, Any]]] = {"AdminDomain": [entity_json(site.domain, time)]}
        accelerators = accelerator_entities(tree, site.snapshot.computing_elements, all_subclusters(tree), site.ids)
        for e in (*site.entities, *accelerators):
            doc.setdefault(e.kind, []).append(entity_json(e, time))
        return _dumps(doc).encode()
