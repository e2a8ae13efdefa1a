"""SSS Node documents for synthetic hosts, written with infosvc's own writer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infosvc.codec.node_xml import node_to_xml
from infosvc.model.node import Consumable, Extension, Node


def make_node(host: str, *, processors: int = 4, free_processors: int | None = None, memory_mb: float = 8192,
              free_memory_mb: float | None = None, features: tuple[str, ...] = (), opsys: str = "Linux",
              arch: str = "x86_64", os_name: str = "Rocky Linux", os_release: str = "9.3",
              model: str = "Xeon Gold 6130", state: str = "Idle", sequence: int | None = None,
              sample_time: str | None = None, extra: tuple[Extension, ...] = (),
              gpus: GPUs | None = None) -> Node:
    """A Node as the agent would write it, for a synthetic host (with `gpus`, its GPUs as the
    agent reports them: docs/node-mapping.md, GPUs)."""
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
    if gpus is not None:
        gpus.add_to(node)
    return node


@dataclass(frozen=True)
class GPUs:
    """`count` GPUs of one model, `busy` of them in use and `failed` of them failing their probe
    (counted in Configured only), each with `memory_mb` and its own PCI address."""

    model: str = "NVIDIA H100 80GB HBM3"
    count: int = 4
    busy: int = 0
    failed: int = 0
    memory_mb: float = 81559.0
    vendor: str = "NVIDIA"
    compute_capability: str | None = "9.0"

    def add_to(self, node: Node) -> None:
        ext = node.extensions
        for i in range(self.count):
            address = f"0000:{0x18 + i:02x}:00.0"
            context = f"GPU:{address}"
            ext.append(Extension("Vendor", self.vendor, context))
            ext.append(Extension("Model", self.model, context))
            ext.append(Extension("Index", str(i), context))
            if self.compute_capability:
                ext.append(Extension("ComputeCapability", self.compute_capability, context))
            used = self.memory_mb / 2 if i < self.busy else 0.0
            node.configured.add(Consumable("Resource", self.memory_mb, units="MB", name="GPUMemory", type=address))
            node.available.add(Consumable("Resource", self.memory_mb - used, units="MB", name="GPUMemory",
                                          type=address))
            node.utilized.add(Consumable("Resource", used, units="MB", name="GPUMemory", type=address))
            node.utilized.add(Consumable("Resource", 87.0 if i < self.busy else 0.0, units="%", metric="Average",
                                         name="GPUUtilization", type=address))
        node.configured.add(Consumable("Resource", float(self.count), name="GPU", type=self.model))
        node.available.add(Consumable("Resource", float(self.count - self.busy - self.failed), name="GPU",
                                      type=self.model))
        node.utilized.add(Consumable("Resource", float(self.busy), name="GPU", type=self.model))


def node_document(host: str, **kwargs: Any) -> bytes:
    """A valid SSS Node document (XML) for a synthetic host; keywords as for make_node."""
    return node_to_xml(make_node(host, **kwargs))
