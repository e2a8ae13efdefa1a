"""The job queue over HTTP (infosvc/web/jobs.py, infosvc/queue/jobqueue.py): submission in the three
formats, the scheduling pass against reported hosts, executor reports, cancel, dependencies, and
the refusals; on an in-process server with a real SQLite file."""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.server import InProcessServer, ServerFactory, wait_for

SSS_JOB = """<Job><Id>{id}</Id><Name>{name}</Name>{deps}<Executable>/bin/true</Executable>
<Requested><Processors>{procs}</Processors>{more}</Requested></Job>"""


def sss(name: str, procs: int = 1, *, deps: str = "", more: str = "") -> bytes:
    return SSS_JOB.format(id=name, name=name, deps=deps, procs=procs, more=more).encode()


def ccs(procs: int = 1, *, exclusive: bool = True, runtime: str | None = None, priority: str = "Normal",
        tasks: str = "") -> bytes:
    run = f' Runtime="{runtime}"' if runtime else ""
    tasks = tasks or '<Task CommandLine="echo hi"/>'
    return (f'<Job xmlns="http://www.microsoft.com/ComputeCluster/" Name="c" MinimumNumberOfProcessors="{procs}" '
            f'MaximumNumberOfProcessors="{procs}" IsExclusive="{str(exclusive).lower()}" Priority="{priority}"{run}>'
            f'<Tasks>{tasks}</Tasks></Job>').encode()


def submit(server: InProcessServer, body: bytes, content_type: str = "application/xml", token: str | None = None) -> Any:
    reply = server.request("POST", "/v1/jobs", body, token=server.tokens["submit"] if token is None else token,
                           headers={"Content-Type": content_type})
    assert reply.status == 201, (reply.status, reply.body)
    return reply.json()


def job(server: InProcessServer, job_id: str) -> Any:
    reply = server.get(f"/v1/jobs/{job_id}")
    assert reply.status == 200, reply.body
    return reply.json()


def state_becomes(server: InProcessServer, job_id: str, state: str) -> Any:
    wait_for(lambda: job(server, job_id)["state"] == state, timeout=10, message=f"job {job_id} {state}")
    return job(server, job_id)


@pytest.fixture
def site(serve_app: ServerFactory) -> InProcessServer:
    server = serve_app(agents=2, executors={"exec0": "n0", "exec1": "n1"})
    for number in range(2):
        server.report(f"n{number}", server.agent_token(), processors=4)
    return server  # type: ignore[return-value]


def test_a_job_is_queued_started_and_run_to_its_end(site: InProcessServer) -> None:
    made = submit(site, sss("one", 2))
    assert made["state"] in ("Queued", "Running") and made["id"] == "1"
    running = state_becomes(site, "1", "Running")
    assert running["hosts"] in ("n0", "n1") and running["sss_state"] == "Running"
    host = running["hosts"]
    orders = site.get("/v1/executor/tasks", token=site.tokens[f"exec{host[1]}"]).json()
    assert [(t["job"], t["task"], t["executable"]) for t in orders["tasks"]] == [("1", 0, "/bin/true")]
    events = "/v1/jobs/1/tasks/0/events"
    other = site.tokens["exec1" if host == "n0" else "exec0"]
    assert site.request("POST", events, b'{"event": "started"}', token=other).status == 403
    assert site.request("POST", events, b'{"event": "started"}', token=site.tokens[f"exec{host[1]}"]).status == 200
    reply = site.request("POST", events, b'{"event": "ended", "exit_code": 0}', token=site.tokens[f"exec{host[1]}"])
    assert reply.status == 200 and reply.json()["state"] == "Finished"
    done = job(site, "1")
    assert done["glue_status"] == "DONE" and done["exit_code"] == 0
    assert [e["state"] for e in done["events"] if e["task"] is None] == ["Queued", "Running", "Finished"]


def test_an_end_report_names_its_attempt_and_may_say_why(site: InProcessServer) -> None:
    """A report of an earlier placement (sent late, after a restart) must not end the task's new run;
    a task that could not start says why where its owner reads the job."""
    submit(site, sss("one", 1))
    host = state_becomes(site, "1", "Running")["hosts"]
    token = site.tokens[f"exec{host[1]}"]
    orders = site.get("/v1/executor/tasks", token=token).json()["tasks"]
    assert [order["attempt"] for order in orders] == [1]
    events = "/v1/jobs/1/tasks/0/events"
    stale = site.request("POST", events, b'{"event": "ended", "exit_code": 0, "attempt": 2}', token=token)
    assert stale.status == 400 and "attempt 2" in stale.json()["error"]
    for bad in (b'"reason": ""', b'"reason": 7', b'"reason": "' + b"x" * 1001 + b'"', b'"attempt": 0',
                b'"attempt": true'):
        body = b'{"event": "ended", "exit_code": 127, ' + bad + b"}"
        assert site.request("POST", events, body, token=token).status == 400, bad
    assert job(site, "1")["state"] == "Running"
    why = "Stdin /root/x: permission denied as nobody"
    reply = site.request("POST", events, json.dumps({"event": "ended", "exit_code": 127, "attempt": 1,
                                                     "reason": why}).encode(), token=token)
    assert reply.status == 200 and reply.json()["state"] == "Failed"
    done = job(site, "1")
    assert why in done["reason"] and any(why in event["detail"] for event in done["events"] if event["task"] == 0)


def test_exclusive_jobs_wait_and_the_reason_says_why(site: InProcessServer) -> None:
    for _ in range(3):
        submit(site, ccs(1))
    wait_for(lambda: [job(site, i)["state"] for i in "123"] == ["Running", "Running", "Queued"])
    # The submission's answer gives a reason at once (queue/planning.py could_start); the pass after
    # it (at once, or within REFRESH_SECONDS) says where it stands in the queue.
    wait_for(lambda: (job(site, "3")["reason"] or "").startswith("first in the queue"))
    assert job(site, "3")["reason"].startswith("first in the queue: waiting for 1 processor, 0 free on idle hosts")
    shared = submit(site, ccs(1, exclusive=False, priority="Highest"))
    wait_for(lambda: (job(site, shared["id"])["reason"] or "").startswith("first in the queue"))
    assert job(site, shared["id"])["reason"].startswith("first in the queue: waiting for 1 processor, 0 free on "
                                                        "hosts it may share")  # hosts held exclusively are not shared


def test_cancel_frees_the_hosts_for_the_next_job(site: InProcessServer) -> None:
    submit(site, ccs(8))
    submit(site, ccs(4))
    state_becomes(site, "1", "Running")
    assert job(site, "2")["state"] == "Queued"
    assert site.request("DELETE", "/v1/jobs/1", token=site.tokens["agent0"]).status in (401, 403)
    reply = site.request("DELETE", "/v1/jobs/1", token=site.tokens["submit"])
    assert reply.status == 200 and reply.json()["state"] == "Canceled"
    state_becomes(site, "2", "Running")
    assert site.request("DELETE", "/v1/jobs/1", token=site.tokens["submit"]).status == 400


def test_a_job_group_runs_in_dependency_order(site: InProcessServer) -> None:
    group = (b"<JobGroup><Id>g</Id>"
             + sss("fat.1", 1) + sss("fat.2", 1, deps="<Dependency>fat.1</Dependency>")
             + sss("fat.3", 1, deps="<Dependency>fat.2</Dependency>") + b"</JobGroup>")
    made = submit(site, group)
    assert [j["id"] for j in made["jobs"]] == ["1", "2", "3"] and made["group"] == "1"
    state_becomes(site, "1", "Running")
    second = job(site, "2")
    assert second["state"] == "Queued" and second["sss_state"] == "Hold"
    assert second["reason"] == "held: dependency fat.1 not completed (job 1)"
    host = job(site, "1")["hosts"]
    token = site.tokens[f"exec{host[1]}"]
    site.request("POST", "/v1/jobs/1/tasks/0/events", b'{"event":"ended","exit_code":0}', token=token)
    state_becomes(site, "2", "Running")
    host = job(site, "2")["hosts"]
    site.request("POST", "/v1/jobs/2/tasks/0/events", b'{"event":"ended","exit_code":3}',
                 token=site.tokens[f"exec{host[1]}"])
    third = state_becomes(site, "3", "Canceled")
    assert third["reason"] == "dependency fat.2 (job 2) ended Failed; the job was to run after fat.2 completed"


def test_a_cycle_in_a_job_group_is_refused(site: InProcessServer) -> None:
    group = (b"<JobGroup><Id>g</Id>" + sss("a", deps="<Dependency>b</Dependency>")
             + sss("b", deps="<Dependency>a</Dependency>") + b"</JobGroup>")
    reply = site.request("POST", "/v1/jobs", group, token=site.tokens["submit"])
    assert reply.status == 400 and "cycle" in reply.json()["error"]
    assert site.get("/v1/jobs").json()["total"] == 0


def test_refusals(site: InProcessServer) -> None:
    assert site.request("POST", "/v1/jobs", sss("x")).status == 401
    assert site.request("POST", "/v1/jobs", sss("x"), token=site.tokens["agent1"]).status == 403
    bad = site.request("POST", "/v1/jobs", sss("x", more="<Priority>7</Priority>").replace(
        b"<Requested>", b"<Priority>Urgent</Priority><Requested>"), token=site.tokens["submit"])
    assert bad.status == 400 and "Priority" in bad.json()["error"]
    assert site.get("/v1/jobs?color=red").status == 400
    assert site.get("/v1/jobs?state=Sleeping").status == 400
    assert site.get("/v1/jobs/99").status == 404
    submit(site, sss("x"))
    assert site.request("POST", "/v1/jobs/1/tasks/0/events", b"not json", token=site.tokens["exec0"]).status == 400
    limit = site.request("POST", "/v1/jobs/1/tasks/0/events", b'{"event":"ended","exit_code":1,"limit":"yes"}',
                         token=site.tokens["admin"])
    assert limit.status == 400 and "limit" in limit.json()["error"]
    assert site.request("POST", "/v1/jobs/1/tasks/9/events", b'{"event":"started"}',
                        token=site.tokens["admin"]).status in (400, 404)


def test_a_job_no_host_can_take_says_so(site: InProcessServer) -> None:
    made = submit(site, sss("big", 64))
    waiting = state_becomes(site, made["id"], "Queued")
    wait_for(lambda: job(site, made["id"])["reason"] is not None)
    assert "needs 64 processors; the hosts it may use have 8" in job(site, made["id"])["reason"]
    featured = submit(site, sss("gpu", 1, more="<Feature>BigMem</Feature>"))
    wait_for(lambda: job(site, featured["id"])["reason"] is not None)
    detail = job(site, featured["id"])
    # the two hosts rejected for the same reason, folded into one line, which the reason quotes
    [rejected] = detail["rejected_hosts"]
    assert rejected.startswith("n[0-1]: ") and "BigMem" in rejected
    assert f"no usable host meets its requirements ({rejected})" in detail["reason"]
    assert waiting["glue_status"] in ("WAITING", "SCHEDULED")


def test_what_a_job_needs_outside_requested_is_read_and_the_answer_names_it(site: InProcessServer) -> None:
    body = (b"<Job><Id>u</Id><Executable>/bin/true</Executable><Processors>2</Processors>"
            b"<Feature>BigMem</Feature></Job>")
    made = submit(site, body)
    assert made["read_as_requested"] == ["Processors", "Feature"] and made["processors"]["min"] == 2
    assert made["warnings"] == ["no host known now can run it: n[0-1] (Feature: asked BigMem, host has no features)"]
    wait_for(lambda: job(site, made["id"])["reason"] is not None)
    [rejected] = job(site, made["id"])["rejected_hosts"]
    assert rejected.startswith("n[0-1]: ") and "BigMem" in rejected
    site.stop()
    site.start()
    assert job(site, made["id"])["read_as_requested"] == ["Processors", "Feature"]


def test_the_queue_survives_a_restart(site: InProcessServer) -> None:
    submit(site, ccs(8))
    state_becomes(site, "1", "Running")
    submit(site, ccs(2, priority="Highest"))
    wait_for(lambda: job(site, "2")["reason"])
    site.stop()
    site.start()
    assert job(site, "1")["state"] == "Running"
    assert job(site, "2")["state"] == "Queued" and job(site, "2")["priority"] == "Highest"
    wait_for(lambda: job(site, "2")["reason"])  # the hosts are still held by job 1 after the restart
    assert "0 free" in job(site, "2")["reason"]
    listed = site.get("/v1/jobs?state=queued").json()
    assert [j["id"] for j in listed["jobs"]] == ["2"]
    assert json.loads(site.get("/v1/jobs?limit=1").body)["truncated"] is True


def test_a_job_whose_host_requirements_no_longer_compile_at_a_restart_is_held(
        site: InProcessServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # it was scheduled without them: a job that asked for n1 alone (or excluded a host, or asked a
    # feature) could run anywhere once an upgrade read its stored document otherwise
    from infosvc.errors import DocumentError
    from infosvc.queue import submissions

    submit(site, ccs(8))
    state_becomes(site, "1", "Running")  # both hosts busy: the next waits
    asked = submit(site, sss("only-n1", 1, more="<Node>n1</Node>"))["id"]
    site.stop()

    def unreadable(*args: Any, **kwargs: Any) -> Any:
        raise DocumentError("read otherwise by this version")
    monkeypatch.setattr(submissions, "prepare", unreadable)
    site.start()
    held = job(site, asked)
    assert held["state"] == "Queued" and held["holds"] == ["System"], held
    site.request("DELETE", "/v1/jobs/1", token=site.tokens["submit"])  # the hosts free: it still waits
    state_becomes(site, "1", "Canceled")
    wait_for(lambda: "System hold" in job(site, asked)["reason"], message="the held job's reason")
    assert job(site, asked)["state"] == "Queued"


def test_the_ce_publishes_the_queue_in_every_rendering(site: InProcessServer) -> None:
    from infosvc.codec import safexml

    submit(site, ccs(1, runtime="00:10:00"))
    submit(site, ccs(1, runtime="00:10:00"))
    submit(site, ccs(8))  # both hosts: waits for the two above, reserved at their limits
    wait_for(lambda: [job(site, i)["state"] for i in "123"] == ["Running", "Running", "Queued"])
    wait_for(lambda: site.get("/v1/glue/computing-elements/default").json()["state"]["waiting_jobs"] == 1)
    ce = site.get("/v1/glue/computing-elements/default").json()
    state = ce["state"]
    assert (state["running_jobs"], state["waiting_jobs"], state["total_jobs"], state["free_cpus"]) == (2, 1, 3, 0)
    # the new job (a whole host, an hour) waits behind job 3 (both hosts, no limit: for ever)
    assert state["estimated_response_time"] == state["worst_response_time"] == 2146660842
    assert [(j["local_id"], j["status"]) for j in ce["jobs"]] == [("1", "RUNNING"), ("2", "RUNNING"),
                                                                ("3", "SCHEDULED")]
    document = site.get("/v1/glue/computing-elements/default?format=xml").body
    root = safexml.parse(document, max_bytes=1 << 24, what="GLUE document")
    safexml.validate(root, safexml.schema("glue-ce-1.1.xsd"))
    text = document.decode()
    assert "<RunningJobs>2</RunningJobs>" in text and "<WaitingJobs>1</WaitingJobs>" in text
    assert text.count("<Job>") + text.count("<Job ") == 3


def test_the_site_config_picks_fcfs(serve_app: ServerFactory) -> None:
    server = serve_app({"scheduler": {"policy": "fcfs"}}, agents=2, executors={"exec0": "n0", "exec1": "n1"})
    for number in range(2):
        server.report(f"n{number}", server.agent_token(), processors=4)
    submit(server, ccs(1, runtime="00:10:00"))
    submit(server, ccs(8, runtime="00:10:00"))
    submit(server, ccs(1, runtime="00:01:00"))  # EASY would backfill it on the idle host; FCFS does not
    wait_for(lambda: (job(server, "3")["reason"] or "").startswith("behind 2"), message="job 3 behind job 2")
    assert [job(server, i)["state"] for i in "123"] == ["Running", "Queued", "Queued"]


def test_a_submit_token_cancels_its_own_jobs_only(serve_app: ServerFactory) -> None:
    site = serve_app(agents=1, users={"alice": "alice", "bob": "bob"})
    site.report("n0", site.agent_token(), processors=1)
    first = submit(site, ccs(1), token=site.tokens["alice"])
    second = submit(site, ccs(1), token=site.tokens["alice"])
    assert job(site, second["id"])["owner"] == "alice"
    refused = site.request("DELETE", f"/v1/jobs/{second['id']}", token=site.tokens["bob"])
    assert refused.is_error(403), refused.body
    assert job(site, second["id"])["state"] == "Queued"  # bob's refusal changed nothing
    mine = site.request("DELETE", f"/v1/jobs/{second['id']}", token=site.tokens["alice"])
    assert mine.status == 200 and mine.json()["state"] == "Canceled"
    admin = site.request("DELETE", f"/v1/jobs/{first['id']}", token=site.tokens["admin"])
    assert admin.status == 200 and admin.json()["state"] == "Canceled"  # an admin cancels anyone's
