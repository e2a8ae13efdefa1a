"""The what-if of `infosvc simulate --hosts N [--gpus-per-host G --gpu-jobs F --gpus-per-job K]`:
a trace replayed on a machine of hosts with GPUs, in simulated time, pure (no clock, no I/O).

An SWF trace knows processors only. The what-if splits the machine's processors over N hosts (the
first P mod N hosts one more than the others), gives each G GPUs, and lets a fraction F of the
trace's jobs ask K GPUs, chosen by job number (`asks_gpus`: a fixed hash, so a what-if is the same
run after run, and the jobs asking GPUs at F are among those asking at any larger F).

The machine is the service's own host pool (infosvc.sched.hosts.HostPool), the one its live queue
schedules on, not the trace's processor pool with a GPU count beside it: GPUs belong to hosts, and
a pooled count would let a job take its processors on one host and its GPUs on another, which no
site can do. Here a job asking K GPUs is placed only on hosts with K free and takes K on each host
it gets processors on, as the service places it. Every job shares hosts (not exclusive): a trace's
machine is interchangeable processors, and a job without GPUs may take free processors on any host.
So on one host, or under FCFS on any number, the host pool decides what the processor pool decides
(the tests hold it to that, start for start); EASY's extra processors are counted per host here (a
backfilled job must find them on the hosts it holds), so on several hosts EASY and predictive may
start a job later than on the pool, as on a real site. The conventions, the event order and the
policies are infosvc.sched.simulation's (docs/simulation.md)."""

from __future__ import annotations

import bisect
import heapq
import math
import time
from dataclasses import dataclass, field, fields
from typing import Callable, Final, Sequence

from infosvc.sched.draws import MAX_GPUS_PER_HOST
from infosvc.sched.hosts import Allocation, HostPool, HostSlot, WaitingJob
from infosvc.sched.ordering import guard_after, order_key
from infosvc.sched.policy import Backfilling, Plan, Policy, Running, resume, schedule
from infosvc.sched.prediction import UserHistory
from infosvc.sched.request import JobRequest
from infosvc.sched.simulation import BOUND_SECONDS, Options, Outcome, SimJob

#: The most hosts a what-if makes: ten times the largest machines' nodes (a host costs the pool
#: about 400 bytes and its passes time: a million is seconds and 0.4 GB)
MAX_HOSTS: Final = 1_000_000

__all__ = ["GpuFigures", "HostReplay", "WhatIf", "asks_gpus", "gpu_figures", "host_slots", "simulate_hosts"]

_MASK = (1 << 64) - 1


def asks_gpus(number: int, fraction: float) -> bool:
    """Whether trace job `number` is one of the `fraction` that ask GPUs: its number's splitmix64
    hash, read as a number in [0, 1), is below the fraction (0: none; 1: all)."""
    z = (number + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) / 2.0 ** 64 < fraction


@dataclass(frozen=True, slots=True)
class WhatIf:
    """The machine as `hosts` hosts of `gpus_per_host` GPUs each; the `gpu_jobs` fraction of the
    jobs (by `asks_gpus`) asking `gpus_per_job` GPUs on each of their hosts."""

    hosts: int
    gpus_per_host: int = 0
    gpu_jobs: float = 0.0
    gpus_per_job: int = 1

    def problem(self, processors: int) -> str | None:
        """What makes this what-if impossible on a machine of `processors`, in a user's words; None: nothing."""
        if not 1 <= self.hosts <= MAX_HOSTS:
            return f"--hosts must be 1 to {MAX_HOSTS:,}"
        if self.hosts > processors:
            return f"--hosts {self.hosts}: more hosts than the machine's {processors} processors (a host has one at least)"
        if not 0 <= self.gpus_per_host <= MAX_GPUS_PER_HOST:
            return f"--gpus-per-host must be 0 to {MAX_GPUS_PER_HOST}"
        if not 0.0 <= self.gpu_jobs <= 1.0:  # NaN too
            return "--gpu-jobs is a fraction of the jobs: 0 to 1"
        if self.gpu_jobs > 0 and self.gpus_per_host == 0:
            return "--gpu-jobs: jobs would ask GPUs of hosts that have none (say --gpus-per-host G)"
        if self.gpus_per_job < 1:
            return "--gpus-per-job must be at least 1"
        if self.gpu_jobs > 0 and self.gpus_per_job > self.gpus_per_host:
            return (f"--gpus-per-job {self.gpus_per_job}: more than a host's {self.gpus_per_host} GPUs "
                    "(no GPU job could ever start)")
        return None

    def gpus_of(self, job: SimJob) -> int:
        """The GPUs `job` asks on each of its hosts."""
        return self.gpus_per_job if self.gpu_jobs > 0 and asks_gpus(job.number, self.gpu_jobs) else 0


def host_slots(processors: int, what_if: WhatIf) -> list[HostSlot]:
    """The what-if's hosts: `processors` split over them, the first P mod N one more, each with its GPUs;
    named h0, h1, ... zero-padded, so that the resource sort (equal hosts: by id) is their order."""
    each, more = divmod(processors, what_if.hosts)
    width = len(str(what_if.hosts - 1))
    return [HostSlot(f"h{row:0{width}d}", each + (row < more), gpus=what_if.gpus_per_host)
            for row in range(what_if.hosts)]


@dataclass(slots=True)
class HostReplay:
    """Each started job's outcome, and beside it (the same index) the GPUs it held in all and the
    rows of the hosts it held."""

    slots: list[HostSlot]
    outcomes: list[Outcome] = field(default_factory=list)
    held: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)


def simulate_hosts(jobs: Sequence[SimJob], processors: int, policy: Policy, what_if: WhatIf,
                   progress: Callable[[int, float], None] | None = None, every: float = 1.0,
                   resumes: bool = True) -> HostReplay:
    """Each job's start by `policy` on the what-if's hosts (infosvc.sched.simulation.simulate's
    event loop: one pass at each instant with something waiting, none while fewer processors are
    free than the narrowest waiting job asks). Under EASY, while no job ends, a blocked pass is
    gone on from with the jobs arrived since (`policy.resume`, as the processor pool's replay
    does; `resumes=False` makes every pass whole, for the tests that hold the two the same): a
    long queue is otherwise read whole at every arrival."""
    problem = what_if.problem(processors)
    if problem is not None:
        raise ValueError(problem)
    if any(job.processors > processors or job.processors < 1 for job in jobs):
        raise ValueError(f"a job asks for more than the machine's {processors} processors, or for none")
    replay = HostReplay(host_slots(processors, what_if))
    pool = HostPool(replay.slots)
    options = Options()
    longest = 0.0  # the longest wait of a job started so far: the guard's bound follows it, as in the pool's replay
    predictive = policy is Policy.PREDICTIVE
    history = UserHistory()
    keys: list[tuple[float, float, str]] = []
    queue: list[WaitingJob] = []  # in the policy's order: arrival for fcfs and easy, the slack order for predictive
    trace_job: dict[str, SimJob] = {}
    running: dict[str, Running[Allocation]] = {}
    ends: list[tuple[float, str]] = []
    # how many waiting jobs ask each number of processors, and a heap of those numbers: with fewer
    # free than the narrowest asks, no pass can start anything, and none is run (simulation's shortcut)
    asking: dict[int, int] = {}
    sizes: list[int] = []
    # EASY's blocked pass to go on from while nothing ends (None: the next pass is whole), and the
    # jobs arrived since the last pass (EASY's order puts them after every job queued before)
    blocked: Backfilling[Allocation] | None = None
    fresh: list[WaitingJob] = []
    resumes = resumes and policy is Policy.EASY
    count, arrival, clock = len(jobs), 0, time.monotonic()
    while arrival < count or ends:
        next_end = ends[0][0] if ends else math.inf
        now = min(jobs[arrival].submitted if arrival < count else math.inf, next_end)
        while ends and ends[0][0] == now:  # completions first
            _, job_id = heapq.heappop(ends)
            pool.give(running.pop(job_id).allocation)
            done = trace_job.pop(job_id)
            history.record(done.user, done.run, done.estimate)
            blocked = None  # an end: the machine is no longer as the blocked pass left it
        while arrival < count and jobs[arrival].submitted == now:  # then arrivals
            job = jobs[arrival]
            arrival += 1
            trace_job[job.id] = job
            guess = history.predict(job.user, job.estimate) if predictive else math.nan
            request = JobRequest(job.id, "", min_processors=job.processors, max_processors=job.processors,
                                 estimate=job.estimate, exclusive=False, gpus=what_if.gpus_of(job))
            waiting = WaitingJob(job.id, 0, job.submitted, job.estimate, request, predicted=guess)
            key = order_key(options.order, waiting, now, options.slack_factor, options.max_slack) if predictive \
                else (job.submitted, 0.0, job.id)
            at = bisect.bisect(keys, key)
            keys.insert(at, key)
            queue.insert(at, waiting)
            fresh.append(waiting)
            if not asking.get(job.processors):
                heapq.heappush(sizes, job.processors)
                asking[job.processors] = 0
            asking[job.processors] += 1
        if not queue:
            continue
        while not asking[sizes[0]]:
            heapq.heappop(sizes)
        if pool.room() < sizes[0]:
            continue
        plan: Plan[Allocation]
        if blocked is not None:
            plan = resume(blocked, fresh, now)  # arrivals at one instant are in id order, as the queue has them
        else:
            plan = schedule(pool, running.values(), queue, now, policy, explain=False,
                            overdue_after=guard_after(longest, options.overdue_after, options.guard_fraction))
        blocked, fresh = plan.backfilling if resumes else None, []
        if not plan.starts:
            continue
        longest = max(longest, now - min(start.job.submitted for start in plan.starts))
        for start in plan.starts:
            entry: WaitingJob = start.job  # type: ignore[assignment]
            job = trace_job[entry.id]
            pool.take(start.allocation)  # refuses (ValueError) what would over-commit a host
            running[job.id] = Running(job.id, now, job.estimate, start.allocation, entry.predicted)
            heapq.heappush(ends, (now + job.run, job.id))
            replay.outcomes.append(Outcome(job, now, entry.predicted))
            replay.held.append((start.allocation.gpus * len(start.allocation.rows), start.allocation.rows))
            asking[job.processors] -= 1
        started = {start.job.id for start in plan.starts}
        kept = [at for at, waiting in enumerate(queue) if waiting.id not in started]
        keys, queue = [keys[at] for at in kept], [queue[at] for at in kept]
        if progress is not None and time.monotonic() - clock >= every:
            clock = time.monotonic()
            progress(len(replay.outcomes), now)
    return replay


@dataclass(frozen=True, slots=True)
class GpuFigures:
    """What a GPU what-if adds to the summary: the GPUs, their use, and the jobs asking them
    against the rest (waits and bounded slowdowns as docs/simulation.md defines them)."""

    hosts: int
    gpus: int
    gpu_jobs: int
    gpu_utilization: float
    gpu_jobs_mean_wait_seconds: float
    other_jobs_mean_wait_seconds: float
    gpu_jobs_max_wait_seconds: float
    other_jobs_max_wait_seconds: float
    gpu_jobs_mean_bounded_slowdown: float
    other_jobs_mean_bounded_slowdown: float

    def as_json(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def gpu_figures(replay: HostReplay) -> GpuFigures:
    """The GPU figures of a replay: GPU utilization = sum(run x GPUs held) / (GPUs x makespan)."""
    gpus = sum(slot.gpus for slot in replay.slots)
    waits: tuple[list[float], list[float]] = ([], [])
    slowdowns: tuple[list[float], list[float]] = ([], [])
    busy = 0.0
    for (job, start, _), (held, _rows) in zip(replay.outcomes, replay.held):
        wait = start - job.submitted
        waits[held > 0].append(wait)
        slowdowns[held > 0].append(max(1.0, (wait + job.run) / max(job.run, BOUND_SECONDS)))
        busy += job.run * held
    makespan = (max(start + job.run for job, start, _ in replay.outcomes)
                - min(job.submitted for job, _, _ in replay.outcomes)) if replay.outcomes else 0.0

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    return GpuFigures(len(replay.slots), gpus, len(waits[1]), busy / (gpus * makespan) if gpus and makespan > 0 else 0.0,
                      mean(waits[1]), mean(waits[0]), max(waits[1], default=0.0), max(waits[0], default=0.0),
                      mean(slowdowns[1]), mean(slowdowns[0]))
