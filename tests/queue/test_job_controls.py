"""The SSS Job's own controls and a job's controls after it is filed, as pure decisions: Hold,
EligibleTime and Deadline read from a document (infosvc/sched/request.py), what the queue does at a
Deadline (infosvc/queue/upkeep.py, JobRecord.limit_at), and who may hold, release, requeue and
reprioritise a job in which state (infosvc/queue/jobcontrols.py). The server tests
(tests/web/test_job_controls_api.py) run the same through HTTP and a restart."""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path

import pytest

from infosvc.errors import Conflict, DocumentError, Forbidden, Invalid
from infosvc.model.ccsjob import JobState
from infosvc.queue import jobcontrols as controls
from infosvc.queue.cestate import CEFigures
from infosvc.queue.jobcontrols import Actor, deadline_note, note_deadlines, submission_checks
from infosvc.queue.submissions import Filer, prepare
from infosvc.queue.upkeep import held_reason, upkeep, wake_at
from infosvc.sched.jobs import Event, JobRecord, sss_state
from infosvc.sched.request import JobRequest, TaskRequest
from infosvc.store import Store
from infosvc.store.jobs import write_jobs

ALICE = Actor(admin=False, submitter="alice-token", user="alice", name="alice")
BOB = Actor(admin=False, submitter="bob-token", user="bob", name="bob")
PORTAL = Actor(admin=False, submitter="portal-token", user=None, name="token-portal")
ADMIN = Actor(admin=True, submitter="admin-token", user=None, name="an administrator")


def read(controls_xml: str, processors: int = 1) -> JobRequest:
    document = (f"<Job><Id>j</Id>{controls_xml}<Executable>/bin/true</Executable>"
                f"<Requested><Processors>{processors}</Processors><Duration>100</Duration></Requested></Job>")
    prepared, _ = prepare(document.encode(), "application/xml", Filer("alice"))
    return prepared[0].request


def record(request: JobRequest | None = None, state: JobState = JobState.QUEUED, *, submitter: str = "alice-token",
           rerunnable: bool = True) -> JobRecord:
    if request is None:
        request = JobRequest(name="j", owner="alice", estimate=100.0,
                             tasks=(TaskRequest(0, "t", executable="/bin/true", rerunnable=rerunnable),))
    job = JobRecord("7", request, 0.0, "alice", submitter=submitter)
    if state is JobState.RUNNING:
        job.start({"n0": 1}, True, 0.0, 10.0)
    return job


# --- reading the document ------------------------------------------------------------------------

def test_holds_eligible_time_and_deadline_are_read() -> None:
    request = read("<Hold>system</Hold><Hold>User</Hold><Hold>user</Hold>"
                   "<EligibleTime>1800000000</EligibleTime><Deadline>1800003600</Deadline>")
    assert request.holds == ("User", "System")  # each once, in one order, as this service spells them
    assert (request.eligible, request.deadline) == (1_800_000_000.0, 1_800_003_600.0)
    assert read("").holds == () and read("").eligible is None and read("").deadline is None


@pytest.mark.parametrize("written, message", [
    ("<Hold>Batch</Hold>", "Hold 'Batch' is not one of User, System"),
    ("<EligibleTime>100</EligibleTime><Deadline>100</Deadline>", "Deadline (100) is not after its EligibleTime"),
    ("<Deadline>253402300800</Deadline>", "after the year 9999"),
    ("<EligibleTime>-1</EligibleTime>", "not a valid value"),
])
def test_a_control_no_job_could_honour_is_refused(written: str, message: str) -> None:
    with pytest.raises(DocumentError, match=re.escape(message)):
        read(written)


# --- the queue on its own: the Deadline ----------------------------------------------------------

def test_a_queued_job_is_canceled_at_its_deadline_and_a_running_one_at_it_too() -> None:
    queued = record(JobRequest(name="q", owner="alice", deadline=50.0))
    running = record(JobRequest(name="r", owner="alice", estimate=1000.0, deadline=60.0,
                                tasks=(TaskRequest(0, "t", executable="/bin/true"),)), JobState.RUNNING)
    assert running.limit_at == 60.0  # before its run time limit (10 + 1000)
    jobs = {"1": queued, "2": running}
    assert wake_at(jobs.values(), 0.0) == 50.0  # the queue wakes for it
    changed, events, _ = upkeep(jobs, lambda host: True, 49.0, JobRecord.trial)
    assert changed == [] and events == []
    changed, events, _ = upkeep(jobs, lambda host: True, 60.0, JobRecord.trial)
    ended = {job.request.name: trial for job, trial in changed}
    assert ended["q"].state is JobState.CANCELED and ended["q"].reason.startswith("its Deadline (1970-01-01T00:00:50Z)")
    assert ended["r"].state is JobState.CANCELED and ended["r"].reason == "reached its Deadline (1970-01-01T00:01:00Z)"
    assert ended["r"].tasks[0].state is JobState.CANCELED  # its task leaves its executor's list, which stops it
    # a run time limit that comes first is still the limit
    short = record(JobRequest(name="s", owner="alice", estimate=5.0, deadline=60.0,
                              tasks=(TaskRequest(0, "t", executable="/bin/true"),)), JobState.RUNNING)
    assert short.limit_at == 15.0 and short.reach_limit(15.0)[-1].detail == "reached its run time limit of 5 s"


def test_a_held_job_says_each_hold_and_its_sss_state_is_hold() -> None:
    job = record(JobRequest(name="h", owner="alice", holds=("User", "System")))
    upkeep({"1": job}, lambda host: True, 0.0, JobRecord.trial)
    assert job.reason == "held: User hold, System hold" and sss_state(job) == "Hold"
    assert held_reason((), "dependency x not completed") == "held: dependency x not completed"
    assert held_reason(()) == ""


def test_why_says_when_the_plan_cannot_meet_a_deadline() -> None:
    request = JobRequest(name="d", owner="alice", estimate=100.0, deadline=150.0)
    assert deadline_note(request, 50.0) == ""  # 50 + 100 <= 150
    assert "cannot be met: starting at 1970-01-01T00:01:00Z at the earliest" in deadline_note(request, 60.0)
    eligible_late = JobRequest(name="e", owner="alice", estimate=100.0, eligible=100.0, deadline=150.0)
    assert deadline_note(eligible_late, 0.0).startswith("its Deadline (1970-01-01T00:02:30Z) cannot be met: "
                                                        "starting at 1970-01-01T00:01:40Z")
    assert deadline_note(JobRequest(name="i", owner="alice", deadline=150.0), 0.0) == ""  # Infinite: ended then
    job = record(request)
    job.reason, job.reserved_at = "first in the queue: waiting", 80.0
    note_deadlines([job], 0.0)
    note_deadlines([job], 0.0)  # said once
    assert job.reason.count("cannot be met") == 1 and job.reason.startswith("first in the queue: waiting; its Deadline")


def test_a_submission_s_deadline_is_refused_when_past_and_warned_of_when_it_cannot_be_met() -> None:
    fine = JobRequest(name="a", owner="alice", estimate=100.0, deadline=1000.0)
    late = JobRequest(name="b", owner="alice", estimate=100.0, deadline=1000.0)
    assert submission_checks([fine], False, 0.0, {}) == []
    # the CEs' forecast starts a new job at 950: job b would end at 1050
    forecasts = {"ce1": CEFigures(0, 0, 0, 950.0, 950.0), "ce2": CEFigures(0, 0, 0, math.inf, math.inf)}
    warnings = submission_checks([fine, late], False, 0.0, forecasts)
    assert len(warnings) == 2 and warnings[1].startswith("job 'b': its Deadline (1970-01-01T00:16:40Z) cannot be met")
    with pytest.raises(Invalid, match="has passed"):
        submission_checks([late], False, 1000.0, {})
    system = JobRequest(name="s", owner="alice", holds=("System",))
    with pytest.raises(Forbidden, match="System hold"):
        submission_checks([system], False, 0.0, {})
    assert submission_checks([system], True, 0.0, {}) == []


# --- hold, release, requeue, priority ------------------------------------------------------------

def apply(job: JobRecord, change: controls.Change | None) -> list[str]:
    assert change is not None
    trial = job.trial()
    events = change(trial)
    job.adopt(trial)
    return [event.detail for event in events]


def test_the_owner_holds_and_releases_a_user_hold() -> None:
    job = record()
    assert apply(job, controls.hold(job, "user", ALICE, 5.0)) == ["User hold put on by alice"]
    assert job.holds == ("User",) and job.reason == "held: User hold"
    assert controls.hold(job, "User", ALICE, 6.0) is None  # held already: nothing to store
    assert apply(job, controls.release(job, "User", ALICE, 7.0)) == ["User hold released by alice"]
    assert job.holds == () and job.reason == ""
    with pytest.raises(Conflict, match="has no User hold"):
        controls.release(job, "User", ALICE, 8.0)


def test_who_may_hold_and_release() -> None:
    job = record()
    with pytest.raises(Forbidden, match="this token may not hold it"):
        controls.hold(job, "User", BOB, 0.0)
    with pytest.raises(Forbidden):
        controls.hold(job, "User", PORTAL, 0.0)  # bound to no user, and not its submitter
    mine = record(submitter="portal-token")
    assert controls.hold(mine, "User", PORTAL, 0.0) is not None  # the token that submitted it
    with pytest.raises(Forbidden, match="System hold is an administrator's"):
        controls.hold(job, "System", ALICE, 0.0)
    apply(job, controls.hold(job, "System", ADMIN, 0.0))
    apply(job, controls.hold(job, "User", ALICE, 0.0))
    assert job.holds == ("User", "System") and job.reason == "held: User hold, System hold"
    with pytest.raises(Forbidden):
        controls.release(job, "System", ALICE, 0.0)  # a user releases only User holds
    apply(job, controls.release(job, "User", ADMIN, 0.0))  # an admin releases any
    apply(job, controls.release(job, "System", ADMIN, 0.0))
    assert job.holds == ()
    with pytest.raises(Invalid, match="is no hold"):
        controls.hold(job, "Batch", ADMIN, 0.0)


def test_who_may_cancel_is_who_may_hold() -> None:
    # a job a portal filed for alice is alice's: her bound token holds, releases and requeues it,
    # and cancels it too (the cancel looked at the submitting token alone)
    filed = record(submitter="portal-token")
    with pytest.raises(Forbidden, match="this token may not cancel it"):
        controls.cancel(filed, BOB, 0.0)
    assert set(apply(filed, controls.cancel(filed, ALICE, 1.0))) == {"canceled"}
    assert filed.state is JobState.CANCELED
    with pytest.raises(Invalid, match="has already ended"):
        controls.cancel(filed, ADMIN, 2.0)
    mine = record(submitter="portal-token")
    apply(mine, controls.cancel(mine, PORTAL, 1.0))  # the token that submitted it
    theirs = record()
    apply(theirs, controls.cancel(theirs, ADMIN, 1.0))


def test_only_a_queued_job_is_held() -> None:
    running = record(state=JobState.RUNNING)
    with pytest.raises(Conflict, match="only a queued job is held"):
        controls.hold(running, "User", ALICE, 0.0)


def test_an_ended_job_s_hold_stays_as_it_ended() -> None:
    # canceled while held: its stored request, reason and events are its record, not to be rewritten
    job = record()
    apply(job, controls.hold(job, "User", ALICE, 1.0))
    job.end(JobState.CANCELED, 2.0, "canceled")
    for who in (ALICE, ADMIN):
        with pytest.raises(Conflict, match="job 7 is Canceled: only a queued job's hold is released"):
            controls.release(job, "User", who, 3.0)
    assert job.holds == ("User",) and job.reason == "canceled"


def test_requeue_sends_a_running_job_back_and_its_tasks_run_again() -> None:
    job = record(state=JobState.RUNNING)
    assert job.tasks[0].state is JobState.RUNNING and job.tasks[0].attempts == 1
    with pytest.raises(Forbidden):
        controls.requeue(job, BOB, 20.0)
    apply(job, controls.requeue(job, ALICE, 20.0))
    assert job.state is JobState.QUEUED and job.hosts == {} and job.started is None
    assert job.tasks[0].state is JobState.QUEUED and job.reason == "requeued by alice"
    with pytest.raises(Conflict, match="only a running job is requeued"):
        controls.requeue(job, ALICE, 21.0)
    job.start({"n1": 1}, True, 0.0, 30.0)
    assert job.tasks[0].attempts == 2  # a new attempt: the executor runs it anew
    once = record(state=JobState.RUNNING, rerunnable=False)
    with pytest.raises(Conflict, match="not rerunnable"):
        controls.requeue(once, ADMIN, 20.0)


def test_an_administrator_sets_the_priority() -> None:
    job = record()
    with pytest.raises(Forbidden):
        controls.priority(job, 4, ALICE, 0.0)
    assert apply(job, controls.priority(job, "highest", ADMIN, 0.0)) == ["priority set to Highest by an administrator"]
    assert job.priority == 4
    apply(job, controls.priority(job, 0, ADMIN, 0.0))
    assert job.request.priority_name == "Lowest"
    for bad in (5, -1, "Urgent", True, 2.0, None):
        with pytest.raises(Invalid):
            controls.priority(job, bad, ADMIN, 0.0)
    job.end(JobState.CANCELED, 1.0, "canceled")
    with pytest.raises(Conflict, match="has ended"):
        controls.priority(job, 3, ADMIN, 2.0)


# --- how many --------------------------------------------------------------------------------------

def test_a_job_takes_max_controls_then_only_an_administrator_s() -> None:
    job = record()
    controls.within_bound(job, ALICE, controls.MAX_CONTROLS - 1)
    with pytest.raises(Conflict, match=f"job 7 has had {controls.MAX_CONTROLS} controls"):
        controls.within_bound(job, ALICE, controls.MAX_CONTROLS)
    controls.within_bound(job, ADMIN, 10 * controls.MAX_CONTROLS)


def test_its_users_requeue_a_job_until_it_has_run_max_runs_times() -> None:
    job = record(state=JobState.RUNNING)
    for run in range(1, controls.MAX_RUNS):
        assert job.tasks[0].attempts == run
        apply(job, controls.requeue(job, ALICE, 20.0 + run))
        job.start({"n0": 1}, True, 0.0, 30.0 + run)
    with pytest.raises(Conflict, match=f"job 7 has run {controls.MAX_RUNS} times"):
        controls.requeue(job, ALICE, 50.0)
    apply(job, controls.requeue(job, ADMIN, 50.0))


def test_the_store_counts_the_events_of_every_control_and_of_nothing_else(tmp_path: Path) -> None:
    """The bound is counted from the job's stored events (CONTROL_EVENTS): each control's detail
    matches, the queue's own events and the tasks' do not."""
    job = record(state=JobState.RUNNING)
    made = [Event(job.id, None, JobState.QUEUED, 0.0, "submitted"), Event(job.id, None, JobState.RUNNING, 0.0, "on n0")]
    for decide in (lambda: controls.requeue(job, ALICE, 1.0), lambda: controls.hold(job, "User", ALICE, 2.0),
                   lambda: controls.hold(job, "System", ADMIN, 2.5),
                   lambda: controls.priority(job, "Highest", ADMIN, 3.0),
                   lambda: controls.release(job, "User", ADMIN, 4.0)):
        change = decide()
        assert change is not None
        trial = job.trial()
        made += change(trial)
        job.adopt(trial)
    job.start({"n1": 1}, True, 0.0, 5.0)
    made += job.requeue(6.0, "host n1 became unreachable") + job.end(JobState.CANCELED, 7.0, "canceled")
    assert len([event for event in made if event.task is not None]) >= 2  # the tasks' requeue events
    store = Store(tmp_path / "s.sqlite")
    try:
        asyncio.run(store.write(write_jobs([], [], made)))
        assert store.count_job_events(7, controls.CONTROL_EVENTS) == 5
        assert store.count_job_events(8, controls.CONTROL_EVENTS) == 0
    finally:
        store.close()
