"""A stored report as the Node it says: a whole report parsed, a delta applied to the whole report
it builds on (infosvc/model/nodedelta.py)."""

from __future__ import annotations

from infosvc.codec.node_xml import parse_node
from infosvc.model.node import Node
from infosvc.model.nodedelta import apply_delta


def node_of_report(document: bytes, base: bytes | None) -> Node:
    """The Node of a stored report; `base`: the whole report a delta builds on (None: `document`
    is whole). DocumentError when either no longer parses or they do not fit."""
    node = parse_node(document)
    return node if base is None else apply_delta(parse_node(base), node)
