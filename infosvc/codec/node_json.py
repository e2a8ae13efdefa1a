"""SSS Node objects as JSON: the same facts as the XML, with the spec's names in camelCase keys.

A Node becomes {"id", "name", "features", "opsys", "arch", "description", "state",
"extensions": [{"name", "type", "value"}], "configured" | "available" | "utilized":
[{"kind", "value", "units", "metric", "wallDuration", "consumptionRate", "name", "type"}]};
absent values are left out.
"""

from __future__ import annotations

from typing import Any

from infosvc.model.node import Category, Consumable, Node

_CONSUMABLE_KEYS = (("kind", "kind"), ("name", "name"), ("type", "type"), ("value", "value"),
                    ("units", "units"), ("metric", "metric"), ("wall_duration", "wallDuration"),
                    ("consumption_rate", "consumptionRate"))


def consumable_to_json(item: Consumable) -> dict[str, Any]:
    return {key: getattr(item, attr) for attr, key in _CONSUMABLE_KEYS if getattr(item, attr) is not None}


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
