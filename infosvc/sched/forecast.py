"""When would a new job start? The computing element's EstimatedResponseTime and
WorstResponseTime (GLUE CE State), forecast from the current plan as a pure function.

The forecast counts processors on the CE's hosts over time (a profile): what is free now after the
pass's starts, plus each running job's processors from its predicted end. The jobs queued ahead of
the new one are placed in queue order at the earliest time their processors are free for their
whole run (conservative backfilling: a job may start before one ahead of it only where it delays
none), and then the new job. Exact placement on hosts is the scheduler's; the forecast reads an
exclusive job as the whole hosts it needs (`whole_hosts`).

Bounded: at most `depth` jobs are placed one by one (Slurm's backfill looks 500 deep by default);
the work of the jobs beyond, processor-seconds over the CE's processors, is added to the start.
A job with an EligibleTime (`Demand.not_before`) is placed no earlier than that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Sequence

import numpy as np

__all__ = ["DEPTH", "Demand", "first_start", "whole_hosts"]

#: Jobs placed one by one ahead of the new one; the rest are counted by their work.
DEPTH: Final = 500


@dataclass(frozen=True, slots=True)
class Demand:
    """Processors held for `seconds` (math.inf: until cancelled), from `not_before` at the earliest
    (a job's SSS EligibleTime)."""

    processors: int
    seconds: float
    not_before: float = -math.inf


def whole_hosts(processors: int, host_size: int) -> int:
    """The processors an exclusive job holds: whole hosts of `host_size`."""
    if host_size <= 0:
        return processors
    return -(-processors // host_size) * host_size


def first_start(now: float, capacity: int, free_now: int, releases: Sequence[tuple[float, int]],
                ahead: Sequence[Demand], new: Demand, depth: int = DEPTH, beyond: float = 0.0) -> float:
    """When `new` would start: `free_now` of `capacity` processors free at `now`, `releases` (time,
    processors) as running jobs end, `ahead` queued before it in queue order (and `beyond`
    processor-seconds of more jobs ahead, when the caller counted them itself). math.inf when it
    never would (it is wider than the CE, or what it needs stays held until cancelled)."""
    if new.processors > capacity or capacity <= 0:
        return math.inf
    times = [now]
    free = [free_now]
    for at, count in sorted(releases):
        if at <= now:
            free[0] += count
        elif at == times[-1]:
            free[-1] += count
        else:
            times.append(at)
            free.append(free[-1] + count)
    profile = _Profile(np.array(times, dtype=np.float64), np.array(free, dtype=np.int64))
    work = beyond
    for number, job in enumerate(ahead):
        if job.processors > capacity:
            continue  # never starts here: it holds nothing of this CE
        if number < depth:
            profile.hold(job)
        elif math.isfinite(job.seconds):
            work += job.processors * job.seconds
    start = profile.earliest(new)
    return start + work / capacity if math.isfinite(start) else start


class _Profile:
    """Free processors over time: free[i] from times[i] until times[i+1] (the last, for ever)."""

    def __init__(self, times: np.ndarray, free: np.ndarray) -> None:
        self.times = times
        self.free = free

    def _first(self, job: Demand) -> int | None:
        earliest = self._from(job.not_before)
        ok = self.free >= job.processors
        if not ok[earliest:].any():
            return None
        if math.isinf(job.seconds):
            # held for ever: free enough from some breakpoint to the end
            tail_ok = np.flip(np.logical_and.accumulate(np.flip(ok)))
            found = np.flatnonzero(tail_ok[earliest:])
            return earliest + int(found[0]) if found.size else None
        ends = np.searchsorted(self.times, self.times + job.seconds, side="left")
        bad = np.concatenate(([0], np.cumsum(~ok)))
        feasible = ok & (bad[ends] == bad[:-1])
        found = np.flatnonzero(feasible[earliest:])
        return earliest + int(found[0]) if found.size else None

    def _from(self, at: float) -> int:
        """The first breakpoint at or after `at`, made one when `at` falls between two."""
        if at <= self.times[0]:
            return 0
        index = int(np.searchsorted(self.times, at, side="left"))
        if index == len(self.times) or self.times[index] != at:
            self._split(index, at)
        return index

    def _split(self, index: int, at: float) -> None:
        """A breakpoint at `at`, made at `index`, free there as just before it. (By hand, not
        np.insert: that is ten times as long for a short profile, and the forecast of a CE's 500 jobs
        ahead splits a thousand times; at 10,000 queued it was a third of the CEs' figures.)"""
        times, free = self.times, self.free
        self.times = np.empty(len(times) + 1, times.dtype)
        self.times[:index], self.times[index], self.times[index + 1:] = times[:index], at, times[index:]
        self.free = np.empty(len(free) + 1, free.dtype)
        self.free[:index], self.free[index], self.free[index + 1:] = free[:index], free[index - 1], free[index:]

    def earliest(self, job: Demand) -> float:
        index = self._first(job)
        return math.inf if index is None else float(self.times[index])

    def hold(self, job: Demand) -> None:
        index = self._first(job)
        if index is None:
            return  # it never fits: it holds nothing the forecast can see
        start = self.times[index]
        if math.isinf(job.seconds):
            self.free[index:] -= job.processors
            return
        end = start + job.seconds
        stop = int(np.searchsorted(self.times, end, side="left"))
        if stop == len(self.times) or self.times[stop] != end:
            self._split(stop, end)
        self.free[index:stop] -= job.processors
