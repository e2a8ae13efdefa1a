"""SSS Node objects in a compact form for the service's own restart, not for anyone else: a JSON
array of the Node's fields in order (no keys), which reads back into an equal Node ten times
faster than its XML parses and validates. Only what the service itself wrote is read this way
(the store's snapshot of its hosts, taken at a clean stop); anything that does not read back is a
DocumentError, and the service falls back to the document itself."""

from __future__ import annotations

import json
from typing import Any, Final

from infosvc.errors import DocumentError
from infosvc.model.node import Consumable, Extension, Node, PartTable, Properties, consumable_key

#: the form's version: a snapshot of another form is not read
FORM: Final = 1
#: The parts read lately, so that the parts alike on many hosts are one object after a start as
#: after their reports (infosvc/codec/node_xml.py shares them the same way).
_extensions = PartTable()
_consumables = PartTable()


def _item(item: Consumable) -> list[Any]:
    return [item.kind, item.value, item.units, item.metric, item.wall_duration, item.consumption_rate, item.name,
            item.type]


def node_to_compact(node: Node) -> bytes:
    return json.dumps([FORM, node.id, node.name, node.features, node.opsys, node.arch, node.description, node.state,
                       [[e.name, e.value, e.type] for e in node.extensions],
                       [_item(i) for i in node.configured.items], [_item(i) for i in node.available.items],
                       [_item(i) for i in node.utilized.items]],
                      separators=(",", ":"), ensure_ascii=False).encode()


def node_from_compact(data: bytes | str) -> Node:
    """The Node `node_to_compact` wrote; DocumentError for anything else."""
    try:
        (form, node_id, name, features, opsys, arch, description, state, extensions, configured, available,
         utilized) = json.loads(data)
        if form != FORM:
            raise ValueError(f"form {form!r}")
        return Node(node_id, name, features, opsys, arch, description, state, [_extension(e) for e in extensions],
                    Properties([_consumable(i) for i in configured]), Properties([_consumable(i) for i in available]),
                    Properties([_consumable(i) for i in utilized]))
    except (ValueError, TypeError) as exc:
        raise DocumentError(f"not a compact Node: {exc}") from None


def _extension(fields: list[Any]) -> Extension:
    return _extensions.get(tuple(fields), Extension, *fields)


def _consumable(fields: list[Any]) -> Consumable:
    if len(fields) != 8:
        raise ValueError(f"a consumable of {len(fields)} fields")
    return _consumables.get(consumable_key(tuple(fields)), Consumable, *fields)
