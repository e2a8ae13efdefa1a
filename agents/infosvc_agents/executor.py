"""`infosvc-agent --run-jobs`: run the tasks the aggregator placed on this host, so that a site can
try the whole path without a batch system.

Every interval the executor asks the aggregator for this host's tasks (GET /v1/executor/tasks, with
an executor token bound to this host) and hands each new one to a supervisor of its own
(infosvc_agents/taskrun.py), which runs it as the account the host maps its owner to
(infosvc_agents/accounts.py) and contains every process it starts. The executor itself never opens
a path a task names nor waits on anything a task does: nothing a submitter writes can block it.

Each task has a directory in the task state (`--task-state DIR`, root's, 0700): the order, the
supervisor's lock, BEGUN once the program runs, RESULT at its end, and which reports the server
has taken. The directory is made before the task starts, so a task is started once: a restarted
agent adopts a task whose supervisor still runs, reports one that ended while it was away, and
never starts a task that has a directory. Reports the server did not take are sent again.

A task that is no longer listed was cancelled: its supervisor gets SIGTERM and ends the whole task
(SIGTERM, then SIGKILL after the grace period). The supervisor enforces the run time limit itself,
so the limit holds while the agent is away. A stopping agent stops its tasks and reports them.
"""

from __future__ import annotations

import fcntl
import json
import logging
import marshal
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from infosvc_agents import taskrun
from infosvc_agents.accounts import Account, AccountError, AccountPolicy
from infosvc_agents.gpu_devices import Device, environment, pick
from infosvc_agents.push import PushError, Sender

__all__ = ["Executor", "TaskRecord"]

log = logging.getLogger("infosvc-agent.executor")

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
#: Seconds the launcher may take to say it forked a task's supervisor.
LAUNCH_SECONDS = 10.0
#: Seconds after its SIGTERM a supervisor is itself killed, should it hang (it never should).
SUPERVISOR_KILL_AFTER = 30.0
#: The server's job ids as a file name: anything else is refused, never joined to a path.
_JOB_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_TASK_DIRECTORY = re.compile(rf"(?P<job>{_JOB_ID.pattern})\.(?P<task>\d{{1,9}})\.(?P<attempt>\d{{1,9}})")
STARTED_SENT = "started.sent"
#: Where a job's directory is moved, out of the job's reach, to be emptied by its owner.
REMOVING = ".removing"
#: Seconds the removal of a job's directory may take before it is killed.
REMOVAL_SECONDS = 600.0
ENDED_SENT = "ended.sent"
#: the GPUs a task was given, a gpu_devices.Device key a line (absent: none)
GPUS = "gpus"


#: An end report's reason, at most: the server takes 1,000 characters in a report of 4 KiB.
REASON_CHARS = 1000
REASON_BYTES = 3000


def _fitting(reason: str) -> str:
    """The reason cut to what the server takes, counted as the report will carry it (JSON's escapes
    make one character of a file name up to 12 bytes)."""
    reason = reason[:REASON_CHARS]
    while len(json.dumps(reason)) > REASON_BYTES:
        reason = reason[: len(reason) * 3 // 4]
    return reason


def _sync_directory(path: Path) -> None:
    directory = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _write_atomically(path: Path, data: bytes, *, sync: bool = True) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
        if sync:
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(temporary, path)
    if sync:
        _sync_directory(path.parent)


@dataclass(slots=True)
class TaskRecord:
    """One placement of a task this host took (an attempt: a requeued task placed here again is
    another): its directory, and its supervisor while it runs."""

    job: str
    task: int
    attempt: int
    path: Path
    process: subprocess.Popen[bytes] | None = None  # the supervisor, where this agent started it
    pid: int | None = None  # the supervisor's, where the launcher forked it
    stop_sent_at: float | None = None
    result: dict[str, Any] | None = None
    # which reports the server took, as the files STARTED_SENT and ENDED_SENT say (read once, at a
    # restart: not stat'ed at every round)
    started_sent: bool = False
    ended_sent: bool = False
    #: the GPUs it was given (gpu_devices.Device keys), as the file GPUS in its directory keeps them
    gpus: tuple[str, ...] = ()

    def mark_sent(self, name: str) -> None:
        (self.path / name).touch()
        if name == STARTED_SENT:
            self.started_sent = True
        else:
            self.ended_sent = True

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.job, self.task, self.attempt)

    def read_result(self) -> dict[str, Any] | None:
        try:
            self.result = json.loads((self.path / taskrun.RESULT).read_bytes())
        except FileNotFoundError:
            return None
        return self.result

    def supervisor_pid(self) -> int | None:
        """The supervisor's pid while it lives (it holds its lock), else None."""
        if self.process is not None:
            return self.process.pid if self.process.poll() is None else None
        try:
            fd = os.open(self.path / taskrun.LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # held: alive, its pid written as it starts (0: not yet)
                text = os.pread(fd, 32, 0).decode().strip()
                return int(text) if text.isdigit() else self.pid or 0
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)


class LaunchUnknown(Exception):
    """The launcher took a task and did not say whether it forked its supervisor."""


class Launcher:
    """The agent's end of taskrun.launch: one single-threaded process, started with the executor,
    that forks each task's supervisor already loaded. A supervisor of its own costs a Python start
    (~50 ms); a fork ~1 ms. Where the launcher cannot be had, `start` says so (None) and the
    executor starts a supervisor of its own."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.process: subprocess.Popen[bytes] | None = None

    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is None and self.sock is not None:
            return True
        self.close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(taskrun.command("--launch", theirs.fileno()),
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            pass_fds=(theirs.fileno(),), start_new_session=True)
        except OSError as exc:
            log.warning("no task launcher (%s): each task's supervisor starts on its own", exc)
            ours.close()
            return False
        finally:
            theirs.close()
        ours.settimeout(LAUNCH_SECONDS)
        self.sock = ours
        return True

    def start(self, directory: Path, lock: int) -> int | None:
        """The pid of the supervisor forked for `directory`, handed `lock`; None where no launcher
        took the task (start one yourself); LaunchUnknown where it took it and said nothing."""
        if not self._ready():
            return None
        assert self.sock is not None
        try:
            socket.send_fds(self.sock, [os.fsencode(directory)], [lock])
        except OSError:
            self.close()  # not taken: starting it another way is safe
            return None
        try:
            reply = self.sock.recv(32)
        except OSError as exc:
            self.close()
            raise LaunchUnknown(f"the task launcher did not answer: {exc}") from None
        if not reply.isdigit() or reply == b"0":
            self.close()
            raise LaunchUnknown(f"the task launcher answered {reply!r}")
        return int(reply)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()  # the launcher ends when it reads the end of its socket
            self.sock = None
        if self.process is not None:
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None


def orders_of(body: bytes) -> list[tuple[tuple[str, int, int], dict[str, Any]]] | None:
    """The task list's orders, each with its key (job, task, attempt) as the agent keeps it; None
    when the answer is no list of tasks. An order whose id is not a job id this agent takes (the
    job a string of its pattern, task and attempt whole numbers, not negative) is left out with a
    warning: a task id of another type ("0" for 0) was listed under one key and kept under another,
    so the agent stopped and ran the same placement again at every round."""
    try:
        orders = json.loads(body)["tasks"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(orders, list):
        return None
    keyed = []
    for order in orders:
        if not isinstance(order, dict):
            log.warning("refusing a task order that is no object: %.100r", order)
            continue
        job, task, attempt = order.get("job"), order.get("task"), order.get("attempt", 0)
        if not (isinstance(job, str) and _JOB_ID.fullmatch(job) and type(task) is int and type(attempt) is int
                and task >= 0 and attempt >= 0):
            log.warning("refusing a task with the id %.40r/%.20r/%.20r: not a job id this agent takes", job, task, attempt)
            continue
        keyed.append(((job, task, attempt), order))
    return keyed


class Executor:
    def __init__(self, sender: Sender, *, state: str | Path, accounts: AccountPolicy | None = None,
                 interval: float = 2.0, containment: str = "auto", work_root: str | Path | None = None,
                 work_keep: float = 86400.0, grace: float = taskrun.GRACE_SECONDS,
                 clock: Callable[[], float] = time.time,
                 devices: Callable[[], Sequence[Device]] | None = None) -> None:
        self.sender = sender
        self.interval = interval
        self.accounts = accounts or AccountPolicy()
        self.containment = containment
        self.work_root = Path(work_root) if work_root else None
        self.work_keep = work_keep
        self.grace = grace
        self.clock = clock
        #: this host's GPUs a job can be given (the agent's scan: gpu_devices.devices_of)
        self.devices: Callable[[], Sequence[Device]] = devices or (lambda: ())
        self.state = Path(state)
        self.tasks: dict[tuple[str, int, int], TaskRecord] = {}
        self._stop = threading.Event()
        self._last_sweep = 0.0
        self._removals: list[tuple[subprocess.Popen[bytes], Path, float]] = []
        self.launcher = Launcher()
        self._prepare_state()
        self._recover()

    # --- the task state ---------------------------------------------------------------------------

    def _prepare_state(self) -> None:
        self.state.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = self.state.lstat()
        if not self.state.is_dir() or self.state.is_symlink() or info.st_uid != os.geteuid() or info.st_mode & 0o022:
            raise ValueError(f"--task-state {self.state}: must be a directory of this agent's user, "
                             "writable by it alone")
        if self.work_root is not None:
            self.work_root.mkdir(mode=0o711, parents=True, exist_ok=True)
            info = self.work_root.lstat()
            if self.work_root.is_symlink() or info.st_uid != os.geteuid() or info.st_mode & 0o022:
                raise ValueError(f"--work-root {self.work_root}: must be a directory of this agent's user, "
                                 "writable by it alone (the jobs' directories are made in it)")
            # the accounts reach their own job's directory, and list none (set whatever the umask:
            # a service's 0077 would lock them out)
            for directory in (self.work_root, self.work_root / REMOVING):
                directory.mkdir(mode=0o711, exist_ok=True)
                os.chmod(directory, 0o711)
            (self.state / "workdirs").mkdir(mode=0o700, exist_ok=True)

    def _recover(self) -> None:
        """After a restart: every task directory is a task this host took; none is started again."""
        for entry in sorted(self.state.iterdir()):
            found = _TASK_DIRECTORY.fullmatch(entry.name)
            if found is None or not entry.is_dir():
                continue
            record = TaskRecord(found["job"], int(found["task"]), int(found["attempt"]), entry,
                                started_sent=(entry / STARTED_SENT).exists(), ended_sent=(entry / ENDED_SENT).exists())
            self.tasks[record.key] = record
            try:  # the GPUs it holds while it runs: no other job is given them
                record.gpus = tuple((entry / GPUS).read_text().split())
            except FileNotFoundError:
                pass
            if record.ended_sent:
                # done with, but forgotten only once the server no longer lists it (_forget): a
                # listed task is never started again
                record.read_result()
                continue
            if record.read_result() is None:
                pid = record.supervisor_pid()
                if pid is not None:
                    log.info("job %s task %d still runs (supervisor pid %d): adopted", record.job, record.task, pid)
                else:
                    self._ended_unseen(record)

    def _ended_unseen(self, record: TaskRecord) -> None:
        """The supervisor is gone without a result (killed with the agent, or never got to run)."""
        began = (record.path / taskrun.BEGUN).exists()
        result = {"exit_code": 137 if began else taskrun.NOT_STARTED, "began": began, "limit": False,
                  "reason": "the task's supervisor ended before the task's end was known" if began
                  else "the agent stopped before the task could start"}
        _write_atomically(record.path / taskrun.RESULT, json.dumps(result).encode())
        record.result = result
        log.warning("job %s task %d: %s", record.job, record.task, result["reason"])

    # --- one round ----------------------------------------------------------------------------------

    def tick(self) -> None:
        self._collect()
        self._report()
        try:
            status, body = self.sender.call("GET", "/v1/executor/tasks", limit=16 * 1024 * 1024)
        except PushError as exc:
            log.warning("%s", exc)
            return
        if status != 200:
            log.warning("the server answered %d to the task list: %s", status, body[:300].decode("utf-8", "replace"))
            return
        keyed = orders_of(body)
        if keyed is None:
            log.warning("the server's task list is not a list of tasks: %s", body[:300].decode("utf-8", "replace"))
            return
        listed = {key for key, _ in keyed}
        for key, record in self.tasks.items():
            if key not in listed and record.result is None and record.stop_sent_at is None:
                log.info("job %s task %d is no longer placed here (cancelled): stopping it", record.job, record.task)
                self._stop_task(record)
        for key, order in keyed:
            if key not in self.tasks:
                self._start(order)
        self._collect()
        self._report()
        self._forget(listed)
        if self.work_root is not None:
            self._removed()
            if self.clock() - self._last_sweep >= min(60.0, self.work_keep):
                self._sweep_workdirs()

    def _start(self, order: dict[str, Any]) -> None:
        job, task, attempt = order["job"], order["task"], order.get("attempt", 0)
        path = self.state / f"{job}.{task}.{attempt}"
        try:
            path.mkdir(mode=0o700)  # the record that this host took the task: never again
            _sync_directory(self.state)  # durable before the task starts, a power cut included
        except FileExistsError:
            log.warning("job %s task %d has a directory already: not started again", job, task)
            self.tasks[(job, task, attempt)] = TaskRecord(job, task, attempt, path)
            return
        record = TaskRecord(job, task, attempt, path)
        self.tasks[record.key] = record
        try:
            account = self.accounts.resolve(order.get("owner"))
            workdir = order.get("workdir") or self._job_directory(job, account)
            argv = [str(order["executable"]), *shlex.split(order.get("arguments") or "")]
        except (AccountError, OSError) as exc:
            self._not_started(record, str(exc))
            return
        except ValueError as exc:
            self._not_started(record, f"Arguments: {exc}")
            return
        gpu_environment: dict[str, str] = {}
        count = int(order.get("gpus") or 0)
        devices = list(self.devices())
        if count > 0 or devices:
            given = self._gpus_for(job, devices, count)
            if given is None:
                self._not_started(record, f"asked {count} GPUs on this host: {len(devices)} here, "
                                          f"{len(devices) - len(self._held(job))} not held by other jobs")
                return
            record.gpus = tuple(d.key for d in given)
            if record.gpus:
                _write_atomically(path / GPUS, "\n".join(record.gpus).encode())
            gpu_environment = environment(devices, given)
        supervised = {
            "job": job, "task": task, "key": path.name, "argv": argv, "workdir": workdir,
            "environment": {"PATH": DEFAULT_PATH, "HOME": account.home if account else os.environ.get("HOME", "/"),
                            "USER": account.name if account else "", "LOGNAME": account.name if account else "",
                            "INFOSVC_JOB": job, "INFOSVC_TASK": str(task), **order.get("environment", {}),
                            # after the job's own: a job does not name GPUs it was not given
                            **gpu_environment},
            "stdin": order.get("stdin"), "stdout": order.get("stdout"), "stderr": order.get("stderr"),
            "deadline": order.get("deadline"), "grace": self.grace, "containment": self.containment,
            "account": None if account is None else {"name": account.name, "uid": account.uid, "gid": account.gid},
        }
        lock = -1
        how = "supervisor"
        try:
            # not synced: read back by the supervisor at once, and never again after a crash
            _write_atomically(path / taskrun.ORDER, marshal.dumps(supervised), sync=False)
            # the lock is taken here and handed over, so a restarted agent never finds the task
            # unclaimed while its supervisor is still starting
            lock = os.open(path / taskrun.LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            try:
                record.pid = self.launcher.start(path, lock)
            except LaunchUnknown as exc:
                # it may have forked the supervisor: the lock says, once this agent lets go of it
                log.warning("job %s task %d: %s: its state is read from its lock", job, task, exc)
                return
            if record.pid is None:  # no launcher: a supervisor of its own (a Python start more)
                with open(path / "supervisor.log", "ab") as errors:
                    record.process = subprocess.Popen(taskrun.command(path, lock), stdin=subprocess.DEVNULL,
                                                      stdout=subprocess.DEVNULL, stderr=errors, close_fds=True,
                                                      pass_fds=(lock,), start_new_session=True)
                record.pid, how = record.process.pid, "supervisor of its own"
        except OSError as exc:
            self._not_started(record, f"the task's supervisor could not start: {exc}")
            return
        finally:
            if lock >= 0:
                os.close(lock)  # the supervisor holds it now (or nobody does, and it is not started)
        log.info("job %s task %d handed to its %s (pid %d)%s", job, task, how, record.pid,
                 f" as {account.name}" if account else "")

    def _held(self, job: str) -> set[Device]:
        """The GPUs the running tasks of other jobs hold."""
        return {Device.of_key(key) for record in self.tasks.values()
                if record.result is None and record.job != job for key in record.gpus}

    def _gpus_for(self, job: str, devices: Sequence[Device], count: int) -> tuple[Device, ...] | None:
        """The GPUs a task of `job` is given: those its job's running tasks here hold (a job's tasks
        share its GPUs on a host), else `count` that no running job holds; None when too few are free."""
        if count <= 0:
            return ()
        for record in self.tasks.values():
            if record.job == job and record.result is None and len(record.gpus) >= count:
                return tuple(Device.of_key(key) for key in record.gpus[:count])
        return pick(devices, self._held(job), count)

    def _job_directory(self, job: str, account: Account | None) -> str:
        """The job's own directory under --work-root (made for its account, 0700), else the account's home."""
        if self.work_root is None:
            return account.home if account else os.getcwd()
        path = self.work_root / job
        try:
            path.mkdir(mode=0o700)
            if account is not None:
                os.chown(path, account.uid, account.gid)
        except FileExistsError:
            info = path.lstat()  # another task of the job made it: it must be the same account's directory
            expected = account.uid if account else os.geteuid()
            if not path.is_dir() or path.is_symlink() or info.st_uid != expected:
                raise OSError(f"the job's directory {path} exists and is not {expected}'s") from None
        (self.state / "workdirs" / job).touch()
        return str(path)

    def _not_started(self, record: TaskRecord, reason: str) -> None:
        result = {"exit_code": taskrun.NOT_STARTED, "began": False, "limit": False, "reason": reason}
        _write_atomically(record.path / taskrun.RESULT, json.dumps(result).encode())
        record.result = result
        log.warning("job %s task %d could not start: %s", record.job, record.task, reason)

    def _stop_task(self, record: TaskRecord) -> None:
        record.stop_sent_at = self.clock()
        pid = record.supervisor_pid()
        if pid:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def _collect(self) -> None:
        """Take the results of the tasks whose supervisors have ended."""
        for record in self.tasks.values():
            if record.result is None:
                try:
                    self._collect_one(record)
                except Exception:  # noqa: BLE001 - one record (a full disk...) must not stop the host's others
                    log.exception("job %s task %d: could not take its state", record.job, record.task)

    def _collect_one(self, record: TaskRecord) -> None:
        now = self.clock()
        if record.read_result() is not None:
            if record.process is not None:
                record.process.wait()
            self._ended(record)
            return
        pid = record.supervisor_pid()
        if pid is None:
            if record.read_result() is None:  # it may have written it just before it went
                self._ended_unseen(record)
            self._ended(record)
        elif (pid and record.stop_sent_at is not None
              and now - record.stop_sent_at > self.grace + SUPERVISOR_KILL_AFTER):
            log.warning("job %s task %d: its supervisor did not end after SIGTERM: killing it", record.job,
                        record.task)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _ended(self, record: TaskRecord) -> None:
        assert record.result is not None
        if self.work_root is not None and os.path.lexists(self.work_root / record.job):
            (self.state / "workdirs" / record.job).touch()  # the job's directory is kept from its last end
        log.info("job %s task %d ended: exit code %d%s", record.job, record.task, record.result["exit_code"],
                 f" ({record.result['reason']})" if record.result.get("reason") else "")

    def _report(self) -> None:
        for record in self.tasks.values():
            try:
                self._report_one(record)
            except Exception:  # noqa: BLE001 - one record (a full disk...) must not stop the host's others
                log.exception("job %s task %d: could not report", record.job, record.task)

    def _report_one(self, record: TaskRecord) -> None:
        if record.ended_sent:
            return
        if not record.started_sent and (record.path / taskrun.BEGUN).exists():
            if self._send(record, {"event": "started", **self._attempt(record)}):
                record.mark_sent(STARTED_SENT)
            else:
                return
        if record.result is not None:
            report: dict[str, Any] = {"event": "ended", "exit_code": int(record.result["exit_code"]),
                                      "limit": bool(record.result.get("limit")), **self._attempt(record)}
            if record.result.get("reason"):
                report["reason"] = _fitting(str(record.result["reason"]))
            sent = self._send(record, report, refused_for_good=False)
            if sent is None and "reason" in report:  # the server took none with it: the end matters more
                del report["reason"]
                sent = self._send(record, report, refused_for_good=False)
            if sent is not False:
                record.mark_sent(ENDED_SENT)

    @staticmethod
    def _attempt(record: TaskRecord) -> dict[str, int]:
        return {"attempt": record.attempt} if record.attempt >= 1 else {}  # 0: a server that does not count them

    def _send(self, record: TaskRecord, report: dict[str, Any], refused_for_good: bool = True) -> bool | None:
        """True: taken; False: to send again later; a refusal (the task cancelled meanwhile, or the
        report itself refused): True where `refused_for_good`, else None."""
        try:
            status, body = self.sender.call("POST", f"/v1/jobs/{record.job}/tasks/{record.task}/events",
                                            json.dumps(report).encode(), "application/json")
        except PushError:
            return False
        if status >= 500 or status in (401, 408, 429, 503):
            return False
        if status != 200:
            log.info("job %s task %d: the server did not take %s (%d): %s", record.job, record.task, report["event"],
                     status, body[:200].decode("utf-8", "replace"))
            return True if refused_for_good else None
        return True

    def _forget(self, listed: set[tuple[str, int, int]]) -> None:
        """A reported task the server no longer lists is done with: its directory goes."""
        for key, record in list(self.tasks.items()):
            if key not in listed and record.result is not None and record.ended_sent:
                shutil.rmtree(record.path, ignore_errors=True)
                del self.tasks[key]

    def _sweep_workdirs(self) -> None:
        """Jobs' directories whose last task ended more than --work-keep seconds ago are removed."""
        assert self.work_root is not None
        self._last_sweep = now = self.clock()
        busy = {record.job for record in self.tasks.values() if record.result is None}
        for mark in (self.state / "workdirs").iterdir():
            try:
                if mark.name in busy or not _JOB_ID.fullmatch(mark.name) or now - mark.stat().st_mtime < self.work_keep:
                    continue
                self._remove_job_directory(mark.name)
                mark.unlink()
            except OSError as exc:
                log.warning("job %s's directory: cannot remove it: %s", mark.name, exc)

    def _remove_job_directory(self, job: str) -> None:
        """Out of the job's reach first (renamed into REMOVING, root's), then emptied as the
        directory's owner (taskrun.remove_as) in a process of its own: root never walks a tree an
        account made (a FIFO swapped in would block its open, a link would lead it to a device), and
        nothing there can stall the executor."""
        assert self.work_root is not None
        path = self.work_root / job
        try:
            info = path.lstat()
        except FileNotFoundError:
            return
        target = self.work_root / REMOVING / f"{job}.{time.time_ns()}"
        os.rename(path, target)
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(target)  # not ours: a link or a file put there; unlink follows nothing
            return
        if os.geteuid() == 0:
            if info.st_uid == 0 or info.st_gid == 0:
                log.warning("job %s's directory is root's: left in %s", job, target)
                return
            # taskrun.remove_as: dropped to the owner and never dumpable, which an `rm` exec'd as
            # the owner is (a task of that account could take it over and run outside containment)
            argv = [sys.executable, "-I", "-S", taskrun.__file__, "--remove", str(target), str(info.st_uid),
                    str(info.st_gid)]
        else:
            argv = ["rm", "-rf", "--one-file-system", "--", str(target)]  # as the agent: tasks run as it too
        remover = subprocess.Popen(argv, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True, env={"PATH": DEFAULT_PATH})
        self._removals.append((remover, target, self.clock()))
        log.info("job %s's directory removed, %d s after its last task ended", job, self.work_keep)

    def _removed(self) -> None:
        """The removals that ended: the emptied directory goes too (root's rmdir of an empty one)."""
        kept = []
        for remover, target, since in self._removals:
            if remover.poll() is None:
                if self.clock() - since < REMOVAL_SECONDS:
                    kept.append((remover, target, since))
                    continue
                remover.kill()
                remover.wait()
            try:
                os.rmdir(target)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("%s: left, not empty after its owner's removal: %s", target, exc)
        self._removals = kept

    # --- the loop ----------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - one bad answer must not end the executor
                log.exception("executor round failed")
            self._stop.wait(self.interval)
        self.shutdown()

    def shutdown(self, wait: float | None = None) -> None:
        """The agent stops: stop every running task, wait for their ends, and report them."""
        running = [record for record in self.tasks.values() if record.result is None]
        for record in running:
            log.info("job %s task %d: the agent is stopping: stopping it", record.job, record.task)
            self._stop_task(record)
        give_up = time.monotonic() + (self.grace + 5 if wait is None else wait)
        while any(record.result is None for record in running) and time.monotonic() < give_up:
            time.sleep(0.05)
            self._collect()
        self._collect()
        self._report()
        self.launcher.close()
