"""The GPUs the executor gives a task: the devices of this host a job can be given (whole GPUs by
their index in PCI order, MIG instances by UUID), which of them the running jobs hold, and the
environment that tells a task its own (CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,
ZE_AFFINITY_MASK). The scheduler counts each host's GPUs and never gives more than it has
(infosvc.sched.hosts); the executor picks which. The variables are what CUDA, ROCm and Level Zero
read; a process may still unset them: enforcing the split needs the device cgroup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from infosvc_agents.collectors.gpus import Gpu

__all__ = ["VARIABLES", "Device", "devices_of", "environment", "pick"]

#: each vendor's variable naming the devices a process may use
VARIABLES = {"NVIDIA": "CUDA_VISIBLE_DEVICES", "AMD": "ROCR_VISIBLE_DEVICES", "Intel": "ZE_AFFINITY_MASK"}


@dataclass(frozen=True, slots=True)
class Device:
    vendor: str
    visible: str  # what the vendor's variable names it by: "3", or "MIG-<uuid>"

    @property
    def key(self) -> str:
        """As the task's record keeps it: `NVIDIA:3`."""
        return f"{self.vendor}:{self.visible}"

    @classmethod
    def of_key(cls, key: str) -> Device:
        vendor, _, visible = key.partition(":")
        return cls(vendor, visible)


def devices_of(gpus: Iterable[Gpu]) -> list[Device]:
    """The devices a job can be given, in PCI order: each usable GPU (bound to a driver, not excluded,
    not failing), or where it is split by MIG each instance with a UUID (CUDA names them so)."""
    found: list[Device] = []
    for gpu in gpus:
        if gpu.driver is None or gpu.excluded or gpu.problem is not None or gpu.vendor not in VARIABLES:
            continue
        if gpu.mig_enabled or gpu.mig:
            found.extend(Device(gpu.vendor, mig.uuid if mig.uuid.startswith("MIG-") else f"MIG-{mig.uuid}")
                         for mig in gpu.mig if mig.uuid)
        elif gpu.index is not None:
            found.append(Device(gpu.vendor, str(gpu.index)))
    return found


def pick(devices: Sequence[Device], held: Iterable[Device], count: int) -> tuple[Device, ...] | None:
    """`count` of `devices` that no running job holds, the first in PCI order; None when fewer are free."""
    taken = set(held)
    free = [d for d in devices if d not in taken]
    return tuple(free[:count]) if len(free) >= count else None


def environment(devices: Sequence[Device], given: Sequence[Device]) -> dict[str, str]:
    """The variables of a task given `given` on a host with `devices`: for each vendor the host has,
    its devices the task may use (none: empty, so that it uses none it was not given)."""
    variables: dict[str, str] = {}
    for vendor in dict.fromkeys(d.vendor for d in devices):
        variables[VARIABLES[vendor]] = ",".join(d.visible for d in given if d.vendor == vendor)
    if "CUDA_VISIBLE_DEVICES" in variables:
        variables["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # the indices are in PCI order, as the agent counts them
    return variables
