"""SSS Node objects in a compact form for the service's own restart, not for anyone else: a JSON
array of the Node's fields in order (no keys), which reads back into an equal Node ten times
faster than its XML parses and validates. Only what the service itself wrote is read this way
(the store's snapshot of its hosts, taken at a clean stop); anything that does not read back is a
DocumentError, and the service falls back to the document itself."""

from __future__ import annotations

import json
from typing import Any, Callable, Final, TypeVar

from infosvc.errors import DocumentError
from infosvc.model.node import Consumable, Extension, Node, Properties

#: the form's version: a snapshot of another form is not read
FORM: Final = 1
#: The Extensions and Consumables read lately, by what they were read from, so that the parts alike
#: on many hosts are one object after a start as after their reports (infosvc/codec/node_xml.py
#: shares them the same way; the parts are frozen). A number's type is part of what it was read
#: from: 1 and 1.0 are equal keys, not equal values. Bounded as node_xml's tables are.
_extensions: dict[tuple[Any, ...], Extension] = {}
_consumables: dict[tuple[Any, ...], Consumable] = {}
_SHARED_MAX: Final = 1 << 14


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
    return _shared(_extensions, tuple(fields), Extension, fields)


def _consumable(fields: list[Any]) -> Consumable:
    key = (*fields, type(fields[1]) if len(fields) > 1 else None, type(fields[5]) if len(fields) > 5 else None)
    return _shared(_consumables, key, Consumable, fields)


Part = TypeVar("Part", Extension, Consumable)


def _shared(table: dict[tuple[Any, ...], Part], key: tuple[Any, ...], make: Callable[..., Part],
            fields: list[Any]) -> Part:
    """The part read before from the same fields, else a new one (kept in the bounded `table`)."""
    part = table.get(key)
    if part is None:
        part = make(*fields)
        if len(table) >= _SHARED_MAX:
            table.clear()
        table[key] = part
    return part
