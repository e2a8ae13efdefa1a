"""`infosvc serve --local-agent`, as `make run` starts it: this host shows up in /v1/glue by itself."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import time
import sys
from pathlib import Path

import psutil
import pytest

from support.server import banner_of, free_port, request, wait_for


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_local_agent_reports_this_host_and_stops_with_the_server(tmp_path: Path, stop: signal.Signals) -> None:
    """SIGHUP (the terminal of `make run` closed) stops the server as SIGTERM does, cleanly: it
    killed it at once, leaving its agent running; and the agent stops even when the server is
    killed (SIGKILL), rather than report for ever beside the next one."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "infosvc", "serve", "--db", str(tmp_path / "run.sqlite"), "--local-agent",
         "--agent-interval", "0.5", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        banner = banner_of(server)
        assert banner.startswith(f"infosvc: serving on http://127.0.0.1:{port}"), banner

        def glue_hosts() -> list[str]:
            try:
                reply = request(port, "GET", "/v1/glue", timeout=2)
            except (OSError, http.client.HTTPException):
                return []
            return [h["unique_id"] for h in reply.json()["hosts"]] if reply.status == 200 else []

        assert wait_for(glue_hosts, timeout=30, message="this host in /v1/glue") == [os.uname().nodename]
        agents = [p for p in psutil.Process(server.pid).children() if "infosvc_agents" in " ".join(p.cmdline())]
        assert len(agents) == 1
        # A second report arrives: the agent keeps pushing on its interval.
        first = request(port, "GET", f"/v1/nodes/{os.uname().nodename}").json()["extensions"]
        wait_for(lambda: request(port, "GET", f"/v1/nodes/{os.uname().nodename}").json()["extensions"] != first,
                 timeout=15, message="a second report")
    finally:
        server.send_signal(stop)
        output = server.communicate(timeout=20)[0].decode()
    if stop == signal.SIGKILL:
        assert server.returncode == -signal.SIGKILL
        wait_for(lambda: not agents[0].is_running() or agents[0].status() == psutil.STATUS_ZOMBIE, timeout=20,
                 message="the agent stopped after its server was killed")
        return
    assert server.returncode == 0, output
    assert "hosts kept for the next start" in output, output  # a clean stop: the snapshot written
    assert not agents[0].is_running() or agents[0].status() == psutil.STATUS_ZOMBIE


def fresh_report_after_start(tmp_path: Path) -> None:
    """Start `infosvc serve --local-agent` on tmp_path's database and wait for a report of this
    host made after the start (stamps are whole seconds: the caller leaves a second between runs,
    so the report stored by the run before is older)."""
    host = os.uname().nodename
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "infosvc", "serve", "--db", str(tmp_path / "run.sqlite"), "--local-agent",
         "--agent-interval", "0.5", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path)
    began = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        assert banner_of(server).startswith("infosvc: serving on")

        def fresh() -> bool:
            try:
                reply = request(port, "GET", f"/v1/nodes/{host}", timeout=2)
            except (OSError, http.client.HTTPException):
                return False
            if reply.status != 200:
                return False
            stamp = next((e["value"] for e in reply.json()["extensions"] if e["name"] == "SampleTime"), "")
            return stamp >= began and reply.json()["state"] != "Unreachable"

        wait_for(fresh, timeout=30, message="a report of this host made after the start")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=20)
    time.sleep(1.1)


def test_a_restarted_server_s_local_agent_still_reports(tmp_path: Path) -> None:
    """`make run` twice on one database: the local agent's token is kept beside it, so the host's
    stored binding still holds and its reports are taken; and removing the
    token file (to rotate it) has the next start make a new one, bound over the old binding."""
    fresh_report_after_start(tmp_path)
    fresh_report_after_start(tmp_path)
    token = tmp_path / "run.sqlite.local-agent-token"
    assert token.exists() and token.stat().st_mode & 0o777 == 0o600
    first = token.read_text()
    token.unlink()
    fresh_report_after_start(tmp_path)
    assert token.read_text() != first
