"""`infosvc why` on a server whose queue is `predictive`: the run time the policy plans a job
with is shown (and in `--json`), as a user runs the command against a real server on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.server import InProcessServer, ServerFactory, wait_for

JOB = ("<Job><Id>{name}</Id><Name>{name}</Name><Executable>/bin/true</Executable>"
       "<Requested><Processors>8</Processors><Duration>{limit}</Duration></Requested></Job>")


def test_why_shows_the_prediction_the_policy_plans_with(serve_app: ServerFactory, tmp_path: Path) -> None:
    server: InProcessServer = serve_app({"scheduler": {"policy": "predictive"}}, agents=1,
                                        users={"alice": "alice"}, executors={"exec0": "n0"})  # type: ignore[assignment]
    server.report("n0", server.agent_token(), processors=4)
    token = tmp_path / "alice.token"
    token.write_text(server.tokens["alice"] + "\n")
    base = [sys.executable, "-m", "infosvc"]
    common = ["--server", server.url, "--token-file", str(token)]
    submitted = subprocess.run([*base, "submit", "-", *common], input=JOB.format(name="wide", limit=5400),
                               capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    # the first pass predicts it (its reason may come sooner: a job no host can run is said so at submission)
    wait_for(lambda: server.get("/v1/jobs/1").json()["predicted_run_seconds"] is not None)
    shown = subprocess.run([*base, "why", "1", *common], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    # alice has no ended job yet: the job is planned with its limit
    assert "  planned to run 1:30:00 (predicted from its owner's last jobs; the limit still ends it)" \
        in shown.stdout.splitlines()
    as_json = subprocess.run([*base, "why", "1", "--json", *common], capture_output=True, text=True, timeout=60)
    assert json.loads(as_json.stdout)["predicted_run_seconds"] == 5400
