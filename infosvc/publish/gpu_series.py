"""The per-host GPU series of /metrics (infosvc/publish/prometheus.py): which of a report's GPU
resources become series, bounded whatever the report names (its types are label values)."""

from __future__ import annotations

import logging
import re
from typing import Final

from infosvc.hosts import gpu_count
from infosvc.loglimit import LogLimiter
from infosvc.model.node import Consumable

__all__ = ["GPU_FAMILIES", "MAX_GPU_DEVICES", "MAX_GPU_MODELS", "MAX_GPU_MODEL_CHARS", "MIB", "bytes_of",
           "gpu_values"]

log = logging.getLogger("infosvc.publish.prometheus")  # the /metrics log, as before
MIB = 1 << 20


#: the per-host GPU families, in METRICS order, with the label each has beside node
GPU_FAMILIES: Final = (("infosvc_host_gpus", "model"), ("infosvc_host_gpus_available", "model"),
                        ("infosvc_host_gpus_utilized", "model"), ("infosvc_host_gpu_memory_bytes", "gpu"),
                        ("infosvc_host_gpu_memory_used_bytes", "gpu"), ("infosvc_host_gpu_utilization_ratio", "gpu"))


#: At most this many models per host have per-model GPU series, and this many GPUs per-GPU series:
#: the label values are the agent's to write, and one report of 1,000 GPU types renamed at each
#: report made 2,000 series at each scrape and new ones at each report (docs/security.md)
MAX_GPU_MODELS: Final = 8
MAX_GPU_DEVICES: Final = 64
#: A model longer than this, or with a character that is not printable (str.isprintable: no line
#: break of any kind, tab, control or format character), has no series: a 15,000-character model
#: went through to a real Prometheus, where every sample of a series repeats its labels, and a host
#: renaming long models at each report made series of them anew each time. The longest real ones
#: (a MIG profile's: "NVIDIA H100 80GB HBM3 MIG 1g.10gb") are under 64. Left out rather than cut
#: short: two models cut alike would be summed as one.
MAX_GPU_MODEL_CHARS: Final = 128
#: A GPU's id as agents write it (docs/node-mapping.md): its PCI address, domain:bus:device.function
#: (the kernel's 0000:3b:00.0, NVML's 00000000:3B:00.0), or a MIG instance's, <PCI address>/gi<G>/ci<C>
_GPU_ID: Final = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7](?:/gi[0-9]{1,4}/ci[0-9]{1,4})?")
#: says that a host's GPU series were cut: one line per interval, however many hosts
_cut_log = LogLimiter(log)


def gpu_values(categories: tuple[list[Consumable], ...], host: str) -> tuple[list[tuple[str, float]], ...]:
    """Each GPU_FAMILIES family's (label value, value) pairs, from the GPU resources of the
    Configured, Available and Utilized categories (_first's; docs/node-mapping.md, GPUs): per
    model the GPUs of each category; per GPU its memory, memory used, utilisation. Bounded
    whatever the report says: per model, the models the host has GPUs of (a Configured count of
    one or more, as the roll-up counts its accelerators) named fit for a label (_fit_model), the
    first MAX_GPU_MODELS by name; per GPU, the ids of a GPU's form (_GPU_ID), the first
    MAX_GPU_DEVICES. A model's GPUs listed twice are summed (as the roll-up does), a GPU's value
    listed twice is its first."""
    models: set[str] = set()  # those it has GPUs of
    devices: set[str] = set()  # those of a GPU's form
    model_keys: set[str] = set()  # every per-model label value of the report, kept or not
    device_keys: set[str] = set()  # and every per-GPU one
    for category, items in enumerate(categories):
        for item in items:
            name, key = item.name, item.type
            assert key is not None  # _first keeps only typed ones
            if name == "GPU":
                model_keys.add(key)
                if category == 0 and key not in models and _fit_model(key) and gpu_count(item) >= 1:
                    models.add(key)  # as the roll-up counts the host's accelerators
            elif (name == "GPUMemory" and category != 1) or (name == "GPUUtilization" and category == 2):
                if key not in device_keys:
                    device_keys.add(key)
                    if _GPU_ID.fullmatch(key):
                        devices.add(key)
    if len(models) > MAX_GPU_MODELS:
        models = set(sorted(models)[:MAX_GPU_MODELS])
    if len(devices) > MAX_GPU_DEVICES:
        devices = set(sorted(devices)[:MAX_GPU_DEVICES])
    if len(model_keys) > len(models) or len(device_keys) > len(devices):
        _cut_log.warning("gpu-series-cut", "host %r: %d GPU models and %d GPU ids of its report are left off /metrics "
                         "(per-model series: at most %d models it has GPUs of, named in at most %d printable "
                         "characters; per-GPU series: at most %d PCI addresses or MIG instances)", host,
                         len(model_keys) - len(models), len(device_keys) - len(devices), MAX_GPU_MODELS,
                         MAX_GPU_MODEL_CHARS, MAX_GPU_DEVICES)
    out: tuple[dict[str, float], ...] = ({}, {}, {}, {}, {}, {})
    for category, items in enumerate(categories):
        for item in items:
            name, key = item.name, item.type
            assert key is not None
            try:
                if name == "GPU":
                    if key in models:
                        counts = out[category]
                        counts[key] = counts.get(key, 0.0) + float(item.value)
                elif key not in devices:
                    continue
                elif name == "GPUMemory" and category != 1:
                    family = out[3 if category == 0 else 4]
                    if key not in family and (amount := bytes_of(item)) is not None:
                        family[key] = amount
                elif name == "GPUUtilization" and category == 2 and key not in out[5]:
                    out[5][key] = float(item.value) / 100
            except (ValueError, OverflowError):  # not a number: not exported rather than failing the scrape
                continue
    return tuple(list(values.items()) for values in out)


def _fit_model(model: str) -> bool:
    return len(model) <= MAX_GPU_MODEL_CHARS and model.isprintable()


def bytes_of(item: Consumable | None) -> float | None:
    """A size as bytes; None for one that names no size."""
    if item is None:
        return None
    try:
        if item.units == "MB" or item.units is None:  # what agents write; no units means MB for Memory
            return float(item.value) * MIB
        return item.amount("byte")
    except (ValueError, OverflowError):  # units that name no size, or a size past any float:
        return None  # not exported rather than failing the scrape
