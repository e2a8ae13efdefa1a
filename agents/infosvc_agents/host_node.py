"""The mapping from one sample of host facts to an SSS Node (documented in docs/node-mapping.md).

GLUE needs more host detail than the SSS Node's fixed elements hold, so the detail rides on the
spec's own extension points: named Resource elements for file systems, network adapters, load and
GPUs, and Extension elements whose `type` names the context (Processor, OperatingSystem,
FileSystem:/scratch, NetworkAdapter:eth0, GPU:0000:17:00.0, Agent).
"""

from __future__ import annotations

import re
from typing import Any, Final, Mapping

from infosvc.codec.xmltext import attr, text
from infosvc.model.durations import format_seconds
from infosvc.model.node import Consumable, Extension, Node, PartTable, consumable_key

from infosvc_agents.collectors import CollectorRun
from infosvc_agents.collectors.gpus import AVAILABLE_STATES, BUSY, gpu_state

MB: Final = float(1 << 20)
KB: Final = 1 << 10

#: A host's facts are mostly the same from one sample to the next: its parts are made once and
#: shared (model.node.PartTable), which is cheaper than making them, and lets the push loop tell a
#: sample's unchanged facts from its base's by identity (infosvc/model/nodedelta.py).
_extensions = PartTable(512)
_consumables = PartTable(512)


#: What XML 1.0 cannot carry, escaped or not (infosvc.codec.xmltext.NOT_XML): C0 controls but tab,
#: newline and CR; surrogates (a byte that is not UTF-8, as surrogateescape reads it back); U+FFFE, U+FFFF.
_NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    if 0xDC80 <= code <= 0xDCFF:  # the byte surrogateescape kept
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def xml_safe(value: str) -> str:
    """`value` with what XML cannot carry written as a backslash escape: a byte that is not UTF-8
    as \\xfc, a control character as \\x1b, a lone surrogate or U+FFFE as \\ud800, \\ufffe; the
    rest as it is. The kernel keeps mount points, devices, interface and host names as bytes (and
    mountinfo escapes only space, tab, newline and backslash): one such name made the whole sample
    unwritable. Unlike a replacement character, the escapes keep two such names two; a backslash
    is left as it is, as infosvc.controls leaves it."""
    return _NOT_XML.sub(_escape, value) if _NOT_XML.search(value) else value


def _safe(value: str | None) -> str | None:
    return None if value is None else xml_safe(value)


def _make_ext(name: str, value: str, context: str | None) -> Extension:
    return Extension(xml_safe(name), xml_safe(value), _safe(context))


def _make_con(kind: str, value: int | float, units: str | None, metric: str | None, wall_duration: str | None,
              consumption_rate: float | None, name: str | None, type: str | None) -> Consumable:
    return Consumable(kind, value, _safe(units), _safe(metric), wall_duration, consumption_rate, _safe(name),
                      _safe(type))


# Every string of the host's own (a mount point, a device, an interface, a GPU's or the operating
# system's name, a collector's failure) reaches the Node through these two, made XML-safe when the
# part is made: once per distinct value, not per sample.
def _ext(name: str, value: str, context: str | None = None) -> Extension:
    return _extensions.get((name, value, context), _make_ext, name, value, context)


def _con(kind: str, value: int | float, units: str | None = None, metric: str | None = None,
        wall_duration: str | None = None, consumption_rate: float | None = None, name: str | None = None,
        type: str | None = None) -> Consumable:
    fields = (kind, value, units, metric, wall_duration, consumption_rate, name, type)
    return _consumables.get(consumable_key(fields), _make_con, *fields)


def build_node(runs: Mapping[str, CollectorRun], *, host_id: str | None = None,
               features: tuple[str, ...] = (), timestamp: str | None = None,
               agent_version: str | None = None, sample_id: str | None = None) -> Node:
    """One SSS Node from the collectors' runs; a failed collector leaves only its failure noted.
    `sample_id` names the sample once for all its deliveries: the aggregator stores a sample sent
    again (its answer lost on the way) once."""
    facts: dict[str, Any] = {name: run.facts for name, run in runs.items() if run.ok}
    system = facts.get("system")
    node = Node(id=xml_safe(host_id or (system.hostname if system else "localhost")),
                features=[xml_safe(feature) for feature in features])
    ext = node.extensions
    if timestamp is not None:
        ext.append(_ext("SampleTime", timestamp, "Agent"))
    if sample_id is not None:
        ext.append(_ext("SampleId", sample_id, "Agent"))
    if agent_version is not None:
        ext.append(_ext("AgentVersion", agent_version, "Agent"))
    for run in runs.values():
        if not run.ok:
            ext.append(_ext("CollectorFailed", f"{run.name}: {run.error}", "Agent"))
    if system is not None:
        _system(node, system)
    if (processors := facts.get("processors")) is not None:
        _processors(node, processors)
    if (memory := facts.get("memory")) is not None:
        _memory(node, memory)
    if (load := facts.get("load")) is not None:
        for span, value in (("1min", load.one), ("5min", load.five), ("15min", load.fifteen)):
            node.utilized.add(_con("Resource", value, metric="Average", name="Load", type=span))
    if (filesystems := facts.get("filesystems")) is not None:
        _filesystems(node, filesystems)
    if (adapters := facts.get("network")) is not None:
        _network(node, adapters)
    if gpus := facts.get("gpus"):
        _gpus(node, gpus)
    return node


def _system(node: Node, system: Any) -> None:
    node.name = xml_safe(system.hostname.split(".", 1)[0])
    node.opsys = xml_safe(system.sysname)
    node.arch = _safe(system.machine)
    for name, value in (("Name", system.os_name), ("Release", system.os_release), ("Version", system.os_version),
                        ("KernelRelease", system.kernel_release), ("KernelVersion", system.kernel_version)):
        if value:
            node.extensions.append(_ext(name, value, "OperatingSystem"))


def _processors(node: Node, sample: Any) -> None:
    info, usage = sample.info, sample.usage
    logical = info.logical
    busy = min(max(usage.busy, 0.0), float(logical))
    used = min(logical, round(busy))
    node.configured.add(_con("Processors", logical))
    node.available.add(_con("Processors", logical - used))
    node.utilized.add(_con("Processors", used, metric="Average", wall_duration=format_seconds(round(usage.seconds, 3)),
                                 consumption_rate=round(busy / logical, 4) if logical else 0.0))
    node.state = "Busy" if used >= logical else "Idle"
    ext = node.extensions
    for name, value in (("Vendor", info.vendor), ("Model", info.model), ("Version", info.version),
                        ("InstructionSet", info.isa)):
        if value:
            ext.append(_ext(name, value, "Processor"))
    if info.clock_mhz:
        ext.append(_ext("ClockSpeed", str(round(info.clock_mhz)), "Processor"))
    if info.physical:
        ext.append(_ext("PhysicalCores", str(info.physical), "Processor"))
    if info.sockets:
        ext.append(_ext("Sockets", str(info.sockets), "Processor"))
    for cache, size in sorted(info.caches.items()):
        # GLUE names caches CacheL1D, CacheL1I, CacheL2 and gives them in KB.
        ext.append(_ext(f"Cache{cache.upper()}", str(size // KB), "Processor"))
    if info.flags:
        ext.append(_ext("Flags", " ".join(info.flags), "Processor"))


def _memory(node: Node, memory: Any) -> None:
    node.configured.add(_con("Memory", memory.total / MB, units="MB"))
    node.available.add(_con("Memory", memory.available / MB, units="MB"))
    node.utilized.add(_con("Memory", max(memory.total - memory.available, 0) / MB, units="MB"))
    node.configured.add(_con("Swap", memory.swap_total / MB, units="MB"))
    node.available.add(_con("Swap", memory.swap_free / MB, units="MB"))
    node.utilized.add(_con("Swap", max(memory.swap_total - memory.swap_free, 0) / MB, units="MB"))


def _filesystems(node: Node, filesystems: Any) -> None:
    size = available = used = 0
    ext = node.extensions
    for fs in filesystems:
        node.configured.add(_con("Resource", fs.size / MB, units="MB", name="FileSystem", type=fs.mount_point))
        node.available.add(_con("Resource", fs.available / MB, units="MB", name="FileSystem", type=fs.mount_point))
        context = f"FileSystem:{fs.mount_point}"
        ext.append(_ext("Type", fs.fstype, context))
        ext.append(_ext("ReadOnly", "true" if fs.read_only else "false", context))
        ext.append(_ext("Kind", "remote" if fs.remote else "local", context))
        ext.append(_ext("Device", fs.device, context))
        if not fs.remote:
            size += fs.size
            available += fs.available
            used += fs.size - fs.free
    # Disk is the node's own storage: the local file systems only.
    node.configured.add(_con("Disk", size / MB, units="MB"))
    node.available.add(_con("Disk", available / MB, units="MB"))
    node.utilized.add(_con("Disk", max(used, 0) / MB, units="MB"))


#: the longest a size of _filesystems' Resources is written (format_amount: a float's repr,
#: 1.2345678901234567e+18)
_AMOUNT_CHARS: Final = 24


def file_system_bytes(mount_point: str, device: str, fstype: str) -> int:
    """The bytes one file system's elements (_filesystems: four Extensions, two Resources) take in the
    report, at most: its names as written (made XML-safe, then escaped), its flags and sizes the
    longest they can be. Never less than the characters the aggregator counts of them ([reports]
    max_file_system_chars, max_extension_chars, max_resource_chars count names unescaped and no
    markup), so that a budget of these bytes (collectors/filesystems.py) bounds those too, and the
    report's body. Kept beside _filesystems so that the two change together."""
    context = attr(f"FileSystem:{xml_safe(mount_point)}")
    extensions = "".join(f'<Extension name="{name}" type="{context}">{text(value)}</Extension>'
                         for name, value in (("Type", xml_safe(fstype)), ("ReadOnly", "false"), ("Kind", "remote"),
                                             ("Device", xml_safe(device))))
    resource = (f'<Resource name="FileSystem" type="{attr(xml_safe(mount_point))}" units="MB">'
                f'{"0" * _AMOUNT_CHARS}</Resource>')
    return len(extensions.encode()) + 2 * len(resource.encode())


def _network(node: Node, adapters: Any) -> None:
    bandwidth = 0
    ext = node.extensions
    for nic in adapters:
        node.configured.add(_con("Resource", nic.speed_mbps or 0, units="Mbit/s", name="NetworkAdapter", type=nic.name))
        for name, value, units in (("NetworkBytesIn", nic.bytes_in, "byte"), ("NetworkBytesOut", nic.bytes_out, "byte"),
                                   ("NetworkPacketsIn", nic.packets_in, None), ("NetworkPacketsOut", nic.packets_out, None)):
            node.utilized.add(_con("Resource", value, units=units, metric="Total", name=name, type=nic.name))
        context = f"NetworkAdapter:{nic.name}"
        ext.append(_ext("State", "up" if nic.up else "down", context))
        if nic.mtu is not None:
            ext.append(_ext("MTU", str(nic.mtu), context))
        if nic.mac:
            ext.append(_ext("MAC", nic.mac, context))
        for address in nic.addresses:
            ext.append(_ext("Address", address, context))
        if nic.up and nic.speed_mbps and nic.name != "lo":
            bandwidth += nic.speed_mbps
    if bandwidth:
        node.configured.add(_con("Network", bandwidth, units="Mbit/s"))


GpuParts = tuple[tuple[Extension, ...], tuple[tuple[str, tuple[Extension, ...]], ...]]

#: id(gpu) -> (gpu, the Extensions of what it is and of what each MIG instance is, with the
#: instance's context): the collector hands out the same Gpu object from one scan to the next, so
#: these are looked up once per scan, not per sample.
_gpu_parts: dict[int, tuple[Any, GpuParts]] = {}


def _gpu_extensions(gpu: Any) -> GpuParts:
    kept = _gpu_parts.get(id(gpu))
    if kept is not None and kept[0] is gpu:
        return kept[1]
    context = f"GPU:{gpu.bus_id}"
    own = [_ext(name, value, context) for name, value in (
        ("Vendor", gpu.vendor), ("Model", gpu.model), ("PCIId", gpu.pci_id), ("Driver", gpu.driver),
        ("UUID", gpu.uuid), ("VideoBIOS", gpu.vbios), ("ComputeCapability", gpu.compute_capability)) if value]
    own += [_ext(name, str(number), context) for name, number in (("Index", gpu.index), ("Minor", gpu.minor))
            if number is not None]
    if gpu.mig_enabled or gpu.mig:
        own.append(_ext("MIG", "enabled", context))
    migs = []
    for mig in gpu.mig:
        mig_context = f"{context}/gi{mig.gpu_instance}/ci{mig.compute_instance}"
        parts = [_ext("Model", mig.model, mig_context)]
        if mig.uuid:
            parts.append(_ext("UUID", mig.uuid, mig_context))
        if mig.memory_total is not None:
            parts.append(_ext("Memory", str(round(mig.memory_total / MB)), mig_context))
        migs.append((mig_context, tuple(parts)))
    if len(_gpu_parts) >= 256:
        _gpu_parts.clear()
    made: GpuParts = (tuple(own), tuple(migs))
    _gpu_parts[id(gpu)] = (gpu, made)
    return made


def _gpus(node: Node, samples: Any) -> None:
    """Each GPU (or MIG instance) a job can be given counts in `Resource name="GPU"` of its model's
    type; each GPU's memory and utilisation, and what it is, are its own (type: its PCI address)."""
    configured: dict[str, int] = {}
    available: dict[str, int] = {}
    busy: dict[str, int] = {}
    ext = node.extensions
    for sample in samples:
        gpu, use = sample.gpu, sample.use
        units = sample.units()
        for model, state in units:
            configured[model] = configured.get(model, 0) + 1
            if state in AVAILABLE_STATES:
                available[model] = available.get(model, 0) + 1
            elif state == BUSY:
                busy[model] = busy.get(model, 0) + 1
        bus_id = gpu.bus_id
        total, used = gpu.memory_total, use.memory_used
        if total is not None:
            node.configured.add(_con("Resource", total / MB, units="MB", name="GPUMemory", type=bus_id))
            if used is not None:
                node.available.add(_con("Resource", max(total - used, 0) / MB, units="MB", name="GPUMemory",
                                        type=bus_id))
        if used is not None:
            node.utilized.add(_con("Resource", used / MB, units="MB", name="GPUMemory", type=bus_id))
        if use.utilization is not None:
            node.utilized.add(_con("Resource", use.utilization, units="%", metric="Average", name="GPUUtilization",
                                   type=bus_id))
        own, migs = _gpu_extensions(gpu)
        context = f"GPU:{bus_id}"
        failure = sample.failure
        ext.extend(own)
        ext.append(_ext("State", gpu_state(units, failure), context))
        if failure is not None:
            ext.append(_ext("ProbeFailed", failure, context))
        for (mig_context, parts), (_model, state) in zip(migs, units):
            ext.extend(parts)
            ext.append(_ext("State", state, mig_context))
    for model, count in sorted(configured.items()):
        node.configured.add(_con("Resource", float(count), name="GPU", type=model))
        node.available.add(_con("Resource", float(available.get(model, 0)), name="GPU", type=model))
        node.utilized.add(_con("Resource", float(busy.get(model, 0)), name="GPU", type=model))
