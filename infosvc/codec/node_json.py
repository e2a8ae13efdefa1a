"""SSS Node objects as JSON: the same facts as the XML, the spec's names as snake_case keys (the one
style of every JSON answer of the service).

A Node becomes {"id", "name", "features", "opsys", "arch", "description", "state",
"extensions": [{"name", "type", "value"}], "configured" | "available" | "utilized":
[{"kind", "value", "units", "metric", "wall_duration", "consumption_rate", "name", "type"}]};
absent values are left out.
"""

from __future__ import annotations

from typing import Any

from infosvc.model.node import Category, Consumable, Node

_CONSUMABLE_KEYS = ("kind", "name", "type", "value", "units", "metric", "wall_duration", "consumption_rate")


def consumable_to_json(item: Consumable) -> dict[str, Any]:
    return {key: value for key in _CONSUMABLE_KEYS if (value := getattr(item, key)) is not None}


def node_to_json(node: Node) -> dict[str, Any]:
    out: dict[str, Any] = {"id": node.id}
    for key in ("name", "opsys", "arch", "description", "state"):
        if (value := getattr(node, key)) is not None:
            out[key] = value
    if node.features:
        out["features"] = list(node.features)
    if node.extensions:
        out["extensions"] = [{"name": e.name, **({"type": e.type} if e.type is not None else {}), "value": e.value}
                             for e in node.extensions]
    for category in Category:
        if items := node.category(category).items:
            out[category.value.lower()] = [consumable_to_json(item) for item in items]
    return out
