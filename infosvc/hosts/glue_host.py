"""The SSS Node -> GLUE Host mapping of one host (docs/node-mapping.md, docs/glue-mapping.md): a pure
function of the node, its life-cycle state and the site config, run for every report ingested and
for every host at start; infosvc.hosts.rollup puts the Host in its subcluster."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable

from infosvc.config import SiteConfig, resources_of
from infosvc.model import glue
from infosvc.model.glue import Host
from infosvc.model.node import Consumable, Node

__all__ = ["host_from_node"]

MB = "MB"


#: Larger counts (MHz, KB, bytes of MTU, tasks, GPUs) are no measurement of a real host.
_MAX_COUNT = 1 << 31
#: Larger sizes in MB (9 ZB) are none either, and past what the scheduler's int64 columns hold.
_MAX_MB = 1 << 53


def _int(text: str | None) -> int | None:
    """A non-negative count written in an Extension (free text); None when it is not one."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if 0 <= value < _MAX_COUNT else None


def _mb(item: Consumable | None) -> int | None:
    """`item` in whole MB; None when absent or in units that are no size (units is free text in an
    SSS document, and a report the store has committed must not fail to publish)."""
    if item is None:
        return None
    try:
        if item.units == MB:
            # What the agent writes: the same number as item.amount(MB) gives (a shift by 2^0),
            # without its unit lookups.
            size = int(float(item.value))
        else:
            size = int(item.amount(MB))
    except (ValueError, OverflowError):
        return None
    return size if size < _MAX_MB else None


_SPANS = ("1min", "5min", "15min")


def _load(loads: dict[str | None, float], cpus: int) -> tuple[glue.Load, glue.Load] | None:
    """ProcessorLoad and SMPLoad as GLUE defines them: (available CPUs - runnable tasks) x 100.

    `loads` is the load average by span. SMPLoad is for the whole node; ProcessorLoad is the same
    per processor, so that nodes of different sizes compare (a single-CPU node has the two equal).
    """
    if len(loads) != 3 or cpus <= 0:
        return None
    l1, l5, l15 = loads["1min"], loads["5min"], loads["15min"]
    if not (0 <= l1 < _MAX_COUNT and 0 <= l5 < _MAX_COUNT and 0 <= l15 < _MAX_COUNT):
        return None
    # Positional: glue.Load(last_1min, last_5min, last_15min).
    return (glue.Load(round((cpus - l1) * 100 / cpus), round((cpus - l5) * 100 / cpus),
                      round((cpus - l15) * 100 / cpus)),
            glue.Load(round((cpus - l1) * 100), round((cpus - l5) * 100), round((cpus - l15) * 100)))


def _address(first: str | None, others: Iterable[str]) -> str | None:
    """The address GLUE publishes for an adapter: its first IPv4 one, else its first (of `first`
    and then `others`, in document order)."""
    # Prefer IPv4: GLUE 1.1 predates IPv6 in practice, and consumers expect a dotted quad.
    if first is None or ":" not in first:
        return first
    return next((a for a in others if ":" not in a), first)


@lru_cache(maxsize=1024)
def _processor(vendor: str | None, model: str | None, version: str | None, clock_speed: str | None,
               instruction_set: str | None, flags: str | None, cache_l1: str | None, cache_l1i: str | None,
               cache_l1d: str | None, cache_l2: str | None) -> glue.Processor:
    """The Processor group from its Extensions' text.

    Memoized, as are the other groups a host repeats in every report and shares with the hosts
    of its kind: a frozen dataclass's __init__ sets each field with an object.__setattr__ call,
    which makes this one cost several times the look-up; being frozen, one object serves every
    host. Keyed by the text, so that a hit also skips parsing the counts. Bounded: a site of more
    kinds than that only loses some of the saving.
    """
    return glue.Processor(vendor, model, version, _int(clock_speed), instruction_set, flags, _int(cache_l1),
                          _int(cache_l1i), _int(cache_l1d), _int(cache_l2))


# Memoized like _processor. typed=True where a number is an argument: 1 and 1.0 are one key to a
# plain lru_cache, and the group must hold what was asked for.
_architecture = lru_cache(maxsize=1024, typed=True)(glue.Architecture)
_operating_system = lru_cache(maxsize=1024)(glue.OperatingSystem)
_benchmark = lru_cache(maxsize=1024, typed=True)(glue.Benchmark)
_application_software = lru_cache(maxsize=1024)(glue.ApplicationSoftware)

_NONE: dict[str, str] = {}  # the Extensions of a context the node does not have (never written to)


def _extensions(node: Node) -> tuple[dict[str | None, dict[str, str]], dict[tuple[str | None, str], list[str]]]:
    """context (Extension type) -> name -> value of the first Extension of that name, as
    Node.extensions_of has it; and the further values of a repeated name. The one name that
    repeats in a context is an adapter's Address (one per address): its further values go to
    `more`, in document order, so that the common case costs no test of the name. The agent writes
    the Extensions of a context together, so the context's dict is looked up only when the context
    changes."""
    by_type: dict[str | None, dict[str, str]] = {}
    more: dict[tuple[str | None, str], list[str]] = {}
    current: str | None = None
    found = by_type[None] = {}  # untyped Extensions: kept, never read
    for ext in node.extensions:
        context = ext.type
        if context != current:
            current = context
            found = by_type.setdefault(context, {})
        name = ext.name
        if name not in found:
            found[name] = ext.value
        else:
            more.setdefault((context, name), []).append(ext.value)
    return by_type, more


def _consumables(items: Iterable[Consumable]) -> tuple[dict[str, Consumable], dict[str | None, Consumable], list[str],
                                                     list[Consumable]]:
    """One category's consumables by kind (the first of each counts, as Properties.get has it),
    its file systems by mount point (the last of a mount point, in the place of the first), its
    network adapters' names but the loopback's, and its GPUs and GPU memories (most hosts: none)."""
    first: dict[str, Consumable] = {}
    sizes: dict[str | None, Consumable] = {}
    nics: list[str] = []
    gpus: list[Consumable] = []
    for item in items:
        kind = item.kind
        if kind == "Resource":
            name = item.name
            if name == "FileSystem":
                sizes[item.type] = item
            elif name == "NetworkAdapter":
                if item.type and item.type != "lo":
                    nics.append(item.type)
            elif name == "GPU" or name == "GPUMemory":
                gpus.append(item)
        elif kind not in first:
            first[kind] = item
    return first, sizes, nics, gpus


def gpu_count(item: Consumable) -> int:
    """A `Resource name="GPU"`'s count; 0 for one that is no count of a real host's (a report of
    1e19 GPUs overflowed the scheduler's columns: every submission and match failed after it).
    /metrics counts a host's GPUs by the same rule, and leaves out besides the models too long or
    not printable to be a label (publish/gpu_series.py)."""
    try:
        value = float(item.value)
    except (ValueError, OverflowError):
        return 0
    return int(value) if 0 <= value < _MAX_COUNT else 0


def _gpu_count(items: Iterable[Consumable]) -> int:
    """The GPUs of a category (`Resource name="GPU"`, one per model), counted over every model."""
    return min(sum(gpu_count(item) for item in items if item.name == "GPU"), _MAX_COUNT)


_accelerator = lru_cache(maxsize=1024, typed=True)(glue.Accelerator)


def _accelerators(gpus: list[Consumable], by_type: dict[str | None, dict[str, str]]) -> tuple[glue.Accelerator, ...]:
    """The host's GPUs by model (docs/node-mapping.md, GPUs): the count of each model's Configured
    `Resource name="GPU"`, with its vendor, memory (the least of its devices: what a job can count
    on) and compute capability from the GPU:<PCI address> Extensions (a MIG instance's: its own
    Model and Memory, its GPU's vendor and capability)."""
    counts: dict[str, int] = {}
    memory_of: dict[str, int | None] = {}
    for item in gpus:
        if item.name == "GPU" and item.type:
            counts[item.type] = min(counts.get(item.type, 0) + gpu_count(item), _MAX_COUNT)
        elif item.name == "GPUMemory" and item.type:
            memory_of[item.type] = _mb(item)
    details: dict[str, tuple[str | None, int | None, str | None]] = {}
    for context, values in by_type.items():
        if not context or not context.startswith("GPU:"):
            continue
        model = values.get("Model")
        if model is None or model not in counts:
            continue
        device = context[4:]
        parent = by_type.get(f"GPU:{device.split('/', 1)[0]}", _NONE) if "/" in device else values
        memory = _int(values.get("Memory")) if "/" in device else memory_of.get(device)
        vendor, least, capability = details.get(model, (None, None, None))
        if memory is not None:
            least = memory if least is None else min(least, memory)
        details[model] = (vendor or parent.get("Vendor"), least, capability or parent.get("ComputeCapability"))
    return tuple(_accelerator("GPU", model, count, *details.get(model, (None, None, None)))
                 for model, count in sorted(counts.items()) if count > 0)


def _loads(node: Node) -> dict[str | None, float]:
    loads: dict[str | None, float] = {}
    for item in node.utilized.items:
        # The name first: most utilized items are adapter counters, and only a Resource has one.
        if item.name == "Load" and item.kind == "Resource" and item.type in _SPANS:
            loads[item.type] = float(item.value)
    return loads


def _file_systems(sizes: dict[str | None, Consumable], frees: dict[str | None, Consumable],
                  by_type: dict[str | None, dict[str, str]]) -> tuple[glue.FileSystem, ...]:
    found = []
    for root, size in sizes.items():
        if root is None:
            continue
        fs_ext = by_type.get(f"FileSystem:{root}", _NONE)
        # root, name, type, read_only, size, available_space, remote
        found.append(glue.FileSystem(
            root, fs_ext.get("Device", root), fs_ext.get("Type"), fs_ext.get("ReadOnly", "false").lower() == "true",
            _mb(size), _mb(frees.get(root)), fs_ext.get("Kind") == "remote"))
    return tuple(found)


def _adapters(nics: list[str], by_type: dict[str | None, dict[str, str]],
              more: dict[tuple[str | None, str], list[str]]) -> tuple[glue.NetworkAdapter, ...]:
    found = []
    for nic in nics:
        context = f"NetworkAdapter:{nic}"
        nic_ext = by_type.get(context, _NONE)
        address = _address(nic_ext.get("Address"), more.get((context, "Address"), ()))
        # name, ip_address, mtu
        found.append(glue.NetworkAdapter(nic, address, _int(nic_ext.get("MTU"))))
    return tuple(found)


def host_from_node(node: Node, state: str, config: SiteConfig, last_report: str, paused: bool = False,
                   reason: str | None = None, clock_skew: float | None = None) -> Host:
    """The GLUE Host of an SSS Node as the agent writes it (docs/node-mapping.md).

    It runs for every report ingested and for every host at start, so it reads each list of the
    node once (the Extensions, then each category's consumables) rather than once per value it
    needs, and builds the GLUE objects with positional arguments: keywords cost a third more in
    a frozen dataclass's __init__. The arguments are in glue's field order, named in comments;
    tests/hosts/test_rollup.py gives every field a value of its own, which tells a swap.
    """
    by_type, more = _extensions(node)
    configured, sizes, nics, gpus = _consumables(node.configured.items)
    available, frees, _, free_gpus = _consumables(node.available.items)
    processors = configured.get("Processors")
    cpus = int(processors.value) if processors is not None else 0
    free = available.get("Processors")
    idle = max(0, int(free.value)) if free is not None else 0
    if processors is not None:
        idle = min(idle, cpus)  # a report of more free than it has would count on every CE and match
    os_ext = by_type.get("OperatingSystem", _NONE)
    cpu = by_type.get("Processor", _NONE)
    load = _load(_loads(node), cpus)
    cluster = config.cluster_of(node.id)
    bench = config.benchmark_of(node.id)
    software = config.software_of(node.id)
    return Host(
        node.id, node.name or node.id, state, last_report, cluster.id,  # unique_id, name, state, last_report, cluster
        _architecture(node.arch, cpus or None),
        _operating_system(os_ext.get("Name") or node.opsys, os_ext.get("Release"), os_ext.get("Version")),
        _benchmark(bench.si00, bench.sf00) if bench is not None else None,
        _application_software(software) if software else None,
        _processor(cpu.get("Vendor"), cpu.get("Model"), cpu.get("Version"), cpu.get("ClockSpeed"),
                   cpu.get("InstructionSet") or node.arch, cpu.get("Flags"), cpu.get("CacheL1"), cpu.get("CacheL1I"),
                   cpu.get("CacheL1D"), cpu.get("CacheL2")),
        # ram_size, ram_available, virtual_size, virtual_available
        glue.MainMemory(_mb(configured.get("Memory")), _mb(available.get("Memory")), _mb(configured.get("Swap")),
                        _mb(available.get("Swap"))),
        _file_systems(sizes, frees, by_type),
        load[0] if load else None, load[1] if load else None,  # processor_load, smp_load
        _adapters(nics, by_type, more),
        cpus, idle,  # total_cpus, available_cpus
        node.state, paused, reason,  # reported_state, paused, reason
        resources=resources_of(config.resources, node.id, cluster.id), clock_skew_seconds=clock_skew,
        physical_cpus=_int(cpu.get("Sockets")) or None,
        **(_gpu_fields(node, gpus, free_gpus, by_type) if gpus else {}),
    )


def _gpu_fields(node: Node, gpus: list[Consumable], free_gpus: list[Consumable],
                by_type: dict[str | None, dict[str, str]]) -> dict[str, Any]:
    accelerators = _accelerators(gpus, by_type)
    total = sum(a.count for a in accelerators)
    return {"accelerators": accelerators, "accelerators_available": min(total, _gpu_count(free_gpus)),
            "accelerators_used": min(total, _gpu_count(i for i in node.utilized.items if i.kind == "Resource"))}
