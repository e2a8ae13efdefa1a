"""The exit status a task in a PID namespace of its own reports (`--containment pidns`): its main
process's, whatever the namespace's init is doing when the task's kill comes.

A review found, by reasoning, that the init (pid 1 of the namespace) reaped the task's main process
and passed its wait status on to the supervisor, so that a SIGKILL of the init (the end of a cancel's
or a limit's grace) landing after the main process had exited, but before the init had reaped it
and said so, was reported as 137, killed. Here the init is held on purpose in that window: the test
stops it (SIGSTOP, as root) before the main process exits, so that it cannot reap it until the
supervisor's SIGKILL. They need root (the namespace, and a task run as another account) and skip
without it."""

from __future__ import annotations

import fcntl
import json
import marshal
import os
import pwd
import signal
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from support.executors import AS_ROOT, TASK_ACCOUNT, alive, reachable_base, task_directory
from support.server import wait_for

from infosvc_agents import taskrun


pytestmark = pytest.mark.skipif(not AS_ROOT, reason="a task in a PID namespace as another account needs root "
                                                    "(CI runs as root)")

#: The main process: exits 7 on SIGUSR1, ignores SIGTERM; meanwhile a `sleep` of its own is always
#: running, and is left behind in the namespace when it exits (`wait` returns at a trapped signal).
SCRIPT = "trap 'exit 7' USR1; trap '' TERM; echo $$ $PPID > pid; while :; do sleep 1 & wait $!; done"


@pytest.fixture
def base() -> Iterator[Path]:
    yield from reachable_base()


@pytest.fixture
def task(base: Path) -> Iterator[tuple[Path, Path, subprocess.Popen[bytes]]]:
    """A supervisor of its own for SCRIPT as the task's account in a PID namespace, once SCRIPT
    runs: its directory, the task's, the supervisor. Killed after the test if it still runs."""
    if "pidns" not in taskrun.available_containments():
        pytest.skip("no right to make a PID namespace here")
    work = task_directory(base, "work")
    directory = base / "task"
    directory.mkdir(mode=0o700)
    account = pwd.getpwnam(TASK_ACCOUNT)
    order = {"job": "t", "task": 0, "key": "t.0.exit", "argv": ["/bin/sh", "-c", SCRIPT], "grace": 1.0,
             "environment": {"PATH": "/usr/bin:/bin"}, "workdir": str(work), "containment": "pidns",
             "account": {"name": TASK_ACCOUNT, "uid": account.pw_uid, "gid": account.pw_gid}}
    (directory / taskrun.ORDER).write_bytes(marshal.dumps(order))
    lock = os.open(directory / taskrun.LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        supervisor = subprocess.Popen(taskrun.command(directory, lock), pass_fds=(lock,), start_new_session=True)
    finally:
        os.close(lock)
    try:
        wait_for(lambda: (work / "pid").exists() and (work / "pid").read_text().endswith("\n"), timeout=20,
                 message="the task's program running")
        yield directory, work, supervisor
    finally:
        if supervisor.poll() is None:
            supervisor.kill()  # its Init dies with it, and the namespace with its Init
            supervisor.wait()


def _in_namespace(supervisor: int) -> dict[int, int]:
    """The supervisor's descendants in the task's namespace: {pid there: pid on the host}."""
    found = {}
    for pid in taskrun.descendants(supervisor):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        nspids = next(line for line in status.splitlines() if line.startswith("NSpid:")).split()[1:]
        if len(nspids) == 2:
            found[int(nspids[1])] = pid
    return found


def _state(pid: int) -> bytes:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0]


def _result(directory: Path) -> Any:
    result = json.loads((directory / taskrun.RESULT).read_text())
    assert result["began"] and result["containment"] == "pidns", result
    return result


@pytest.mark.parametrize("main, code", [("exits", 7), ("is killed", 128 + signal.SIGKILL)])
def test_the_main_processs_own_status_whatever_its_init_is_doing(task: tuple[Path, Path, subprocess.Popen[bytes]],
                                                                 main: str, code: int) -> None:
    """The init is stopped; the main process exits 7 (or runs on); then a cancel: SIGTERM, and after
    the grace period the SIGKILL of the init, which ends the namespace whole. A main process that
    had exited reports 7, though no init reaped it; one that the kill ended reports 137."""
    directory, _, supervisor = task
    processes = _in_namespace(supervisor.pid)
    init, main_process = processes[1], processes[2]
    os.kill(init, signal.SIGSTOP)
    wait_for(lambda: _state(init) == b"T", timeout=10, message="the init stopped")
    if main == "exits":
        os.kill(main_process, signal.SIGUSR1)
        wait_for(lambda: not alive(main_process), timeout=10, message="the task's main process exited")
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=30) == code
    result = _result(directory)
    assert result["exit_code"] == code and result["stopped"], result


def test_a_main_process_that_ends_by_itself_while_others_linger(task: tuple[Path, Path,
                                                                              subprocess.Popen[bytes]]) -> None:
    """Pid 2 of the namespace, whose parent (the supervisor, outside it) is pid 0 there; it exits 7
    by itself and leaves its `sleep` to the init, which the supervisor then ends: 7, no cancel."""
    directory, work, supervisor = task
    assert (work / "pid").read_text().split() == ["2", "0"]
    os.kill(_in_namespace(supervisor.pid)[2], signal.SIGUSR1)
    assert supervisor.wait(timeout=30) == 7
    result = _result(directory)
    assert result["exit_code"] == 7 and not result["stopped"] and not result["limit"], result
