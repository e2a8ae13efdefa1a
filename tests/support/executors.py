"""Agents that run jobs (`infosvc-agent --run-jobs`) in tests: started on a fixture host against a
real server, with their task state and a base directory the tasks' account can reach; job
documents of one shell task; waiting for a job's end."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from xml.sax.saxutils import escape

from support import ROOT
from support.server import Server, wait_for

FIXTURES = ROOT / "tests" / "fixtures"
#: the unprivileged account tasks run as when the tests run as root (as CI does)
TASK_ACCOUNT = "nobody"
AS_ROOT = os.geteuid() == 0
ENDED = ("Finished", "Failed", "Canceled")


def reachable_base() -> Iterator[Path]:
    """A directory under /tmp the tasks' account can traverse (pytest's tmp_path is root's, 0700)."""
    base = Path(tempfile.mkdtemp(prefix="infosvc-exec-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def task_directory(base: Path, name: str) -> Path:
    """A working directory owned by the tasks' account."""
    path = base / name
    path.mkdir()
    if AS_ROOT:
        account = pwd.getpwnam(TASK_ACCOUNT)
        os.chown(path, account.pw_uid, account.pw_gid)
    return path


def start_agent(server: Server, host: str, executor_token: str, state: Path, log: Path, *, fixture: str = "host1",
                more: tuple[str, ...] = (), run_as: tuple[str, ...] | None = None) -> subprocess.Popen[bytes]:
    """An agent reporting `host` from a fixture tree, running the tasks placed there."""
    state.mkdir(parents=True, exist_ok=True)
    agent_token = state.parent / f"{state.name}.agent.token"
    if not agent_token.exists():
        agent_token.write_text(server.agent_token() + "\n")
    token_file = state.parent / f"{state.name}.executor.token"
    token_file.write_text(f"executor {executor_token} {host}\n")
    root = FIXTURES / fixture
    if run_as is None:
        run_as = ("--run-as", TASK_ACCOUNT) if AS_ROOT else ()
    return subprocess.Popen(
        [sys.executable, "-m", "infosvc_agents", "--server", server.url, "--token-file", str(agent_token),
         "--id", host, "--interval", "0.5", "--proc-root", str(root / "proc"), "--sys-root", str(root / "sys"),
         "--etc-root", str(root / "etc"), "--run-jobs", "--executor-token-file", str(token_file),
         "--jobs-interval", "0.1", "--task-state", str(state / "tasks"), *run_as, *more],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log.open("ab"))


def sh_job(name: str, script: str, workdir: Path | str | None, *, owner: str | None = None, extra: str = "",
           requested: str = "") -> bytes:
    """An SSS Job of one task, `/bin/sh -c SCRIPT`; `extra` adds elements (OutputFile, InputFile...)."""
    return (f"<Job><Id>{name}</Id><Name>{name}</Name>" + (f"<User>{owner}</User>" if owner else "")
            + f"<Executable>/bin/sh</Executable><Arguments>-c '{escape(script)}'</Arguments>"
            + (f"<InitialWorkingDirectory>{workdir}</InitialWorkingDirectory>" if workdir else "")
            + f"{extra}<Requested><Processors>1</Processors>{requested}</Requested></Job>").encode()


def submit(server: Server, document: bytes, token: str | None = None, content_type: str = "application/xml") -> str:
    reply = server.request("POST", "/v1/jobs", document, token=token or server.tokens["submit"],
                           headers={"Content-Type": content_type})
    assert reply.status in (200, 201, 202), reply.body
    return str(reply.json()["id"])


def job(server: Server, job_id: str) -> Any:
    return server.get(f"/v1/jobs/{job_id}").json()


def ended(server: Server, job_id: str, timeout: float = 30) -> Any:
    wait_for(lambda: job(server, job_id)["state"] in ENDED, timeout=timeout, message=f"job {job_id}'s end")
    return job(server, job_id)


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False
