"""The whole path of a job: a server, two agents with --run-jobs on loopback (fixture hosts), a job
group of three dependent jobs, each really run, in order, with its exit code and its output where
the job says; a cancel and a run time limit killing the task's process group."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

from xml.sax.saxutils import escape

import pytest

from support.executors import reachable_base, start_agent, task_directory
from support.server import Server, ServerFactory, stop_process, wait_for

HOSTS = {"exec-a.example": "host1", "exec-b.example": "host2"}


@pytest.fixture
def cluster(serve_app: ServerFactory, tmp_path: Path) -> Iterator[tuple[Server, Path]]:
    server = serve_app(agents=2, executors={f"exec{n}": host for n, host in enumerate(HOSTS)})
    base = reachable_base()
    work = task_directory(next(base), "work")  # the tasks' account writes its outputs here
    agents = [start_agent(server, host, server.tokens[f"exec{number}"], tmp_path / f"agent{number}",
                          tmp_path / f"agent{number}.log", fixture=fixture)
              for number, (host, fixture) in enumerate(HOSTS.items())]
    try:
        wait_for(lambda: len(server.node_ids()) == 2, timeout=20, message="both agents reporting")
        yield server, work
    finally:
        for agent in agents:
            stop_process(agent)
        base.close()


def job(server: Server, job_id: str) -> Any:
    return server.get(f"/v1/jobs/{job_id}").json()


def submit(server: Server, document: str, tmp_path: Path) -> str:
    """`infosvc submit FILE` with a submit token file, as a user does; what it printed."""
    token = tmp_path / "submit.token"
    token.write_text(server.tokens["submit"] + "\n")
    path = tmp_path / "job.xml"
    path.write_text(document)
    done = subprocess.run([sys.executable, "-m", "infosvc", "submit", "--server", server.url, "--token-file", str(token),
                           str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def sh(name: str, script: str, work: Path, *, after: str = "", more: str = "") -> str:
    return (f"<Job><Id>{name}</Id><Name>{name}</Name>{after}<Executable>/bin/sh</Executable>"
            f"<Arguments>-c '{escape(script)}'</Arguments><InitialWorkingDirectory>{work}</InitialWorkingDirectory>"
            f"<OutputFile>{name}.out</OutputFile><ErrorFile>{name}.err</ErrorFile>"
            f"<Requested><Processors>1</Processors>{more}</Requested></Job>")


def test_a_job_group_runs_for_real_in_dependency_order(cluster: tuple[Server, Path], tmp_path: Path) -> None:
    server, work = cluster
    group = ("<JobGroup><Id>fat</Id>"
             + sh("fat.1", "echo one; echo 1 >> order.txt", work)
             + sh("fat.2", "echo two; echo 2 >> order.txt; exit 3", work, after="<Dependency>fat.1</Dependency>")
             + sh("fat.3", "echo three >&2; echo 3 >> order.txt", work,
                  after='<Dependency condition="OnExit" code="3">fat.2</Dependency>')
             + "</JobGroup>")
    printed = submit(server, group, tmp_path)
    assert printed == "job group 1 submitted: jobs 1-3\n"
    wait_for(lambda: job(server, "3")["state"] in ("Finished", "Failed", "Canceled"), timeout=60,
             message="the third job's end")
    states = [(job(server, i)["state"], job(server, i)["exit_code"]) for i in "123"]
    assert states == [("Finished", 0), ("Failed", 3), ("Finished", 0)]
    assert (work / "order.txt").read_text() == "1\n2\n3\n"
    assert (work / "fat.1.out").read_text() == "one\n" and (work / "fat.2.out").read_text() == "two\n"
    assert (work / "fat.3.err").read_text() == "three\n"
    first = job(server, "1")
    assert first["tasks"][0]["began"] is not None and first["hosts"] in HOSTS


def test_cancel_kills_the_task(cluster: tuple[Server, Path], tmp_path: Path) -> None:
    server, work = cluster
    submit(server, sh("long", "echo $$ > long.pid; sleep 60; echo late > long.late", work), tmp_path)
    wait_for(lambda: (work / "long.pid").exists() and (work / "long.pid").read_text().strip(), timeout=30)
    pid = int((work / "long.pid").read_text())
    reply = server.request("DELETE", "/v1/jobs/1", token=server.tokens["submit"])
    assert reply.status == 200 and reply.json()["state"] == "Canceled"
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), timeout=20, message="the cancelled task killed")
    assert not (work / "long.late").exists()


def test_the_run_time_limit_kills_the_task(cluster: tuple[Server, Path], tmp_path: Path) -> None:
    server, work = cluster
    submit(server, sh("limited", "echo $$ > limited.pid; sleep 60", work, more="<Duration>2</Duration>"), tmp_path)
    wait_for(lambda: (work / "limited.pid").exists() and (work / "limited.pid").read_text().strip(), timeout=30)
    pid = int((work / "limited.pid").read_text())
    wait_for(lambda: job(server, "1")["state"] == "Canceled", timeout=20, message="the limit reached")
    assert "run time limit" in job(server, "1")["reason"]
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), timeout=20, message="the task at its limit killed")


def test_a_stream_names_a_local_file_by_path_or_file_url() -> None:
    from infosvc_agents.taskrun import Refused, local_path

    assert local_path("Stdout", "out.txt") == "out.txt"
    assert local_path("Stdout", "/abs/out.txt") == "/abs/out.txt"
    assert local_path("Stdout", "dir/odd://name") == "dir/odd://name"  # a path, not a URL
    assert local_path("Stdin", "file:///data/in%20put.txt") == "/data/in put.txt"
    assert local_path("Stdin", "FILE://localhost/data/x") == "/data/x"
    for url, said in (("gsiftp://se.example.org/x", "a gsiftp URL"), ("https://example.org/x", "a https URL"),
                      ("file://other.example.org/x", "a file URL of host 'other.example.org'"),
                      ("file:///x%00y", "NUL")):
        with pytest.raises(Refused, match=said):
            local_path("Stdin", url)
