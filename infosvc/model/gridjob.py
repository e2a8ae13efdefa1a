"""Grid jobs (the grid JSON job description, version 2) as plain dataclasses.

Names follow the description: a `GridJob` has `tasks`, each a `GridTask` whose fields are the
task description's attributes with every rule of the description already applied (environment
names upper-cased, files resolved to URLs against the right default_storage_base, requirements
merged task over job). `Constraints` is what the requirements ask of a computing element and a
host, and `admits` says why a CE / host is refused, in the user's words.

Stored task records (`TaskRecord`, `StateChange`) carry a task's state history: new, pending,
running, paused, finished, aborted. `transition` is the only way a record moves on.

The codec (infosvc/codec/gridjob_json.py) builds these from a validated document; nothing here
validates. A later step maps a GridJob onto the service's one Job model (infosvc/model/job.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from infosvc.model.hostid import canonical

#: The description's schema version.
VERSION = 2

#: The LRMS type that the fork rule is about (compared without regard to case).
FORK = "Fork"

#: Exit codes are read as unsigned integers of this many bits.
EXIT_CODE_BITS = 32


@dataclass(frozen=True, slots=True)
class Requirements:
    """Resource requirements as written: None means "not given" (which admits any resource).

    `fork` keeps None apart from False so that a task's explicit `"fork": false` replaces a job's
    `"fork": true` when the two are merged.
    """

    hostname: tuple[str, ...] | None = None
    lrms: str | None = None
    fork: bool | None = None
    queue: str | None = None

    def merged(self, over: Requirements) -> Requirements:
        """These requirements updated with `over`'s, key by key (the task's over the job's)."""
        return Requirements(
            hostname=over.hostname if over.hostname is not None else self.hostname,
            lrms=over.lrms if over.lrms is not None else self.lrms,
            fork=over.fork if over.fork is not None else self.fork,
            queue=over.queue if over.queue is not None else self.queue,
        )

    def constraints(self) -> Constraints:
        return Constraints(hostnames=self.hostname, lrms=self.lrms, fork=bool(self.fork), queue=self.queue)


@dataclass(frozen=True, slots=True)
class Constraints:
    """What a task asks of the CE and host it runs on (from its merged requirements).

    hostnames: the hosts it may run on (None: any); lrms: the CE's LRMS type (None: any);
    fork: whether a Fork CE may be chosen without lrms naming Fork; queue: the CE's queue (None: any).
    """

    hostnames: tuple[str, ...] | None = None
    lrms: str | None = None
    fork: bool = False
    queue: str | None = None


# Host names compare as DNS names do: without regard to case, a final dot ignored (as the matcher).
_host_key = canonical


def admits(constraints: Constraints, ce_lrms_type: str, ce_queue: str, host_name: str) -> list[str]:
    """Why a task with `constraints` may not run on `host_name` behind a CE of LRMS type
    `ce_lrms_type` and queue `ce_queue`, in the user's words; [] if it may.

    LRMS types and host names compare without regard to case, queue names exactly (batch systems
    treat them so). The fork rule: a Fork CE is chosen only when `lrms` names Fork or `fork` is
    true; `fork` allows Fork, it never requires it.
    """
    reasons: list[str] = []
    if constraints.hostnames is not None and _host_key(host_name) not in {_host_key(h) for h in constraints.hostnames}:
        reasons.append(f"host {host_name} is not among the hosts the task may run on ({', '.join(constraints.hostnames)})")
    ce_is_fork = ce_lrms_type.casefold() == FORK.casefold()
    if constraints.lrms is not None and constraints.lrms.casefold() != ce_lrms_type.casefold():
        reasons.append(f"the task asks for LRMS {constraints.lrms}; this CE's LRMS is {ce_lrms_type}")
    elif ce_is_fork and constraints.lrms is None and not constraints.fork:
        reasons.append("this CE's LRMS is Fork, which the task may use only if its requirements name lrms Fork "
                       "or set fork to true")
    if constraints.queue is not None and constraints.queue != ce_queue:
        reasons.append(f"the task asks for queue {constraints.queue}; this CE's queue is {ce_queue}")
    return reasons


@dataclass(slots=True)
class GridTask:
    """One task with its description resolved.

    `stdin`, `stdout`, `stderr` and the values of `input_files` / `output_files` (keyed by the path
    on the compute node) are URLs: paths were resolved against `default_storage_base` (the
    task's, else the job's); where neither gives one, path-valued entries are left out and said
    so in `ignored`. `requirements` are the job's updated with the task's. `definition` is the
    task description as the user wrote it (JSON text), for the task record.
    """

    id: str
    executable: str
    arguments: tuple[str, ...] = ()
    environment: dict[str, str] = field(default_factory=dict)
    count: int | None = None
    stdin: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    input_files: dict[str, str] = field(default_factory=dict)
    output_files: dict[str, str] = field(default_factory=dict)
    default_storage_base: str | None = None
    max_success_code: int = 0
    requirements: Requirements = field(default_factory=Requirements)
    description: str | None = None
    meta: dict[str, Any] | None = None
    ignored: tuple[str, ...] = ()
    definition: str = ""

    @property
    def mpi(self) -> bool:
        """A count above 1 makes an MPI task; any other count, or none, does not."""
        return self.count is not None and self.count > 1

    @property
    def processors(self) -> int:
        """How many processors the task takes: its count, at least 1."""
        return max(self.count or 1, 1)

    @property
    def constraints(self) -> Constraints:
        return self.requirements.constraints()

    def succeeded(self, exit_code: int) -> bool:
        """Whether `exit_code` counts as a normal end: read as unsigned, at most max_success_code."""
        return exit_code % (1 << EXIT_CODE_BITS) <= self.max_success_code


@dataclass(slots=True)
class GridJob:
    """A grid job: its tasks, in the order given, ids unique; and what the tasks share as written."""

    tasks: tuple[GridTask, ...]
    default_storage_base: str | None = None
    requirements: Requirements = field(default_factory=Requirements)
    version: int = VERSION

    def task(self, task_id: str) -> GridTask:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(task_id)


class TaskState(StrEnum):
    """The states of a stored task (the record schema's enum)."""

    NEW = "new"
    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"
    ABORTED = "aborted"


#: Where a task may go from each state. finished and aborted are final. A paused task goes back
#: to running (resumed in place) or to pending (requeued); a pending task may be held (paused).
TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    TaskState.NEW: frozenset({TaskState.PENDING, TaskState.ABORTED}),
    TaskState.PENDING: frozenset({TaskState.RUNNING, TaskState.PAUSED, TaskState.ABORTED}),
    TaskState.RUNNING: frozenset({TaskState.PAUSED, TaskState.FINISHED, TaskState.ABORTED}),
    TaskState.PAUSED: frozenset({TaskState.RUNNING, TaskState.PENDING, TaskState.ABORTED}),
    TaskState.FINISHED: frozenset(),
    TaskState.ABORTED: frozenset(),
}


class TransitionError(ValueError):
    """A state change that the life cycle does not allow, or that goes back in time."""


@dataclass(frozen=True, slots=True)
class StateChange:
    """One entry of a task's state history: the state and when the task entered it (aware)."""

    s: TaskState
    ts: datetime


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """A stored task: its job's URI, its description (text), when it was made and last changed,
    and every state it has been in, the first `new`, the last the current one."""

    job: str
    definition: str
    created: datetime
    state: tuple[StateChange, ...]
    modified: datetime | None = None

    @property
    def current(self) -> TaskState:
        return self.state[-1].s


def _aware(now: datetime) -> datetime:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("a task record's times must carry a time zone")
    return now


def new_record(job_uri: str, definition: str, now: datetime) -> TaskRecord:
    """A task record in state new, made at `now`."""
    now = _aware(now)
    return TaskRecord(job=job_uri, definition=definition, created=now, state=(StateChange(TaskState.NEW, now),))


def transition(record: TaskRecord, state: TaskState | str, now: datetime) -> TaskRecord:
    """`record` moved to `state` at `now`: a new record, the history one entry longer.

    TransitionError if the life cycle does not allow the move (TRANSITIONS) or `now` is before
    the current state's time.
    """
    now = _aware(now)
    try:
        target = TaskState(state)
    except ValueError:
        raise TransitionError(f"{state!r} is not a task state (one of {', '.join(s.value for s in TaskState)})") from None
    current = record.state[-1]
    if target not in TRANSITIONS[current.s]:
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[current.s])) or "none: it is final"
        raise TransitionError(f"a {current.s.value} task cannot become {target.value} (allowed: {allowed})")
    if now < current.ts:
        raise TransitionError(f"{target.value} at {now.isoformat()} is before the task became "
                              f"{current.s.value} at {current.ts.isoformat()}")
    return replace(record, state=(*record.state, StateChange(target, now)), modified=now)
