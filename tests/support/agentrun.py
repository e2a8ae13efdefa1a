"""The agent run as a process in tests: stopping it as its service manager does, and the figures
of the line it logs when it stops; the reports a server stored for a host, oldest first."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

from support.server import Server

#: the agent's last log line (agents/infosvc_agents/cli.py)
STOPPED = re.compile(r"stopped: (\d+) delivered \(\d+ as deltas\), (\d+) dropped, (\d+) refused, (\d+) kept undelivered, of (\d+) taken")


def stop(agent: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """SIGTERM, as systemd stops it; killed if it does not end in `timeout` seconds."""
    agent.send_signal(signal.SIGTERM)
    try:
        agent.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        agent.kill()
        agent.wait()


def figures(agent: subprocess.Popen[bytes], log: Path) -> tuple[int, ...]:
    """An ended agent's stop line: delivered, dropped, refused, kept undelivered, taken."""
    text = log.read_text()
    found = STOPPED.search(text)
    assert agent.returncode == 0 and found, text
    return tuple(map(int, found.groups()))


def stored(server: Server, host: str) -> list[bytes]:
    return [row[0] for row in server.sql("SELECT document FROM reports WHERE host_id = ? ORDER BY seq", host)]
