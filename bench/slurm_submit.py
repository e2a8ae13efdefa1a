"""Benchmark of submission through the service to Slurm against `sbatch` directly, in the same run,
on the same real Slurm (tests/support/slurm.py's cluster).

Two phases, each `--jobs` submissions by `--clients` concurrent clients (closed loop):

  infosvc   POST /v1/jobs of an SSS job to `infosvc serve` with `[lrms] type = "slurm"`, which
            translates it and runs `sbatch` as the pool account
  sbatch    `sbatch` run directly as the same account with the same options and script

Every job is held (SSS `Hold` User, `sbatch --hold`) so that no job runs and Slurm's scheduler
costs both phases the same; the jobs are cancelled between phases. Latency is each submission's
wall time as its client saw it.

Run (root, with slurm-wlm and munge installed): `flock /tmp/heavy.lock python bench/slurm_submit.py
[--jobs 300] [--clients 4]`; prints a table and writes bench/results/slurm_submit.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.server import free_port, stop_process  # noqa: E402
from support.slurm import running  # noqa: E402

JOB = (b"<Job><Id>b</Id><Name>bench</Name><Executable>/bin/sleep</Executable><Arguments>600</Arguments>"
       b"<OutputFile>/dev/null</OutputFile><Hold>User</Hold></Job>")
SCRIPT = "#!/bin/sh\nexec /bin/sleep 600\n"
POOL = "nobody"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def closed_loop(jobs: int, clients: int, submit: Callable[[], None]) -> tuple[float, list[float]]:
    """`jobs` calls of `submit` by `clients` threads; (wall seconds, each call's seconds)."""
    latencies: list[float] = []
    lock = threading.Lock()
    left = [jobs]

    def client() -> None:
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            began = time.perf_counter()
            submit()
            took = time.perf_counter() - began
            with lock:
                latencies.append(took)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, latencies


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=300)
    p.add_argument("--clients", type=int, default=4)
    args = p.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="infosvc-bench-slurm-submit-"))
    workdir.chmod(0o755)  # the pool account reads slurm.conf
    account = pwd.getpwnam(POOL)
    results: dict[str, dict[str, float]] = {}
    try:
        with running(workdir / "slurm") as cluster:
            token = os.urandom(16).hex()
            (workdir / "tokens").write_text(f"submit {token} alice\n")
            (workdir / "site.toml").write_text(
                f'[lrms]\ntype = "slurm"\nslurm_conf = "{cluster.conf}"\nbin_dir = "{cluster.bin_dir}"\n'
                f'run_as = "{POOL}"\ntimeout_seconds = 60.0\n')
            port = free_port()
            server = subprocess.Popen([sys.executable, "-m", "infosvc", "serve", "--config", str(workdir / "site.toml"),
                                       "--listen", f"127.0.0.1:{port}", "--db", str(workdir / "db.sqlite"),
                                       "--tokens", str(workdir / "tokens")],
                                      stdout=open(workdir / "server.log", "wb"), stderr=subprocess.STDOUT)
            try:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                        connection.request("GET", "/healthz")
                        if connection.getresponse().status == 200:
                            break
                    except OSError:
                        pass
                    if time.monotonic() > deadline:
                        raise RuntimeError((workdir / "server.log").read_text())
                    time.sleep(0.1)

                def through_infosvc() -> None:
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                    connection.request("POST", "/v1/jobs", JOB, {"Authorization": f"Bearer {token}",
                                                                  "Content-Type": "application/xml"})
                    answer = connection.getresponse()
                    body = answer.read()
                    if answer.status != 201:
                        raise RuntimeError(f"{answer.status}: {body[:300]!r}")

                # the same options infosvc gives this job (infosvc/lrms/sbatch.py)
                argv = [shutil.which("sbatch", path=cluster.bin_dir) or "sbatch", "--parsable", "--export=NONE",
                        "--job-name=bench", "--ntasks=1", "--hold", "--chdir=/tmp", "--output=/dev/null",
                        "--input=/dev/null"]
                env = {**cluster.env, "HOME": account.pw_dir, "USER": POOL}

                def directly() -> None:
                    subprocess.run(argv, input=SCRIPT, capture_output=True, text=True, check=True, env=env, cwd="/",
                                   user=account.pw_uid, group=account.pw_gid, extra_groups=[])

                for name, submit in (("infosvc", through_infosvc), ("sbatch", directly)):
                    closed_loop(min(20, args.jobs), args.clients, submit)  # warm-up
                    cluster.cancel_all()
                    wall, latencies = closed_loop(args.jobs, args.clients, submit)
                    results[name] = {"jobs": args.jobs, "clients": args.clients, "seconds": wall,
                                     "jobs_per_second": args.jobs / wall,
                                     "p50_ms": statistics.median(latencies) * 1000,
                                     "p99_ms": percentile(latencies, 0.99) * 1000}
                    cluster.cancel_all()
            finally:
                stop_process(server)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{'phase':8} {'jobs':>5} {'clients':>7} {'jobs/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for name, row in results.items():
        print(f"{name:8} {row['jobs']:5.0f} {row['clients']:7.0f} {row['jobs_per_second']:8.1f} {row['p50_ms']:8.1f} "
              f"{row['p99_ms']:8.1f}")
    ratio = results["infosvc"]["jobs_per_second"] / results["sbatch"]["jobs_per_second"]
    print(f"through infosvc: {ratio:.2f}x sbatch's rate")
    out = HERE / "results" / "slurm_submit.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"results": results, "infosvc_over_sbatch": ratio}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
