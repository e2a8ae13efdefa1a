"""Load: the kernel's 1/5/15-minute load averages and task counts, from /proc/loadavg.

A loadavg that does not have the usual five fields raises ValueError quoting it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from infosvc_agents.collectors._files import ProcFile


@dataclass(frozen=True, slots=True)
class LoadSample:
    one: float
    five: float
    fifteen: float
    runnable: int
    tasks: int


def parse_loadavg(text: str) -> LoadSample:
    """LoadSample from a line such as "0.08 0.13 0.06 2/345 3433"."""
    fields = text.split()
    try:
        runnable, slash, tasks = fields[3].partition("/")
        if not slash:
            raise ValueError
        return LoadSample(float(fields[0]), float(fields[1]), float(fields[2]), int(runnable), int(tasks))
    except (IndexError, ValueError):
        raise ValueError(f"malformed /proc/loadavg: {text.strip()[:80]!r}") from None


class LoadCollector:
    name = "load"

    def __init__(self, proc_root: str = "/proc") -> None:
        self._file = ProcFile(os.path.join(proc_root, "loadavg"))

    def collect(self) -> LoadSample:
        return parse_loadavg(self._file.read())
