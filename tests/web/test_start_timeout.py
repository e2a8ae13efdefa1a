"""Hosts that run jobs, and tasks no executor starts (docs/security.md, docs/scheduling.md): the
queue places tasks only on hosts an executor token is bound to (`executor TOKEN HOST`), so an
agent token reporting a host of 4,096 processors draws no job; a task not started within
`[scheduler] start_timeout_seconds` of its placement goes back to the queue (or fails, not
rerunnable) and its host is drained (Paused, with the reason on /v1/nodes, in GLUE and in
`infosvc why`) until an admin resumes it; across a restart too. On real servers with real
tokens files; executors are played by the test posting task events with an executor token."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from support.server import Server, ServerFactory, wait_for

TIMEOUT = 1.0


def job_document(name: str, processors: int = 1, *, rerunnable: bool = True) -> bytes:
    restart = "" if rerunnable else "<Restartable>false</Restartable>"
    return (f"<Job><Id>{name}</Id><Name>{name}</Name><Executable>/bin/true</Executable>{restart}"
            f"<Requested><Processors>{processors}</Processors></Requested></Job>").encode()


def submit(site: Server, body: bytes, token: str = "submit") -> str:
    reply = site.request("POST", "/v1/jobs", body, token=site.tokens[token])
    assert reply.status == 201, reply.body
    return str(reply.json()["id"])


def job(site: Server, job_id: str) -> Any:
    reply = site.get(f"/v1/jobs/{job_id}")
    assert reply.status == 200, reply.body
    return reply.json()


def node(site: Server, host: str) -> Any:
    reply = site.get(f"/v1/nodes/{host}")
    assert reply.status == 200, reply.body
    return reply.json()


def started(site: Server, job_id: str, host: str, attempt: int = 1) -> None:
    """The executor of `host` says the task began: the `attempt` its task list gives (a report of a
    task placed again names it, as the agent's executor does)."""
    body = json.dumps({"event": "started", "attempt": attempt}).encode()
    reply = site.request("POST", f"/v1/jobs/{job_id}/tasks/0/events", body, token=site.tokens[f"exec-{host}"])
    assert reply.status == 200, reply.body


def site_of(serve: ServerFactory, hosts: tuple[str, ...] = ("n0", "n1"), timeout: float = TIMEOUT,
            **kwargs: Any) -> Any:
    server = serve({"scheduler": {"start_timeout_seconds": timeout}}, agents=len(hosts) + 1,
                   executors={f"exec-{h}": h for h in hosts}, **kwargs)
    for host in hosts:
        server.report(host, server.agent_token(), processors=4)
    return server


def test_a_host_without_an_executor_draws_no_job(serve_app: ServerFactory) -> None:
    """The attack: any agent token reported a host of 4,096 processors and every big job was
    placed there, Running for ever."""
    site = site_of(serve_app, ("n0",))
    site.report("big", site.agent_token(), processors=4096)
    big = submit(site, job_document("big", 64))
    small = submit(site, job_document("small", 1))
    wait_for(lambda: job(site, small)["state"] == "Running", message="the small job running")
    assert job(site, small)["hosts"] == "n0"
    wait_for(lambda: job(site, big)["reason"], message="the big job's reason")
    waiting = job(site, big)
    assert waiting["state"] == "Queued" and "no host with an executor fits" in waiting["reason"], waiting
    assert site.get("/v1/executor/tasks?host=big", token=site.tokens["admin"]).json()["tasks"] == []
    # nor does an admin's job go there, nor one that names the host
    admins = submit(site, job_document("admins", 64), token="admin")
    named = submit(site, job_document("named", 1).replace(b"</Requested>", b"<Node>big</Node></Requested>"))
    for waiter in (admins, named):
        wait_for(lambda: job(site, waiter)["reason"], message="a reason")
        assert job(site, waiter)["state"] == "Queued" and "no host with an executor fits" in job(site, waiter)["reason"]


def test_a_task_not_started_in_time_goes_back_and_its_host_is_drained(serve_app: ServerFactory) -> None:
    site = site_of(serve_app)
    first = submit(site, job_document("first"))
    placed = wait_for(lambda: job(site, first)["hosts"], message="job placed")
    other = "n1" if placed == "n0" else "n0"
    # no executor starts it: after the timeout it is placed on the other host, and its first is drained
    wait_for(lambda: job(site, first)["hosts"] == other, timeout=10, message="the job placed again elsewhere")
    drained = node(site, placed)
    assert drained["life_cycle"] == "Paused" and drained["paused"] is True
    assert "not started by an executor" in drained["reason"] and f"job {first}" in drained["reason"], drained
    glue = site.get(f"/v1/glue/hosts/{placed}").json()
    assert "Paused" in json.dumps(glue) and "not started by an executor" in json.dumps(glue), glue
    events = [e for e in job(site, first)["events"] if e["task"] is None]
    assert [e["state"] for e in events] == ["Queued", "Running", "Queued", "Running"], events
    assert "not started by an executor" in events[2]["detail"] and placed in events[2]["detail"]
    # started in time on the other host: no drain, whatever the time
    started(site, first, other, attempt=2)  # placed again: its second attempt
    time.sleep(TIMEOUT * 1.5)
    assert job(site, first)["state"] == "Running" and node(site, other)["life_cycle"] == "Ready"
    # nothing is placed on the drained host; an admin resumes it the usable way
    second = submit(site, job_document("second"))
    wait_for(lambda: job(site, second)["reason"], message="the second job's reason")
    assert job(site, second)["state"] == "Queued"
    assert site.admin(placed, "resume").status == 200
    wait_for(lambda: job(site, second)["hosts"] == placed, message="the second job on the resumed host")
    assert node(site, placed)["life_cycle"] == "Ready" and "reason" not in node(site, placed)
    audit = [line for line in site.log.read_text().splitlines() if "infosvc.audit" in line and "drain" in line]
    assert any(placed in line for line in audit), audit


def test_a_task_that_is_not_rerunnable_fails_instead(serve_app: ServerFactory) -> None:
    site = site_of(serve_app)
    once = submit(site, job_document("once", rerunnable=False))
    placed = wait_for(lambda: job(site, once)["hosts"], message="job placed")
    ended = wait_for(lambda: job(site, once)["state"] == "Failed" and job(site, once), timeout=10,
                     message="the job failed")
    assert "not started by an executor" in ended["reason"] and "not rerunnable" in ended["reason"], ended
    assert node(site, placed)["life_cycle"] == "Paused"


def test_the_timeout_survives_a_restart(serve: ServerFactory) -> None:
    site = site_of(serve, ("n0",), timeout=2.0)
    stuck = submit(site, job_document("stuck"))
    wait_for(lambda: job(site, stuck)["hosts"] == "n0", message="job placed")
    site.kill()  # kill -9 within its timeout: the placement is stored, the clock starts again
    site.start()
    site.report("n0", site.tokens["agent0"], processors=4)  # still heard from
    assert job(site, stuck)["state"] == "Running"
    wait_for(lambda: job(site, stuck)["state"] == "Queued", timeout=15, message="the job back in the queue")
    assert node(site, "n0")["life_cycle"] == "Paused"
    assert "not started by an executor" in node(site, "n0")["reason"]
    # the drain is stored: another restart keeps the host out, and the job waiting
    site.restart()
    site.report("n0", site.tokens["agent0"], processors=4)
    assert node(site, "n0")["life_cycle"] == "Paused"
    wait_for(lambda: job(site, stuck)["reason"], message="the reason")
    assert job(site, stuck)["state"] == "Queued"
    why = subprocess.run([sys.executable, "-m", "infosvc", "why", stuck, "--server", site.url],
                         capture_output=True, text=True, timeout=60)
    assert why.returncode == 0, why.stderr
    assert "Queued" in why.stdout and "not started by an executor" in why.stdout, why.stdout


@pytest.mark.parametrize("value", [0, -1, "60"])
def test_the_timeout_setting_is_checked(value: object) -> None:
    from infosvc.config.site import ConfigError, parse_config

    with pytest.raises(ConfigError, match="start_timeout_seconds"):
        parse_config({"scheduler": {"start_timeout_seconds": value}})
