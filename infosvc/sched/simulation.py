"""A workload replayed through the service's own scheduler (infosvc.sched.policy.schedule) in
simulated time: the discrete-event loop of `infosvc simulate`, pure (no clock, no I/O).

The conventions are the design's (docs/simulation.md), so that two correct simulators give the same schedule:
- processors: requested (SWF field 8) if > 0, else allocated (field 5); estimate: requested time
  (field 9) if > 0, else the run time (field 4); run time: min(run time, estimate), as a job is
  killed at its limit. Jobs with run time <= 0, processors <= 0, or more processors than the
  machine has are skipped (and counted).
- Events at one instant: all completions, then all arrivals, then one scheduling pass.
- The queue is ordered by submit time, then job id.
- wait = start - submit; bounded slowdown = max(1, (wait + run) / max(run, 10)); utilization =
  sum(run x processors) / (machine processors x makespan); makespan = last end - first submit.
"""

from __future__ import annotations

import functools
import heapq
import math
import operator
import time
from typing import Callable, Collection, Iterable, NamedTuple, Protocol, Sequence

from infosvc.codec.swf import SwfRecord
from infosvc.sched.policy import Backfilling, Plan, Policy, Queued, Running, Start, resume, schedule, starts_now
from infosvc.sched.pool import ProcessorPool
from infosvc.sched.summary import BOUND_SECONDS, Summary, summarize
from infosvc.sched.ordering import GUARD_FRACTION, MAX_SLACK, OVERDUE_AFTER, SLACK_FACTOR, Order


__all__ = ["BOUND_SECONDS", "Outcome", "SimJob", "Summary", "Trace", "jobs_of", "simulate", "summarize", "trace_jobs"]


class SimJob(NamedTuple):
    """A trace's job as the scheduler reads it (a Queued): `id` orders jobs of one submit
    time by their number. A tuple, as `Outcome`: a trace makes them by the hundred thousand, and a
    tuple is made in one call where a frozen dataclass sets each field in turn (a third of a
    small trace's simulation, measured)."""

    number: int
    submitted: float
    processors: int
    estimate: float
    run: float
    id: str = ""
    priority: int = 0
    #: SWF field 12, whose history predicts the job's run time (`predictive`); -1: unknown
    user: int = -1

    @classmethod
    def of(cls, number: int, submitted: float, processors: int, estimate: float, run: float, user: int = -1) -> SimJob:
        return cls(number, submitted, processors, estimate, run, _job_id(number), 0, user)


#: Added to a job number for its id: the trace reader holds numbers below 2**53 either way, so
#: every id is 17 digits with no padding to make, and the ids' text order (the queue's tie-break
#: on equal submit times) is the numbers' order, negative ones included (the number zero-padded
#: put -1 before -2)
_ID_OFFSET = 2 * 10**16


def _job_id(number: int) -> str:
    return str(number + _ID_OFFSET)


class Outcome(NamedTuple):
    job: SimJob
    start: float
    #: the run time `predictive` planned it with (NaN for the other policies)
    predicted: float = math.nan

    @property
    def end(self) -> float:
        return self.start + self.job.run

    @property
    def wait(self) -> float:
        return self.start - self.job.submitted


class Trace:
    """The jobs to simulate, in queue order, and how many the conventions skipped. No class of
    this module is a dataclass (a named tuple, or slots): infosvc/sched/policy.py says why."""

    __slots__ = ("jobs", "skipped")

    def __init__(self) -> None:
        self.jobs: list[SimJob] = []
        self.skipped = 0


def jobs_of(records: Iterable[tuple[int, float, float, int, int, float] | tuple[int, float, float, int, int, float, int]],
            processors: int) -> Trace:
    """(number, submit, run time, allocated, requested processors, requested time[, user]) per
    trace job, read by the conventions for a machine of `processors`."""
    return _jobs(((*r, -1) if len(r) < 7 else r for r in records), processors)


def _jobs(records: Iterable[tuple[int, float, float, int, int, float, int]], processors: int) -> Trace:
    trace = Trace()
    jobs, make = trace.jobs, _SIM_JOB
    for number, submitted, run_time, allocated, requested, requested_time, user in records:
        wanted = requested if requested > 0 else allocated
        estimate = requested_time if requested_time > 0 else run_time
        run = run_time if run_time < estimate else estimate
        if run <= 0 or wanted <= 0 or wanted > processors:
            trace.skipped += 1
            continue
        jobs.append(make((number, submitted, wanted, estimate, run, str(number + _ID_OFFSET), 0, user)))
    if len(set(map(_ID, jobs))) < len(jobs):
        trace.jobs = jobs = _told_apart(jobs)
    jobs.sort(key=_QUEUE_ORDER)
    return trace


def _told_apart(jobs: list[SimJob]) -> list[SimJob]:
    """The jobs, a number's second and later jobs (in the trace's order) given ids of their own:
    the queue and the replay key their maps by id, and a trace may repeat a number (another
    simulator reads such jobs as so many jobs). `.k` sorts after its number and before the next."""
    seen: dict[str, int] = {}
    apart = []
    for job in jobs:
        k = seen.get(job.id, 0)
        seen[job.id] = k + 1
        apart.append(job._replace(id=f"{job.id}.{k:09d}") if k else job)  # fixed width: .10 after .9
    return apart


#: A SimJob of its fields, made in C (SimJob(...) is a Python call per job; the id as `_job_id`)
_SIM_JOB = functools.partial(tuple.__new__, SimJob)
#: A SimJob's place in the queue: its submit time, then its id
_QUEUE_ORDER = operator.itemgetter(1, 5)
_PROCESSORS, _SUBMITTED = operator.attrgetter("processors"), operator.attrgetter("submitted")
_ID = operator.itemgetter(5)
#: What `jobs_of` reads of a SwfRecord: job, submit, run time, allocated and requested
#: processors, requested time, user (picked in C: this runs once per trace line)
_JOB_FIELDS = operator.itemgetter(0, 1, 3, 4, 7, 8, 11)


def trace_jobs(records: Iterable[SwfRecord], processors: int) -> Trace:
    """A trace's records (infosvc.codec.swf) read by the conventions, as `jobs_of`."""
    return _jobs(map(_JOB_FIELDS, records), processors)


def simulate(jobs: Sequence[SimJob], processors: int, policy: Policy,
             progress: Callable[[int, float], None] | None = None, every: float = 1.0) -> list[Outcome]:
    """Each job's start, by `policy` on a machine of `processors`; `progress(started, now)` is
    called about every `every` seconds of real time."""
    widths = list(map(_PROCESSORS, jobs))  # read in C: a trace is tens of thousands of jobs
    if widths and (max(widths) > processors or min(widths) < 1):
        raise ValueError(f"a job asks for more than the machine's {processors} processors, or for none")
    if policy is Policy.PREDICTIVE:
        return simulate_predictive(jobs, processors, Options(), progress, every)
    return _replay(jobs, processors, _Arrivals(policy), progress, every)


class Options(NamedTuple):
    """What `predictive` uses (each can be turned off to measure what it buys: bench/predictive.py)."""

    #: predict run times from each user's history (else every prediction is the estimate)
    predictions: bool = True
    order: Order = Order.SLACK
    slack_factor: float = SLACK_FACTOR
    max_slack: float = MAX_SLACK
    #: the guard: a job waiting this long is served in EASY's order (infosvc/sched/ordering.py) ...
    overdue_after: float = OVERDUE_AFTER
    #: ... or this part of the longest wait so far, if longer (0: `overdue_after` alone)
    guard_fraction: float = GUARD_FRACTION


class Waiting(NamedTuple):
    """A queued trace job as `predictive` reads it: the job, and its prediction made at submission."""

    id: str
    priority: int
    submitted: float
    estimate: float
    processors: int
    predicted: float
    job: SimJob


#: (now, the reserved head, its guaranteed start) at each pass: what the starvation tests check
Observer = Callable[[float, Waiting, float], None]


def simulate_predictive(jobs: Sequence[SimJob], processors: int, options: Options,
                        progress: Callable[[int, float], None] | None = None, every: float = 1.0,
                        observe: Observer | None = None) -> list[Outcome]:
    """`simulate` by `predictive`: each job predicted at its submission from its user's history of
    ended jobs (infosvc/sched/prediction.py), the queue in `options.order` (kept sorted by its
    fixed keys; sorted each pass for the orders that change with the clock), one pass of
    `policy.schedule` per instant as `simulate`. `observe(now, head, at)` is told each pass's
    reserved head and its guaranteed start."""
    from infosvc.sched.slackqueue import SlackQueue  # here: fcfs and easy never import it

    return _replay(jobs, processors, SlackQueue(options, observe), progress, every)


class _Queue(Protocol):
    """The waiting jobs of one replay, as its policy reads them: what differs between the policies'
    event loops (the loop itself, `_replay`, is one)."""

    #: whether `ended` is to be told each end (else it is not called: a call per job saved)
    learns: bool
    policy: Policy
    #: the waiting jobs by id, where the queue is no more than that (FCFS, EASY): the loop then
    #: adds and removes them itself and runs `policy` on them, and `arrive`, `plan`, `started` and
    #: `leave` are not called (a call per job saved each, a tenth of a small trace's replay)
    arrivals: dict[str, SimJob] | None

    def arrive(self, job: SimJob, now: float) -> None: ...

    def ended(self, user: int, run: float, estimate: float) -> None:
        """A job of `user` and kill limit `estimate` ended after `run` seconds."""

    def plan(self, pool: ProcessorPool, running: Collection[Running[int]], now: float) -> Plan[int]: ...

    def started(self, entry: Queued) -> tuple[SimJob, float]:
        """The trace job a start of the plan is, and the run time it was planned with (NaN: its estimate)."""
        ...

    def leave(self, starts: list[Start[int]]) -> None:
        """The plan's starts leave the queue."""


class _Arrivals:
    """FCFS and EASY: the trace jobs themselves, in arrival order (the trace's queue order)."""

    learns = False

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.jobs: dict[str, SimJob] = {}
        self.arrivals: dict[str, SimJob] | None = self.jobs

    def arrive(self, job: SimJob, now: float) -> None:
        self.jobs[job.id] = job

    def ended(self, user: int, run: float, estimate: float) -> None:
        pass

    def plan(self, pool: ProcessorPool, running: Collection[Running[int]], now: float) -> Plan[int]:
        return schedule(pool, running, self.jobs.values(), now, self.policy, explain=False)

    def started(self, entry: Queued) -> tuple[SimJob, float]:
        return entry, math.nan  # type: ignore[return-value]

    def leave(self, starts: list[Start[int]]) -> None:
        for start in starts:
            del self.jobs[start.job.id]


def _replay(jobs: Sequence[SimJob], processors: int, queue: _Queue,
            progress: Callable[[int, float], None] | None, every: float) -> list[Outcome]:
    """The discrete-event loop: at each instant, completions, then arrivals, then one pass of the
    queue's policy, whose starts take their processors until they end (at start + run)."""
    pool = ProcessorPool.empty(processors)
    # How many queued jobs ask each number of processors, and a heap of those numbers: with fewer
    # free than the narrowest asks, no policy can start anything, and the pass is skipped (the same
    # decisions, far fewer passes; FCFS's too while its head does not fit). A heap, not a scan up the counts: a scan costs up to the
    # machine's processors each time the queue empties, which on a large, lightly loaded machine is
    # nearly every pass.
    asking: dict[int, int] = {}
    sizes: list[int] = []  # a heap of the numbers asked; a number no longer asked leaves when it comes to the top
    running: dict[str, Running[int]] = {}
    ends: list[tuple[float, str, int, float]] = []  # (end, job id, user, run): a heap
    outcomes: list[Outcome] = []
    push, pop, learns, arrivals, policy = heapq.heappush, heapq.heappop, queue.learns, queue.arrivals, queue.policy
    inf, nan, record, new = math.inf, math.nan, outcomes.append, object.__new__
    fcfs = policy is Policy.FCFS and arrivals is not None
    head_wants = 0  # the processors FCFS's head asks (0: not read since the last starts)
    deleted = 0  # jobs deleted from `arrivals` since it was last copied
    submits = list(map(_SUBMITTED, jobs))
    submits.append(inf)
    arrival = waiting = 0
    popped = False  # whether the pass's one start was popped off the queue already (a lone job's pass)
    # A blocked EASY pass's state (policy.resume), and the first job that arrived after it: while
    # no job ends, the next pass is that one's, gone on with the jobs arrived since
    backfilling: Backfilling[int] | None = None
    since = 0
    # the next arrival's and the next end's times, kept as they change (not read again each instant)
    next_submit, next_end = submits[0], inf
    clock = time.monotonic()
    while True:
        now = next_submit if next_submit < next_end else next_end
        if now == inf:
            break
        while next_end == now:  # completions first
            _, job_id, user, run = pop(ends)
            done = running.pop(job_id)
            pool.free += done.allocation  # the pool's own give, without its call and check
            if learns:
                queue.ended(user, run, done.estimate)
            next_end = ends[0][0] if ends else inf
            backfilling = None  # an end: the machine is no longer as the last pass left it
        while next_submit == now:  # then arrivals
            job = jobs[arrival]
            # a SimJob's fields by place, here and below: a named tuple's field read by name is a
            # descriptor call, and the loop reads a job's fields a dozen times (a twentieth of a replay)
            if arrivals is not None:
                arrivals[job[5]] = job
            else:
                queue.arrive(job, now)
            wanted = job[2]
            asked = asking.get(wanted, 0)
            if not asked:
                push(sizes, wanted)
            asking[wanted] = asked + 1
            arrival += 1
            waiting += 1
            next_submit = submits[arrival]
        if not waiting:
            continue
        if waiting == 1 and arrivals is not None:
            # A queue of one job: the pass is the policies' first rule alone (policy.starts_now:
            # it starts if it fits, and else nothing can), applied here without the rest of a pass
            # (a copy of the pool, a Plan, a Start) or the sizes below. A lightly loaded machine's
            # passes are nearly all of this kind. (The sizes it leaves unasked leave the heap later.)
            lone_id, lone = arrivals.popitem()  # popped, not deleted: the dict keeps no deleted entry
            taken = starts_now(pool, lone)
            if taken is None:
                arrivals[lone_id] = lone
                continue
            started: list[tuple[Queued, int]] = [(lone, taken)]
            backfilling, since, popped = None, arrival, True
        else:
            while not asking[sizes[0]]:
                pop(sizes)
            if pool.free < sizes[0]:
                continue
            if fcfs:  # FCFS starts nothing while its head does not fit
                if not head_wants:
                    head_wants = next(iter(arrivals.values()))[2]  # type: ignore[union-attr]
                if pool.free < head_wants:
                    continue
            if backfilling is not None:
                plan = resume(backfilling, jobs[since:arrival], now)
            elif arrivals is not None:
                plan = schedule(pool, running.values(), arrivals.values(), now, policy, explain=False)
            else:
                plan = queue.plan(pool, running.values(), now)
            backfilling, since = plan.backfilling, arrival
            starts = plan.starts
            if not starts:
                continue
            started, popped = list(map(_STARTED, starts)), False
            if arrivals is None:
                queue.leave(starts)
        for queued, taken in started:
            if arrivals is not None:
                job, planned = queued, nan  # type: ignore[assignment]  # FCFS and EASY plan the SimJobs themselves
                if not popped:
                    del arrivals[job[5]]
            else:
                job, planned = queue.started(queued)
            _, _, wanted, estimate, run, job_id, _, user = job
            pool.free -= taken  # the plan was made on this pool: it fits
            asking[wanted] -= 1
            entry = running[job_id] = new(Running)  # Running(...) without a frame for its __init__
            entry.id, entry.started, entry.estimate, entry.allocation, entry.predicted = job_id, now, estimate, taken, planned
            push(ends, (now + run, job_id, user, run))
            record(_OUTCOME((job, now, planned)))
        next_end, head_wants = ends[0][0], 0  # FCFS's head: the first job the pass did not start, read when asked
        waiting -= len(started)
        if arrivals is not None and not popped:
            deleted += len(started)
            if deleted > waiting + 32:
                # A dict's deleted entries stay until it resizes, and every pass's iteration of the
                # queue skips them from its start: more of them than jobs, and it is copied without.
                arrivals, deleted = dict(arrivals), 0
        if progress is not None and time.monotonic() - clock >= every:
            clock = time.monotonic()
            progress(len(outcomes), now)
    return outcomes


#: A plan's start as (the job, its processors), read in C
_STARTED = operator.attrgetter("job", "allocation")
#: An Outcome of its fields, made in C (Outcome(...) is a Python call per job)
_OUTCOME = functools.partial(tuple.__new__, Outcome)
