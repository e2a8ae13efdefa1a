"""The SSS Job's own controls and a job's controls over HTTP (infosvc/web/jobcontrols.py,
infosvc/queue/jobcontrols.py): a job submitted with a Hold waits until it is released; hold, release,
requeue and priority with who may and who may not, and their bad bodies; EligibleTime and Deadline
kept by the running queue; and every change stored before it is answered: the real `infosvc serve`
restarted, and killed with -9, keeps them."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

import pytest

from infosvc.cli.client import epoch_of as epoch
from support.jobsite import job_site
from support.server import InProcessServer, Server, ServerFactory, wait_for
from test_jobs_api import job, state_becomes, submit as submit_with


def sss(name: str, controls: str = "", *, procs: int = 1, duration: int | None = None) -> bytes:
    limit = f"<Duration>{duration}</Duration>" if duration else ""
    return (f"<Job><Id>{name}</Id><Name>{name}</Name>{controls}<Executable>/bin/sleep</Executable>"
            f"<Arguments>600</Arguments><Requested><Processors>{procs}</Processors>{limit}</Requested></Job>").encode()


def submit(server: Server, body: bytes, token: str = "submit") -> Any:
    return submit_with(server, body, token=server.tokens[token])


def control(server: Server, job_id: str, action: str, body: Any = None, token: str = "submit") -> Any:
    data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    return server.request("POST", f"/v1/jobs/{job_id}/{action}", data, token=server.tokens.get(token, token),
                          headers={"Content-Type": "application/json"})


def ok(reply: Any) -> Any:
    assert reply.status == 200, (reply.status, reply.body)
    return reply.json()


def passed(server: Server, job_id: str) -> None:
    """Wait until a scheduling pass has looked at the job (it has a reason), and one more."""
    wait_for(lambda: job(server, job_id)["reason"], message=f"a pass over job {job_id}")
    time.sleep(0.2)


@pytest.fixture
def site(serve_app: ServerFactory) -> InProcessServer:
    return job_site(serve_app)


def test_a_job_submitted_with_a_hold_waits_until_its_owner_releases_it(site: InProcessServer) -> None:
    made = submit(site, sss("held", "<Hold>User</Hold>"), token="alice")
    assert made["holds"] == ["User"] and made["sss_state"] == "Hold" and made["reason"] == "held: User hold"
    submit(site, sss("free"), token="alice")
    state_becomes(site, "2", "Running")  # a pass ran, and started the job without a hold only
    assert job(site, "1")["state"] == "Queued" and job(site, "1")["reason"] == "held: User hold"
    assert control(site, "1", "release", {"hold": "User"}, token="bob").is_error(403)
    released = ok(control(site, "1", "release", {"hold": "User"}, token="alice"))
    assert released["holds"] == [] and released["sss_state"] == "Idle"
    running = state_becomes(site, "1", "Running")
    assert [e["detail"] for e in running["events"] if e["task"] is None][:2] == ["submitted",
                                                                                "User hold released by alice"]


def test_who_may_hold_and_release_and_what_they_must_send(site: InProcessServer) -> None:
    submit(site, sss("wide", procs=8), token="alice")  # both hosts: the next job waits
    state_becomes(site, "1", "Running")
    submit(site, sss("mine"), token="alice")
    assert control(site, "2", "hold", {"hold": "User"}, token="bob").is_error(403)
    assert control(site, "2", "hold", {"hold": "System"}, token="alice").is_error(403)
    assert control(site, "2", "hold", {"hold": "User"}, token="agent0").is_error(403)
    assert site.request("POST", "/v1/jobs/2/hold", b"{}").is_error(401)
    for bad in (b"not json", b"[1]", b'{"hold": 3}', b'{"hold": "Batch"}', b'{"hold": "User", "why": "x"}',
                b'{"hold": "' + b"x" * 2000 + b'"}'):
        assert control(site, "2", "hold", bad, token="alice").is_error(400), bad
    assert control(site, "99", "hold", {"hold": "User"}, token="alice").is_error(404)
    assert job(site, "2")["holds"] == []  # no refusal changed anything
    assert ok(control(site, "2", "hold", None, token="alice"))["holds"] == ["User"]  # no body: the User hold
    assert ok(control(site, "2", "hold", {"hold": "system"}, token="admin"))["holds"] == ["User", "System"]
    assert ok(control(site, "2", "hold", {"hold": "User"}, token="alice"))["holds"] == ["User", "System"]
    assert ok(control(site, "2", "release", {"hold": "User"}, token="alice"))["holds"] == ["System"]
    assert control(site, "2", "release", {"hold": "User"}, token="alice").is_error(409)
    assert control(site, "2", "release", {"hold": "System"}, token="alice").is_error(403)
    assert job(site, "2")["reason"] == "held: System hold"
    assert control(site, "1", "hold", {"hold": "User"}, token="alice").is_error(409)  # running
    assert ok(control(site, "2", "release", {"hold": "System"}, token="admin"))["holds"] == []
    details = [e["detail"] for e in job(site, "2")["events"]]
    assert details == ["submitted", "User hold put on by alice", "System hold put on by an administrator",
                       "User hold released by alice", "System hold released by an administrator"]


def test_requeue_takes_a_running_job_s_tasks_from_its_executor_and_runs_them_again(site: InProcessServer) -> None:
    submit(site, sss("again"), token="alice")
    host = state_becomes(site, "1", "Running")["hosts"]
    executor = site.tokens[f"exec{host[1]}"]
    first = site.get("/v1/executor/tasks", token=executor).json()["tasks"]
    assert [(t["job"], t["attempt"]) for t in first] == [("1", 1)]
    assert control(site, "1", "requeue", token="bob").is_error(403)
    assert control(site, "1", "requeue", {"now": True}, token="alice").is_error(400)
    requeued = ok(control(site, "1", "requeue", token="alice"))
    assert requeued["state"] == "Queued" and requeued["reason"] == "requeued by alice"
    again = state_becomes(site, "1", "Running")
    orders = [(t["job"], t["attempt"]) for h in ("exec0", "exec1")
              for t in site.get("/v1/executor/tasks", token=site.tokens[h]).json()["tasks"]]
    assert orders == [("1", 2)]  # attempt 1 left its executor's list: the executor stops it
    stale = site.request("POST", "/v1/jobs/1/tasks/0/events", b'{"event": "ended", "exit_code": 143, "attempt": 1}',
                         token=site.tokens[f"exec{again['hosts'][1]}"])
    assert stale.status == 400 and job(site, "1")["state"] == "Running"  # the old run's end ends nothing
    assert [e["state"] for e in again["events"] if e["task"] is None] == ["Queued", "Running", "Queued", "Running"]
    ok(site.request("DELETE", "/v1/jobs/1", token=site.tokens["alice"]))
    assert control(site, "1", "requeue", token="admin").is_error(409)  # only a running job
    submit(site, sss("once", "<Restartable>false</Restartable>"), token="alice")
    state_becomes(site, "2", "Running")
    refused = control(site, "2", "requeue", token="admin")
    assert refused.is_error(409) and "not rerunnable" in refused.json()["error"]


def test_only_an_administrator_sets_a_priority_and_the_queue_follows_it(site: InProcessServer) -> None:
    submit(site, sss("wide", procs=8))
    state_becomes(site, "1", "Running")
    submit(site, sss("second", procs=8))
    submit(site, sss("third", procs=8))
    passed(site, "3")
    assert control(site, "3", "priority", {"priority": "Highest"}).is_error(403)  # a submit token
    for bad in ({"priority": 5}, {"priority": "Urgent"}, {}, {"priority": 4, "more": 1}, [4]):
        assert control(site, "3", "priority", bad, token="admin").is_error(400), bad
    assert ok(control(site, "3", "priority", {"priority": "Highest"}, token="admin"))["priority"] == "Highest"
    assert ok(site.request("DELETE", "/v1/jobs/1", token=site.tokens["submit"]))["state"] == "Canceled"
    state_becomes(site, "3", "Running")
    assert job(site, "2")["state"] == "Queued"
    assert ok(control(site, "2", "priority", {"priority": 0}, token="admin"))["priority"] == "Lowest"


def test_a_job_starts_no_earlier_than_its_eligible_time(site: InProcessServer) -> None:
    eligible = int(time.time()) + 3
    made = submit(site, sss("later", f"<EligibleTime>{eligible}</EligibleTime>"))
    assert epoch(made["eligible_time"]) == eligible
    wait_for(lambda: "EligibleTime" in (job(site, "1")["reason"] or ""), message="the EligibleTime reason")
    assert job(site, "1")["state"] == "Queued" and job(site, "1")["reason"].startswith("not eligible before ")
    started = state_becomes(site, "1", "Running")
    assert epoch(started["started"]) >= eligible


def test_a_job_is_ended_at_its_deadline_and_warned_of_when_it_cannot_meet_it(site: InProcessServer) -> None:
    now = int(time.time())
    made = submit(site, sss("hurry", f"<Deadline>{now + 5}</Deadline>", duration=3600))
    assert any("cannot be met" in warning for warning in made["warnings"]), made["warnings"]
    running = state_becomes(site, "1", "Running")
    executor = site.tokens[f"exec{running['hosts'][1]}"]
    orders = site.get("/v1/executor/tasks", token=executor).json()["tasks"]
    assert [order["deadline"] for order in orders] == [now + 5]  # its executor stops it then too
    held = submit(site, sss("never", f"<Hold>User</Hold><Deadline>{int(time.time()) + 3}</Deadline>"))
    assert held["warnings"] == []  # no run time limit: it could still end in time
    ended = state_becomes(site, "1", "Canceled")
    assert ended["reason"].startswith("reached its Deadline")
    assert state_becomes(site, held["id"], "Canceled")["reason"].endswith("came before it could start")
    past = site.request("POST", "/v1/jobs", sss("past", f"<Deadline>{now - 10}</Deadline>"),
                        token=site.tokens["submit"])
    assert past.is_error(400) and "has passed" in past.json()["error"]
    system = site.request("POST", "/v1/jobs", sss("sys", "<Hold>System</Hold>"), token=site.tokens["alice"])
    assert system.is_error(403)
    assert submit(site, sss("sys", "<Hold>System</Hold>"), token="admin")["holds"] == ["System"]


def test_controls_are_stored_before_they_are_answered_and_survive_restarts(serve: ServerFactory) -> None:
    """The real `infosvc serve`: a hold, a System hold and a priority kept across a restart; a
    release answered and then kill -9 is kept too."""
    site = serve(agents=1, users={"alice": "alice"}, executors={"exec0": "n0"})
    site.report("n0", site.agent_token(), processors=4)
    submit(site, sss("held", "<Hold>User</Hold>"), token="alice")
    ok(control(site, "1", "hold", {"hold": "System"}, token="admin"))
    ok(control(site, "1", "priority", {"priority": "AboveNormal"}, token="admin"))
    site.restart()
    after = job(site, "1")
    assert (after["state"], after["holds"], after["priority"]) == ("Queued", ["User", "System"], "AboveNormal")
    passed(site, "1")
    assert job(site, "1")["state"] == "Queued" and job(site, "1")["reason"] == "held: User hold, System hold"
    ok(control(site, "1", "release", {"hold": "System"}, token="admin"))
    site.kill()
    site.start()
    assert job(site, "1")["holds"] == ["User"]
    ok(control(site, "1", "release", {"hold": "User"}, token="alice"))
    state_becomes(site, "1", "Running")
    details = [e["detail"] for e in job(site, "1")["events"] if e["task"] is None]
    assert details[:5] == ["submitted", "System hold put on by an administrator",
                           "priority set to AboveNormal by an administrator",
                           "System hold released by an administrator", "User hold released by alice"]


def test_a_body_nested_past_the_parser_s_depth_is_a_400_and_logs_no_error(site: InProcessServer) -> None:
    """Under the 1 KiB cap, `[` 1,000 times made json.loads raise RecursionError: a 500 and a stack
    logged at ERROR, each time."""
    submit(site, sss("mine", "<Hold>User</Hold>"), token="alice")  # held: no pass adds an event
    for action, token in (("hold", "alice"), ("release", "alice"), ("requeue", "alice"), ("priority", "admin")):
        for body in (b"[" * 1000, b'{"hold": ' + b"[" * 1000):
            reply = control(site, "1", action, body, token=token)
            assert reply.is_error(400), (action, body[:12], reply.status, reply.body[:200])
            assert "nests" in reply.json()["error"], reply.json()
    assert "unhandled error" not in site.log.read_text()
    assert job(site, "1")["holds"] == ["User"] and [e["detail"] for e in job(site, "1")["events"]] == ["submitted"]


def test_a_job_has_one_spelling_of_its_id(site: InProcessServer) -> None:
    """GET /v1/jobs/01 answered job 1, read from the store (not the queue's copy), while every
    control on 01 was a 404: a job's id is the queue's decimal spelling of it, and no other."""
    submit(site, sss("mine", "<Hold>User</Hold>"), token="alice")
    assert job(site, "1")["id"] == "1"
    for other in ("01", "001", "+1", "1.0", "\u0661", "\uff11", "1 ", "0", "-1", "1e0"):
        path = "/v1/jobs/" + quote(other, safe="")
        assert site.get(path).is_error(404), (other, site.get(path).status)
        assert control(site, quote(other, safe=""), "release", {"hold": "User"}, token="alice").is_error(404), other
    assert job(site, "1")["holds"] == ["User"]


def test_a_job_takes_a_bounded_number_of_controls_from_its_users_but_an_administrator_s_always(
        site: InProcessServer) -> None:
    """Each hold, release, requeue or priority is an event kept with the job: 500 hold and release
    cycles by its owner left 1,002 rows for one job (3.9 MiB of store), and requeues ran it again
    without end. Past a bound its owner is refused (409, the bound named); an administrator is not."""
    submit(site, sss("wide", procs=8), token="alice")  # both hosts: the next job waits
    state_becomes(site, "1", "Running")
    submit(site, sss("mine"), token="alice")
    taken = 0
    while taken < 300 and (reply := control(site, "2", ("hold", "release")[taken % 2], {"hold": "User"},
                                            token="alice")).status == 200:
        taken += 1
    rows = site.sql("SELECT count(*) FROM job_events WHERE job_id = 2")[0][0]
    assert taken < 300, f"{taken} controls taken, {rows} events kept for one job"
    assert reply.is_error(409) and "100 controls" in reply.json()["error"], reply.body
    assert taken == 100 and rows == 101  # submitted, then the controls taken
    assert ok(control(site, "2", "hold", {"hold": "User"}, token="admin"))["holds"] == ["User"]
    assert ok(control(site, "2", "release", {"hold": "User"}, token="alice"))["holds"] == []  # a release always
    assert control(site, "2", "hold", {"hold": "User"}, token="alice").is_error(409)
    assert ok(control(site, "2", "priority", {"priority": "Highest"}, token="admin"))["priority"] == "Highest"
    ok(site.request("DELETE", "/v1/jobs/2", token=site.tokens["alice"]))  # Highest, it would start before job 1
    requeues = 0
    for _ in range(30):  # job 1: the owner requeues it until refused
        state_becomes(site, "1", "Running")
        reply = control(site, "1", "requeue", token="alice")
        if reply.status != 200:
            break
        requeues += 1
    attempts = job(site, "1")["tasks"][0]["attempts"]
    assert reply.is_error(409) and "has run 10 times" in reply.json()["error"], (requeues, attempts, reply.body)
    assert requeues == 9 and attempts == 10
    ok(control(site, "1", "requeue", token="admin"))  # an administrator's is taken
    assert state_becomes(site, "1", "Running")["tasks"][0]["attempts"] == 11
