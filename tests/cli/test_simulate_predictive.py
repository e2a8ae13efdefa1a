"""`infosvc simulate --policy predictive` as a user runs it, on the vendored traces (tuning traces
of the design: docs/simulation.md): the summary names the policy, predictive's figures against
easy's are those docs/simulation.md gives, and it is not worse than easy on mean bounded slowdown
on either trace, nor on maximum wait beyond the 1.25 x the held-out goal allows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
LUBLIN = TRACES / "lublin_256.swf.gz"
NASA = TRACES / "NASA-iPSC-1993-3.1-cln.swf.gz"


def summary(trace: Path, policy: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "infosvc", "simulate", str(trace), "--policy", policy, "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_predictive_beats_easy_on_the_lublin_trace() -> None:
    easy, predictive = summary(LUBLIN, "easy"), summary(LUBLIN, "predictive")
    assert (predictive["policy"], predictive["jobs"]) == ("predictive", easy["jobs"])
    # the model's estimates are its run times: every prediction is exact once a user has run a job
    assert round(predictive["mean_bounded_slowdown"], 2) == 427.28
    assert round(easy["mean_bounded_slowdown"], 2) == 590.05
    assert predictive["mean_bounded_slowdown"] <= 0.73 * easy["mean_bounded_slowdown"]  # 28 % lower
    assert predictive["max_wait_seconds"] <= 1.11 * easy["max_wait_seconds"]  # 1.10 x: its backlog grows all along


def test_predictive_is_easy_where_nobody_waits_long() -> None:
    easy, predictive = summary(NASA, "easy"), summary(NASA, "predictive")
    assert predictive["mean_bounded_slowdown"] <= easy["mean_bounded_slowdown"]
    assert predictive["max_wait_seconds"] <= easy["max_wait_seconds"]
