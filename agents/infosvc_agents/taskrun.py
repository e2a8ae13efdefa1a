"""The supervisor of one task: the process between the executor and the task it runs.

The executor (infosvc_agents/executor.py) writes the task's order into a directory of its own and
starts `python -I -S taskrun.py DIR` in a new session; from there on this process alone acts for the
task, so that nothing the task names is ever touched by the agent:

- It forks the task. The child drops to the task's account at once (initgroups: the account's own
  primary and supplementary groups, nothing of the agent's; then setresgid/setresuid, checked to be
  irreversible), enters the working directory and opens Stdin/Stdout/Stderr as that account,
  relative to that directory, with O_NOFOLLOW and O_NONBLOCK (a FIFO cannot block it), accepting
  only regular files (and /dev/null); then it execs the task. A step that fails ends the task with
  exit code 127 and a reason that says which path and why ("Stdin /root/x: permission denied as
  nobody").
- It contains every process the task starts: it is a child subreaper (PR_SET_CHILD_SUBREAPER), so
  a process that double-forks or calls setsid is still its descendant and is reaped here; where
  cgroup v2 is writable the task also runs in a cgroup of its own, killed whole with cgroup.kill
  (as Slurm's proctrack/cgroup); else, where it may, it runs the task in a PID namespace of its
  own under a small init of its own (Init), which the kernel kills whole, with everything in it,
  when that init dies. The subreaper alone walks /proc to signal, which processes that fork and
  exit at once can outrun; the other two cannot be. When the task's main process ends, or on
  SIGTERM (a cancel, the agent stopping) or at the run time limit, every remaining process gets
  SIGTERM and, after the grace period, SIGKILL; the supervisor exits only when none is left.
- It records what happened in the directory (atomically, synced): BEGUN once the task's program
  runs, RESULT at the end (exit code, whether the limit stopped it, why it did not start). It
  holds the exclusive lock on LOCK (holding its pid) that the agent took and handed over, which is
  how a restarted agent tells a live supervisor from a dead one and adopts it instead of starting
  the task again. Whatever fails in it after the fork, the task is killed whole before it exits.

It uses the standard library alone, since it is started with -I -S (no site-packages: quicker and
blind to the environment), and on the way to the task's start only modules that load in microseconds:
the order comes as `marshal` (written by the same interpreter, in root's own directory), the
arguments already split, and json is loaded for the result alone. Python's start is the bulk of
what a task's start costs here (bench/executor.py).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import marshal
import os
import select
import signal
import stat
import sys
import time
from urllib.parse import unquote

TYPE_CHECKING = False  # typing itself is not loaded: a tenth of the start (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

ORDER = "order"
BEGUN = "begun"
RESULT = "result.json"
LOCK = "lock"
#: Exit code of a task that could not be started (the shell's "command not found").
NOT_STARTED = 127
#: Seconds between SIGTERM and SIGKILL for what is left of a task.
GRACE_SECONDS = 5.0
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_PDEATHSIG = 1
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_SLAVE = 2, 4, 8, 1 << 14, 1 << 19
_STREAM_LABELS = {"stdin": "Stdin", "stdout": "Stdout", "stderr": "Stderr"}


def command(directory: str | os.PathLike[str], lock: int) -> list[str]:
    """The command line that supervises the task whose order is in `directory`; `lock` is the
    descriptor of its LOCK, flocked by the caller and passed on (pass_fds)."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), os.fspath(directory), str(lock)]


# --- cgroup v2 ------------------------------------------------------------------------------------

def _own_cgroup_dir() -> str | None:
    """This process's cgroup v2 directory, where cgroup2 is mounted; None otherwise."""
    try:
        with open("/proc/self/cgroup") as lines:
            path = next((line.rstrip("\n")[3:] for line in lines if line.startswith("0::")), None)
        with open("/proc/self/mounts") as mounts:
            root = next((fields[1] for fields in (line.split() for line in mounts) if fields[2] == "cgroup2"), None)
    except OSError:
        return None
    if path is None or root is None:
        return None
    return os.path.join(root, path.lstrip("/"))


def available_containments() -> list[str]:
    """The containments this host allows: always the subreaper; cgroup where cgroup v2 is writable;
    pidns where this process may make a PID namespace (root, unless a seccomp filter forbids it)."""
    found = ["subreaper"]
    here = _own_cgroup_dir()
    if here is not None and os.access(here, os.W_OK) and os.access(os.path.join(here, "cgroup.procs"), os.W_OK):
        found.append("cgroup")
    if _may_make_pid_namespace():
        found.append("pidns")
    return found


def _may_make_pid_namespace() -> bool:
    """Whether a task's PID namespace, its /proc included, can be made here: tried whole by
    `taskrun.py --probe-pidns`, a process of its own (the agent may have threads: it forks none)."""
    import subprocess

    try:
        return subprocess.run([sys.executable, "-I", "-S", os.path.abspath(__file__), "--probe-pidns"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _probe_pid_namespace() -> int:
    """`taskrun.py --probe-pidns`: 0 if a PID namespace with its own /proc can be made here."""
    if ctypes.CDLL(None, use_errno=True).unshare(_CLONE_NEWPID) != 0:
        return 1
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if _own_proc() is None else 1
        finally:
            os._exit(code)
    return 0 if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0 else 1


def _own_proc() -> str | None:
    """In a process of a new PID namespace: a mount namespace of its own (host mounts still come in,
    none goes out) with a /proc of the new namespace, so that the task's pids and /proc agree
    (ps, pkill, $PPID, /proc/self) and it sees no process outside it. None, or why it failed."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS) != 0:
        step = "unshare"
    elif libc.mount(b"none", b"/", None, _MS_REC | _MS_SLAVE, None) != 0:
        step = "making / a slave"
    elif libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) != 0:
        step = "mounting /proc"
    else:
        return None
    return f"{step}: {os.strerror(ctypes.get_errno()).lower()}"


class Cgroup:
    """The task's own cgroup: made before the task starts, killed whole, removed at the end."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def make(cls, key: str) -> Cgroup:
        parent = _own_cgroup_dir()
        if parent is None:
            raise OSError(errno.ENOENT, "no cgroup v2 on this host")
        # the supervisor's pid makes it unique on the host: two agents (two task states) may both
        # run a job 1's task 0, and neither must kill the other's
        path = os.path.join(parent, f"infosvc-task-{key}-{os.getpid()}")
        try:
            os.mkdir(path, 0o755)
        except FileExistsError:
            stale = cls(path)  # left by a killed supervisor whose pid this one has now: emptied first
            stale.signal(signal.SIGKILL)
            return stale
        return cls(path)

    def enter(self) -> None:
        with open(os.path.join(self.path, "cgroup.procs"), "w") as procs:
            procs.write("0")  # the writing process itself

    def pids(self) -> list[int]:
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as procs:
                return [int(line) for line in procs if line.strip()]
        except OSError:
            return []

    def signal(self, signum: int) -> None:
        if signum == signal.SIGKILL:
            try:
                with open(os.path.join(self.path, "cgroup.kill"), "w") as kill:
                    kill.write("1")
                return
            except OSError:
                pass  # before Linux 5.14: one by one
        for pid in self.pids():
            _kill(pid, signum)

    def remove(self) -> None:
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)  # the last process is still leaving


# --- descendants, by the process tree ---------------------------------------------------------------

def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def descendants(ancestor: int) -> list[int]:
    """Every process below `ancestor` in the process tree, read from /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                text = handle.read()
        except OSError:
            continue  # it ended meanwhile
        # the command name, in parentheses, may hold spaces and parentheses: fields resume after the last ')'
        ppid = int(text[text.rindex(b")") + 2:].split(None, 2)[1])
        children.setdefault(ppid, []).append(int(name))
    found, todo = [], [ancestor]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


# --- the task's own process, between fork and exec -------------------------------------------------

class Refused(Exception):
    """A step of starting the task failed; the message is the reason the task reports."""


def _why(exc: OSError) -> str:
    return {errno.ELOOP: "a symbolic link (not followed)", errno.ENXIO: "not a regular file",
            errno.EACCES: "permission denied", errno.EPERM: "permission denied",
            errno.ENOENT: "no such file or directory"}.get(exc.errno or 0, (exc.strerror or str(exc)).lower())


def local_path(label: str, name: str) -> str:
    """The file a stream names: a path as it is; a grid job's file URL (file:///x, file://localhost/x,
    percent-escapes decoded) as its path. Any other URL is refused: this executor opens local files
    only, and stages nothing in or out."""
    scheme, sep, rest = name.partition("://")
    if not sep or "/" in scheme:
        return name
    if scheme.lower() != "file":
        raise Refused(f"{label} {name}: a {scheme} URL; this executor opens local files only (file:// URLs "
                      "and paths) and stages nothing")
    host, slash, path = rest.partition("/")
    if host not in ("", "localhost"):
        raise Refused(f"{label} {name}: a file URL of host {host!r}, not this one")
    local = unquote(slash + path)
    if "\0" in local:
        raise Refused(f"{label} {name}: a file URL naming a NUL byte")
    return local


def _open_stream(which: str, name: str | None, account: str) -> int:
    if not name:
        return os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    label = _STREAM_LABELS[which]
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    flags |= os.O_RDONLY if which == "stdin" else os.O_WRONLY | os.O_CREAT | os.O_APPEND
    path = local_path(label, name)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise Refused(f"{label} {name}: {_why(exc)} as {account}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode) and not (stat.S_ISCHR(mode) and os.path.realpath(path) == os.devnull):
        os.close(fd)
        raise Refused(f"{label} {name}: not a regular file")
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd


def _exec_path(env: dict[str, str]) -> list[str]:
    return (env.get("PATH") or os.defpath).split(os.pathsep)


def _exec(argv: list[str], env: dict[str, str]) -> None:
    """execve along PATH, as execvpe does, without os.get_exec_path: it imports `warnings`, which an
    account that cannot read the interpreter's library could not load after the drop."""
    if "/" in argv[0]:
        os.execve(argv[0], argv, env)
    first: OSError | None = None
    for directory in _exec_path(env):
        try:
            os.execve(os.path.join(directory or ".", argv[0]), argv, env)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:  # EACCES, ENOEXEC...: go on, but say this one if none runs
            first = first or exc
    raise first or FileNotFoundError(errno.ENOENT, "not found on PATH")


def _clean_slate(keep: int) -> None:
    """Nothing of the supervisor's reaches the task: signal dispositions and mask, descriptors
    (say, one NSS opened for initgroups without close-on-exec)."""
    for signum in signal.valid_signals():
        if signum not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(signum, signal.SIG_DFL)
            except (OSError, ValueError):
                pass  # a real-time signal Python will not touch
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    os.closerange(3, keep)
    os.closerange(keep + 1, 65536)


def _become_task(order: dict[str, Any], cgroup: Cgroup | None, status: int, parent: int, namespace: bool) -> None:
    """In the supervisor's forked child, which sees the supervisor's pid as `parent` (0 where it runs
    in the task's PID namespace, `namespace`: the supervisor is outside it): become the task, or
    raise Refused. Returns only by raising."""
    signal.set_wakeup_fd(-1)
    os.setsid()  # a session and process group of its own, without a terminal
    if cgroup is not None:
        try:
            cgroup.enter()
        except OSError as exc:
            raise Refused(f"cannot enter the task's cgroup {cgroup.path}: {_why(exc)}") from None
    if namespace:
        # as root still; inherited by everything the task starts. Not done by the Init: it is not
        # the task's parent, so it does not pass its mount namespace on
        failed = _own_proc()
        if failed is not None:
            raise Refused(f"cannot give the task's PID namespace its own /proc: {failed}")
    account = order.get("account")
    name = account["name"] if account else str(os.getuid())
    if account is not None:
        uid, gid = account["uid"], account["gid"]
        if uid == 0 or gid == 0:
            raise Refused("tasks never run as root or with the root group")
        try:
            os.initgroups(account["name"], gid)
            if 0 in os.getgroups():
                raise Refused(f"{account['name']} is in the root group: tasks never run with it")
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        except OSError as exc:
            raise Refused(f"cannot become {account['name']}: {_why(exc)}") from None
        try:
            os.setuid(0)
        except PermissionError:
            pass
        else:
            raise Refused(f"dropping to {account['name']} could be undone: not starting")
    # Killed with the supervisor from here on: the account could stop this process (SIGSTOP) to
    # outlive a supervisor that gave up on it, then exec uncontained.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        # the supervisor is already gone (in the namespace any reaper outside it reads as 0 too,
        # but there the Init dies with the supervisor, and this process with the namespace)
        os._exit(NOT_STARTED)
    os.umask(0o022)
    workdir = order["workdir"]
    try:
        os.chdir(workdir)
    except OSError as exc:
        raise Refused(f"working directory {workdir}: {_why(exc)} as {name}") from None
    fds = [_open_stream(which, order.get(which), name) for which in ("stdin", "stdout", "stderr")]
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    env = {str(key): str(value) for key, value in order.get("environment", {}).items()}
    argv = [str(word) for word in order["argv"]]
    _clean_slate(status)
    try:
        _exec(argv, env)
    except OSError as exc:
        raise Refused(f"executable {argv[0]}: {_why(exc)} as {name}") from None


def _run_task(order: dict[str, Any], cgroup: Cgroup | None, writable: int, parent: int, namespace: bool) -> None:
    """In the forked child: become the task; else say why on `writable` and exit. Never returns."""
    try:
        _become_task(order, cgroup, writable, parent, namespace)
        reason = "the task's program did not start"
    except Refused as refused:
        reason = str(refused)
    except BaseException as exc:  # noqa: BLE001 - whatever it is, the child must not return
        reason = f"the task could not start: {exc}"
    try:
        os.write(writable, reason.encode("utf-8", "replace")[:4000])
    finally:
        os._exit(NOT_STARTED)


class Init:
    """Pid 1 of the task's PID namespace: the supervisor's first fork after its unshare, root,
    running no code of the task's and forking nothing. The task's main process is the supervisor's
    second fork, pid 2 of the namespace, so the supervisor reaps it itself, as with the other
    containments: its wait status never depends on this init, which a SIGKILL may end at any time
    (were the init its parent, a kill between the main process's exit and the init's reap of it
    would lose that status, and report 137). This init reaps the orphans that come to it and exits
    once the namespace holds nothing else. A SIGTERM from the supervisor is passed to every process
    of the namespace at once (kill(-1): the kernel signals them all under one lock, and a fork
    racing it fails); a SIGKILL of this init makes the kernel kill the rest and refuse them any
    fork. It dies with the supervisor (PR_SET_PDEATHSIG). The main process, not an init, keeps a
    process's usual signal semantics (an init ignores the signals it has no handler for)."""

    #: What it waits for (sigwait): blocked by the supervisor across its fork, so that none sent
    #: before it runs is lost to a handler of the supervisor's that it inherited
    SIGNALS = {signal.SIGTERM, signal.SIGCHLD}

    def __init__(self, life: int) -> None:
        self.life = life

    def run(self) -> None:
        """Never returns."""
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGINT, signal.SIGHUP, *self.SIGNALS):
            signal.signal(signum, signal.SIG_DFL)  # blocked ones are still queued for an init
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # getppid() says 0 here whoever the parent is (it is outside the namespace): the supervisor's
        # end of `life`, closed only by its exit, tells whether it died before the line above
        if select.select([self.life], [], [], 0)[0]:
            os._exit(NOT_STARTED)
        # nothing of the supervisor's is held here: its lock above all, which must end with it
        os.closerange(3, 65536)
        # a signal first: before one, the main process may not be forked yet, and an empty
        # namespace would not mean a task that ended (its fork would fail once this init is gone)
        while True:
            if signal.sigwait(self.SIGNALS) == signal.SIGTERM:
                self._pass_on()
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                # none of its own: the main process (the supervisor's child, which pokes this init
                # with SIGCHLD once it reaped it) may still run, and nothing else can be left
                try:
                    os.kill(-1, 0)
                except ProcessLookupError:
                    os._exit(0)

    @staticmethod
    def _pass_on() -> None:
        try:
            os.kill(-1, signal.SIGTERM)  # every process of the namespace but this init
        except ProcessLookupError:
            pass  # none left


# --- the supervisor --------------------------------------------------------------------------------

def _write_atomically(dirfd: int, name: str, data: bytes, *, sync: bool = True) -> None:
    temporary = f".{name}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600,
                 dir_fd=dirfd)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temporary, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    if sync:
        os.fsync(dirfd)


class Supervisor:
    def __init__(self, order: dict[str, Any], dirfd: int) -> None:
        self.order = order
        self.dirfd = dirfd
        self.grace = float(order.get("grace", GRACE_SECONDS))
        self.deadline: float | None = order.get("deadline")
        self.stop_requested = False
        self.stopping_since: float | None = None  # SIGTERM sent to what is left
        self.next_kill: float | None = None
        self.limit = False
        self.cgroup: Cgroup | None = None
        self.namespace = False  # the task runs in a PID namespace of its own, under an Init
        self.init: int | None = None
        self.life = -1  # the write end of the Init's pipe, never written: closed by this process's end

    def _on_term(self, *_: object) -> None:
        self.stop_requested = True

    def _signal_all(self, signum: int, *, walk: bool = False) -> None:
        """Every process of the task: its cgroup holds them all (none can leave it: root's), or its
        PID namespace (the init passes SIGTERM on to all; its SIGKILL kills all), else the process
        tree below this subreaper; `walk` both, for a child not yet in its cgroup."""
        if self.init is not None:
            _kill(self.init, signum)
        if self.cgroup is not None:
            self.cgroup.signal(signum)
        if (self.init is not None or self.cgroup is not None) and not walk:
            return
        for pid in descendants(os.getpid()):
            _kill(pid, signum)

    def _begin_stop(self, now: float) -> None:
        if self.stopping_since is None:
            self.stopping_since = now
            self.next_kill = now + self.grace
            self._signal_all(signal.SIGTERM)

    def run(self) -> dict[str, Any]:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return {"exit_code": NOT_STARTED, "began": False, "limit": False,
                    "reason": f"cannot contain the task: prctl: {os.strerror(ctypes.get_errno())}"}
        containment = self.order.get("containment", "auto")
        if containment in ("cgroup", "auto"):
            try:
                self.cgroup = Cgroup.make(self.order["key"])
            except OSError as exc:
                if containment == "cgroup":
                    return {"exit_code": NOT_STARTED, "began": False, "limit": False,
                            "reason": f"cannot make the task's cgroup: {_why(exc)}"}
        if containment == "pidns" or (containment == "auto" and self.cgroup is None):
            # this process's next child is pid 1 of a new namespace; it forks no other
            if libc.unshare(_CLONE_NEWPID) == 0:
                self.namespace = True
            elif containment == "pidns":
                return {"exit_code": NOT_STARTED, "began": False, "limit": False,
                        "reason": f"cannot make the task's PID namespace: {os.strerror(ctypes.get_errno()).lower()}"}
        wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup fd hears it
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._on_term)
        try:
            main, reason = self._start(wake_read)
            if main is None:
                if self.init is not None:
                    self._kill_everything()  # the namespace's Init, all that is left of the task
                return {"exit_code": NOT_STARTED, "began": False, "limit": False, "reason": reason,
                        "containment": self._containment()}
            try:
                # not synced: after a power cut the task is gone anyway, and BEGUN only tells what
                # the restarted agent reports for it (killed, or never started)
                _write_atomically(self.dirfd, BEGUN, str(main).encode(), sync=False)
            except OSError:
                pass  # a full disk: the end is still recorded, and the start reported with it
            status = self._wait(main, wake_read)
        except BaseException:
            # whatever failed here, nothing of the task may outlive its supervisor uncontained
            self._kill_everything()
            raise
        finally:
            if self.cgroup is not None:
                self.cgroup.remove()
        exit_code = os.waitstatus_to_exitcode(status)
        return {"exit_code": exit_code if exit_code >= 0 else 128 - exit_code, "began": True, "limit": self.limit,
                "stopped": self.stop_requested, "reason": None, "containment": self._containment()}

    def _start(self, wake: int) -> tuple[int | None, str | None]:
        """Fork the task (in a PID namespace, after its Init); (the pid forked, None) once the
        task's program runs, or (None, why it did not start). A stop or the deadline while the
        task is on its way (stopped by its account, say) kills it."""
        if self.namespace:
            self._start_init()
        readable, writable = os.pipe2(os.O_CLOEXEC)
        # in the namespace the supervisor is outside it: the task sees its parent as pid 0
        parent = 0 if self.namespace else os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(readable)
            _run_task(self.order, self.cgroup, writable, parent, self.namespace)
        os.close(writable)
        said = b""
        try:
            while True:  # EOF at exec (close-on-exec) or once the child gave up
                now = time.time()
                if self.stop_requested or (self.deadline is not None and now >= self.deadline):
                    _kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    self.limit = not self.stop_requested
                    return None, "stopped before its program started"
                timeout = None if self.deadline is None else max(0.0, self.deadline - now)
                try:
                    ready, _, _ = select.select([readable, wake], [], [], timeout)
                except InterruptedError:
                    continue
                if wake in ready:
                    _drain(wake)
                if readable in ready:
                    chunk = os.read(readable, 4096)
                    if not chunk:
                        break
                    said += chunk
        finally:
            os.close(readable)
        if said:
            os.waitpid(pid, 0)
            return None, said.decode("utf-8", "replace")
        return pid, None

    def _start_init(self) -> None:
        """Fork the namespace's Init: this process's first child since its unshare, pid 1 there."""
        life, self.life = os.pipe2(os.O_CLOEXEC)  # its write end lives as long as this process
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, Init.SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:
                try:
                    os.close(self.life)
                    Init(life).run()
                finally:
                    os._exit(NOT_STARTED)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        os.close(life)
        self.init = pid

    def _kill_everything(self) -> None:
        """SIGKILL every process of the task and reap them, until none is left."""
        for _ in range(200):
            self._signal_all(signal.SIGKILL, walk=True)
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                return
            time.sleep(0.01)

    def _containment(self) -> str:
        return "cgroup" if self.cgroup is not None else "pidns" if self.namespace else "subreaper"

    def _wait(self, main: int, wake: int) -> int:
        """Until no process of the task is left; the wait status of its main process."""
        status: int | None = None
        while True:
            while True:  # reap whatever has ended: the task, and every orphan it left to us
                try:
                    pid, code = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    assert status is not None  # the main process is this process's child
                    return status
                if pid == 0:
                    break
                if pid == main:
                    status = code
                    if self.init is not None:
                        # the Init waits on its own children alone: told that the main process
                        # is gone, it exits as soon as the namespace holds nothing else. Not
                        # reaped yet: the kernel keeps an init until every pid of its namespace
                        # is freed, the main process's included
                        _kill(self.init, signal.SIGCHLD)
            now = time.time()
            if status is not None or self.stop_requested:
                self._begin_stop(now)
            if self.deadline is not None and now >= self.deadline and self.stopping_since is None:
                self.limit = True
                self._begin_stop(now)
            if self.next_kill is not None and now >= self.next_kill:
                self._signal_all(signal.SIGKILL)
                self.next_kill = now + 0.5  # again, for anything forked meanwhile
            wakes = [t for t in (self.next_kill, None if self.stopping_since else self.deadline) if t is not None]
            timeout = max(0.0, min(wakes) - now) if wakes else None
            try:
                select.select([wake], [], [], timeout)
            except InterruptedError:
                pass
            _drain(wake)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def supervise(directory: str, lock: int) -> int:
    """Supervise the task whose order is in `directory`; `lock` is the task's LOCK, flocked by the
    agent and handed over, so that a restarted agent never sees the task unclaimed."""
    dirfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    os.set_inheritable(lock, False)  # the task never holds it: the lock is the supervisor's life
    os.pwrite(lock, f"{os.getpid():<12}".encode(), 0)
    try:
        with open(ORDER, "rb", opener=lambda path, flags: os.open(path, flags | os.O_NOFOLLOW, dir_fd=dirfd)) as f:
            order = marshal.load(f)
        if not isinstance(order, dict):
            raise ValueError("not a task order")
    except (OSError, ValueError, EOFError, TypeError) as exc:
        result: dict[str, Any] = {"exit_code": NOT_STARTED, "began": False, "limit": False,
                                  "reason": f"unreadable order: {exc}"}
    else:
        try:
            result = Supervisor(order, dirfd).run()
        except Exception as exc:  # noqa: BLE001 - the task was killed whole: say so rather than vanish
            result = {"exit_code": 128 + signal.SIGKILL, "began": True, "limit": False,
                      "reason": f"the task's supervisor failed and killed it: {exc}"}
    result["ended_at"] = time.time()
    import json  # loaded already in a launcher's supervisors; a supervisor of its own loads it only now

    for _ in range(3):  # a full disk may free up; the agent reports a supervisor that left none
        try:
            _write_atomically(dirfd, RESULT, json.dumps(result).encode())
            break
        except OSError:
            time.sleep(1)
    return int(result["exit_code"]) & 0xFF


def launch(channel: int) -> int:
    """`taskrun.py --launch FD`: the agent's launcher, one process started with the executor.
    For each task the agent sends the task's directory with its lock (SCM_RIGHTS) over the socket
    FD; the launcher forks a supervisor, which is this process already loaded (a fork costs ~1 ms,
    a Python start ~50), and answers its pid. It is single-threaded, so forking it is safe where
    forking the agent (threads) is not. It ends when the agent closes the socket."""
    import json  # noqa: F401 - loaded once here, for every supervisor forked
    import socket

    def reap(*_: object) -> None:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass

    signal.signal(signal.SIGCHLD, reap)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the agent's terminal is the agent's
    with socket.socket(fileno=channel) as sock:
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(sock, 4096, 1)
            except InterruptedError:
                continue
            if not message:
                return 0
            if len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                sock.send(b"0")
                continue
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    sock.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    signal.signal(signal.SIGINT, signal.SIG_DFL)
                    os.setsid()
                    directory = os.fsdecode(message)
                    errors = os.open(os.path.join(directory, "supervisor.log"),
                                     os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                    os.dup2(errors, 2)  # its own log, as a supervisor of its own has
                    os.close(errors)
                    code = supervise(directory, fds[0])
                finally:
                    os._exit(code)
            os.close(fds[0])
            sock.send(str(pid).encode())


def remove_as(target: str, uid: int, gid: int) -> int:
    """`taskrun.py --remove DIR UID GID`, started by root: DIR's tree removed as UID:GID (DIR itself,
    in a directory of root's, is left to root's rmdir once empty). Not `rm` run as the account: a
    program exec'd as the account is dumpable, so any process of that account (a task, without
    Yama) could ptrace it or write its memory and run code outside every task's containment. This
    process changes its credentials and execs nothing: the kernel makes it not dumpable, and it
    says so itself too, whatever fs.suid_dumpable is."""
    import shutil  # before the drop: the interpreter's library may be root's alone

    if uid == 0 or gid == 0:
        return 2
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    shutil.rmtree(target, ignore_errors=True)  # by descriptors, following no link (rmtree's safe form)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "--launch" and argv[2].isdigit():
        return launch(int(argv[2]))
    if argv[1:] == ["--probe-pidns"]:
        return _probe_pid_namespace()
    if len(argv) == 5 and argv[1] == "--remove" and argv[3].isdigit() and argv[4].isdigit():
        return remove_as(argv[2], int(argv[3]), int(argv[4]))
    if len(argv) != 3 or not argv[2].isdigit():
        print("usage: taskrun.py DIRECTORY LOCK_FD | taskrun.py --launch SOCKET_FD (started by infosvc-agent "
              "--run-jobs)", file=sys.stderr)
        return 2
    return supervise(argv[1], int(argv[2]))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
