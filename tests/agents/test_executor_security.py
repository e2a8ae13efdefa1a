"""What a submitter can make the executor do on a host (issue 24, items 1-5, 9 and 10): the attacks of
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
from typing import Any, Iterator

import pytest

from support.executors import (AS_ROOT, TASK_ACCOUNT, alive, ended, job, reachable_base, sh_job, start_agent, submit,
                               task_directory)
from support.server import Server, ServerFactory, stop_process, wait_for
from support.accounts import local_account

pytestmark = pytest.mark.skipif(not AS_ROOT, reason="the executor's security tests run tasks as another account: "
                                                    "run them as root (CI does)")

HOST = "exec-sec.example"
SECRET = "root-only-secret-7f3a"


@pytest.fixture
def base() -> Iterator[Path]:
    yield from reachable_base()


@pytest.fixture
def agent_site(serve_app: ServerFactory, tmp_path: Path,
               base: Path) -> Iterator[tuple[Server, Path, subprocess.Popen[bytes]]]:
    """A server and one agent running jobs as nobody; the directory a task works in, nobody's; the
    agent. A job that names no directory (a grid job) gets its own under `base/jobs`."""
    server = serve_app(agents=2, executors={"exec": HOST})
    agent = start_agent(server, HOST, server.tokens["exec"], tmp_path / "agent", tmp_path / "agent.log",
                        more=("--work-root", str(base / "jobs")))
    try:
        wait_for(lambda: server.node_ids() == [HOST], timeout=30, message="the agent reporting")
        yield server, task_directory(base, "work"), agent
    finally:
        stop_process(agent)


@pytest.fixture
def site(agent_site: tuple[Server, Path, subprocess.Popen[bytes]]) -> tuple[Server, Path]:
    return agent_site[0], agent_site[1]


def root_file(base: Path, name: str, mode: int = 0o600) -> Path:
    """A file of root's, in a root directory the task's account can traverse but not write."""
    folder = base / "rootdir"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(SECRET + "\n")
    path.chmod(mode)
    return path


# --- 1. task files are opened as the task's account ---------------------------------------------

#: Each format's names for a task's streams (docs/job-formats.md)
STREAMS = {"sss": {"stdin": "InputFile", "stdout": "OutputFile", "stderr": "ErrorFile"},
           "ccs": {"stdin": "Stdin", "stdout": "Stdout", "stderr": "Stderr"},
           "grid": {"stdin": "stdin", "stdout": "stdout", "stderr": "stderr"}}


def run_streams(server: Server, base: Path, work: Path, form: str, script: str, streams: dict[str, str]) -> Any:
    """A job of one task `/bin/sh -c SCRIPT` naming `streams` ({"stdin": name, ...}) in `form`,
    run to its end in `work`. A grid job names no working directory (it runs in one of its own)
    and its streams are URLs: the names resolved against the base `file://WORK/`, which the
    executor opens as the files they name."""
    from xml.sax.saxutils import escape, quoteattr

    tags = STREAMS[form]
    if form == "sss":
        return ended(server, submit(server, sh_job("streams", script, work, extra="".join(
            f"<{tags[k]}>{escape(v)}</{tags[k]}>" for k, v in streams.items()))))
    if form == "ccs":
        attributes = "".join(f" {tags[k]}={quoteattr(v)}" for k, v in streams.items())
        document = ('<Job xmlns="http://www.microsoft.com/ComputeCluster/" Name="streams"><Tasks>'
                    f"<Task CommandLine={quoteattr(f'/bin/sh -c {chr(39)}{script}{chr(39)}')} "
                    f"WorkDirectory={quoteattr(str(work))}{attributes}/></Tasks></Job>").encode()
        return ended(server, submit(server, document))
    import json

    document = json.dumps({"version": 2, "executable": "/bin/sh", "arguments": ["-c", script],
                           "default_storage_base": f"file://{work}/", **streams}).encode()
    return ended(server, submit(server, document, content_type="application/json"))


def stream_name(form: str, name: str, work: Path) -> str:
    """The name the task's reason quotes: a grid job's is the URL it was resolved to."""
    from infosvc.codec.gridjob_json import resolve

    return (resolve(name, f"file://{work}/") or name) if form == "grid" else name


@pytest.mark.parametrize("form", ["sss", "ccs", "grid"])
def test_stdin_of_a_root_only_file_fails_the_task_and_leaks_nothing(site: tuple[Server, Path], base: Path,
                                                                    form: str) -> None:
    server, work = site
    secret = root_file(base, "secret")
    name = str(secret)
    done = run_streams(server, base, work, form, "cat", {"stdin": name, "stdout": "peek.out"})
    assert done["state"] == "Failed" and done["exit_code"] == 127, done
    assert f"Stdin {stream_name(form, name, work)}: permission denied as {TASK_ACCOUNT}" in done["reason"]
    assert SECRET not in "".join(path.read_text() for path in base.rglob("peek.out"))


@pytest.mark.parametrize(("form", "stream", "where"), [
    (form, stream, where) for form in ("sss", "ccs", "grid") for stream in ("stdout", "stderr")
    for where in ("absolute", "relative")])
def test_outputs_cannot_create_files_where_the_account_may_not(site: tuple[Server, Path], base: Path,
                                                               form: str, stream: str, where: str) -> None:
    server, work = site
    root_file(base, "secret")
    target = base / "rootdir" / "planted"
    name = {"absolute": str(target), "relative": "../rootdir/planted"}[where]
    done = run_streams(server, base, work, form, "echo owned; echo owned >&2", {stream: name})
    label = stream.capitalize()
    assert done["state"] == "Failed", done
    assert f"{label} {stream_name(form, name, work)}: permission denied as {TASK_ACCOUNT}" in done["reason"], done
    assert not target.exists()


def test_a_grid_jobs_file_urls_are_the_files_they_name(site: tuple[Server, Path]) -> None:
    """A grid job's streams are URLs: a file URL is opened as its path (as the account), so its
    output lands where the user asked; any other URL is refused with the reason, nothing staged."""
    server, work = site
    done = run_streams(server, work.parent, work, "grid", "echo landed; echo also >&2",
                       {"stdout": "grid out.txt", "stderr": f"file://localhost{work}/grid%20err.txt"})
    assert done["state"] == "Finished", done
    assert (work / "grid out.txt").read_text() == "landed\n"  # the base's file URL, its space escaped
    assert (work / "grid err.txt").read_text() == "also\n"
    refused = run_streams(server, work.parent, work, "grid", "echo x", {"stdout": "gsiftp://se.example.org/out"})
    assert refused["state"] == "Failed", refused
    assert ("Stdout gsiftp://se.example.org/out: a gsiftp URL; this executor opens local files only"
            in refused["reason"]), refused


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


def _pids(work: Path, count: int, *, running: bool = True) -> list[int]:
    """The host's pids of the processes the task wrote to `pids` (in a PID namespace of its own a
    process's $$ is its pid there): those working in `work` whose innermost pid is listed; every
    one of them if they are `running` still."""
    wait_for(lambda: (work / "pids").exists() and len((work / "pids").read_text().split()) >= count, timeout=20,
             message="the task's processes started")
    listed = {int(pid) for pid in (work / "pids").read_text().split()}
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{name}/status").read_text()
            cwd = os.readlink(f"/proc/{name}/cwd")
        except OSError:
            continue
        inner = int(next(line for line in status.splitlines() if line.startswith("NSpid:")).split()[-1])
        if inner in listed and cwd == str(work.resolve()):
            found.append(int(name))
    assert len(found) == len(listed) or not running, (listed, found)
    return found


@pytest.fixture(params=["subreaper", "cgroup", "pidns"])
def contained_site(request: pytest.FixtureRequest, serve_app: ServerFactory, tmp_path: Path,
                   base: Path) -> Iterator[tuple[Server, Path, subprocess.Popen[bytes]]]:
    if request.param not in _containments():
        pytest.skip(f"containment {request.param} is not available on this host (no writable cgroup v2, or no "
                    "right to make a PID namespace)")
    server = serve_app(agents=2, executors={"exec": HOST})
    agent = start_agent(server, HOST, server.tokens["exec"], tmp_path / "agent", tmp_path / "agent.log",
                        more=("--containment", request.param))
    try:
        wait_for(lambda: server.node_ids() == [HOST], timeout=30, message="the agent reporting")
        yield server, task_directory(base, "work"), agent
    finally:
        stop_process(agent)


def test_no_process_outlives_its_finished_task(contained_site: tuple[Server, Path, Any]) -> None:
    server, work, _ = contained_site
    done = ended(server, submit(server, sh_job("escape", escaping(work, "exit 0"), work)))
    assert done["state"] == "Finished"
    pids = _pids(work, 4, running=False)
    # the one that ignores SIGTERM lasts the grace period (5 s), then SIGKILL
    wait_for(lambda: not any(alive(pid) for pid in pids), timeout=15, message="every escaped process ended")


def test_no_process_outlives_its_cancel(contained_site: tuple[Server, Path, Any]) -> None:
    server, work, _ = contained_site
    job_id = submit(server, sh_job("escape", escaping(work, "trap '' TERM; sleep 600"), work))
    pids = _pids(work, 4)
    wait_for(lambda: job(server, job_id)["state"] == "Running", timeout=20)
    reply = server.request("DELETE", f"/v1/jobs/{job_id}", token=server.tokens["submit"])
    assert reply.status == 200
    wait_for(lambda: not any(alive(pid) for pid in pids), timeout=20, message="every process of the cancelled task")


def test_no_process_outlives_its_run_time_limit(contained_site: tuple[Server, Path, Any]) -> None:
    server, work, _ = contained_site
    job_id = submit(server, sh_job("escape", escaping(work, "trap '' TERM; sleep 600"), work,
                                   requested="<Duration>3</Duration>"))
    pids = _pids(work, 4)
    done = ended(server, job_id)
    assert done["state"] == "Canceled" and "run time limit" in done["reason"], done
    wait_for(lambda: not any(alive(pid) for pid in pids), timeout=20, message="every process of the task at its limit")


def test_no_process_outlives_the_agents_stop(contained_site: tuple[Server, Path, Any]) -> None:
    """SIGTERM (`systemctl stop`): the agent stops each task whole, waits for it, reports it, and
    only then exits."""
    server, work, agent = contained_site
    job_id = submit(server, sh_job("escape", escaping(work, "sleep 600"), work))
    pids = _pids(work, 4)
    wait_for(lambda: job(server, job_id)["state"] == "Running", timeout=20)
    agent.send_signal(signal.SIGTERM)
    agent.wait(timeout=40)
    assert not [pid for pid in pids if alive(pid)]
    done = job(server, job_id)
    assert done["state"] == "Failed" and done["exit_code"] == 128 + signal.SIGTERM, done


#: Chains of processes, each forking its successor and exiting at once (a link lives a few ms), which
#: a walk of /proc cannot catch whole: by the time it signals the pids it read, their successors
#: run. Each chain ends on its own after LIFETIME seconds, sooner than the agent's SIGKILL of a
#: supervisor that hangs (grace + 30 s), so that a containment that fails leaves the supervisor
#: reaping them and never fills the pid table with orphans of an init that does not reap.
CHAINS = """import os, sys, time
marker, chains, lifetime = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
end = time.monotonic() + lifetime
for _ in range(chains):
    if os.fork() == 0:
        while time.monotonic() < end:
            time.sleep(0.002)
            if os.fork():
                os._exit(0)
        os._exit(0)
open("chains.started", "w").close()
time.sleep(float(sys.argv[4]))  # the main process's own run
"""


def _chain_links(marker: str) -> list[int]:
    """The processes of the chains started with `marker`, alive now."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                line = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in line.split(b"\0") and alive(int(name)):
                found.append(int(name))
    return found


#: The containments that promise to end such chains (the subreaper alone is outrun by them, and
#: docs/security.md says so)
WHOLE = ["cgroup", "pidns"]


def _none_for(marker: str, scans: int) -> bool:
    """Whether `scans` scans of /proc in a row find no link of the chains."""
    return not any(_chain_links(marker) for _ in range(scans))


@pytest.mark.parametrize("contained_site", WHOLE, indirect=True)
@pytest.mark.parametrize("then", ["finish", "cancel", "supervisor killed"])
def test_processes_that_fork_and_exit_at_once_end_with_their_task(contained_site: tuple[Server, Path, Any],
                                                                  then: str, request: pytest.FixtureRequest,
                                                                  tmp_path: Path) -> None:
    """A review's attack: four chains that each fork their successor and exit at once outran the
    supervisor's walk of /proc, and ran on after their task's end or cancel, and after the agent's
    SIGKILL of the supervisor that could not end them. A cgroup (cgroup.kill) and a PID namespace
    (the kernel kills it whole with its init) each end them whole; the namespace's init dies with
    the supervisor, and everything in the namespace with it."""
    server, work, _ = contained_site
    if then == "supervisor killed" and request.node.callspec.params["contained_site"] != "pidns":
        pytest.skip("a cgroup's processes outlive a killed supervisor: it ends them itself, within its grace")
    marker = f"chains-{os.getpid()}-{time.monotonic_ns()}"
    (work / "chains.py").write_text(CHAINS)
    lifetime = 30.0
    job_id = submit(server, sh_job("chains", f"exec python3 chains.py {marker} 4 {lifetime} "
                                             f"{lifetime if then == 'cancel' else 2}", work))
    wait_for(lambda: (work / "chains.started").exists(), timeout=20, message="the chains started")
    began = time.monotonic()
    assert _chain_links(marker), "the chains run"
    if then == "cancel":
        wait_for(lambda: job(server, job_id)["state"] == "Running", timeout=20)
        reply = server.request("DELETE", f"/v1/jobs/{job_id}", token=server.tokens["submit"])
        assert reply.status == 200
    elif then == "supervisor killed":
        (lock,) = (tmp_path / "agent").rglob("lock")  # the task's, holding its supervisor's pid
        os.kill(int(lock.read_text().split()[0]), signal.SIGKILL)
    done = ended(server, job_id, timeout=15)
    assert done["state"] == {"cancel": "Canceled", "finish": "Finished"}.get(then, "Failed"), done
    # every link ended with the task (SIGKILL at the latest, the grace period after its SIGTERM),
    # well before the chains would have ended alone. One scan of /proc is not atomic: it can miss
    # a link whose child took a pid below the scan's place (pids wrap) as the link exits, so "none
    # left" is taken from twenty scans in a row that find none
    wait_for(lambda: _none_for(marker, 20), timeout=12, interval=0.05, message="no link of the chains left")
    assert time.monotonic() - began < lifetime - 5
    time.sleep(1)
    assert _none_for(marker, 20)


# --- 4. a task stopped on its way to exec -----------------------------------------------------------

def _on_its_way(agent: subprocess.Popen[bytes]) -> int:
    """The task's process while it still runs the supervisor's code (dropped to the account, not
    yet exec'd: its command name is still Python's)."""
    from infosvc_agents.taskrun import descendants

    uid = pwd.getpwnam(TASK_ACCOUNT).pw_uid
    for pid in descendants(agent.pid):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        name = status.split("\n", 1)[0].split(":", 1)[1].strip()
        uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
        if name.startswith("python") and int(uids[0]) == uid:
            return pid
    return 0


@pytest.mark.parametrize("then", ["cancel", "limit", "supervisor killed"])
def test_a_task_stopped_on_its_way_to_exec_is_killed(agent_site: tuple[Server, Path, subprocess.Popen[bytes]],
                                                      then: str) -> None:
    """The account may stop its task's process between the drop and the exec (SIGSTOP: it is the
    account's from the drop on), which then never execs and never says so: the supervisor still
    kills it at a cancel and at the limit, and the kernel kills it with its supervisor
    (PR_SET_PDEATHSIG), so it cannot be resumed uncontained later. A PATH of 40,000 missing
    directories (the job's own environment) keeps the process on its way for a second or so."""
    server, work, agent = agent_site
    path = ":".join(["/n"] * 40000 + ["/bin", "/usr/bin"])
    limit = "<Duration>4</Duration>" if then == "limit" else ""
    job_id = submit(server, (f"<Job><Id>stopped</Id><Executable>true</Executable>"
                             f"<InitialWorkingDirectory>{work}</InitialWorkingDirectory>"
                             f'<Environment><Variable name="PATH">{path}</Variable></Environment>'
                             f"<Requested><Processors>1</Processors>{limit}</Requested></Job>").encode())
    pid = wait_for(lambda: _on_its_way(agent), timeout=20, interval=0.002, message="the task on its way to exec")
    try:
        account = pwd.getpwnam(TASK_ACCOUNT)
        stopper = subprocess.run(["kill", "-STOP", str(pid)], user=account.pw_uid, group=account.pw_gid,
                                 extra_groups=[], capture_output=True, text=True, timeout=10)
        assert stopper.returncode == 0, stopper.stderr  # the account's to stop
        wait_for(lambda: Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T", timeout=5,
                 message="the task's process stopped")
        time.sleep(0.5)
        running = job(server, job_id)
        assert alive(pid) and running["state"] == "Running" and running["tasks"][0]["began"] is None, running
        if then == "cancel":
            assert server.request("DELETE", f"/v1/jobs/{job_id}", token=server.tokens["submit"]).status == 200
        elif then == "supervisor killed":
            supervisor = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            os.kill(supervisor, signal.SIGKILL)
        wait_for(lambda: not alive(pid), timeout=15, message="the stopped process killed")
        done = ended(server, job_id)
        assert done["state"] in ("Failed", "Canceled"), done
    finally:
        if alive(pid):  # whatever failed above, the test leaves no process behind
            os.kill(pid, signal.SIGKILL)
    if then == "limit":
        assert "run time limit" in done["reason"], done


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


def _tree(root: Path, account: pwd.struct_passwd) -> Path:
    """A tree of 20,000 files of the account's, slow enough to remove to be looked at meanwhile."""
    root.mkdir()
    for branch in range(100):
        folder = root / str(branch)
        folder.mkdir()
        for leaf in range(200):
            (folder / str(leaf)).touch()
    for path in (root, *root.rglob("*")):
        os.lchown(path, account.pw_uid, account.pw_gid)
    return root


def _owner_of_memory_while_dropped(argv: list[str], account: pwd.struct_passwd, **how: Any) -> int | None:
    """The owner of /proc/PID/mem of the process `argv` once it runs as the account (a process that
    is not dumpable has its /proc files root's, and a process of the account may not trace it or
    write its memory); None if it ended before it could be seen."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **how)
    try:
        while process.poll() is None:
            try:
                status = Path(f"/proc/{process.pid}/status").read_text()
                owner = os.stat(f"/proc/{process.pid}/mem").st_uid
            except OSError:
                continue
            uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
            if uids == [str(account.pw_uid)] * 4:
                return owner
        return None
    finally:
        process.wait(timeout=60)


def test_the_remover_of_a_jobs_directory_cannot_be_taken_over(base: Path) -> None:
    """A review: the job's directory was emptied by `rm` exec'd as its owner, dumpable, so a task
    of that account (without Yama) could write its memory through /proc and run code outside every
    containment. The remover now drops to the owner and execs nothing: not dumpable."""
    from infosvc_agents import taskrun

    account = pwd.getpwnam(TASK_ACCOUNT)
    owners = []
    for attempt in range(3):
        tree = _tree(base / f"tree{attempt}", account)
        owners.append(_owner_of_memory_while_dropped(
            [sys.executable, "-I", "-S", taskrun.__file__, "--remove", str(tree), str(account.pw_uid),
             str(account.pw_gid)], account))
        assert not any(tree.iterdir()), "the tree emptied"
        if owners[-1] is not None:
            break
    assert owners[-1] == 0, owners
    # what it was: the same tree emptied by an `rm` exec'd as the account, its memory the account's
    tree = _tree(base / "by-rm", account)
    seen = _owner_of_memory_while_dropped(["rm", "-rf", "--", str(tree)], account, user=account.pw_uid,
                                          group=account.pw_gid, extra_groups=[])
    assert seen in (account.pw_uid, None)


#: The local account an owner of the same name has, made for the test where it is missing.
OWN_ACCOUNT = "infosvc-test-owner"


@pytest.fixture
def own_account() -> Iterator[pwd.struct_passwd]:
    """A local account of a uid >= 1000 (useradd's UID_MIN), named as a job's owner will be: made
    with useradd if missing, and removed after (with its group); the test skips, saying why, where
    it cannot be made."""
    with local_account(OWN_ACCOUNT) as account:
        yield account


def test_an_owner_runs_as_its_own_account_where_the_host_allows(serve_app: ServerFactory, tmp_path: Path,
                                                                 base: Path,
                                                                 own_account: pwd.struct_passwd) -> None:
    """--run-as-owner: the owner whose local account exists with a uid of at least --min-uid runs as
    it, with its own groups; an owner whose account is below --min-uid (daemon), one with no account
    here, and root fall to the pool account; none runs as root."""
    assert own_account.pw_uid >= 1000
    owners = {"own": OWN_ACCOUNT, "system": "daemon", "ghost": "no-such-owner-here", "root": "root"}
    server = serve_app(agents=2, executors={"exec": HOST}, users=owners)
    agent = start_agent(server, HOST, server.tokens["exec"], tmp_path / "agent", tmp_path / "agent.log",
                        more=("--run-as-owner", "--min-uid", "1000", "--work-root", str(base / "jobs")))
    try:
        wait_for(lambda: server.node_ids() == [HOST], timeout=30, message="the agent reporting")
        ran = {}
        for token, owner in owners.items():
            job_id = submit(server, sh_job(f"who-{token}", "id -un > who; id -u >> who; id -G >> who", None),
                            token=server.tokens[token])
            done = ended(server, job_id)
            assert done["state"] == "Finished" and done["owner"] == owner, done
            name, uid, groups = (base / "jobs" / job_id / "who").read_text().split("\n")[:3]
            ran[token] = name
            assert int(uid) != 0 and 0 not in map(int, groups.split())
            account = pwd.getpwnam(name)
            assert sorted(map(int, groups.split())) == sorted(set(os.getgrouplist(name, account.pw_gid)))
        assert ran == {"own": OWN_ACCOUNT, "system": TASK_ACCOUNT, "ghost": TASK_ACCOUNT, "root": TASK_ACCOUNT}
    finally:
        stop_process(agent)


def test_the_account_policy() -> None:
    from infosvc_agents.accounts import AccountError, AccountPolicy

    daemon = pwd.getpwnam("daemon")
    nobody = pwd.getpwnam(TASK_ACCOUNT)
    policy = AccountPolicy(default="daemon", own_accounts=True, mapping={"carol": TASK_ACCOUNT, "eve": "root"},
                           min_uid=1000, max_uid=65534)
    assert policy.resolve("carol").name == TASK_ACCOUNT  # the map first
    assert policy.resolve(TASK_ACCOUNT).uid == nobody.pw_uid  # its own account: uid 65534 in 1000..65534
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


def test_an_owner_s_own_account_is_no_account_of_the_system_s_or_a_daemon_s() -> None:
    # a review: with run_as_owner, a portal's token filed a job for owner `slurm` (Debian's SlurmUser,
    # uid 64030 >= min_uid): it ran as Slurm's own account, which Slurm takes for an operator, and
    # cancelled another user's job. Debian's system range above UID_MAX (60000-65533: packages' fixed
    # uids, slurm's, libvirt-qemu's; 65534 nobody) is no owner's own, nor the LRMS's daemons' accounts.
    from infosvc_agents.accounts import AccountError, AccountPolicy

    policy = AccountPolicy(default="daemon", own_accounts=True)
    assert policy.max_uid == 59999
    assert policy.resolve(TASK_ACCOUNT).name == "daemon"  # nobody, 65534: the pool's
    try:
        pwd.getpwnam("slurm")
    except KeyError:
        pass
    else:
        assert policy.resolve("slurm").name == "daemon"
    wide = AccountPolicy(default="daemon", own_accounts=True, max_uid=65534, never=frozenset({TASK_ACCOUNT}))
    assert wide.resolve(TASK_ACCOUNT).name == "daemon"  # a daemon's account, whatever its uid
    with pytest.raises(AccountError, match="runs no task"):
        AccountPolicy(mapping={"carol": TASK_ACCOUNT}, never=frozenset({TASK_ACCOUNT})).resolve("carol")
    with pytest.raises(AccountError, match="runs no task"):
        AccountPolicy(default=TASK_ACCOUNT, never=frozenset({TASK_ACCOUNT})).check()
    with pytest.raises(AccountError, match="runs no task"):
        AccountPolicy(default=TASK_ACCOUNT, never=frozenset({TASK_ACCOUNT})).resolve("anyone")


def test_an_owner_of_a_directory_s_uid_past_the_system_block_is_its_own_account(monkeypatch: pytest.MonkeyPatch) -> None:
    # a review: max_uid 59999 alone sent owners of sssd's, FreeIPA's or AD's uids (1,234,567) to the pool
    from infosvc_agents import accounts
    from infosvc_agents.accounts import AccountPolicy

    real = pwd.getpwnam
    fake = {"dirk": pwd.struct_passwd(("dirk", "x", 1_234_567, 1_234_567, "", "/home/dirk", "/bin/sh")),
            "pkg": pwd.struct_passwd(("pkg", "x", 64_055, 64_055, "", "/", "/usr/sbin/nologin")),
            "edge": pwd.struct_passwd(("edge", "x", 65_536, 65_536, "", "/", "/bin/sh"))}
    monkeypatch.setattr(accounts.pwd, "getpwnam", lambda name: fake[name] if name in fake else real(name))
    policy = AccountPolicy(default="daemon", own_accounts=True)
    assert policy.resolve("dirk").uid == 1_234_567
    assert policy.resolve("edge").uid == 65_536  # the first uid past the block
    assert policy.resolve("pkg").name == "daemon"  # a package's fixed uid: the pool's
    assert AccountPolicy(default="daemon", own_accounts=True, never_uids=frozenset({1_234_567})).resolve("dirk").name \
        == "daemon"  # a daemon's uid, whatever the name


def test_an_owner_is_its_own_account_only_by_its_exact_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # Where NSS finds names without regard to case (sssd, winbind), getpwnam("ALICE") answers
    # alice's entry: an owner ALICE ran as alice. The entry's own name must be the name asked.
    from infosvc_agents import accounts
    from infosvc_agents.accounts import AccountPolicy

    real = pwd.getpwnam
    monkeypatch.setattr(accounts.pwd, "getpwnam", lambda name: real(name.lower()))  # such an NSS
    policy = AccountPolicy(default="daemon", own_accounts=True, min_uid=1000, max_uid=65534)
    assert policy.resolve(TASK_ACCOUNT).name == TASK_ACCOUNT
    assert policy.resolve(TASK_ACCOUNT.upper()).name == "daemon"  # no own account: the pool's


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

def _once_job(work: Path) -> bytes:
    # not rerunnable (an SSS Job's default): counts its starts, then runs until the test lets it end
    return sh_job("once", "echo start >> starts; while [ ! -e go ]; do sleep 0.1; done; echo done >> starts", work)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_a_restart_never_starts_a_started_task_again(serve_app: ServerFactory, tmp_path: Path, base: Path,
                                                     how: str) -> None:
    server = serve_app(agents=2, executors={"exec": HOST})
    work = task_directory(base, "work")
    state, log = tmp_path / "agent", tmp_path / "agent.log"
    agent = start_agent(server, HOST, server.tokens["exec"], state, log)
    try:
        wait_for(lambda: server.node_ids() == [HOST], timeout=30, message="the agent reporting")
        job_id = submit(server, _once_job(work))
        wait_for(lambda: (work / "starts").exists(), timeout=20, message="the task started")
        agent.send_signal(getattr(signal, how))
        agent.wait(timeout=30)
        if how == "SIGTERM":
            # the stopping agent stopped its task and said so
            stopped = ended(server, job_id, timeout=5)
            assert stopped["state"] == "Failed" and stopped["exit_code"] == 128 + signal.SIGTERM, stopped
        before = len(log.read_bytes())
        agent = start_agent(server, HOST, server.tokens["exec"], state, log)
        if how == "SIGKILL":
            # the task still runs when the agent is back (it waits for `go`): adopted, not started again
            wait_for(lambda: b"still runs" in log.read_bytes()[before:], timeout=20, message="the task adopted")
            time.sleep(1)  # a few rounds of the restarted executor
            running = job(server, job_id)
            assert running["state"] == "Running" and (work / "starts").read_text() == "start\n", running
            (work / "go").touch()
        done = ended(server, job_id)
        time.sleep(1)  # a few rounds of the restarted executor
        assert (work / "starts").read_text().count("start") == 1
        if how == "SIGKILL":
            # adopted: the task ran on to its end under its supervisor, and that end was reported once
            assert done["state"] == "Finished" and (work / "starts").read_text() == "start\ndone\n", done
            assert [event["state"] for event in job(server, job_id)["events"] if event["task"] == 0] == [
                "Running", "Running", "Finished"], done["events"]
            assert log.read_text(errors="replace").count(f"job {job_id} task 0 ended") == 1
    finally:
        stop_process(agent)


@pytest.mark.parametrize("containment", ["auto", "pidns"])
@pytest.mark.parametrize("how", ["own", "launcher"])
def test_a_supervisor_started_either_way_runs_the_task_and_records_it(base: Path, how: str, containment: str) -> None:
    """The executor forks supervisors from its launcher, and starts one of its own where it has
    no launcher: both drop to the account, hold the lock the agent handed over (an Init they fork
    holds none of it), and record the end."""
    import fcntl
    import json
    import marshal

    from infosvc_agents import taskrun
    from infosvc_agents.executor import Launcher

    if containment != "auto" and containment not in _containments():
        pytest.skip(f"containment {containment} is not available on this host")
    work = task_directory(base, "work")
    directory = base / "task"
    directory.mkdir(mode=0o700)
    account = pwd.getpwnam(TASK_ACCOUNT)
    order = {"job": "t", "task": 0, "key": f"t.0.{how}", "argv": ["/bin/sh", "-c", "id -u > uid; sleep 0.5"],
             "environment": {"PATH": "/usr/bin:/bin"}, "workdir": str(work), "containment": containment,
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
        # auto: a cgroup where writable, else a PID namespace where allowed
        assert result["containment"] == (containment if containment != "auto" else
                                         next(c for c in ("cgroup", "pidns", "subreaper") if c in _containments()))
        assert (work / "uid").read_text().strip() == str(account.pw_uid)
        if how == "own":
            assert supervisor.wait(timeout=10) == 0
    finally:
        launcher.close()


def _supervised(base: Path, containment: str, script: str) -> Any:
    """The result a supervisor of its own records for `/bin/sh -c SCRIPT` run as the task's account."""
    import fcntl
    import json
    import marshal

    from infosvc_agents import taskrun

    work = task_directory(base, "work")
    directory = base / "task"
    directory.mkdir(mode=0o700)
    account = pwd.getpwnam(TASK_ACCOUNT)
    order = {"job": "t", "task": 0, "key": "t.0.status", "argv": ["/bin/sh", "-c", script], "grace": 1.0,
             "environment": {"PATH": "/usr/bin:/bin"}, "workdir": str(work), "containment": containment,
             "account": {"name": TASK_ACCOUNT, "uid": account.pw_uid, "gid": account.pw_gid}}
    (directory / taskrun.ORDER).write_bytes(marshal.dumps(order))
    lock = os.open(directory / taskrun.LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    subprocess.run(taskrun.command(directory, lock), pass_fds=(lock,), start_new_session=True, timeout=30)
    os.close(lock)
    return json.loads((directory / taskrun.RESULT).read_text()), work


@pytest.mark.parametrize("script, code", [("echo $$ > pid; exit 3", 3), ("echo $$ > pid; kill -USR1 $$", 138),
                                          ("echo $$ > pid; sleep 60 & exec sh -c 'trap \"\" TERM; exit 0'", 0)])
def test_a_task_in_a_pid_namespace_is_an_ordinary_process(base: Path, script: str, code: int) -> None:
    """Its Init, not the task, is pid 1 of the namespace: the task's main process is pid 2 there,
    with a process's usual signals (an init ignores those it has no handler for), and its exit
    status is the task's, whatever else is left to end after it."""
    if "pidns" not in _containments():
        pytest.skip("no right to make a PID namespace here")
    result, work = _supervised(base, "pidns", script)
    assert result["exit_code"] == code and result["began"] and result["containment"] == "pidns", result
    assert (work / "pid").read_text().strip() == "2"


def test_a_task_in_a_pid_namespace_sees_its_own_proc(base: Path) -> None:
    """A review: with the host's /proc, /proc/$$ was the host's pid 2 (kthreadd), so ps, pkill and
    anything reading /proc/PID looked at other processes, and the task could reach (and, without
    Yama, write the memory of) its account's processes outside the namespace. Its /proc is the
    namespace's: its own pids, and nothing else."""
    if "pidns" not in _containments():
        pytest.skip("no right to make a PID namespace here")
    # the background child is `sh` until its exec of sleep: wait for it (a loaded machine read it first)
    result, work = _supervised(base, "pidns", "cat /proc/$$/comm > comm; sleep 30 & echo $! > bg; "
                                              "ls /proc | grep -c '^[0-9][0-9]*$' > seen; "
                                              "for i in $(seq 100); do [ \"$(cat /proc/$!/comm)\" = sleep ] && break; "
                                              "sleep 0.05; done; cat /proc/$!/comm >> comm")
    assert result["exit_code"] == 0 and result["containment"] == "pidns", result
    assert (work / "comm").read_text().split() == ["sh", "sleep"]
    # the Init, the shell, its sleep, ls and grep: a handful, not the host's hundreds
    assert int((work / "seen").read_text()) <= 6


@pytest.mark.parametrize("containment", ["pidns", "auto"])
def test_a_supervisor_that_may_not_make_a_pid_namespace(base: Path, containment: str) -> None:
    """A supervisor run as an account (an agent not run as root) may make neither a cgroup nor a PID
    namespace: with --containment pidns its task does not start, and says why; with auto it runs
    with the subreaper."""
    import fcntl
    import json
    import marshal

    from infosvc_agents import taskrun

    import shutil

    account = pwd.getpwnam(TASK_ACCOUNT)
    python = "/usr/bin/python3"  # this suite's interpreter may be in a directory of root's
    if not os.path.exists(python):
        pytest.skip(f"no {python} for the account to run its supervisor with")
    work = task_directory(base, "work")
    directory = task_directory(base, "task")  # the account's: its supervisor writes there
    script = base / "taskrun.py"
    shutil.copyfile(taskrun.__file__, script)
    script.chmod(0o644)
    order = {"job": "t", "task": 0, "key": "t.0.unprivileged", "argv": ["/bin/sh", "-c", "echo ran > ran"],
             "environment": {"PATH": "/usr/bin:/bin"}, "workdir": str(work), "containment": containment}
    (directory / taskrun.ORDER).write_bytes(marshal.dumps(order))
    lock = os.open(directory / taskrun.LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    os.fchown(lock, account.pw_uid, account.pw_gid)
    fcntl.flock(lock, fcntl.LOCK_EX)
    subprocess.run([python, "-I", "-S", str(script), str(directory), str(lock)], pass_fds=(lock,),
                   user=account.pw_uid, group=account.pw_gid, extra_groups=[], start_new_session=True, timeout=30)
    os.close(lock)
    result = json.loads((directory / taskrun.RESULT).read_text())
    if containment == "pidns":
        assert not result["began"] and result["exit_code"] == taskrun.NOT_STARTED, result
        assert result["reason"] == "cannot make the task's PID namespace: operation not permitted", result
        assert not (work / "ran").exists()
    else:
        assert result["began"] and result["exit_code"] == 0 and result["containment"] == "subreaper", result
        assert (work / "ran").read_text() == "ran\n"


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
