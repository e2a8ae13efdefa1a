"""A job's controls reaching the processes: real agents with --run-jobs on loopback (test_executor's
cluster). A requeue has the executor kill the running task and the job run it again, a new
attempt; a Deadline has the task killed and the job Canceled; a job held at submission runs only
once released."""

from __future__ import annotations

import time
from pathlib import Path

from support.server import Server, wait_for
from test_executor import cluster, job, sh, submit  # noqa: F401 - cluster is a fixture


def pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def test_requeue_kills_the_task_and_runs_it_again(cluster: tuple[Server, Path], tmp_path: Path) -> None:
    server, work = cluster
    runs = work / "again.pids"
    submit(server, sh("again", f"echo $$ >> {runs}; sleep 60", work), tmp_path)
    wait_for(lambda: len(pids(runs)) == 1, timeout=30, message="the first run")
    first = pids(runs)[0]
    reply = server.request("POST", "/v1/jobs/1/requeue", b"", token=server.tokens["submit"])
    assert reply.status == 200 and reply.json()["state"] == "Queued", reply.body
    wait_for(lambda: not Path(f"/proc/{first}").exists(), timeout=20, message="the requeued task killed")
    wait_for(lambda: len(pids(runs)) == 2, timeout=30, message="the second run")
    again = job(server, "1")
    assert again["state"] == "Running" and again["tasks"][0]["attempts"] == 2
    assert server.request("DELETE", "/v1/jobs/1", token=server.tokens["submit"]).status == 200


def test_a_deadline_kills_the_task_and_a_hold_keeps_a_job_from_running(cluster: tuple[Server, Path],
                                                                        tmp_path: Path) -> None:
    server, work = cluster
    held = work / "held.pid"
    token = server.tokens["submit"]
    reply = server.request("POST", "/v1/jobs", sh("held", f"echo $$ > {held}", work).replace(
        "<Executable>", "<Hold>User</Hold><Executable>").encode(), token=token)
    assert reply.status == 201 and reply.json()["holds"] == ["User"]
    deadline = int(time.time()) + 4
    reply = server.request("POST", "/v1/jobs", sh("late", "echo $$ > late.pid; sleep 60; echo late > late.late", work)
                           .replace("<Executable>", f"<Deadline>{deadline}</Deadline><Executable>").encode(), token=token)
    assert reply.status == 201
    wait_for(lambda: (work / "late.pid").exists() and (work / "late.pid").read_text().strip(), timeout=30)
    pid = int((work / "late.pid").read_text())
    wait_for(lambda: job(server, "2")["state"] == "Canceled", timeout=20, message="the Deadline reached")
    assert job(server, "2")["reason"].startswith("reached its Deadline")
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), timeout=20, message="the task at its Deadline killed")
    assert not (work / "late.late").exists() and not held.exists()  # the held job never ran
    assert server.request("POST", "/v1/jobs/1/release", b"", token=token).status == 200
    wait_for(lambda: job(server, "1")["state"] == "Finished", timeout=30, message="the released job run")
    assert held.exists()
