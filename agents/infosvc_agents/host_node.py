"""The mapping from one sample of host facts to an SSS Node (documented in docs/node-mapping.md).

GLUE needs more host detail than the SSS Node's fixed elements hold, so the detail rides on the
spec's own extension points: named Resource elements for file systems, network adapters and load,
and Extension elements whose `type` names the context (Processor, OperatingSystem,
FileSystem:/scratch, NetworkAdapter:eth0, Agent).
"""

from __future__ import annotations

from typing import Any, Final, Mapping

from infosvc.model.durations import format_seconds
from infosvc.model.node import Consumable, Extension, Node

from infosvc_agents.collectors import CollectorRun

MB: Final = float(1 << 20)
KB: Final = 1 << 10


def build_node(runs: Mapping[str, CollectorRun], *, host_id: str | None = None,
               features: tuple[str, ...] = (), timestamp: str | None = None,
               agent_version: str | None = None, sample_id: str | None = None) -> Node:
    """One SSS Node from the collectors' runs; a failed collector leaves only its failure noted.
    `sample_id` names the sample once for all its deliveries: the aggregator stores a sample sent
    again (its answer lost on the way) once."""
    facts: dict[str, Any] = {name: run.facts for name, run in runs.items() if run.ok}
    system = facts.get("system")
    node = Node(id=host_id or (system.hostname if system else "localhost"), features=list(features))
    ext = node.extensions
    if timestamp is not None:
        ext.append(Extension("SampleTime", timestamp, "Agent"))
    if sample_id is not None:
        ext.append(Extension("SampleId", sample_id, "Agent"))
    if agent_version is not None:
        ext.append(Extension("AgentVersion", agent_version, "Agent"))
    for run in runs.values():
        if not run.ok:
            ext.append(Extension("CollectorFailed", f"{run.name}: {run.error}", "Agent"))
    if system is not None:
        _system(node, system)
    if (processors := facts.get("processors")) is not None:
        _processors(node, processors)
    if (memory := facts.get("memory")) is not None:
        _memory(node, memory)
    if (load := facts.get("load")) is not None:
        for span, value in (("1min", load.one), ("5min", load.five), ("15min", load.fifteen)):
            node.utilized.add(Consumable("Resource", value, metric="Average", name="Load", type=span))
    if (filesystems := facts.get("filesystems")) is not None:
        _filesystems(node, filesystems)
    if (adapters := facts.get("network")) is not None:
        _network(node, adapters)
    return node


def _system(node: Node, system: Any) -> None:
    node.name = system.hostname.split(".", 1)[0]
    node.opsys = system.sysname
    node.arch = system.machine
    for name, value in (("Name", system.os_name), ("Release", system.os_release), ("Version", system.os_version),
                        ("KernelRelease", system.kernel_release), ("KernelVersion", system.kernel_version)):
        if value:
            node.extensions.append(Extension(name, value, "OperatingSystem"))


def _processors(node: Node, sample: Any) -> None:
    info, usage = sample.info, sample.usage
    logical = info.logical
    busy = min(max(usage.busy, 0.0), float(logical))
    used = min(logical, round(busy))
    node.configured.add(Consumable("Processors", logical))
    node.available.add(Consumable("Processors", logical - used))
    node.utilized.add(Consumable("Processors", used, metric="Average", wall_duration=format_seconds(round(usage.seconds, 3)),
                                 consumption_rate=round(busy / logical, 4) if logical else 0.0))
    node.state = "Busy" if used >= logical else "Idle"
    ext = node.extensions
    for name, value in (("Vendor", info.vendor), ("Model", info.model), ("Version", info.version),
                        ("InstructionSet", info.isa)):
        if value:
            ext.append(Extension(name, value, "Processor"))
    if info.clock_mhz:
        ext.append(Extension("ClockSpeed", str(round(info.clock_mhz)), "Processor"))
    if info.physical:
        ext.append(Extension("PhysicalCores", str(info.physical), "Processor"))
    if info.sockets:
        ext.append(Extension("Sockets", str(info.sockets), "Processor"))
    for cache, size in sorted(info.caches.items()):
        # GLUE names caches CacheL1D, CacheL1I, CacheL2 and gives them in KB.
        ext.append(Extension(f"Cache{cache.upper()}", str(size // KB), "Processor"))
    if info.flags:
        ext.append(Extension("Flags", " ".join(info.flags), "Processor"))


def _memory(node: Node, memory: Any) -> None:
    node.configured.add(Consumable("Memory", memory.total / MB, units="MB"))
    node.available.add(Consumable("Memory", memory.available / MB, units="MB"))
    node.utilized.add(Consumable("Memory", max(memory.total - memory.available, 0) / MB, units="MB"))
    node.configured.add(Consumable("Swap", memory.swap_total / MB, units="MB"))
    node.available.add(Consumable("Swap", memory.swap_free / MB, units="MB"))
    node.utilized.add(Consumable("Swap", max(memory.swap_total - memory.swap_free, 0) / MB, units="MB"))


def _filesystems(node: Node, filesystems: Any) -> None:
    size = available = used = 0
    ext = node.extensions
    for fs in filesystems:
        node.configured.add(Consumable("Resource", fs.size / MB, units="MB", name="FileSystem", type=fs.mount_point))
        node.available.add(Consumable("Resource", fs.available / MB, units="MB", name="FileSystem", type=fs.mount_point))
        context = f"FileSystem:{fs.mount_point}"
        ext.append(Extension("Type", fs.fstype, context))
        ext.append(Extension("ReadOnly", "true" if fs.read_only else "false", context))
        ext.append(Extension("Kind", "remote" if fs.remote else "local", context))
        ext.append(Extension("Device", fs.device, context))
        if not fs.remote:
            size += fs.size
            available += fs.available
            used += fs.size - fs.free
    # Disk is the node's own storage: the local file systems only.
    node.configured.add(Consumable("Disk", size / MB, units="MB"))
    node.available.add(Consumable("Disk", available / MB, units="MB"))
    node.utilized.add(Consumable("Disk", max(used, 0) / MB, units="MB"))


def _network(node: Node, adapters: Any) -> None:
    bandwidth = 0
    ext = node.extensions
    for nic in adapters:
        node.configured.add(Consumable("Resource", nic.speed_mbps or 0, units="Mbit/s", name="NetworkAdapter", type=nic.name))
        for name, value, units in (("NetworkBytesIn", nic.bytes_in, "byte"), ("NetworkBytesOut", nic.bytes_out, "byte"),
                                   ("NetworkPacketsIn", nic.packets_in, None), ("NetworkPacketsOut", nic.packets_out, None)):
            node.utilized.add(Consumable("Resource", value, units=units, metric="Total", name=name, type=nic.name))
        context = f"NetworkAdapter:{nic.name}"
        ext.append(Extension("State", "up" if nic.up else "down", context))
        if nic.mtu is not None:
            ext.append(Extension("MTU", str(nic.mtu), context))
        if nic.mac:
            ext.append(Extension("MAC", nic.mac, context))
        for address in nic.addresses:
            ext.append(Extension("Address", address, context))
        if nic.up and nic.speed_mbps and nic.name != "lo":
            bandwidth += nic.speed_mbps
    if bandwidth:
        node.configured.add(Consumable("Network", bandwidth, units="Mbit/s"))
