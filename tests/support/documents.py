"""SSS Node documents for synthetic hosts, written with infosvc's own writer."""

from __future__ import annotations

from typing import Any

from infosvc.codec.node_xml import node_to_xml
from infosvc.model.node import Consumable, Extension, Node


def make_node(host: str, *, processors: int = 4, free_processors: int | None = None, memory_mb: float = 8192,
              free_memory_mb: float | None = None, features: tuple[str, ...] = (), opsys: str = "Linux",
              arch: str = "x86_64", os_name: str = "Rocky Linux", os_release: str = "9.3",
              model: str = "Xeon Gold 6130", state: str = "Idle", sequence: int | None = None,
              sample_time: str | None = None, extra: tuple[Extension, ...] = ()) -> Node:
    """A Node as the agent would write it, for a synthetic host."""
    free = processors if free_processors is None else free_processors
    node = Node(id=host, name=host.split(".", 1)[0], features=list(features), opsys=opsys, arch=arch, state=state)
    ext = node.extensions
    if sample_time is not None:
        ext.append(Extension("SampleTime", sample_time, "Agent"))
    if sequence is not None:
        ext.append(Extension("Sequence", str(sequence), "Test"))
    ext.append(Extension("Name", os_name, "OperatingSystem"))
    ext.append(Extension("Release", os_release, "OperatingSystem"))
    ext.append(Extension("Model", model, "Processor"))
    ext.append(Extension("ClockSpeed", "2100", "Processor"))
    ext.extend(extra)
    node.configured.add(Consumable("Processors", processors))
    node.configured.add(Consumable("Memory", float(memory_mb), units="MB"))
    node.available.add(Consumable("Processors", free))
    node.available.add(Consumable("Memory", float(memory_mb / 2 if free_memory_mb is None else free_memory_mb),
                                  units="MB"))
    node.utilized.add(Consumable("Processors", processors - free, metric="Average"))
    return node


def node_document(host: str, **kwargs: Any) -> bytes:
    """A valid SSS Node document (XML) for a synthetic host; keywords as for make_node."""
    return node_to_xml(make_node(host, **kwargs))
