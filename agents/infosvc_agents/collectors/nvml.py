"""The few NVML calls the GPU collector makes, over nvidia-ml-py's `pynvml` (`pip install infosvc[gpu]`).

NVML is optional: `Nvml.load()` answers None where pynvml is not installed or NVML cannot start
(no driver, no libnvidia-ml.so), and the collector then keeps to what /proc and /sys say. pynvml is
imported only here and only when asked for, since it brings ctypes into the agent: a host without
NVIDIA GPUs never loads it.

What does not change while the driver runs (name, UUID, total memory, compute capability, MIG
layout) is asked once per rescan (`static`); a sample asks only memory used, utilisation and the
compute processes (`usage`): NVML calls take milliseconds each on some drivers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("infosvc_agents.collectors.nvml")
_last_failure: str | None = None  # why NVML did not start, as last logged


@dataclass(frozen=True, slots=True)
class NvmlMig:
    """One MIG device (a compute instance of a GPU instance), as NVML names it."""

    gpu_instance: int
    compute_instance: int
    name: str  # "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
    uuid: str | None
    memory_total: int | None  # bytes
    handle: Any = field(default=None, compare=False, repr=False)  # for `usage`


@dataclass(frozen=True, slots=True)
class NvmlStatic:
    name: str
    uuid: str | None
    memory_total: int | None  # bytes
    compute_capability: str | None  # "9.0"
    mig_enabled: bool
    mig: tuple[NvmlMig, ...]


@dataclass(frozen=True, slots=True)
class NvmlUsage:
    memory_used: int | None  # bytes
    utilization: float | None  # percent of the last sample period the GPU was busy; None on a MIG device
    processes: int | None  # compute processes running on it


def _text(value: Any) -> str:
    """pynvml gives bytes from some calls and str from others, by version."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def bus_id(nvml_bus_id: Any) -> str:
    """NVML's "00000000:17:00.0" as sysfs writes it: "0000:17:00.0" (four-digit domain, lower case)."""
    text = _text(nvml_bus_id).strip().lower()
    domain, sep, rest = text.partition(":")
    try:
        return f"{int(domain, 16):04x}:{rest}" if sep else text
    except ValueError:
        return text


class Nvml:
    """An initialised NVML and the handles of its GPUs by PCI bus id."""

    def __init__(self, module: Any) -> None:
        self._nv = module
        module.nvmlInit()
        self.handles: dict[str, Any] = {}
        self.refresh()

    @classmethod
    def load(cls) -> Nvml | None:
        """NVML through pynvml, or None (logged) where either is missing or NVML will not start."""
        try:
            import pynvml
        except ImportError:
            log.debug("nvidia-ml-py is not installed: NVIDIA GPUs are described from /proc and /sys alone")
            return None
        global _last_failure
        try:
            nvml = cls(pynvml)
        except Exception as exc:  # noqa: BLE001 - NVMLError, or OSError from a broken library: sysfs still serves
            failure = f"{type(exc).__name__}: {exc}"
            # asked again at each scan (a driver loaded late): said once, not every five minutes
            log.log(logging.DEBUG if failure == _last_failure else logging.WARNING,
                    "NVML is installed but does not start (%s): NVIDIA GPUs are described from /proc and /sys alone",
                    failure)
            _last_failure = failure
            return None
        _last_failure = None
        return nvml

    def refresh(self) -> None:
        """List the GPUs again (a rescan: a GPU reset or added)."""
        nv = self._nv
        handles: dict[str, Any] = {}
        for index in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            handles[bus_id(nv.nvmlDeviceGetPciInfo(handle).busId)] = handle
        self.handles = handles

    def static(self, handle: Any) -> NvmlStatic:
        nv = self._nv
        major, minor = nv.nvmlDeviceGetCudaComputeCapability(handle)
        mig_enabled = False
        mig: list[NvmlMig] = []
        try:
            current, _pending = nv.nvmlDeviceGetMigMode(handle)
            mig_enabled = current == nv.NVML_DEVICE_MIG_ENABLE
        except nv.NVMLError:
            pass  # not MIG-capable (NOT_SUPPORTED): a whole GPU
        if mig_enabled:
            for index in range(nv.nvmlDeviceGetMaxMigDeviceCount(handle)):
                try:
                    device = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
                except nv.NVMLError:
                    continue  # NOT_FOUND: a slot with no instance made
                mig.append(NvmlMig(nv.nvmlDeviceGetGpuInstanceId(device), nv.nvmlDeviceGetComputeInstanceId(device),
                                   _text(nv.nvmlDeviceGetName(device)), _text(nv.nvmlDeviceGetUUID(device)),
                                   int(nv.nvmlDeviceGetMemoryInfo(device).total), device))
        return NvmlStatic(_text(nv.nvmlDeviceGetName(handle)), _text(nv.nvmlDeviceGetUUID(handle)),
                          int(nv.nvmlDeviceGetMemoryInfo(handle).total), f"{major}.{minor}", mig_enabled, tuple(mig))

    def usage(self, handle: Any, *, whole: bool = True) -> NvmlUsage:
        """Memory used, utilisation (a whole GPU only: NVML has none for a MIG device or a GPU in MIG
        mode) and the number of compute processes."""
        nv = self._nv
        rates = self._optional(nv.nvmlDeviceGetUtilizationRates, handle) if whole else None
        processes = self._optional(nv.nvmlDeviceGetComputeRunningProcesses, handle)
        return NvmlUsage(int(nv.nvmlDeviceGetMemoryInfo(handle).used), None if rates is None else float(rates.gpu),
                         None if processes is None else len(processes))

    def _optional(self, call: Any, handle: Any) -> Any:
        """call(handle), or None where this GPU does not support it (NVML's NOT_SUPPORTED, NO_PERMISSION):
        any other error (GPU_IS_LOST, ...) is the GPU's and propagates."""
        nv = self._nv
        try:
            return call(handle)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) in (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_NO_PERMISSION):
                return None
            raise
