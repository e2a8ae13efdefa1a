"""What one agent report may carry ([reports] in the config): a count and a size for each family of
what a report lists, checked once the document has parsed and before anything of it is stored.

A report is kept (the host's newest, and [store] history_per_host times in its history) and read
by anyone without a token, so its size is paid again by every reader: the body limit alone let
one agent token store a quarter of a megabyte of Extensions per report. Sizes are characters of
the texts a family is made of (names, types, values); the defaults are in infosvc/config/site.py
with why.
"""

from __future__ import annotations

from infosvc.model.node import RESOURCE, Node
from infosvc.config import ReportsConfig
from infosvc.errors import TooLarge

FILE_SYSTEM, ADAPTER = "FileSystem", "NetworkAdapter"

#: what each cap counts, as a refusal names it
WHAT: dict[str, str] = {
    "max_extensions": "Extensions",
    "max_extension_chars": "characters of Extensions",
    "max_features": "features",
    "max_feature_chars": "characters of features",
    "max_file_systems": "file systems",
    "max_file_system_chars": "characters describing file systems",
    "max_adapters": "network adapters",
    "max_adapter_chars": "characters describing network adapters",
    "max_resources": "consumables",
    "max_resource_chars": "characters of consumables' names, types, units and metrics",
    "max_property_chars": "characters in one of Name, Opsys, Arch, Description, State",
}


def measure(node: Node) -> dict[str, int]:
    """What `node` holds of each capped thing, keyed by its cap's name ([reports] in the config)."""
    extension_chars = 0
    described = {FILE_SYSTEM: set(), ADAPTER: set()}  # type: dict[str, set[str]]
    chars = {FILE_SYSTEM: 0, ADAPTER: 0}
    for ext in node.extensions:
        size = len(ext.name) + len(ext.type or "") + len(ext.value)
        extension_chars += size
        context, _, which = (ext.type or "").partition(":")
        if context in described and which:
            described[context].add(which)
            chars[context] += size
    resources = resource_chars = 0
    for category in (node.configured, node.available, node.utilized):
        for item in category:
            resources += 1
            resource_chars += (len(item.name or "") + len(item.type or "") + len(item.units or "")
                               + len(item.metric or "") + len(item.wall_duration or ""))
            if item.kind == RESOURCE and item.name in described and item.type:
                described[item.name].add(item.type)
                chars[item.name] += len(item.type)
    return {
        "max_extensions": len(node.extensions),
        "max_extension_chars": extension_chars,
        "max_features": len(node.features),
        "max_feature_chars": sum(map(len, node.features)),
        "max_file_systems": len(described[FILE_SYSTEM]),
        "max_file_system_chars": chars[FILE_SYSTEM],
        "max_adapters": len(described[ADAPTER]),
        "max_adapter_chars": chars[ADAPTER],
        "max_resources": resources,
        "max_resource_chars": resource_chars,
        "max_property_chars": max(len(text or "") for text in
                                  (node.name, node.opsys, node.arch, node.description, node.state)),
    }


def check_report(node: Node, caps: ReportsConfig) -> None:
    """TooLarge naming the first cap `node` is past, if any."""
    for key, value in measure(node).items():
        cap: int = getattr(caps, key)
        if value > cap:
            raise TooLarge(f"the report carries {value} {WHAT[key]}, past [reports] {key}",
                           f"at most {cap} are taken ([reports] {key} in the server's config); nothing was stored")
