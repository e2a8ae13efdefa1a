"""What a machine of hosts (infosvc.sched.hosts.HostPool) reads and gives: each host as a slot
(processors, memory, speed, usability, licenses, GPUs), a queued job with the hosts it may use,
and an allocation (the hosts, what is taken on each)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from infosvc.sched.policy import Queued
from infosvc.sched.request import JobRequest

__all__ = ["Allocation", "HostJob", "HostSlot", "Mask", "WaitingJob"]

Mask = npt.NDArray[np.bool_]


class HostJob(Queued, Protocol):
    """A queued job as a host machine reads it."""

    @property
    def request(self) -> JobRequest: ...

    @property
    def eligible(self) -> Mask | None:
        """The hosts (rows of the pool) its requirements and asked nodes allow; None: any host."""
        ...

    @property
    def admin(self) -> bool:
        """Submitted by an administrator: may start on Paused hosts."""
        ...


@dataclass(frozen=True, slots=True)
class WaitingJob:
    """A queued job for a host pool: the site's queue and the tests make these."""

    id: str
    priority: int
    submitted: float
    estimate: float
    request: JobRequest
    eligible: Mask | None = None
    admin: bool = False
    predicted: float = float("nan")  # the run time `predictive` plans with (NaN: the estimate)

    @property
    def processors(self) -> int:
        """What a processor pool (infosvc.sched.pool) places: the job's minimum."""
        return self.request.min_processors


@dataclass(frozen=True, slots=True)
class HostSlot:
    """One host as the scheduler sees it."""

    id: str
    processors: int
    memory_mb: float = 0.0
    speed: float = 0.0
    usable: bool = True
    paused: bool = False
    executor: bool = True  # whether an executor runs jobs there (a token bound to it): else it takes none
    #: (feature, license pool) for each software license a job on the host draws, from a pool of
    #: the HostPool's `licenses`
    licenses: tuple[tuple[str, int], ...] = ()
    #: the GPUs a job can be given there (whole GPUs, or MIG instances)
    gpus: int = 0


@dataclass(frozen=True, slots=True)
class Allocation:
    """Rows of the pool, the processors taken on each, the memory held on each, whether the job
    holds them exclusively, and the licenses it draws: (license pool, count)."""

    rows: tuple[int, ...]
    processors: tuple[int, ...]
    memory_mb: float
    exclusive: bool
    licenses: tuple[tuple[int, int], ...] = ()
    #: GPUs taken on each of its hosts
    gpus: int = 0

    @property
    def total(self) -> int:
        return sum(self.processors)
