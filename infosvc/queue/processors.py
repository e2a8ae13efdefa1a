"""Each host's processors as the scheduler counts them, as Slurm's `sinfo -o %C` splits them:
allocated (held by the queue's running jobs: an exclusive job holds its hosts whole), idle
(configured and not allocated, on a host the scheduler places jobs on now), other (the rest: the
host is not usable by the scheduler: paused or drained, unreachable, reporting itself Offline,
without an executor, or of a cluster no serving CE serves) and total (configured).

This, not the load an agent reports, is what decides whether a job starts: POST /v1/match answers
from it (the load shown beside), GET /v1/processors publishes it, `infosvc status` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from infosvc.queue.planning import held_on
from infosvc.sched.hosts import HostPool
from infosvc.sched.jobs import JobRecord

if TYPE_CHECKING:
    from infosvc.queue.jobqueue import JobQueue

__all__ = ["Split", "scheduler_view", "split_of", "totals"]


@dataclass(frozen=True, slots=True)
class Split:
    allocated: int
    idle: int
    other: int
    total: int

    def as_json(self) -> dict[str, Any]:
        return {"allocated": self.allocated, "idle": self.idle, "other": self.other, "total": self.total}


def split_of(pool: HostPool, jobs: Iterable[JobRecord]) -> dict[str, Split]:
    """Host id -> its split, `pool` being the site's (not changed: the running jobs are taken on a copy)."""
    held = pool.copy()
    held_on(held, jobs)
    open_ = (held.usable & ~held.paused).tolist()
    size, free = held.size.tolist(), held.free.tolist()
    found = {}
    for row, host in enumerate(held.ids):
        allocated = size[row] - free[row]
        idle = free[row] if open_[row] and not held.exclusive[row] else 0
        found[host] = Split(allocated, idle, size[row] - allocated - idle, size[row])
    return found


def totals(splits: Iterable[Split]) -> Split:
    """The site's split: each figure summed over the hosts."""
    allocated = idle = other = total = 0
    for split in splits:
        allocated, idle, other, total = (allocated + split.allocated, idle + split.idle, other + split.other,
                                         total + split.total)
    return Split(allocated, idle, other, total)


async def scheduler_view(queue: JobQueue) -> tuple[bool, dict[str, Split]]:
    """Whether the queue schedules at all (some host runs an executor: else no job starts, and a
    dry run reads hosts by their load), and each host's split now."""
    await queue.machine.ready()
    return bool(queue.machine.executors), split_of(queue.pool(), queue.jobs.values())
