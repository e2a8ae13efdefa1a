"""GPUs: what each accelerator of the host is, found from the kernel's own files (no vendor library
needed), and, per sample, how much of it is in use.

What a GPU is does not change while its driver runs, so it is found at construction and again every
`rescan` seconds (a driver loaded after the agent started, a GPU reset), never per sample:

- every PCI device of a display class (0x03xxxx) from NVIDIA, AMD or Intel under
  /sys/bus/pci/devices: vendor, device, class and the driver bound to it (a GPU with none is found
  but not usable);
- NVIDIA's /proc/driver/nvidia/gpus/<bus id>/information: Model, GPU UUID, Video BIOS, Device Minor,
  GPU Excluded; and the MIG instances made on it, /proc/driver/nvidia/capabilities/gpu<minor>/mig/
  gi<G>/ci<C> (their profile is NVML's to name);
- /sys/class/drm/card<N>/device (amdgpu, i915, xe): product_name, mem_info_vram_total.

A sample reads only what moves: amdgpu's mem_info_vram_used and gpu_busy_percent; and, where NVML
is at hand (`infosvc[gpu]`, on this machine's own /proc only), each NVIDIA GPU's memory used,
utilisation and compute processes (infosvc_agents/collectors/nvml.py). NVML also gives the total
memory, the compute capability and the MIG devices with their profiles, asked at each scan.

A GPU that cannot be probed (a file that fails to read, an NVML error such as "GPU is lost") is
logged when it starts or stops failing and marked in the sample (`GpuSample.error`), as
node_exporter marks a failed collector: the other GPUs and the rest of the sample go on.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Final

from infosvc_agents.collectors._files import ProcFile, is_live_root, read_attr, read_text
from infosvc_agents.collectors.nvml import Nvml, NvmlStatic, NvmlUsage

log = logging.getLogger("infosvc_agents.collectors.gpus")

#: PCI vendor ids of the GPU makers looked for (a server's BMC display, ASPEED or Matrox, is no GPU).
VENDORS: Final[dict[str, str]] = {"10de": "NVIDIA", "1002": "AMD", "8086": "Intel"}
_CARD: Final = re.compile(r"card[0-9]+$")  # not card0-DP-1 (a connector) nor renderD128
_PCI_ADDRESS: Final = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_INSTANCE: Final = re.compile(r"(gi|ci)([0-9]+)$")

#: What a GPU (or MIG instance) is doing, as the sample has it: idle and unknown are Available.
IDLE, BUSY, UNKNOWN, FAILED, EXCLUDED, NO_DRIVER = "idle", "busy", "unknown", "failed", "excluded", "no driver"
AVAILABLE_STATES: Final = frozenset({IDLE, UNKNOWN})

NvmlLoader = Callable[[], Nvml | None]


@dataclass(frozen=True, slots=True)
class MigInstance:
    """A MIG device: a compute instance `compute_instance` of GPU instance `gpu_instance`."""

    gpu_instance: int
    compute_instance: int
    model: str  # NVML's name ("NVIDIA H100 80GB HBM3 MIG 1g.10gb"), else the GPU's model and " MIG"
    uuid: str | None = None
    memory_total: int | None = None  # bytes


@dataclass(frozen=True, slots=True)
class Gpu:
    """What one GPU is, as the last scan found it."""

    bus_id: str  # the PCI address, "0000:17:00.0"
    vendor: str  # NVIDIA, AMD, Intel
    pci_id: str | None  # "10de:2330"
    model: str
    driver: str | None  # the kernel driver bound to it: nvidia, amdgpu, i915, xe, ...; None: none
    index: int | None = None  # its place among its vendor's usable GPUs in PCI order (CUDA's, ROCm's)
    memory_total: int | None = None  # bytes
    uuid: str | None = None
    minor: int | None = None  # /dev/nvidia<minor>
    vbios: str | None = None
    compute_capability: str | None = None
    excluded: bool = False  # "GPU Excluded: Yes": the driver keeps it from use
    mig_enabled: bool = False
    mig: tuple[MigInstance, ...] = ()
    problem: str | None = None  # what could not be read about it at the scan


@dataclass(frozen=True, slots=True)
class GpuUse:
    """What one sample saw of a GPU or MIG instance; None: not known here."""

    memory_used: int | None = None  # bytes
    utilization: float | None = None  # percent busy
    processes: int | None = None  # compute processes on it

    @property
    def state(self) -> str:
        """busy or idle by its processes where known (NVML), else by its utilisation, else unknown."""
        if self.processes is not None:
            return BUSY if self.processes else IDLE
        if self.utilization is not None:
            return BUSY if self.utilization > 0 else IDLE
        return UNKNOWN


_NOTHING: Final = GpuUse()


@dataclass(frozen=True, slots=True)
class GpuSample:
    gpu: Gpu
    use: GpuUse = _NOTHING
    mig_use: tuple[GpuUse, ...] = ()  # one per gpu.mig, in its order
    error: str | None = None  # this sample's probe of it failed

    @property
    def failure(self) -> str | None:
        return self.error or self.gpu.problem

    def units(self) -> list[tuple[str, str]]:
        """(type, state) of each device a job can be given: the GPU, or its MIG instances where it is
        split (as Slurm's NVML autodetection counts them); a GPU in MIG mode with none made gives none."""
        gpu = self.gpu
        held = FAILED if self.failure else EXCLUDED if gpu.excluded else NO_DRIVER if gpu.driver is None else None
        if gpu.mig_enabled or gpu.mig:
            uses = self.mig_use
            return [(mig.model, held or (uses[i] if i < len(uses) else _NOTHING).state)
                    for i, mig in enumerate(gpu.mig)]
        return [(gpu.model, held or self.use.state)]

    @property
    def state(self) -> str:
        return gpu_state(self.units(), self.failure)


def gpu_state(units: list[tuple[str, str]], failure: str | None) -> str:
    """A GPU's own state from its units': theirs when they agree, busy when any is, else unknown."""
    states = {state for _, state in units}
    if not states:  # MIG mode, no instance made
        return FAILED if failure else UNKNOWN
    if len(states) == 1:
        return states.pop()
    return BUSY if BUSY in states else UNKNOWN


def parse_information(text: str) -> dict[str, str]:
    """/proc/driver/nvidia/gpus/<bus id>/information: "Key: \\t value" lines."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


def _hex_id(text: str | None) -> str | None:
    """A sysfs id such as "0x10de" as "10de"; None when missing or not one."""
    if not text or not text.startswith("0x"):
        return None
    value = text[2:].lower()
    return value if value and all(c in "0123456789abcdef" for c in value) else None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def _driver(device_dir: str) -> str | None:
    try:
        return os.path.basename(os.readlink(device_dir + "/driver"))
    except OSError:
        return None


@dataclass(slots=True)
class _Found:
    """One GPU while a scan gathers what each source says of it."""

    bus_id: str
    vendor_id: str | None = None
    device_id: str | None = None
    driver: str | None = None
    card: str | None = None  # /sys/class/drm/cardN/device
    information: dict[str, str] | None = None
    problem: str | None = None


class GpuCollector:
    """The host's GPUs (found at each scan) with what a sample sees of their use."""

    name = "gpus"

    def __init__(self, proc_root: str = "/proc", sys_root: str = "/sys", nvml: NvmlLoader | None = None,
                 rescan: float = 300.0) -> None:
        self._proc = proc_root
        self._sys = sys_root
        # NVML describes the machine we run on: only asked when the roots are this machine's own.
        self._load_nvml: NvmlLoader | None = nvml if nvml is not None else (Nvml.load if is_live_root(proc_root)
                                                                             else None)
        self._nvml: Nvml | None = None
        self._rescan = rescan
        self._scanned = 0.0
        self._gpus: tuple[Gpu, ...] | None = None
        self._handles: dict[str, Any] = {}  # bus id -> NVML handle
        self._mig_handles: dict[str, tuple[Any, ...]] = {}  # bus id -> its MIG devices' NVML handles
        # bus id -> its amdgpu mem_info_vram_used and gpu_busy_percent, where it has them
        self._amd: dict[str, tuple[ProcFile | None, ProcFile | None]] = {}
        self._still: dict[str, GpuSample] = {}  # bus id -> the sample of a GPU with nothing to read per sample
        self._failing: dict[str, str] = {}  # bus id -> the error last logged

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        """The GPUs found by the last scan (scanning now if there was none)."""
        if self._gpus is None:
            self.scan()
        return self._gpus or ()

    def collect(self) -> tuple[GpuSample, ...]:
        gpus = self._gpus
        if gpus is None or time.monotonic() - self._scanned >= self._rescan:
            gpus = self.scan()
        if not gpus:
            return ()
        return tuple(self._sample(gpu) for gpu in gpus)

    # -- what the GPUs are ------------------------------------------------------------------------

    def scan(self) -> tuple[Gpu, ...]:
        """Find the GPUs again (sysfs, NVIDIA's procfs, NVML where at hand)."""
        self._scanned = time.monotonic()
        found = self._find()
        nvidia = any(f.vendor_id == "10de" for f in found.values())
        statics: dict[str, NvmlStatic] = {}
        problems: dict[str, str] = {}
        if nvidia and self._nvml is None and self._load_nvml is not None:
            self._nvml = self._load_nvml()
        nvml = self._nvml
        self._handles, self._mig_handles = {}, {}
        if nvml is not None:
            try:
                nvml.refresh()
            except Exception as exc:  # noqa: BLE001 - NVML gone (driver unloaded): sysfs still serves
                log.warning("NVML cannot list the GPUs (%s: %s): asked again at the next scan", type(exc).__name__, exc)
                self._nvml = nvml = None
        if nvml is not None:
            for bus_id, handle in nvml.handles.items():
                try:
                    static = statics[bus_id] = nvml.static(handle)
                    self._handles[bus_id] = handle
                    self._mig_handles[bus_id] = tuple(mig.handle for mig in static.mig)
                except Exception as exc:  # noqa: BLE001 - this GPU alone is marked
                    problems[bus_id] = f"NVML: {type(exc).__name__}: {exc}"
                found.setdefault(bus_id, _Found(bus_id, vendor_id="10de", driver="nvidia"))
        gpus: list[Gpu] = []
        counts: dict[str, int] = {}
        self.close_files()
        self._still = {}
        named: dict[str, str] = {}  # PCI id -> a model its GPUs have here: for one whose own files would not say
        for bus_id in sorted(found):
            gpu = self._gpu(found[bus_id], statics.get(bus_id), problems.get(bus_id))
            if gpu.pci_id is not None and gpu.model != _unnamed(gpu.vendor, gpu.pci_id):
                named.setdefault(gpu.pci_id, gpu.model)
            gpus.append(gpu)
        for at, gpu in enumerate(list(gpus)):
            if gpu.pci_id in named and gpu.model == _unnamed(gpu.vendor, gpu.pci_id):
                gpu = gpus[at] = replace(gpu, model=named[gpu.pci_id])
            if gpu.driver is not None and not gpu.excluded:
                index = counts.get(gpu.vendor, 0)
                counts[gpu.vendor] = index + 1
                gpus[at] = replace(gpu, index=index)
        self._gpus = tuple(gpus)
        return self._gpus

    def _find(self) -> dict[str, _Found]:
        found: dict[str, _Found] = {}
        pci = f"{self._sys}/bus/pci/devices"
        for name in _listdir(pci):
            device = f"{pci}/{name}"
            pci_class = read_attr(device + "/class")
            if pci_class is None or not pci_class.startswith("0x03"):
                continue
            vendor_id = _hex_id(read_attr(device + "/vendor"))
            if vendor_id in VENDORS:
                found[name] = _Found(name, vendor_id, _hex_id(read_attr(device + "/device")), _driver(device))
        drm = f"{self._sys}/class/drm"
        for card in sorted(_listdir(drm)):
            if not _CARD.match(card):
                continue
            device = f"{drm}/{card}/device"
            bus_id = os.path.basename(os.path.realpath(device))
            if not _PCI_ADDRESS.match(bus_id):
                continue  # not on PCI (a virtual or platform display)
            entry = found.get(bus_id)
            if entry is None:
                vendor_id = _hex_id(read_attr(device + "/vendor"))
                if vendor_id not in VENDORS:
                    continue
                entry = found[bus_id] = _Found(bus_id, vendor_id, _hex_id(read_attr(device + "/device")),
                                               _driver(device))
            entry.card = device
        nvidia = f"{self._proc}/driver/nvidia/gpus"
        for bus_id in _listdir(nvidia):
            entry = found.get(bus_id)
            if entry is None:  # a /sys that does not show it (a container's): NVIDIA's word is enough
                entry = found[bus_id] = _Found(bus_id, "10de", driver="nvidia")
            try:
                entry.information = parse_information(read_text(f"{nvidia}/{bus_id}/information"))
            except OSError as exc:
                entry.problem = f"information: {exc.strerror or exc}"
        return found

    def _gpu(self, found: _Found, static: NvmlStatic | None, problem: str | None) -> Gpu:
        vendor_id = found.vendor_id or ""
        vendor = VENDORS.get(vendor_id, vendor_id)
        pci_id = f"{vendor_id}:{found.device_id}" if found.vendor_id and found.device_id else None
        info = found.information or {}
        card = found.card
        model = info.get("Model") or (static.name if static else None)
        if not model and card is not None:
            model = read_attr(card + "/product_name") or None
        memory = static.memory_total if static else None
        if memory is None and card is not None:
            memory = _int(read_attr(card + "/mem_info_vram_total"))
            used, busy = card + "/mem_info_vram_used", card + "/gpu_busy_percent"
            files = (_sysfs_file(used) if read_attr(used) is not None else None,
                     _sysfs_file(busy) if read_attr(busy) is not None else None)
            if files != (None, None):
                self._amd[found.bus_id] = files
        uuid = static.uuid if static else info.get("GPU UUID")
        minor = _int(info.get("Device Minor"))
        model = model or _unnamed(vendor, pci_id)
        gpu = Gpu(
            bus_id=found.bus_id, vendor=vendor, pci_id=pci_id, model=model, driver=found.driver,
            memory_total=memory, uuid=uuid if uuid and "?" not in uuid else None, minor=minor,
            vbios=(info.get("Video BIOS") or None) if "?" not in info.get("Video BIOS", "?") else None,
            compute_capability=static.compute_capability if static else None,
            excluded=info.get("GPU Excluded", info.get("Blacklisted", "No")) == "Yes",
            problem=problem or found.problem,
        )
        if static is not None:
            mig = tuple(MigInstance(m.gpu_instance, m.compute_instance, m.name, m.uuid, m.memory_total)
                        for m in static.mig)
            return replace(gpu, mig_enabled=static.mig_enabled, mig=mig)
        if minor is not None and vendor == "NVIDIA":
            return replace(gpu, mig=self._proc_mig(minor, model))
        return gpu

    def _proc_mig(self, minor: int, model: str) -> tuple[MigInstance, ...]:
        """The MIG compute instances the driver has made on GPU `minor`, from its capability files."""
        base = f"{self._proc}/driver/nvidia/capabilities/gpu{minor}/mig"
        found = []
        for gi in _listdir(base):
            gi_match = _INSTANCE.match(gi)
            if gi_match is None or gi_match[1] != "gi":
                continue
            for ci in _listdir(f"{base}/{gi}"):
                ci_match = _INSTANCE.match(ci)
                if ci_match is not None and ci_match[1] == "ci":
                    found.append(MigInstance(int(gi_match[2]), int(ci_match[2]), f"{model} MIG"))
        return tuple(sorted(found, key=lambda m: (m.gpu_instance, m.compute_instance)))

    # -- what they are doing ----------------------------------------------------------------------

    def _sample(self, gpu: Gpu) -> GpuSample:
        bus_id = gpu.bus_id
        try:
            sample = self._probe(gpu)
        except Exception as exc:  # noqa: BLE001 - this GPU alone is marked; the others and the sample go on
            sample = GpuSample(gpu, error=f"{type(exc).__name__}: {exc}")
        failure = sample.failure
        if failure != self._failing.get(bus_id):
            if failure is None:
                log.info("GPU %s answers again", bus_id)
                del self._failing[bus_id]
            else:
                log.warning("GPU %s (%s) cannot be probed: %s", bus_id, gpu.model, failure)
                self._failing[bus_id] = failure
        return sample

    def _probe(self, gpu: Gpu) -> GpuSample:
        handle = self._handles.get(gpu.bus_id)
        if handle is not None and self._nvml is not None:
            nvml = self._nvml
            if gpu.mig_enabled:
                parent = nvml.usage(handle, whole=False)
                migs = tuple(_use(nvml.usage(mig, whole=False)) for mig in self._mig_handles.get(gpu.bus_id, ()))
                return GpuSample(gpu, _use(parent), migs)
            return GpuSample(gpu, _use(nvml.usage(handle)))
        files = self._amd.get(gpu.bus_id)
        if files is None:
            # nothing here says what it is doing: one sample object for as long as the scan holds
            still = self._still.get(gpu.bus_id)
            if still is None or still.gpu is not gpu:
                still = self._still[gpu.bus_id] = GpuSample(gpu)
            return still
        used, busy = files
        return GpuSample(gpu, GpuUse(memory_used=_file_int(used), utilization=_file_int(busy)))

    def close_files(self) -> None:
        for files in self._amd.values():
            for file in files:
                if file is not None:
                    file.close()
        self._amd = {}

    def close(self) -> None:
        self.close_files()
        self._nvml = None


def _unnamed(vendor: str, pci_id: str | None) -> str:
    """The model of a GPU whose files name none: its vendor and PCI id, "NVIDIA [10de:2330]"."""
    return f"{vendor} [{pci_id or 'unknown'}]"


def _use(usage: NvmlUsage) -> GpuUse:
    return GpuUse(usage.memory_used, usage.utilization, usage.processes)


def _sysfs_file(path: str) -> ProcFile:
    """A sysfs attribute read every sample: in this machine's own /sys kept open and read again from
    offset 0, which has sysfs (a seq_file) show it afresh, as ProcFile does for /proc."""
    return ProcFile(path, keep=os.path.realpath(path).startswith("/sys/"))


def _file_int(file: ProcFile | None) -> int | None:
    """A per-sample attribute that was there at the scan: a failure to read it now is the GPU's."""
    if file is None:
        return None
    return int(file.read())


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
