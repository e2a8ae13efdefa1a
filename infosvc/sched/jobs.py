"""Jobs and tasks through their life cycle, as pure state changes with the clock passed in.

CCS states for jobs and tasks (NotSubmitted, Queued, Running, Finished, Failed, Canceled), mapped
to SSS Job State (Idle, Hold, Running, Suspended, Completed) and to GLUE CE job status (SUBMITTED,
WAITING, READY, SCHEDULED, RUNNING, ABORTED, DONE, CLEARED, CHECKPOINTED). Every change is an
`Event` (job, task or None, state, time, detail) that the queue stores; nothing here knows the
store, the hosts' names or HTTP.

A job the scheduler starts is Running from that moment with its allocation held; its tasks are
dispatched in order within the allocation, each when the tasks it depends on have finished and
one host of the allocation has room for it (CCS: tasks first come, first served, a task's
dependencies reorder them). A task with nothing to run finishes at dispatch. The job ends when
its last task ends: Finished if every task finished, else Failed; a job that runs until cancelled
keeps its allocation until it is cancelled or reaches its run time limit. At the limit a job is
Canceled (CCS cancels rather than let a job run past it), and so it is at its SSS Deadline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Final

from infosvc.model.ccsjob import JobState
from infosvc.model.snapshot import iso
from infosvc.sched.request import JobRequest

__all__ = ["ENDED", "Event", "JobRecord", "TaskRecord", "glue_status", "sss_state"]


ENDED: Final = frozenset({JobState.FINISHED, JobState.FAILED, JobState.CANCELED})


@dataclass(frozen=True, slots=True)
class Event:
    job: str
    task: int | None
    state: JobState
    at: float
    detail: str = ""


@dataclass(slots=True)
class TaskRecord:
    index: int
    state: JobState = JobState.QUEUED
    host: str | None = None
    #: when the scheduler dispatched it, when the executor said the program began, when it ended
    dispatched: float | None = None
    began: float | None = None
    ended: float | None = None
    exit_code: int | None = None
    attempts: int = 0


@dataclass(slots=True)
class JobRecord:
    id: str
    request: JobRequest
    submitted: float
    owner: str
    admin: bool = False
    group: str | None = None
    #: who submitted it: the token's digest, cut short (a submit token cancels only its own jobs)
    submitter: str = ""
    state: JobState = JobState.QUEUED
    #: what it waits for: a dependency, resources, a closed CE; or why it ended as it did
    reason: str = ""
    held: bool = False  # waiting on a dependency (SSS Hold)
    #: where it runs: host -> processors held there
    hosts: dict[str, int] = field(default_factory=dict)
    exclusive: bool = True
    memory_mb: float = 0.0
    started: float | None = None
    ended: float | None = None
    exit_code: int | None = None
    tasks: list[TaskRecord] = field(default_factory=list)
    #: the plan's word on it: when it is reserved to start, and where
    reserved_at: float | None = None
    reserved_hosts: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()  # hosts its requirements rule out, with why, for `why`
    #: the run time the `predictive` policy plans it with, from its owner's ended jobs (None: not predicted)
    predicted: float | None = None

    def __post_init__(self) -> None:
        if not self.tasks:
            self.tasks = [TaskRecord(task.index) for task in self.request.tasks]

    # --- what the policy reads (sched.policy.Queued) -------------------------------------

    @property
    def priority(self) -> int:
        return self.request.priority

    @property
    def estimate(self) -> float:
        return self.request.estimate

    @property
    def project(self) -> str:
        return self.request.project

    @property
    def holds(self) -> tuple[str, ...]:
        """The SSS Holds on it (User, System): it is not started while it has one."""
        return self.request.holds

    @property
    def limit_at(self) -> float:
        """When a running job is ended: its run time limit, or its Deadline when that comes first."""
        if self.started is None:
            return math.inf
        deadline = self.request.deadline
        ends = self.started + self.request.estimate
        return ends if deadline is None or deadline >= ends else deadline

    # --- changes decided on a trial copy, then adopted (a queue stores them in between) ------

    def trial(self) -> JobRecord:
        """A copy to decide a change on: its own tasks and hosts; the rest is shared (immutable)."""
        clone = replace(self, tasks=[replace(task) for task in self.tasks], hosts=dict(self.hosts))
        return clone

    def adopt(self, trial: JobRecord) -> None:
        """Become `trial` (this job's copy, changed and stored): every field taken as it is."""
        if trial.id != self.id:
            raise ValueError(f"job {self.id} cannot adopt a trial of job {trial.id}")
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(trial, name))

    # --- life cycle --------------------------------------------------------------------------

    def start(self, hosts: dict[str, int], exclusive: bool, memory_mb: float, now: float,
              limit: float | None = None) -> list[Event]:
        """Running on `hosts` from `now`; `limit`: the run time limit where it runs, when that is
        less than its own (a CE's MaxWallClockTime)."""
        if limit is not None and limit < self.request.estimate:
            self.request = replace(self.request, estimate=limit, asked_estimate=self.request.estimate)
        self.state, self.started, self.hosts = JobState.RUNNING, now, dict(hosts)
        self.exclusive, self.memory_mb, self.reason, self.held = exclusive, memory_mb, "", False
        self.reserved_at, self.reserved_hosts = None, ()
        events = [Event(self.id, None, JobState.RUNNING, now, "on " + ",".join(hosts))]
        return events + self.dispatch(now)

    def dispatch(self, now: float) -> list[Event]:
        """The tasks that can start now, each on the first host of the allocation with room; the
        job's end when none is left."""
        events: list[Event] = []
        while True:
            step = self._dispatch_once(now)
            events.extend(step)
            if not any(e.state is not JobState.RUNNING for e in step):
                break  # nothing finished or was cancelled at once: nothing more is released
        return events + self._maybe_end(now)

    def _dispatch_once(self, now: float) -> list[Event]:
        if self.state is not JobState.RUNNING:
            return []
        used: dict[str, int] = {host: 0 for host in self.hosts}
        for task in self.tasks:
            if task.state is JobState.RUNNING and task.host in used:
                used[task.host] += self.request.tasks[task.index].processors
        events: list[Event] = []
        for task in self.tasks:
            if task.state is not JobState.QUEUED:
                continue
            spec = self.request.tasks[task.index]
            before = [self.tasks[i] for i in spec.after]
            if any(other.state in (JobState.FAILED, JobState.CANCELED) for other in before):
                task.state, task.ended = JobState.CANCELED, now
                events.append(Event(self.id, task.index, JobState.CANCELED, now, "a task it depends on did not finish"))
                continue
            if any(other.state is not JobState.FINISHED for other in before):
                continue
            host = next((h for h, held in self.hosts.items()
                         if held - used[h] >= min(spec.processors, held)), None)
            if host is None:
                continue
            used[host] += spec.processors
            task.state, task.host, task.dispatched, task.attempts = JobState.RUNNING, host, now, task.attempts + 1
            task.began = task.ended = task.exit_code = None
            events.append(Event(self.id, task.index, JobState.RUNNING, now, f"on {host}"))
            if not spec.executable:
                task.state, task.ended, task.exit_code = JobState.FINISHED, now, 0
                events.append(Event(self.id, task.index, JobState.FINISHED, now, "nothing to run"))
        return events

    def task_began(self, index: int, now: float) -> list[Event]:
        task = self.tasks[index]
        task.began = now
        return [Event(self.id, index, JobState.RUNNING, now, "the executor started it")]

    def task_ended(self, index: int, exit_code: int, now: float, why: str | None = None) -> list[Event]:
        """Task `index` ended with `exit_code`; `why` is the executor's word for a task that could
        not start or was stopped ("Stdin /x: permission denied as nobody"), kept as the job's reason."""
        task = self.tasks[index]
        task.ended, task.exit_code = now, exit_code
        task.state = JobState.FINISHED if exit_code == 0 else JobState.FAILED
        detail = f"exit code {exit_code}" + (f": {why}" if why else "")
        events = [Event(self.id, index, task.state, now, detail)]
        ended = events + self.dispatch(now)
        if why and self.state is JobState.FAILED:
            self.reason = f"{self.reason}; task {index}: {why}"
        return ended

    def _maybe_end(self, now: float) -> list[Event]:
        if self.state is not JobState.RUNNING or any(t.state in (JobState.QUEUED, JobState.RUNNING) for t in self.tasks):
            return []
        if self.request.run_until_cancelled:
            return []  # it holds its hosts until cancelled or its limit
        failed = [t for t in self.tasks if t.state is not JobState.FINISHED]
        codes = [t.exit_code for t in self.tasks if t.exit_code]
        self.exit_code = codes[0] if codes else 0
        state = JobState.FAILED if failed else JobState.FINISHED
        detail = f"{len(failed)} of {len(self.tasks)} tasks did not finish" if failed else "every task finished"
        return self.end(state, now, detail)

    def reach_limit(self, now: float) -> list[Event]:
        """The job's run time limit (or its Deadline) has come: CCS cancels it, whatever its tasks
        were doing."""
        deadline = self.request.deadline
        if deadline is not None and self.started is not None and deadline < self.started + self.estimate:
            return self.end(JobState.CANCELED, now, f"reached its Deadline ({iso(deadline)})")
        return self.end(JobState.CANCELED, now, f"reached its run time limit of {self.estimate:g} s")

    def end(self, state: JobState, now: float, detail: str) -> list[Event]:
        """The job ends (Finished, Failed, Canceled): its tasks still queued or running with it."""
        events = []
        for task in self.tasks:
            if task.state in (JobState.QUEUED, JobState.RUNNING):
                task.state, task.ended = JobState.CANCELED, now
                events.append(Event(self.id, task.index, JobState.CANCELED, now, detail))
        self.state, self.ended, self.reason, self.held = state, now, detail, False
        self.reserved_at, self.reserved_hosts = None, ()
        return events + [Event(self.id, None, state, now, detail)]

    def requeue(self, now: float, detail: str) -> list[Event]:
        """Back to the queue (its host failed under it): unfinished tasks run again; the allocation
        is released. Submission time is kept: it goes back to its place."""
        events = []
        for task in self.tasks:
            if task.state is JobState.RUNNING:
                task.state = JobState.QUEUED
                events.append(Event(self.id, task.index, JobState.QUEUED, now, detail))
        self.state, self.hosts, self.started, self.reason = JobState.QUEUED, {}, None, detail
        return events + [Event(self.id, None, JobState.QUEUED, now, detail)]

    def unstarted(self, now: float, timeout: float, counted_from: float) -> dict[str, list[int]]:
        """Host -> its tasks placed `timeout` seconds ago or more, counted from their placement or
        from `counted_from` (the service's start) when later, that no executor reported started."""
        late: dict[str, list[int]] = {}
        for task in self.tasks:
            if (task.state is JobState.RUNNING and task.began is None and task.host is not None
                    and max(task.dispatched or 0.0, counted_from) + timeout <= now):
                late.setdefault(task.host, []).append(task.index)
        return late

    def not_started(self, host: str, tasks: list[int], now: float, detail: str) -> list[Event]:
        """Tasks placed on `host` were not started by its executor in time (`detail` says so): the
        job goes back to the queue when every task it is running may be run again, else those
        tasks fail and the job with them (one of them may have started without a word)."""
        if all(self.request.tasks[t.index].rerunnable for t in self.tasks if t.state is JobState.RUNNING):
            return self.requeue(now, f"{detail}; requeued")
        events = []
        for index in tasks:
            task = self.tasks[index]
            if not self.request.tasks[index].rerunnable:
                task.state, task.ended = JobState.FAILED, now
                events.append(Event(self.id, index, JobState.FAILED, now, f"{detail} and the task is not rerunnable"))
        return events + self.end(JobState.FAILED, now, f"{detail}, and a task of the job is not rerunnable")

    def host_lost(self, host: str, now: float) -> list[Event]:
        """`host` became unreachable under this running job: rerunnable tasks on it are requeued
        with the job; a task that is not rerunnable fails, and with it the job."""
        lost = [t for t in self.tasks if t.state is JobState.RUNNING and t.host == host]
        if not lost:
            if self.state is JobState.RUNNING and host in self.hosts:
                return self.requeue(now, f"host {host} became unreachable")
            return []
        if all(self.request.tasks[t.index].rerunnable for t in lost):
            return self.requeue(now, f"host {host} became unreachable; rerunnable tasks requeued")
        events = []
        for task in lost:
            if not self.request.tasks[task.index].rerunnable:
                task.state, task.ended = JobState.FAILED, now
                events.append(Event(self.id, task.index, JobState.FAILED, now,
                                    f"host {host} became unreachable and the task is not rerunnable"))
        return events + self.end(JobState.FAILED, now, f"host {host} became unreachable under a task that is not rerunnable")


def sss_state(job: JobRecord) -> str:
    """SSS Job State: Idle (queued), Hold (a Hold on it, or waiting on a dependency), Running, Completed."""
    if job.state is JobState.QUEUED:
        return "Hold" if job.held or job.request.holds else "Idle"
    if job.state is JobState.RUNNING:
        return "Running"
    return "Completed" if job.state in ENDED else "Idle"


def glue_status(job: JobRecord) -> str:
    """GLUE CE job status: SUBMITTED (not yet submitted), WAITING (held or waiting in the queue),
    SCHEDULED (the head of the queue, reserved), RUNNING, DONE (finished), ABORTED (failed),
    CLEARED (cancelled). READY and CHECKPOINTED are not used: a job that can run is started."""
    match job.state:
        case JobState.NOT_SUBMITTED:
            return "SUBMITTED"
        case JobState.QUEUED:
            return "SCHEDULED" if job.reserved_at is not None else "WAITING"
        case JobState.RUNNING:
            return "RUNNING"
        case JobState.FINISHED:
            return "DONE"
        case JobState.FAILED:
            return "ABORTED"
        case _:
            return "CLEARED"
