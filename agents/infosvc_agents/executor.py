"""`infosvc-agent --run-jobs`: run the tasks the aggregator placed on this host, so that a site can
try the whole path without a batch system.

Every interval the executor asks the aggregator for this host's tasks (GET /v1/executor/tasks, with
an executor token bound to this host), starts each new one as the configured unprivileged user in
a process group of its own, with the task's working directory, environment and files, and reports
its start and its end with the exit code (POST /v1/jobs/{job}/tasks/{task}/events). A task that is
no longer listed was cancelled, and one past its deadline has reached its run time limit: its
whole process group is killed (SIGTERM, then SIGKILL after a grace period). Reports the server did
not take are kept and sent again: an end is never lost to a server restart.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable

from infosvc_agents.push import PushError, Sender

__all__ = ["Executor", "Running"]

log = logging.getLogger("infosvc-agent.executor")

#: Seconds between SIGTERM and SIGKILL for a task being stopped.
GRACE_SECONDS = 5.0
#: Exit code reported for a task that could not be started (the shell's "command not found").
NOT_STARTED = 127
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(slots=True)
class Running:
    job: str
    task: int
    process: subprocess.Popen[bytes]
    deadline: float | None
    files: list[IO[bytes]] = field(default_factory=list)
    killed_at: float | None = None
    at_limit: bool = False  # stopped here at the run time limit, not on a cancel


class Executor:
    def __init__(self, sender: Sender, *, interval: float = 2.0, run_as: str | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.sender = sender
        self.interval = interval
        self.run_as = run_as
        self.clock = clock
        self.running: dict[tuple[str, int], Running] = {}
        self.pending: list[tuple[str, int, dict[str, Any]]] = []  # reports not yet taken
        self.finished: set[tuple[str, int]] = set()  # ended here, report maybe not yet seen by the server
        self._stop = threading.Event()

    # --- one round ------------------------------------------------------------------------

    def tick(self) -> None:
        self._reap()
        self._flush()
        try:
            status, body = self.sender.call("GET", "/v1/executor/tasks", limit=16 * 1024 * 1024)
        except PushError as exc:
            log.warning("%s", exc)
            return
        if status != 200:
            log.warning("the server answered %d to the task list: %s", status, body[:300].decode("utf-8", "replace"))
            return
        orders = json.loads(body)["tasks"]
        listed = {(order["job"], order["task"]) for order in orders}
        for key, run in list(self.running.items()):
            if key not in listed and run.killed_at is None:
                log.info("job %s task %d is no longer placed here (cancelled): stopping it", *key)
                self._kill(run)
        for order in orders:
            key = (order["job"], order["task"])
            if key not in self.running and key not in self.finished:
                self._start(order)
        self.finished &= listed  # once the server no longer lists it, its end was taken
        now = self.clock()
        for run in self.running.values():
            if run.deadline is not None and now >= run.deadline and run.killed_at is None:
                log.info("job %s task %d reached its run time limit: stopping it", run.job, run.task)
                run.at_limit = True
                self._kill(run)
        self._reap()
        self._flush()

    def _start(self, order: dict[str, Any]) -> None:
        job, task = order["job"], order["task"]
        workdir = order.get("workdir") or os.path.expanduser("~" + (self.run_as or ""))
        env = {"PATH": DEFAULT_PATH, "HOME": workdir, "INFOSVC_JOB": job, "INFOSVC_TASK": str(task),
               **order.get("environment", {})}
        files: list[IO[bytes]] = []
        try:
            def opened(name: str | None, mode: str) -> IO[bytes] | int:
                if not name:
                    return subprocess.DEVNULL
                handle = open(os.path.join(workdir, name), mode)  # noqa: SIM115 - closed when the task ends
                files.append(handle)
                return handle

            stdin, stdout, stderr = opened(order.get("stdin"), "rb"), opened(order.get("stdout"), "ab"), \
                opened(order.get("stderr"), "ab")
            argv = [order["executable"], *shlex.split(order.get("arguments") or "")]
            process = subprocess.Popen(argv, cwd=workdir, env=env, stdin=stdin, stdout=stdout, stderr=stderr,
                                       start_new_session=True, user=self.run_as, close_fds=True)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            for handle in files:
                handle.close()
            log.warning("job %s task %d could not start: %s", job, task, exc)
            self.pending.append((job, task, {"event": "ended", "exit_code": NOT_STARTED}))
            self.finished.add((job, task))
            return
        self.running[(job, task)] = Running(job, task, process, order.get("deadline"), files)
        self.pending.append((job, task, {"event": "started"}))
        log.info("job %s task %d started: pid %d", job, task, process.pid)

    def _kill(self, run: Running) -> None:
        run.killed_at = self.clock()
        try:
            os.killpg(run.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def _reap(self) -> None:
        now = self.clock()
        for key, run in list(self.running.items()):
            code = run.process.poll()
            if code is None:
                if run.killed_at is not None and now - run.killed_at >= GRACE_SECONDS:
                    try:
                        os.killpg(run.process.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                continue
            for handle in run.files:
                handle.close()
            del self.running[key]
            exit_code = code if code >= 0 else 128 - code  # killed by signal N: 128 + N, as shells say
            self.pending.append((run.job, run.task, {"event": "ended", "exit_code": exit_code, "limit": run.at_limit}))
            self.finished.add(key)
            log.info("job %s task %d ended: exit code %d", run.job, run.task, exit_code)

    def _flush(self) -> None:
        kept = []
        for job, task, report in self.pending:
            try:
                status, body = self.sender.call("POST", f"/v1/jobs/{job}/tasks/{task}/events",
                                                json.dumps(report).encode(), "application/json")
            except PushError:
                kept.append((job, task, report))
                continue
            if status >= 500 or status in (408, 429, 503):
                kept.append((job, task, report))
            elif status != 200:  # cancelled meanwhile, or already ended: nothing to keep
                log.info("job %s task %d: the server did not take %s (%d): %s", job, task, report["event"], status,
                         body[:200].decode("utf-8", "replace"))
        self.pending = kept

    # --- the loop ----------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - one bad answer must not end the executor
                log.exception("executor round failed")
            self._stop.wait(self.interval)
        for run in self.running.values():
            self._kill(run)
