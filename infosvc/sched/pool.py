"""A machine that is a pool of interchangeable processors: what a workload trace describes (one
number of processors, no hosts), and what `infosvc simulate` schedules on. An allocation is a
number of processors."""

from __future__ import annotations

from infosvc.sched.policy import Machine, Queued, Slotted


class ProcessorPool(Slotted):
    """`free` of `size` processors are free now. A plain class, not a dataclass: `infosvc
    simulate` imports no dataclass (infosvc/sched/policy.py says why)."""

    __slots__ = ("size", "free")

    def __init__(self, size: int, free: int) -> None:
        self.size, self.free = size, free

    @classmethod
    def empty(cls, size: int) -> ProcessorPool:
        return cls(size, size)

    def place(self, job: Queued, within: Machine[int] | None = None) -> int | None:
        wanted = getattr(job, "processors", None)
        if within is None and type(wanted) is int and 0 < wanted:  # the common case: a pass asks this often
            return wanted if wanted <= self.free else None
        if type(wanted) is not int or wanted < 1:
            wanted = _processors(job)
        if within is None:
            return wanted if wanted <= self.free else None
        limit = _free_of(within)
        return wanted if wanted <= self.free and wanted <= limit else None

    def take(self, allocation: int) -> None:
        if allocation > self.free:
            raise ValueError(f"taking {allocation} processors of {self.free} free")
        self.free -= allocation

    def give(self, allocation: int) -> None:
        if self.free + allocation > self.size:
            raise ValueError(f"giving back {allocation} processors with {self.free} of {self.size} free")
        self.free += allocation

    def copy(self) -> ProcessorPool:
        # made without __init__'s call: every pass makes one, a simulation tens of thousands
        pool = _new(ProcessorPool)
        pool.size, pool.free = self.size, self.free
        return pool

    def room(self) -> int:
        return self.free

    def describe_shortfall(self, job: Queued) -> str:
        wanted = _processors(job)
        if wanted > self.size:
            return f"needs {wanted} processors; the machine has {self.size}"
        return f"waiting for {wanted} processors, {self.free} free"


def _processors(job: Queued) -> int:
    processors = getattr(job, "processors", None)
    if not isinstance(processors, int) or processors < 1:
        raise TypeError(f"job {job.id} asks for no number of processors")
    return processors


def _free_of(machine: Machine[int]) -> int:
    if not isinstance(machine, ProcessorPool):
        raise TypeError("a processor pool plans only within another processor pool")
    return machine.free


_new = object.__new__
