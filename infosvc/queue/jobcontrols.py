"""What a site's users and administrators change on a job after it is filed, as `scancel` and
`scontrol hold`, `release`, `requeue` and `update priority` do for Slurm: a cancel, SSS Holds put
on and taken off, a running job sent back to the queue, an administrator's priority. And what the SSS Job's own
controls (Hold, EligibleTime, Deadline) ask of a submission: who may file a System hold, a
Deadline already past, and a warning for a Deadline the queue cannot meet.

Each change is decided here (may this caller make it, on a job in this state?) and made by the
queue (`JobQueue.alter`): stored with an event before it is answered, and so kept across restarts.
Who may: an administrator any job; a submit token the jobs it submitted, and a token bound to a
user that user's jobs. A User hold is the owner's to put on and take off; a System hold an
administrator's only. No HTTP here: web/jobcontrols.py is the shell.

How many: each control is an event kept with the job, so a job takes MAX_CONTROLS of them (by
anyone) and then no more but an administrator's; a release is always taken (it only undoes a
hold, and a job has two at the most). A requeue runs the job's tasks again: its users requeue it
until a task has run MAX_RUNS times; then only an administrator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Final, Iterable, Mapping, Sequence

from infosvc.errors import Conflict, Forbidden, Invalid
from infosvc.model.ccsjob import JobState
from infosvc.model.snapshot import iso
from infosvc.queue.cestate import CEFigures
from infosvc.queue.upkeep import held_reason
from infosvc.sched.jobs import ENDED, Event, JobRecord
from infosvc.sched.holds import HOLDS, hold_name
from infosvc.sched.request import PRIORITIES, JobRequest, priority_rank

__all__ = ["CONTROL_EVENTS", "MAX_CONTROLS", "MAX_RUNS", "Actor", "Change", "cancel", "deadline_note", "hold",
           "note_deadlines", "priority", "release", "requeue", "submission_checks", "within_bound"]

#: A change of one job decided on its trial copy: the events it makes.
Change = Callable[[JobRecord], list[Event]]
#: The admin-only hold.
SYSTEM = "System"
#: The controls a job takes before only an administrator's are (500 hold and release cycles by an
#: owner had left 1,002 events, 3.9 MiB of store, for one job): a bound no real use comes near.
MAX_CONTROLS: Final = 100
#: The runs of a task after which its job's users no longer requeue it (Slurm's MaxBatchRequeue,
#: for its own requeues, is 5).
MAX_RUNS: Final = 10
#: The details of the controls' events, as the store counts them (SQL LIKE): those made below.
CONTROL_EVENTS: Final = ("% hold put on by %", "% hold released by %", "requeued by %", "priority set to % by %")


@dataclass(frozen=True, slots=True)
class Actor:
    """Who asks: an administrator or not, the submitter digest of its token (as a job keeps it),
    the user its token is bound to (None: none), and the name its events carry."""

    admin: bool
    submitter: str
    user: str | None
    name: str


def _may_change(job: JobRecord, who: Actor, what: str) -> None:
    if who.admin or job.submitter == who.submitter or (who.user is not None and who.user == job.owner):
        return
    raise Forbidden(f"job {job.id} is {job.owner}'s, submitted with another token: this token may not {what} it",
                    "an admin token may change any job")


def _named_hold(text: str, who: Actor) -> str:
    name = hold_name(text)
    if name is None:
        raise Invalid(f"{text[:40]!r} is no hold", f"one of {', '.join(HOLDS)}")
    if name == SYSTEM and not who.admin:
        raise Forbidden("a System hold is an administrator's to put on and take off", "ask with an admin token")
    return name


def _ordered(holds: Iterable[str]) -> tuple[str, ...]:
    present = set(holds)
    return tuple(name for name in HOLDS if name in present)


def within_bound(job: JobRecord, who: Actor, made: int) -> None:
    """Refuse a control of a job that has had `made` (the store's count of CONTROL_EVENTS) when
    that is MAX_CONTROLS or more, unless an administrator asks."""
    if who.admin or made < MAX_CONTROLS:
        return
    raise Conflict(f"job {job.id} has had {made} controls: a job takes {MAX_CONTROLS} controls (hold, requeue, "
                   f"priority, release), then only an administrator's", "an admin token may still change it")


def cancel(job: JobRecord, who: Actor, now: float) -> Change:
    """Cancel a job not ended: an administrator any, a submit token its own (as `hold`)."""
    _may_change(job, who, "cancel")
    if job.state in ENDED:
        raise Invalid(f"job {job.id} has already ended ({job.state.value})")
    return lambda trial: trial.end(JobState.CANCELED, now, "canceled")


def hold(job: JobRecord, text: str, who: Actor, now: float) -> Change | None:
    """Put hold `text` (User, System) on a queued job: it is not started until released. None when
    it already has that hold (nothing to store)."""
    name = _named_hold(text, who)
    _may_change(job, who, "hold")
    if job.state is not JobState.QUEUED:
        raise Conflict(f"job {job.id} is {job.state.value}: only a queued job is held",
                       "a running job goes back to the queue with requeue, and may then be held")
    if name in job.holds:
        return None

    def change(trial: JobRecord) -> list[Event]:
        trial.request = replace(trial.request, holds=_ordered((*trial.holds, name)))
        trial.reason = held_reason(trial.holds)
        trial.reserved_at, trial.reserved_hosts = None, ()
        return [Event(trial.id, None, JobState.QUEUED, now, f"{name} hold put on by {who.name}")]
    return change


def release(job: JobRecord, text: str, who: Actor, now: float) -> Change:
    """Take hold `text` off a job; the pass that follows may start it."""
    name = _named_hold(text, who)
    _may_change(job, who, "release")
    if job.state is not JobState.QUEUED:  # an ended job's request and events are its record
        raise Conflict(f"job {job.id} is {job.state.value}: only a queued job's hold is released")
    if name not in job.holds:
        held = ", ".join(job.holds) or "none"
        raise Conflict(f"job {job.id} has no {name} hold (its holds: {held})")

    def change(trial: JobRecord) -> list[Event]:
        trial.request = replace(trial.request, holds=tuple(h for h in trial.holds if h != name))
        trial.reason = held_reason(trial.holds)
        return [Event(trial.id, None, trial.state, now, f"{name} hold released by {who.name}")]
    return change


def requeue(job: JobRecord, who: Actor, now: float) -> Change:
    """A running job back to the queue, in its place (its submission time kept): its running tasks
    leave their executors' task lists, which stop them, and run again (a new attempt) when it next
    starts. A job with a running task that may not run twice (Restartable false) is not requeued."""
    _may_change(job, who, "requeue")
    if job.state is not JobState.RUNNING:
        raise Conflict(f"job {job.id} is {job.state.value}: only a running job is requeued")
    runs = max((task.attempts for task in job.tasks), default=0)
    if runs >= MAX_RUNS and not who.admin:  # each run adds its tasks' events, and holds hosts again
        raise Conflict(f"job {job.id} has run {runs} times: its users requeue it until it has run {MAX_RUNS} times",
                       "an admin token may requeue it again")
    once = [t.index for t in job.tasks if t.state is JobState.RUNNING and not job.request.tasks[t.index].rerunnable]
    if once:
        raise Conflict(f"task {once[0]} of job {job.id} is running and is not rerunnable: the job is not requeued",
                       "cancel it, or submit it with Restartable true (CCS IsRerunnable)")
    return lambda trial: trial.requeue(now, f"requeued by {who.name}")


def priority(job: JobRecord, value: object, who: Actor, now: float) -> Change:
    """An administrator's new priority for a job not ended: a CCS priority by name, or its rank."""
    if not who.admin:
        raise Forbidden("a job's priority is an administrator's to change")
    rank = priority_rank(str(value)) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    if rank is None:
        raise Invalid(f"priority {str(value)[:40]!r} is no CCS priority", f"one of {', '.join(PRIORITIES)}, or 0 to 4")
    if job.state in ENDED:
        raise Conflict(f"job {job.id} has ended ({job.state.value})")

    def change(trial: JobRecord) -> list[Event]:
        trial.request = replace(trial.request, priority=rank)
        return [Event(trial.id, None, trial.state, now, f"priority set to {PRIORITIES[rank]} by {who.name}")]
    return change


# --- at submission ---------------------------------------------------------------------------

def submission_checks(requests: Sequence[JobRequest], admin: bool, now: float,
                      figures: Mapping[str, CEFigures]) -> list[str]:
    """Refuse what a submission may not ask (a System hold, unless an administrator files it; a
    Deadline already past), and the warnings for a Deadline the queue cannot meet: by the earliest
    start there could be, or by the CEs' forecast (`figures`: the last pass's, each CE's estimated
    start of a new job; a job no CE's forecast starts in time is warned of)."""
    starts = [ce.estimated_start for ce in figures.values()]
    warnings = []
    for request in requests:
        who = f"job {request.name!r}" if request.name else "the job"
        if SYSTEM in request.holds and not admin:
            raise Forbidden(f"{who} carries a System hold: an administrator's to put on",
                            "submit it with <Hold>User</Hold>, or with an admin token")
        if request.deadline is None:
            continue
        if request.deadline <= now:
            raise Invalid(f"{who}'s Deadline ({iso(request.deadline)}) has passed: it could not run",
                          "Deadline is seconds since the epoch (SSS DateTime)")
        forecast = min(starts, default=now)
        note = deadline_note(request, max(now, forecast if math.isfinite(forecast) else now))
        if note:
            warnings.append(f"{who}: {note}")
    return warnings


def deadline_note(request: JobRequest, start: float) -> str:
    """What to say of a job's Deadline, were it to start at `start` at the earliest (or at its
    EligibleTime, when later): "" when it can end by then."""
    deadline = request.deadline
    if deadline is None or not math.isfinite(request.estimate):
        return ""
    begins = max(start, request.eligible or start)
    if begins + request.estimate <= deadline:
        return ""
    return (f"its Deadline ({iso(deadline)}) cannot be met: starting at {iso(begins)} at the earliest, its run time "
            f"limit of {request.estimate:g} s ends it at {iso(begins + request.estimate)}; it is ended at its Deadline")


def note_deadlines(jobs: Iterable[JobRecord], now: float) -> None:
    """After a pass: each queued job whose Deadline the plan cannot meet says so in its reason (from
    its reserved start, else from now)."""
    for job in jobs:
        if job.request.deadline is None or job.state is not JobState.QUEUED:
            continue
        note = deadline_note(job.request, job.reserved_at if job.reserved_at is not None else now)
        if note and note not in job.reason:
            job.reason = f"{job.reason}; {note}" if job.reason else note
