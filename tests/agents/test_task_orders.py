"""The task list as the executor reads it (agents/infosvc_agents/executor.py `orders_of`): each
order keyed (job, task, attempt) once, as the agent keeps it, and an order whose id is of another
type or out of range left out. A task id sent as "0" was listed under one key and kept under
another, so the agent stopped the task as cancelled and ran the same placement again at every
round. The real Executor, with a sender that plays the server."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from infosvc_agents.executor import Executor, orders_of


class Server:
    """The aggregator's side of the executor's calls: a task list, and the reports it is sent."""

    def __init__(self, tasks: Any) -> None:
        self.tasks = tasks
        self.reports: list[tuple[str, Any]] = []

    def call(self, method: str, path: str, body: bytes | None = None, content_type: str | None = None,
             limit: int | None = None) -> tuple[int, bytes]:
        if method == "GET":
            return 200, json.dumps({"tasks": self.tasks}).encode()
        self.reports.append((path, json.loads(body or b"{}")))
        return 200, b"{}"


ORDER = {"job": "7", "task": 0, "attempt": 1, "owner": "alice", "executable": "/bin/true"}


@pytest.mark.parametrize("change", [{"task": "0"}, {"attempt": "1"}, {"job": 7}, {"task": True}, {"task": -1},
                                    {"attempt": 1.0}, {"job": "../x"}, {"job": ""}])
def test_an_order_of_another_type_is_refused_not_run(change: dict[str, Any], tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    server = Server([{**ORDER, **change}])
    executor = Executor(server, state=tmp_path / "state")  # type: ignore[arg-type]
    try:
        with caplog.at_level(logging.WARNING, logger="infosvc_agents"):
            for _ in range(3):
                executor.tick()
        assert executor.tasks == {} and server.reports == []  # nothing started, stopped or reported
        assert list((tmp_path / "state").iterdir()) == []
        assert "not a job id this agent takes" in caplog.text
    finally:
        executor.shutdown(wait=1)


def test_the_keys_are_the_agent_s_own() -> None:
    body = json.dumps({"tasks": [ORDER, {**ORDER, "task": 1}, {**ORDER, "attempt": "2"}, "x", {"job": "8", "task": 0}]})
    assert [key for key, _ in orders_of(body.encode()) or []] == [("7", 0, 1), ("7", 1, 1), ("8", 0, 0)]
    for answer in (b"[]", b'{"tasks": {}}', b"{}", b"not json", b'{"tasks": null}'):
        assert orders_of(answer) is None, answer
    assert orders_of(b'{"tasks": []}') == []


@pytest.mark.parametrize("found, warned", [(["subreaper"], True), (["subreaper", "cgroup"], False),
                                           (["subreaper", "pidns"], False)])
def test_the_agent_says_at_its_start_when_tasks_have_no_cgroup(found: list[str], warned: bool, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    # with the subreaper alone a task that keeps forking can outrun its cancel (docs/security.md):
    # an admin running --containment auto where no cgroup v2 is writable and no PID namespace may be
    # made is told so
    from infosvc_agents import cli, taskrun

    token = tmp_path / "executor.token"
    token.write_text("x" * 40 + "\n")
    token.chmod(0o600)
    monkeypatch.setattr(taskrun, "available_containments", lambda: found)
    args = cli.parser().parse_args(["--server", "http://127.0.0.1:9", "--executor-token-file", str(token),
                                    "--task-state", str(tmp_path / "state"), "--run-as", "nobody"])
    with caplog.at_level(logging.WARNING, logger="infosvc_agents"):
        executor = cli._executor(args)
    assert executor is not None
    executor.shutdown(wait=0)
    assert ("no writable cgroup v2 here" in caplog.text) is warned


@pytest.mark.parametrize("asked", ["cgroup", "pidns"])
def test_the_agent_refuses_to_start_with_a_containment_the_host_lacks(asked: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # every task would fail to start, each saying why: the agent says so once, at its start
    from infosvc_agents import cli, taskrun

    token = tmp_path / "executor.token"
    token.write_text("x" * 40 + "\n")
    token.chmod(0o600)
    monkeypatch.setattr(taskrun, "available_containments", lambda: ["subreaper"])
    args = cli.parser().parse_args(["--server", "http://127.0.0.1:9", "--executor-token-file", str(token),
                                    "--task-state", str(tmp_path / "state"), "--run-as", "nobody",
                                    "--containment", asked])
    assert cli._executor(args) is None
    assert f"--containment {asked} is not available here (only subreaper)" in capsys.readouterr().err
