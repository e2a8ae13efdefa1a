"""Benchmark of `infosvc-agent --run-jobs`: what starting a task costs, whole and in its parts.

Issue 24 asks for the executor's start latency per task (submission to the process running) before
and after the tasks were contained, and the cost of the containment per task.

  whole     a real server and one agent with --run-jobs on loopback; `--jobs` jobs submitted one at
            a time over HTTP, each a task `/bin/date +%s.%N` writing when it ran; the latency is
            that time less the moment before the POST, and the next job is sent once this one has
            ended. Run with the agent's default --jobs-interval (2 s: the wait for the next ask
            dominates) and with 0.1 s (the executor's own cost shows).
  launch    (the agent's code after issue 24 only) one task `/bin/true` run to its reaped end
            `--launches` times, in this process: a bare Popen as the run-as user (no containment,
            the floor), and through the task supervisor with each containment this host has
            (subreaper; cgroup v2 where writable; a PID namespace where it may make one). The difference
            to the floor is the cost per task.

Run as root (tasks run as `--run-as`, default nobody): `python bench/executor.py [--jobs 20]`;
prints a table and writes bench/results/executor.json.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import marshal
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "agents"))

from support.server import Server, request, stop_process, wait_for  # noqa: E402

HOST = "bench-exec.example"


def _supports(flag: str) -> bool:
    done = subprocess.run([sys.executable, "-m", "infosvc_agents", "--help"], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    return flag in done.stdout


def whole(jobs: int, interval: float, run_as: str, base: Path) -> list[float]:
    server = Server(base / f"server-{interval}", agents=1, executors={"exec": HOST}).start()
    work = base / f"work-{interval}"
    work.mkdir()
    shutil.chown(work, run_as)
    token = base / f"agent-{interval}.token"
    token.write_text(server.agent_token() + "\n")
    executor_token = base / f"exec-{interval}.token"
    executor_token.write_text(f"executor {server.tokens['exec']} {HOST}\n")
    fixture = ROOT / "tests" / "fixtures" / "host1"
    more = ["--task-state", str(base / f"tasks-{interval}")] if _supports("--task-state") else []
    agent = subprocess.Popen(
        [sys.executable, "-m", "infosvc_agents", "--server", server.url, "--token-file", str(token), "--id", HOST,
         "--interval", "5", "--proc-root", str(fixture / "proc"), "--sys-root", str(fixture / "sys"),
         "--etc-root", str(fixture / "etc"), "--run-jobs", "--executor-token-file", str(executor_token),
         "--jobs-interval", str(interval), "--run-as", run_as, *more],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=(base / f"agent-{interval}.log").open("wb"))
    latencies = []
    try:
        wait_for(lambda: server.node_ids() == [HOST], timeout=30, message="the agent reporting")
        for n in range(jobs):
            name = f"t{n}"
            document = (f"<Job><Id>{name}</Id><Name>{name}</Name><Executable>/bin/date</Executable><Arguments>+%s.%N</Arguments>"
                        f"<InitialWorkingDirectory>{work}</InitialWorkingDirectory><OutputFile>{name}.out</OutputFile>"
                        "<Requested><Processors>1</Processors></Requested></Job>").encode()
            sent = time.time()
            reply = request(server.port, "POST", "/v1/jobs", document, token=server.tokens["submit"],
                            headers={"Content-Type": "application/xml"})
            assert reply.status in (200, 201, 202), reply.body
            job_id = reply.json()["id"]
            wait_for(lambda: server.get(f"/v1/jobs/{job_id}").json()["state"] in ("Finished", "Failed", "Canceled"),
                     timeout=30, interval=0.005, message=f"job {job_id} ended")
            out = (work / f"{name}.out").read_text().strip()
            latencies.append(float(out) - sent)
    finally:
        stop_process(agent)
        server.stop()
    return latencies


def launches(count: int, run_as: str, base: Path) -> dict[str, list[float]]:
    import pwd

    from infosvc_agents import taskrun

    account = pwd.getpwnam(run_as)
    results: dict[str, list[float]] = {"bare Popen": []}
    for _ in range(count):
        began = time.perf_counter()
        subprocess.Popen(["/bin/true"], user=account.pw_uid, group=account.pw_gid, extra_groups=[],
                         cwd="/", start_new_session=True).wait()
        results["bare Popen"].append(time.perf_counter() - began)
    for containment in taskrun.available_containments():
        times = []
        for n in range(count):
            directory = base / f"launch-{containment}-{n}"
            directory.mkdir()
            order = {"job": "bench", "task": n, "argv": ["/bin/true"], "environment": {},
                     "workdir": "/", "containment": containment,
                     "account": {"name": run_as, "uid": account.pw_uid, "gid": account.pw_gid}, "key": f"bench.{n}"}
            (directory / taskrun.ORDER).write_bytes(marshal.dumps(order))
            began = time.perf_counter()
            lock = os.open(directory / taskrun.LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(lock, fcntl.LOCK_EX)  # as the executor does: taken, then handed over
            supervisor = subprocess.Popen(taskrun.command(directory, lock), start_new_session=True,
                                          stdin=subprocess.DEVNULL, pass_fds=(lock,))
            os.close(lock)
            supervisor.wait()
            times.append(time.perf_counter() - began)
            result = json.loads((directory / taskrun.RESULT).read_text())
            assert result["exit_code"] == 0, result
        results[f"supervisor, {containment}"] = times
    from infosvc_agents.executor import Launcher

    launcher = Launcher()  # as the executor starts them: forked by its launcher, already loaded
    for containment in taskrun.available_containments():
        times = []
        for n in range(count):
            directory = base / f"launched-{containment}-{n}"
            directory.mkdir()
            order = {"job": "bench", "task": n, "argv": ["/bin/true"], "environment": {}, "workdir": "/",
                     "containment": containment, "key": f"bench.{n}",
                     "account": {"name": run_as, "uid": account.pw_uid, "gid": account.pw_gid}}
            (directory / taskrun.ORDER).write_bytes(marshal.dumps(order))
            began = time.perf_counter()
            lock = os.open(directory / taskrun.LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(lock, fcntl.LOCK_EX)
            assert launcher.start(directory, lock)
            os.close(lock)
            while not (directory / taskrun.RESULT).exists():
                time.sleep(0.0002)
            times.append(time.perf_counter() - began)
        results[f"launcher's supervisor, {containment}"] = times
    launcher.close()
    return results


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"n": len(values), "p50_ms": round(statistics.median(ordered) * 1e3, 2),
            "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1e3, 2),
            "min_ms": round(ordered[0] * 1e3, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--launches", type=int, default=50)
    parser.add_argument("--run-as", default="nobody")
    parser.add_argument("--label", default="", help="a name for this run in the results (e.g. before, after)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/executor.py runs tasks as another user: run it as root", file=sys.stderr)
        return 2
    figures: dict[str, Any] = {"label": args.label}
    base = Path(tempfile.mkdtemp(prefix="infosvc-bench-exec-", dir="/tmp"))
    base.chmod(0o755)  # the tasks' user reaches its working directory through here
    try:
        for interval in (2.0, 0.1):
            figures[f"whole, --jobs-interval {interval}"] = _summary(whole(args.jobs, interval, args.run_as, base))
        if not (ROOT / "agents" / "infosvc_agents" / "taskrun.py").exists():
            print("(no task supervisor in this version of the agent: launch costs not measured)")
        else:
            for name, values in launches(args.launches, args.run_as, base).items():
                figures[f"launch to reaped end, {name}"] = _summary(values)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    width = max(len(key) for key in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / f"executor{'-' + args.label if args.label else ''}.json").write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
