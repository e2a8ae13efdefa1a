"""The first minutes with the service, as `make run` sets them up: `serve --user-tokens` makes an
admin and a submit token for the user running it (beside the database, 0600) and prints how to use
them; every command takes INFOSVC_SERVER and INFOSVC_TOKEN_FILE as its defaults; `jobs --me`; and
`--run-jobs` (make run RUN_JOBS=1), the local agent's executor running jobs as that user, never root."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from support.executors import reachable_base
from support.server import banner_of, free_port, request, wait_for

REPO = Path(__file__).resolve().parents[2]
JOB = ("<Job><Id>{id}</Id><Executable>/bin/sh</Executable><Arguments>-c \"id -u\"</Arguments>"
       "<InitialWorkingDirectory>{work}</InitialWorkingDirectory><OutputFile>{id}.out</OutputFile>"
       "<Requested><Processors>1</Processors></Requested></Job>")


def start(db: Path, *flags: str, prefix: tuple[str, ...] = (), user: str = "tester") -> tuple[subprocess.Popen[bytes], int,
                                                                                               list[str]]:
    """`infosvc serve` on `db` as `user` (its LOGNAME); the process, its port, and the lines it
    printed after its banner up to the admin token's line."""
    port = free_port()
    env = {**os.environ, "LOGNAME": user, "USER": user}
    server = subprocess.Popen([*prefix, sys.executable, "-m", "infosvc", "serve", "--db", str(db), *flags,
                               "--listen", f"127.0.0.1:{port}"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=db.parent, env=env)
    assert banner_of(server).startswith(f"infosvc: serving on http://127.0.0.1:{port}")
    lines: list[str] = []
    if "--user-tokens" in flags:
        assert server.stdout is not None
        while not lines or "(an admin's commands)" not in lines[-1]:
            line = server.stdout.readline().decode()
            assert line, f"serve ended before it said how to use its tokens: {lines}"
            lines.append(line.rstrip("\n"))
    return server, port, lines


def stop(server: subprocess.Popen[bytes]) -> None:
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=20)


def command(*args: str, env: dict[str, str], user: str = "tester") -> subprocess.CompletedProcess[str]:
    """An infosvc command with only `env`'s INFOSVC_* variables (none of the test's own)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("INFOSVC_")}
    return subprocess.run([sys.executable, "-m", "infosvc", *args], capture_output=True, text=True, timeout=60,
                          env={**clean, **env, "LOGNAME": user, "USER": user})


def test_user_tokens_make_the_commands_work_from_the_environment(tmp_path: Path) -> None:
    db = tmp_path / "run.sqlite"
    server, port, said = start(db, "--user-tokens")
    try:
        submit_file, admin_file = Path(f"{db}.submit-token"), Path(f"{db}.admin-token")
        for path in (submit_file, admin_file):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        # what it printed is what works: the export line, as a shell would take it
        export = next(line for line in said if "export " in line).split("export ", 1)[1].split()
        env = dict(word.split("=", 1) for word in export)
        assert env == {"INFOSVC_SERVER": f"http://127.0.0.1:{port}", "INFOSVC_TOKEN_FILE": str(submit_file)}

        job = tmp_path / "job.xml"
        job.write_text(JOB.format(id="first", work=tmp_path))
        assert command("submit", str(job), env={}).returncode == 1  # no token, and no server at 8080's
        refused = command("submit", str(job), env={"INFOSVC_SERVER": env["INFOSVC_SERVER"]})
        assert refused.returncode == 1 and "401" in refused.stderr, refused
        done = command("submit", str(job), env=env)
        assert done.returncode == 0 and "submitted" in done.stdout, done

        # the submit token files jobs as the user running serve; --me is the user running the command
        mine = command("jobs", "--me", "--json", env=env)
        assert [j["owner"] for j in json.loads(mine.stdout)["jobs"]] == ["tester"], mine
        theirs = command("jobs", "--me", "--json", env=env, user="someone")
        assert json.loads(theirs.stdout)["jobs"] == [], theirs
        both = command("jobs", "--me", "--user", "tester", env=env)
        assert both.returncode == 2 and "not allowed with" in both.stderr

        # --server and --token-file still win over the environment
        elsewhere = command("jobs", "--server", f"http://127.0.0.1:{free_port()}", env=env)
        assert elsewhere.returncode == 1 and "127.0.0.1" in elsewhere.stderr
        admin = {**env, "INFOSVC_TOKEN_FILE": str(admin_file)}
        canceled = command("cancel", "1", "--token-file", str(admin_file), env=env)
        assert canceled.returncode == 0, canceled
        assert request(port, "GET", "/v1/jobs/1").json()["state"] == "Canceled"
        tokens = (submit_file.read_text(), admin_file.read_text())
    finally:
        stop(server)

    # a restart keeps both tokens: what the user exported still works
    server, port, _ = start(db, "--user-tokens")
    try:
        assert (submit_file.read_text(), admin_file.read_text()) == tokens
        env = {"INFOSVC_SERVER": f"http://127.0.0.1:{port}", "INFOSVC_TOKEN_FILE": str(submit_file)}
        job.write_text(JOB.format(id="again", work=tmp_path))
        assert command("submit", str(job), env=env).returncode == 0
        assert command("cancel", "2", env={**env, "INFOSVC_TOKEN_FILE": admin["INFOSVC_TOKEN_FILE"]}).returncode == 0
    finally:
        stop(server)


def test_a_token_file_that_holds_no_token_stops_serve_with_a_reason(tmp_path: Path) -> None:
    db = tmp_path / "run.sqlite"
    Path(f"{db}.submit-token").write_text("\n")
    Path(f"{db}.submit-token").chmod(0o600)
    out = subprocess.run([sys.executable, "-m", "infosvc", "serve", "--db", str(db), "--user-tokens",
                          "--listen", f"127.0.0.1:{free_port()}"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "submit-token holds no token: remove it" in out.stderr, out


def test_run_jobs_is_the_local_agent_s_and_never_root(tmp_path: Path) -> None:
    db = str(tmp_path / "run.sqlite")
    alone = subprocess.run([sys.executable, "-m", "infosvc", "serve", "--db", db, "--run-jobs"],
                           capture_output=True, text=True, timeout=60)
    assert alone.returncode == 2 and "use it with --local-agent" in alone.stderr
    if os.geteuid() == 0:
        as_root = subprocess.run([sys.executable, "-m", "infosvc", "serve", "--db", db, "--local-agent",
                                  "--run-jobs"], capture_output=True, text=True, timeout=60)
        assert as_root.returncode == 2 and "that is root" in as_root.stderr, as_root
        assert not Path(f"{db}.local-executor-token").exists()
    # make run passes it only when asked (RUN_JOBS=1), and always makes the user's tokens
    dry = {value: subprocess.run(["make", "-n", "run", f"RUN_JOBS={value}"], cwd=REPO, capture_output=True,
                                 text=True, timeout=60).stdout for value in ("", "1")}
    assert "--user-tokens" in dry[""] and "--run-jobs" not in dry[""]
    assert "--user-tokens" in dry["1"] and "--run-jobs" in dry["1"]


@pytest.fixture
def as_unprivileged() -> Iterator[tuple[str, ...]]:
    """How to run serve as a user other than root: as root, in a user namespace of its own where
    the process is uid 65534 (it can still read root's interpreter, which nobody itself cannot)."""
    if os.geteuid() != 0:
        yield ()
        return
    prefix = ("unshare", "--user", "--map-user=65534", "--map-group=65534")
    if shutil.which("unshare") is None or subprocess.run([*prefix, "true"]).returncode != 0:
        pytest.skip("root here, and no user namespace (unshare --user) to run serve as another user in")
    yield prefix


def test_run_jobs_runs_the_jobs_as_the_user_running_serve(as_unprivileged: tuple[str, ...]) -> None:
    for base in reachable_base():
        work = base / "work"
        work.mkdir()
        work.chmod(0o777)
        db = base / "run.sqlite"
        server, port, _ = start(db, "--local-agent", "--agent-interval", "0.5", "--run-jobs", "--user-tokens",
                                prefix=as_unprivileged)
        try:
            wait_for(lambda: request(port, "GET", "/v1/nodes").json(), timeout=30,
                     message="the local agent's first report")
            env = {"INFOSVC_SERVER": f"http://127.0.0.1:{port}", "INFOSVC_TOKEN_FILE": f"{db}.submit-token"}
            job = base / "job.xml"
            job.write_text(JOB.format(id="mine", work=work))
            job.chmod(0o644)
            assert command("submit", str(job), env=env).returncode == 0

            def ended() -> dict[str, object] | None:
                job = request(port, "GET", "/v1/jobs/1").json()
                return job if job["state"] in ("Finished", "Failed", "Canceled") else None

            done = wait_for(ended, timeout=60, message="the job's end")
            assert done["state"] == "Finished", done
            assert (work / "mine.out").read_text().strip() == str(os.geteuid() if not as_unprivileged else 65534)
        finally:
            stop(server)


def test_a_token_file_beside_the_database_is_used_only_if_it_is_the_user_s_alone(tmp_path: Path) -> None:
    # As ssh refuses a private key others can read: the file was made 0600, so a looser one (or a
    # link to somewhere else) was not made here, and its token may be known to others.
    from infosvc.cli import token_beside
    from infosvc.hosts import TokenFileError

    db = str(tmp_path / "run.sqlite")
    path, token = token_beside(db, "submit-token")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and token_beside(db, "submit-token") == (path, token)
    path.chmod(0o644)
    with pytest.raises(TokenFileError, match=r"readable by others: chmod 600 .*submit-token") as refused:
        token_beside(db, "submit-token")
    assert token not in str(refused.value)
    path.chmod(0o600)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(token + "\n")
    elsewhere.chmod(0o600)
    linked = Path(f"{db}.admin-token")
    linked.symlink_to(elsewhere)
    with pytest.raises(TokenFileError, match="not a regular file"):
        token_beside(db, "admin-token")
