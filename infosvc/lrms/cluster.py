"""A Slurm cluster as read at one instant: its nodes, partitions and jobs, plain frozen dataclasses
that know no command, format or HTTP (infosvc/lrms/slurm_parse.py makes them from Slurm's output;
infosvc/hosts publishes them as hosts and computing elements).

Times are POSIX instants (seconds), limits minutes as Slurm gives them (None: unlimited), memory
MB. A node's state is Slurm's base state (idle, mixed, allocated, completing, down, future,
unknown) and its flags (DRAIN, NOT_RESPONDING, ...), as `sinfo --json` writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: Slurm puts a pending job it cannot place within its horizon a year ahead: no forecast.
FORECAST_HORIZON_SECONDS: Final = 300 * 86400


@dataclass(frozen=True, slots=True)
class GpuKind:
    """A node's GPUs of one type (`gpu:TYPE:COUNT`; the type is "gpu" where Slurm names none)."""

    model: str
    count: int
    used: int = 0


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    hostname: str
    state: str  # the base state, lower case
    flags: tuple[str, ...]  # upper case: DRAIN, NOT_RESPONDING, ...
    reason: str
    cpus: int
    alloc_cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    real_memory: int  # MB
    alloc_memory: int  # MB
    features: tuple[str, ...]
    gpus: tuple[GpuKind, ...]
    partitions: tuple[str, ...]
    architecture: str | None = None
    operating_system: str | None = None

    @property
    def down(self) -> bool:
        """Slurm cannot use it: down, or its slurmd does not answer."""
        return self.state in ("down", "unknown") or "NOT_RESPONDING" in self.flags

    @property
    def drained(self) -> bool:
        """Draining or drained: it takes no new job (an admin's, or Slurm's own, decision)."""
        return "DRAIN" in self.flags or self.state in ("drain", "drained", "draining")

    @property
    def usable(self) -> bool:
        """It takes new jobs now."""
        return not (self.down or self.drained) and self.state not in ("future", "reserved") \
            and "MAINTENANCE" not in self.flags and "RESERVED" not in self.flags

    @property
    def idle_cpus(self) -> int:
        return max(0, self.cpus - self.alloc_cpus)


@dataclass(frozen=True, slots=True)
class SlurmPartition:
    name: str
    state: str  # UP, DOWN, DRAIN, INACTIVE
    nodes: tuple[str, ...]  # node names, in sinfo's order
    total_cpus: int
    max_time: int | None  # minutes; None: unlimited
    max_nodes: int | None  # None: unlimited
    default: bool = False
    qos: str | None = None
    allow_accounts: tuple[str, ...] = ()  # () = all


@dataclass(frozen=True, slots=True)
class SlurmJob:
    id: str
    partition: str  # a pending job may name several, comma separated: the first is kept
    state: str  # PENDING, RUNNING, COMPLETING, SUSPENDED, ... upper case
    user: str
    account: str
    cpus: int
    nodes: int
    time_limit: int | None  # minutes; None: unlimited (the partition's)
    submit_time: float
    start_time: float  # running: when it started; pending: Slurm's forecast (0: none)
    reason: str
    node_list: str = ""

    @property
    def running(self) -> bool:
        return self.state in ("RUNNING", "COMPLETING", "SUSPENDED")

    @property
    def pending(self) -> bool:
        return self.state in ("PENDING", "REQUEUED", "CONFIGURING")

    def forecast(self, now: float) -> float | None:
        """Slurm's own forecast of its start (`squeue --start`'s START_TIME), when it made one."""
        if not self.pending or self.start_time <= 0 or self.start_time - now > FORECAST_HORIZON_SECONDS:
            return None
        return max(now, self.start_time)


@dataclass(frozen=True, slots=True)
class ClusterState:
    """One read of the cluster: what Slurm said, when, and what the read cost."""

    nodes: tuple[SlurmNode, ...]
    partitions: tuple[SlurmPartition, ...]
    jobs: tuple[SlurmJob, ...]
    version: str
    read_at: float  # POSIX time the read began
    read_seconds: float = 0.0  # wall time of the read, commands and parsing
    cpu_seconds: float = 0.0  # CPU time of the commands and of the parsing
    #: what Slurm keeps private (PrivateData's words, lower case: jobs, users ...), which the
    #: published CEs heed (hosts/slurm_ces.py): the reads are root's, which Slurm does not filter
    private: frozenset[str] = frozenset()

    def node(self, name: str) -> SlurmNode | None:
        return next((n for n in self.nodes if n.name == name), None)

    def partition(self, name: str) -> SlurmPartition | None:
        return next((p for p in self.partitions if p.name == name), None)
