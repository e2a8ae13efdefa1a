"""schemathesis against a live server's /openapi.json: its command line run in a subprocess (as an
operator would run it), on a fixed seed, every check but one, and its figures read back from its
NDJSON report. tests/web/test_schemathesis.py runs it short; bench/apifuzz.py runs it long.

The one check left out, `positive_data_acceptance` (a request the document allows must be
accepted): schemathesis wraps an XML body in `<data>`, which is no SSS or CCS document, and some
rules join two parameters (an admin names `?host=`; a past view `?at=` takes no host filter;
`?history=` goes with `remove` alone; an `ended` event gives its exit code), which the document
says in words, not in its schemas. The XML parsers are fuzzed with hypothesis instead
(tests/codec/test_parser_properties.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from support.server import Server

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
EXCLUDED_CHECKS = ("positive_data_acceptance",)


@dataclass
class FuzzRun:
    """What one run found: test cases generated (each one request, or a stateful scenario's
    steps), checks run on the answers, failures, and the command's output."""

    returncode: int
    cases: int
    checks: int
    failures: list[str] = field(default_factory=list)
    output: str = ""


def populate(server: Server, hosts: int = 3) -> None:
    """A few hosts and a queued job, so that the lists and renderings checked hold something."""
    for i in range(hosts):
        server.report(f"fz{i:02d}.example.org", server.agent_token())
    job = (Path(__file__).resolve().parents[1] / "fixtures" / "jobs" / "sss-job.xml").read_bytes()
    reply = server.request("POST", "/v1/jobs", job, token=server.tokens["submit"])
    assert reply.status == 201, reply


def run_schemathesis(server: Server, workdir: Path, *, token: str, seed: int, examples: int,
                     phases: str = "examples,coverage,fuzzing,stateful", include_path: str | None = None,
                     max_time: int | None = None, timeout: float = 600) -> FuzzRun:
    """One `schemathesis run` against `server`, its report in `workdir` (also its cwd: its
    .hypothesis and report directories go there)."""
    workdir.mkdir(parents=True, exist_ok=True)
    report = workdir / "report.ndjson"
    command = [str(SCHEMATHESIS), "run", f"{server.url}/openapi.json", "--header", f"Authorization: Bearer {token}",
               "--checks", "all", "--exclude-checks", ",".join(EXCLUDED_CHECKS), "--seed", str(seed),
               "--max-examples", str(examples), "--phases", phases, "--workers", "1",
               "--generation-database", "none", "--no-color", "--request-timeout", "10",
               "--report", "ndjson", "--report-ndjson-path", str(report)]
    if include_path:
        command += ["--include-path", include_path]
    if max_time:
        command += ["--max-time", str(max_time)]
    environment = {**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_TELEMETRY": "false"}
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=timeout, env=environment)
    checks, failures = _read_report(report)
    generated = re.search(r"(\d+) generated", done.stdout)
    return FuzzRun(done.returncode, int(generated.group(1)) if generated else 0, checks, failures,
                   done.stdout + done.stderr)


def _read_report(report: Path) -> tuple[int, list[str]]:
    """(checks run, failures as "CODE operation: title") from the NDJSON events of a run."""
    checks, failures = 0, []
    if not report.exists():
        return checks, failures
    with report.open(encoding="utf-8") as events:
        for line in events:
            finished = json.loads(line).get("ScenarioFinished")
            for results in (finished or {}).get("recorder", {}).get("checks", {}).values():
                checks += len(results)
                for result in results:
                    if result.get("status") != "success":
                        failure = result.get("failure_info", {}).get("failure", {})
                        failures.append(f"{failure.get('code')} {failure.get('operation')}: {failure.get('title')}: "
                                        f"{failure.get('message', '')[:300]}")
    return checks, failures
