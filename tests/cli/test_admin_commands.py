"""The small commands an operator reaches for instead of curl (issue 14, item 9):
`infosvc-agent --version` and `infosvc check-config FILE`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from infosvc import __version__


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=60)


def test_agent_version() -> None:
    done = run("infosvc_agents", "--version")
    assert done.returncode == 0 and done.stdout == f"infosvc-agent {__version__}\n"


def test_check_config(tmp_path: Path) -> None:
    good = tmp_path / "site.toml"
    good.write_text('[[clusters]]\nid = "compute"\nnodes = "cn[01-08]"\n[scheduler]\npolicy = "fcfs"\n')
    done = run("infosvc", "check-config", str(good))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{good}: valid (1 cluster, 1 computing element)\n"
    bad = tmp_path / "bad.toml"
    bad.write_text('[scheduler]\npolicy = "sjf"\n')
    done = run("infosvc", "check-config", str(bad))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"infosvc check-config: {bad}: scheduler.policy: one of easy, fcfs, got 'sjf'\n"
    missing = run("infosvc", "check-config", str(tmp_path / "nope.toml"))
    assert missing.returncode == 1 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr
