"""The long schemathesis run: the API against /openapi.json on a real `infosvc serve`, while a
process of its own times GET /healthz.

The same run as tests/web/test_schemathesis.py (tests/support/apifuzz.py: every check but
positive_data_acceptance, one worker, a fixed seed), longer: every phase (examples, coverage,
fuzzing, stateful) with `--examples` cases per operation, as an admin over the whole API, then as
an agent over POST /v1/nodes. Prints and writes to bench/results/apifuzz.json: test cases, checks,
failures, and /healthz p50 / p99 / max during the run. It takes minutes of both cores: run it
under the shared lock, `flock /tmp/heavy.lock python bench/apifuzz.py`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.apifuzz import populate, run_schemathesis  # noqa: E402
from support.server import Server  # noqa: E402

#: GET /healthz from a process of its own until a file appears; prints its latencies in seconds.
POLLER = """
import http.client, os, sys, time
port, stop = int(sys.argv[1]), sys.argv[2]
latencies, failures = [], 0
while not os.path.exists(stop):
    started = time.perf_counter()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        response.read()
        connection.close()
        failures += response.status != 200
    except OSError:
        failures += 1
    latencies.append(time.perf_counter() - started)
    time.sleep(0.05)
print(" ".join(f"{x:.6f}" for x in latencies), f"failures={failures}")
"""


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(len(ordered) * share + 0.5) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=300, help="test cases per operation and phase")
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="apifuzz-"))
    server = Server(directory / "server", {}, agents=8).start()
    try:
        populate(server)
        stop = directory / "stop"
        poller = subprocess.Popen([sys.executable, "-c", POLLER, str(server.port), str(stop)],
                                  stdout=subprocess.PIPE, text=True)
        started = time.monotonic()
        runs = {"admin": run_schemathesis(server, directory / "admin", token=server.tokens["admin"], seed=args.seed,
                                          examples=args.examples, timeout=3600),
                "agent": run_schemathesis(server, directory / "agent", token=server.agent_token(), seed=args.seed,
                                          examples=args.examples, include_path="/v1/nodes", timeout=3600)}
        seconds = time.monotonic() - started
        stop.touch()
        out, _ = poller.communicate(timeout=60)
    finally:
        server.stop()
    words = out.split()
    latencies = [float(x) for x in words[:-1]]
    health_failures = int(words[-1].split("=")[1])
    log = server.log.read_text()
    results = {
        "examples": args.examples, "seed": args.seed, "seconds": round(seconds, 1),
        "cases": sum(run.cases for run in runs.values()), "checks": sum(run.checks for run in runs.values()),
        "failures": [failure for run in runs.values() for failure in run.failures],
        "exit_codes": {name: run.returncode for name, run in runs.items()},
        "unhandled_errors_logged": log.count("unhandled error"),
        "healthz": {"requests": len(latencies), "failures": health_failures,
                    "p50_ms": round(percentile(latencies, 0.50) * 1000, 2),
                    "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
                    "max_ms": round(max(latencies) * 1000, 2)},
    }
    for name, run in runs.items():
        print(f"{name}: {run.cases} test cases, {run.checks} checks, {len(run.failures)} failures, "
              f"exit {run.returncode}")
        if run.returncode:
            print(run.output[-4000:])
    health = results["healthz"]
    print(f"{results['cases']} test cases in {seconds:.0f} s, {len(results['failures'])} failures, "
          f"{results['unhandled_errors_logged']} unhandled errors logged; /healthz over {health['requests']} "
          f"requests: p50 {health['p50_ms']} ms, p99 {health['p99_ms']} ms, max {health['max_ms']} ms, "
          f"{health['failures']} failed")
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "apifuzz.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0 if not results["failures"] and not any(results["exit_codes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
