"""What a submitter can make the executor do on a host (issue 24, items 1-5 and 9): the attacks of
a job holding a submit token against `infosvc-agent --run-jobs --run-as nobody` run as root, each
on a real server with a real agent. Everything a task names is opened as the task's account, never
by the agent; the task has the account's groups alone; every process it starts ends with it; no
path it names can stall the executor; a restart of the agent never starts a task twice.

They need root (to run tasks as another account) and skip without it."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from support.executors import (AS_ROOT, TASK_ACCOUNT, alive, ended, job, reachable_base, sh_job, start_agent, submit,
                               task_directory)
from support.server import Server, ServerFactory, stop_process, wait_for

pytestmark = pytest.mark.skipif(not AS_ROOT, reason="the executor's security tests run tasks as another account: "
                                                    "run them as root (CI does)")

HOST = "exec-sec.example"
SECRET = "root-only-secret-7f3a"


@pytest.fixture
def base() -> Iterator[Path]:
    yield from reachable_base()


@pytest.fixture
def site(serve_app: ServerFactory, tmp_path: Path, base: Path) -> Iterator[tuple[Server, Path]]:
    """A server and one agent running jobs as nobody; the directory a task works in, nobody's."""
    server = serve_app(agents=2, executors={"exec": HOST})
    agent = start_agent(server, HOST, server.tokens["exec"], tmp_path / "agent", tmp_path / "agent.log")
    try:
        wait_for(lambda: server.node_ids() == [HOST], timeout=30, message="the agent reporting")
        yield server, task_directory(base, "work")
    finally:
        stop_process(agent)


def root_file(base: Path, name: str, mode: int = 0o600) -> Path:
    """A file of root's, in a root directory the task's account can traverse but not write."""
    folder = base / "rootdir"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(SECRET + "\n")
    path.chmod(mode)
    return path


# --- 1. task files are opened as the task's account ---------------------------------------------

def test_stdin_of_a_root_only_file_fails_the_task_and_leaks_nothing(site: tuple[Server, Path], base: Path) -> None:
    server, work = site
    secret = root_file(base, "secret")
    done = ended(server, submit(server, sh_job("peek", "cat", work, extra=f"<InputFile>{secret}</InputFile>"
                                               "<OutputFile>peek.out</OutputFile>")))
    assert done["state"] == "Failed" and done["exit_code"] == 127
    assert f"Stdin {secret}: permission denied as {TASK_ACCOUNT}" in done["reason"]
    assert not (work / "peek.out").exists() or SECRET not in (work / "peek.out").read_text()


@pytest.mark.parametrize("where", ["absolute", "relative"])
def test_outputs_cannot_create_files_where_the_account_may_not(site: tuple[Server, Path], base: Path,
                                                               where: str) -> None:
    server, work = site
    root_file(base, "secret")
    target = base / "rootdir" / "planted"
    name = str(target) if where == "absolute" else "../rootdir/planted"
    done = ended(server, submit(server, sh_job("plant", "echo '* * * * * root sh /tmp/x'", work,
                                               extra=f"<OutputFile>{name}</OutputFile>")))
    assert done["state"] == "Failed" and f"Stdout {name}: permission denied as {TASK_ACCOUNT}" in done["reason"]
    assert not target.exists()


def test_a_planted_symbolic_link_is_not_followed(site: tuple[Server, Path], base: Path) -> None:
    server, work = site
    secret = root_file(base, "secret", 0o644)  # readable: so that only the link rule refuses it
    ended(server, submit(server, sh_job("plant", f"ln -s {secret} link.in; ln -s {secret} link.out", work)))
    assert (work / "link.in").is_symlink()
    read = ended(server, submit(server, sh_job("read", "cat", work, extra="<InputFile>link.in</InputFile>"
                                               "<OutputFile>read.out</OutputFile>")))
    assert read["state"] == "Failed" and "Stdin link.in: a symbolic link (not followed)" in read["reason"]
    write = ended(server, submit(server, sh_job("write", "echo owned", work, extra="<OutputFile>link.out</OutputFile>")))
    assert write["state"] == "Failed" and "Stdout link.out: a symbolic link (not followed)" in write["reason"]
    assert secret.read_text() == SECRET + "\n"


def test_a_planted_hard_link_gives_the_account_no_more_than_it_had(site: tuple[Server, Path], base: Path) -> None:
    server, work = site
    secret = root_file(base, "secret")
    # the kernel may refuse the link itself (fs.protected_hardlinks); either way nothing is read
    ended(server, submit(server, sh_job("plant", f"ln {secret} hard.in || true", work)))
    read = ended(server, submit(server, sh_job("read", "cat", work, extra="<InputFile>hard.in</InputFile>"
                                               "<OutputFile>read.out</OutputFile>")))
    assert read["state"] == "Failed"
    assert "Stdin hard.in: " in read["reason"] and f"as {TASK_ACCOUNT}" in read["reason"]
    assert not (work / "read.out").exists() or SECRET not in (work / "read.out").read_text()


def test_a_bare_executable_is_found_on_the_path(site: tuple[Server, Path]) -> None:
    """Found along PATH after the drop, with nothing the task's account cannot load (the interpreter's
    library under /root is not readable by nobody)."""
    server, work = site
    document = (f"<Job><Id>bare</Id><Executable>id</Executable><Arguments>-un</Arguments>"
                f"<InitialWorkingDirectory>{work}</InitialWorkingDirectory><OutputFile>bare.out</OutputFile>"
                "<Requested><Processors>1</Processors></Requested></Job>").encode()
    done = ended(server, submit(server, document))
    assert done["state"] == "Finished", done
    assert (work / "bare.out").read_text() == TASK_ACCOUNT + "\n"


def test_a_long_reason_still_ends_the_task(site: tuple[Server, Path]) -> None:
    """A reason of 700 non-ASCII characters: cut to what the server takes, never a refused end."""
    server, work = site
    name = "é" * 700
    done = ended(server, submit(server, sh_job("long", "cat", work, extra=f"<InputFile>{name}</InputFile>")))
    assert done["state"] == "Failed" and "Stdin éé" in done["reason"] and "no such file" not in done["reason"][:20]


# --- 4. nothing a task names can stall the executor ----------------------------------------------

@pytest.mark.parametrize("stream", ["InputFile", "OutputFile"])
def test_a_fifo_neither_blocks_the_executor_nor_opens(site: tuple[Server, Path], stream: str) -> None:
    server, work = site
    ended(server, submit(server, sh_job("plant", "mkfifo pipe", work)))
    assert (work / "pipe").exists()
    began = time.monotonic()
    stalled = ended(server, submit(server, sh_job("stall", "cat", work, extra=f"<{stream}>pipe</{stream}>")))
    assert stalled["state"] == "Failed" and "pipe: not a regular file" in stalled["reason"]
    after = ended(server, submit(server, sh_job("next", "echo on time > next.out", work)))
    assert after["state"] == "Finished" and (work / "next.out").read_text() == "on time\n"
    assert time.monotonic() - began < 15


# --- 2. the account's own groups, nothing of the agent's ------------------------------------------

def test_a_task_has_its_accounts_groups_alone(site: tuple[Server, Path], base: Path) -> None:
    server, work = site
    group_only = root_file(base, "group-only", 0o640)  # root:root 0640
    done = ended(server, submit(server, sh_job("ids", f"id -u; id -g; id -G; cat {group_only}", work,
                                               extra="<OutputFile>ids.out</OutputFile><ErrorFile>ids.err</ErrorFile>")))
    account = pwd.getpwnam(TASK_ACCOUNT)
    uid, gid, groups = (work / "ids.out").read_text().split("\n")[:3]
    assert (int(uid), int(gid)) == (account.pw_uid, account.pw_gid)
    assert sorted(map(int, groups.split())) == sorted(set(os.getgrouplist(TASK_ACCOUNT, account.pw_gid)))
    assert 0 not in map(int, groups.split())
    assert SECRET not in (work / "ids.out").read_text() and "Permission denied" in (work / "ids.err").read_text()
    assert done["state"] == "Failed"  # cat's exit status: it could not read the file


# --- 3. every process a task starts ends with it ----------------------------------------------------

#: a task that leaves processes behind every way a shell can: a subshell's background child, setsid,
#: one that ignores SIGTERM, nohup; each writes its pid to `pids`
ESCAPES = """(sleep 300 & echo $! >> pids)
setsid sleep 301 & echo $! >> pids
sh -c 'trap "" TERM; echo $$ >> pids; while :; do sleep 1; done' &
nohup sh -c 'echo $$ >> pids; exec sleep 302' >/dev/null 2>&1 &
sleep 0.5
"""


def escaping(work: Path, then: str) -> str:
    (work / "escape.sh").write_text(ESCAPES + then + "\n")
    return "exec sh escape.sh"


def _containments() -> list[str]:
    from infosvc_agents.taskrun import available_containments

    return available_containments()


def _pids(work: Path, count: int) -> list[int]:
    wait_for(lambda: (work / "pids").exists() and len((work / "pids").read_text().split()) >= count, timeout=20,
             message="the task's processes started")
    return [int(pid) for pid in (work / "pids").read_text().split()]


@pytest.fixture(params=["subreaper", "cgroup"])
def contained_site(request: pytest.FixtureRequest, serve_app: ServerFactory, tmp_path: Path,
                   base: Path) -> Iterator[tuple[Server, Path]]:
    if request.param not in _containments():
        pytest.skip(f"containment {request.param} is not available on this host (no writable cgroup v2)")
    server = serve_app(agents=2, executors={"exec": HOST})
    agent = start_agent(server, HOST, server.tokens["exec"], tmp_path / "agent", tmp_path / "agent.log",
                        more=("--containment", request.param))
    try:
        wait_for(lambda: server.node_ids() == [HOST], timeout=30, message="the agent reporting")
        yield server, task_directory(base, "work")
    finally:
        stop_process(agent)


def test_no_process_outlives_its_finished_task(contained_site: tuple[Server, Path]) -> None:
    server, work = contained_site
    done = ended(server, submit(server, sh_job("escape", escaping(work, "exit 0"), work)))
    assert done["state"] == "Finished"
    pids = _pids(work, 4)
    # the one that ignores SIGTERM lasts the grace period (5 s), then SIGKILL
    wait_for(lambda: not any(alive(pid) for pid in pids), timeout=15, message="every escaped process ended")


def test_no_process_outlives_its_cancel(contained_site: tuple[Server, Path]) -> None:
    server, work = contained_site
    job_id = submit(server, sh_job("escape", escaping(work, "trap '' TERM; sleep 600"), work))
    pids = _pids(work, 4)
    wait_for(lambda: job(server, job_id)["state"] == "Running", timeout=20)
    reply = server.request("DELETE", f"/v1/jobs/{job_id}", token=server.tokens["submit"])
    assert reply.status == 200
    wait_for(lambda: not any(alive(pid) for pid in pids), timeout=20, message="every process of the cancelled task")


# --- 5. which account runs a task; the jobs' own directories -------------------------------------

def test_owners_map_to_accounts_never_root(serve_app: ServerFactory, tmp_path: Path, base: Path) -> None:
    server = serve_app(agents=2, executors={"exec": HOST}, users={"alice": "alice", "bob": "bob", "root": "root"})
    account_map = tmp_path / "accounts"
    account_map.write_text("# owner account\nalice daemon\n")
    agent = start_agent(server, HOST, server.tokens["exec"], tmp_path / "agent", tmp_path / "agent.log",
                        more=("--run-as-map", str(account_map), "--run-as-owner", "--work-root", str(base / "jobs"),
                              "--work-keep", "1"))
    try:
        wait_for(lambda: server.node_ids() == [HOST], timeout=30, message="the agent reporting")
        ran = {}
        for owner in ("alice", "bob", "root"):
            # no working directory named: each job gets its own under --work-root, its account's
            # and leaves what would trap root walking its tree: a FIFO, a link to a root file, depth
            script = ("id -un > who; pwd >> who; mkfifo trap; ln -s /etc/passwd passwd; d=deep; "
                      "for i in $(seq 200); do mkdir $d/x 2>/dev/null || mkdir -p $d; d=$d/x; done")
            job_id = submit(server, sh_job(f"who-{owner}", script, None), token=server.tokens[owner])
            done = ended(server, job_id)
            assert done["state"] == "Finished", done
            directory = base / "jobs" / job_id
            ran[owner] = (directory / "who").read_text().split("\n")[:2]
            assert ran[owner][1] == str(directory)
            assert directory.stat().st_uid == pwd.getpwnam(ran[owner][0]).pw_uid
            assert directory.stat().st_mode & 0o777 == 0o700
        # alice by the map; bob and root have no account (root is never one): the pool's
        assert {owner: name for owner, (name, _) in ran.items()} == {
            "alice": "daemon", "bob": TASK_ACCOUNT, "root": TASK_ACCOUNT}
        # removed --work-keep (1 s) after the job's last task ended, emptied by their owners
        passwd = Path("/etc/passwd").read_bytes()
        jobs = base / "jobs"
        wait_for(lambda: not [*(e for e in jobs.iterdir() if e.name != ".removing"), *(jobs / ".removing").iterdir()],
                 timeout=30, message="the jobs' directories removed")
        assert Path("/etc/passwd").read_bytes() == passwd
        assert (base / "jobs").stat().st_mode & 0o777 == 0o711  # reachable, not listable, whatever the umask
        after = ended(server, submit(server, sh_job("after", "true", None), token=server.tokens["bob"]))
        assert after["state"] == "Finished"
    finally:
        stop_process(agent)


def test_the_account_policy() -> None:
    from infosvc_agents.accounts import AccountError, AccountPolicy

    daemon = pwd.getpwnam("daemon")
    nobody = pwd.getpwnam(TASK_ACCOUNT)
    policy = AccountPolicy(default="daemon", own_accounts=True, mapping={"carol": TASK_ACCOUNT, "eve": "root"},
                           min_uid=1000)
    assert policy.resolve("carol").name == TASK_ACCOUNT  # the map first
    assert policy.resolve(TASK_ACCOUNT).uid == nobody.pw_uid  # its own account: uid 65534 >= 1000
    assert policy.resolve("bin").name == "daemon"  # uid 2 is no owner's own account: the pool's
    assert policy.resolve("root").name == "daemon"  # root is never an owner's own account
    assert policy.resolve("no-such-owner").uid == daemon.pw_uid
    with pytest.raises(AccountError, match="never run as root"):
        policy.resolve("eve")  # the map cannot name root either
    with pytest.raises(AccountError, match="never run as root"):
        AccountPolicy(default="root").check()
    with pytest.raises(AccountError, match="never run as root"):
        AccountPolicy(mapping={"x": "root"}).check()
    with pytest.raises(AccountError, match="no local account"):
        AccountPolicy(default="no-such-account-here").check()
    with pytest.raises(AccountError, match="has no account"):
        AccountPolicy(own_accounts=True).resolve("bin")
    from infosvc_agents.accounts import Account, _unprivileged

    with pytest.raises(AccountError, match="root group"):
        _unprivileged(Account("wheel-member", 4242, 0, "/"), "account")  # uid not 0, primary group root


def test_run_as_root_is_refused_at_start(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("x\n")
    for args in (["--run-as", "root"], ["--run-as-map", str(tmp_path / "map")], []):
        (tmp_path / "map").write_text("alice root\n")
        done = subprocess.run([sys.executable, "-m", "infosvc_agents", "--server", "http://127.0.0.1:9", "--token-file",
                               str(token), "--run-jobs", "--executor-token-file", str(token), "--task-state",
                               str(tmp_path / "tasks"), *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "never run as root" in done.stderr, (args, done.stderr)


# --- 9. a restarted agent never starts a started task again ----------------------------------------

def _once_job(work: Path, seconds: float) -> bytes:
    # not rerunnable (an SSS Job's default): counts its starts, then runs a while
    return sh_job("once", f"echo start >> starts; sleep {seconds}; echo done >> starts", work)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_a_restart_never_starts_a_started_task_again(serve_app: ServerFactory, tmp_path: Path, base: Path,
                                                     how: str) -> None:
    server = serve_app(agents=2, executors={"exec": HOST})
    work = task_directory(base, "work")
    state, log = tmp_path / "agent", tmp_path / "agent.log"
    agent = start_agent(server, HOST, server.tokens["exec"], state, log)
    try:
        wait_for(lambda: server.node_ids() == [HOST], timeout=30, message="the agent reporting")
        job_id = submit(server, _once_job(work, 4 if how == "SIGKILL" else 60))
        wait_for(lambda: (work / "starts").exists(), timeout=20, message="the task started")
        agent.send_signal(getattr(signal, how))
        agent.wait(timeout=30)
        if how == "SIGTERM":
            # the stopping agent stopped its task and said so
            stopped = ended(server, job_id, timeout=5)
            assert stopped["state"] == "Failed" and stopped["exit_code"] == 128 + signal.SIGTERM, stopped
        agent = start_agent(server, HOST, server.tokens["exec"], state, log)
        done = ended(server, job_id)
        time.sleep(1)  # a few rounds of the restarted executor
        assert (work / "starts").read_text().count("start") == 1
        if how == "SIGKILL":
            # adopted: the task ran on to its end under its supervisor, and that end was reported
            assert done["state"] == "Finished" and (work / "starts").read_text() == "start\ndone\n", done
    finally:
        stop_process(agent)


@pytest.mark.parametrize("how", ["own", "launcher"])
def test_a_supervisor_started_either_way_runs_the_task_and_records_it(base: Path, how: str) -> None:
    """The executor forks supervisors from its launcher, and starts one of its own where it has
    no launcher: both drop to the account, hold the lock the agent handed over, and record the end."""
    import fcntl
    import json
    import marshal

    from infosvc_agents import taskrun
    from infosvc_agents.executor import Launcher

    work = task_directory(base, "work")
    directory = base / "task"
    directory.mkdir(mode=0o700)
    account = pwd.getpwnam(TASK_ACCOUNT)
    order = {"job": "t", "task": 0, "key": f"t.0.{how}", "argv": ["/bin/sh", "-c", "id -u > uid; sleep 0.5"],
             "environment": {"PATH": "/usr/bin:/bin"}, "workdir": str(work), "containment": "auto",
             "account": {"name": TASK_ACCOUNT, "uid": account.pw_uid, "gid": account.pw_gid}}
    (directory / taskrun.ORDER).write_bytes(marshal.dumps(order))
    lock = os.open(directory / taskrun.LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    launcher = Launcher()
    try:
        if how == "own":
            supervisor = subprocess.Popen(taskrun.command(directory, lock), pass_fds=(lock,), start_new_session=True)
            pid = supervisor.pid
        else:
            pid = launcher.start(directory, lock)
            assert pid
        os.close(lock)
        wait_for(lambda: (directory / taskrun.BEGUN).exists(), timeout=10, message="the task's program running")
        probe = os.open(directory / taskrun.LOCK, os.O_RDONLY)
        with pytest.raises(BlockingIOError):  # the supervisor holds the lock while it lives
            fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
        assert os.pread(probe, 32, 0).decode().strip() == str(pid)
        wait_for(lambda: (directory / taskrun.RESULT).exists(), timeout=10, message="the task's end recorded")

        def let_go() -> bool:  # with its life, just after the result is written
            try:
                fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        wait_for(let_go, timeout=10, message="the supervisor's lock let go")
        os.close(probe)
        result = json.loads((directory / taskrun.RESULT).read_text())
        assert result["exit_code"] == 0 and result["began"] and result["reason"] is None
        assert (work / "uid").read_text().strip() == str(account.pw_uid)
        if how == "own":
            assert supervisor.wait(timeout=10) == 0
    finally:
        launcher.close()


# --- 10. a job cannot write a line of its choosing into the agent's log ----------------------------

FORGED = "infosvc-agent: WARNING FORGED LINE"
#: a stream name that ends the agent's line and writes one of its own, reorders what follows
#: (U+202E) and opens a terminal sequence (U+009B, C1 CSI); XML and a grid job carry each of these
TRAP = f"nofile\n{FORGED}\u202e\u009b[2J"


@pytest.mark.parametrize("form", ["sss", "grid"])
def test_a_job_cannot_forge_a_line_of_the_agents_log(serve_app: ServerFactory, tmp_path: Path, base: Path,
                                                     form: str) -> None:
    """The agent logs a task's end with its reason, and the reason quotes the path the job named
    (run as root, the agent's log is the host's): every value is written on its one line, with its
    control, C1 and bidi characters as escapes."""
    import json
    from xml.sax.saxutils import escape

    server = serve_app(agents=2, executors={"exec": HOST})
    log = tmp_path / "agent.log"
    agent = start_agent(server, HOST, server.tokens["exec"], tmp_path / "agent", log,
                        more=("--work-root", str(base / "jobs")))
    try:
        wait_for(lambda: server.node_ids() == [HOST], timeout=30, message="the agent reporting")
        if form == "sss":
            document = (f"<Job><Id>forge</Id><Executable>/bin/cat</Executable>"
                        f"<InputFile>{escape(TRAP, {chr(10): '&#10;'})}</InputFile>"
                        "<Requested><Processors>1</Processors></Requested></Job>").encode()
            content_type = "application/xml"
        else:
            document = json.dumps({"version": 2, "executable": "/bin/cat", "default_storage_base": "file:///",
                                   "stdin": TRAP}).encode()
            content_type = "application/json"
        reply = server.request("POST", "/v1/jobs", document, token=server.tokens["submit"],
                               headers={"Content-Type": content_type})
        assert reply.status in (200, 201, 202), reply.body
        done = ended(server, str(reply.json()["id"]))
        assert done["state"] == "Failed" and FORGED in done["reason"], done
        wait_for(lambda: "task 0 ended: exit code 127" in log.read_text(encoding="utf-8", errors="replace"),
                 timeout=10, message="the task's end in the agent's log")
    finally:
        stop_process(agent)
    text = log.read_text(encoding="utf-8", errors="replace")
    assert not [line for line in text.split("\n") if line.startswith(FORGED)], text
    for raw in ("\u202e", "\u009b", "\x1b", "\r"):
        assert raw not in text, (raw, text)
    assert "\\n" + FORGED in text and "\\u202e" in text and "\\x9b" in text
