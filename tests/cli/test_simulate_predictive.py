"""`infosvc simulate --policy predictive` as a user runs it, on the vendored Lublin trace: the
summary names the policy, and predictive's figures against easy's are those docs/simulation.md
gives (the targets: mean bounded slowdown at least 20 % lower, maximum wait at most 1.25 x)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

LUBLIN = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "lublin_256.swf.gz"


def summary(policy: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "infosvc", "simulate", str(LUBLIN), "--policy", policy, "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_predictive_beats_easy_on_the_lublin_trace() -> None:
    easy, predictive = summary("easy"), summary("predictive")
    assert (predictive["policy"], predictive["jobs"]) == ("predictive", easy["jobs"])
    assert round(predictive["mean_bounded_slowdown"], 2) == 448.13
    assert round(easy["mean_bounded_slowdown"], 2) == 590.05
    assert predictive["mean_bounded_slowdown"] <= 0.8 * easy["mean_bounded_slowdown"]
    assert predictive["max_wait_seconds"] <= 1.25 * easy["max_wait_seconds"]
