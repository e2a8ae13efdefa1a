"""Memory: RAM and swap totals and what is available, from /proc/meminfo.

Lines other than the ones used are ignored whatever they hold; a used line whose value is
not an integer, or a meminfo without MemTotal, raises ValueError naming the line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

from infosvc_agents.collectors._files import ProcFile

_WANTED: Final = ("MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "SwapTotal", "SwapFree")
# Found by searching rather than by splitting all ~55 lines: a sample then costs a few finds.
_NEEDLES: Final = tuple((key, f"\n{key}:", len(key) + 2) for key in _WANTED)


@dataclass(frozen=True, slots=True)
class MemorySample:
    """Bytes of RAM and swap."""

    total: int
    available: int
    swap_total: int
    swap_free: int


def parse_meminfo(text: str) -> dict[str, int]:
    """The used meminfo fields in bytes."""
    text = "\n" + text
    values: dict[str, int] = {}
    for key, needle, skip in _NEEDLES:
        start = text.find(needle)
        if start < 0:
            continue
        end = text.find("\n", start + 1)
        value = text[start + skip:end if end > 0 else len(text)].strip()
        scale = 1
        if value.endswith(" kB"):
            value, scale = value[:-3].rstrip(), 1024
        if not value.isdigit():
            raise ValueError(f"malformed /proc/meminfo line: {text[start + 1:end if end > 0 else len(text)]!r}")
        values[key] = int(value) * scale
    return values


class MemoryCollector:
    name = "memory"

    def __init__(self, proc_root: str = "/proc") -> None:
        self._file = ProcFile(os.path.join(proc_root, "meminfo"))

    def collect(self) -> MemorySample:
        values = parse_meminfo(self._file.read())
        if "MemTotal" not in values:
            raise ValueError(f"{self._file.path} has no MemTotal line")
        available = values.get("MemAvailable")
        if available is None:
            # Kernels before 3.14 have no MemAvailable; free + buffers + page cache is the
            # estimate tools used before it existed.
            available = values.get("MemFree", 0) + values.get("Buffers", 0) + values.get("Cached", 0)
        return MemorySample(
            total=values["MemTotal"],
            available=available,
            # A kernel built without swap support still prints these; missing means no swap.
            swap_total=values.get("SwapTotal", 0),
            swap_free=values.get("SwapFree", 0),
        )
