"""Prometheus node_exporter measured on this machine, as the baseline of the agent benchmark.

The host agent reports roughly what node_exporter's cpu, meminfo, loadavg, filesystem, netdev and
uname collectors do, so `measure()` runs node_exporter with exactly those six collectors on a free
loopback port and scrapes it from this process: CPU time the exporter spends per scrape, wall time
of a scrape as this client sees it, the exporter's RSS afterwards and the number of series served.
`bench/agent.py` sets these figures beside the agent's own.

CPU time comes from /proc/<pid>/stat (utime + stime, all threads), counted in clock ticks of
1 / SC_CLK_TCK s (10 ms on Linux); the per-scrape figure is therefore exact only to
tick / scrapes (0.05 ms for the default 200 scrapes).

Run `python bench/node_exporter.py` to print one measurement as JSON on stdout (progress and any
apt-get output go to stderr).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TypedDict

DEBIAN_BINARY = Path("/usr/bin/prometheus-node-exporter")
DEBIAN_PACKAGE = "prometheus-node-exporter"
COLLECTORS = ("cpu", "meminfo", "loadavg", "filesystem", "netdev", "uname")
HOST = "127.0.0.1"
READY_TIMEOUT_S = 10.0
READY_POLL_S = 0.02
SCRAPE_TIMEOUT_S = 5.0
STOP_TIMEOUT_S = 5.0
APT_TIMEOUT_S = 900.0
START_ATTEMPTS = 3  # each on a fresh port, in case another process takes the free one first


class Measurement(TypedDict):
    version: str
    scrapes: int
    cpu_ms_per_scrape: float
    wall_ms_median: float
    rss_mib: float
    series: int


def find_binary() -> str | None:
    """Path of an installed node_exporter, without installing anything."""
    if DEBIAN_BINARY.is_file() and os.access(DEBIAN_BINARY, os.X_OK):
        return str(DEBIAN_BINARY)
    return shutil.which("node_exporter") or shutil.which(DEBIAN_PACKAGE)


def _log(message: str) -> None:
    print(f"node_exporter: {message}", file=sys.stderr, flush=True)


def _apt_get(*args: str) -> bool:
    """Run apt-get with its output on stderr (stdout is kept for the JSON); True on success."""
    command = ["apt-get", *args]
    _log("running " + " ".join(command))
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr,
                              env=env, timeout=APT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        _log(f"apt-get {args[0]} failed: {error}")
        return False
    if done.returncode != 0:
        _log(f"apt-get {args[0]} exited with {done.returncode}")
    return done.returncode == 0


def ensure_installed() -> str | None:
    """Path of the node_exporter binary (/usr/bin/prometheus-node-exporter or `node_exporter` on PATH);
    if missing, try `apt-get install -y prometheus-node-exporter` (running `apt-get update` first only if
    the install fails), printing progress to stderr; return None when it cannot be had (never raise)."""
    try:
        binary = find_binary()
        if binary:
            return binary
        if shutil.which("apt-get") is None:
            _log("not installed, and there is no apt-get to install it with")
            return None
        if hasattr(os, "geteuid") and os.geteuid() != 0:
            _log(f"not installed; installing {DEBIAN_PACKAGE} needs root")
            return None
        _log(f"not installed; installing {DEBIAN_PACKAGE}")
        if not _apt_get("install", "-y", DEBIAN_PACKAGE):
            _log("install failed; updating the package lists and trying again")
            if _apt_get("update"):
                _apt_get("install", "-y", DEBIAN_PACKAGE)
        binary = find_binary()
        _log(f"installed at {binary}" if binary else "could not be installed")
        return binary
    except Exception as error:  # the benchmark must go on without its baseline
        _log(f"could not be installed: {error!r}")
        return None


def version(binary: str) -> str:
    """Version number from `--version` ("node_exporter, version 1.5.0 (branch: ...)" -> "1.5.0")."""
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10, check=False)
    words = (done.stdout + done.stderr).split()
    if "version" in words[:-1]:
        return words[words.index("version") + 1]
    return " ".join(words[:3]) or "unknown"


def command_line(binary: str, port: int) -> list[str]:
    """Arguments that run node_exporter on HOST:port with only the COLLECTORS."""
    return [
        binary,
        f"--web.listen-address={HOST}:{port}",
        "--collector.disable-defaults",
        *(f"--collector.{name}" for name in COLLECTORS),
        "--log.level=warn",
    ]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _cpu_ticks(pid: int) -> int:
    """utime + stime of the whole process, in clock ticks."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "; fields[0] is field 3, state
    return int(fields[11]) + int(fields[12])  # fields 14 and 15: utime, stime


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def _series(body: str) -> int:
    return sum(1 for line in body.splitlines() if line.strip() and not line.startswith("#"))


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_ready(opener: urllib.request.OpenerDirector, url: str, process: subprocess.Popen[bytes]) -> bool:
    """Poll url until it answers (True) or the process exits (False); RuntimeError after READY_TIMEOUT_S."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0:
        if process.poll() is not None:
            return False
        try:
            with opener.open(url, timeout=min(left, 1.0)) as response:
                response.read()
                return True
        except OSError:  # URLError, refused, timed out: not up yet
            time.sleep(READY_POLL_S)
    raise RuntimeError(f"node_exporter did not answer {url} within {READY_TIMEOUT_S:.0f} s")


def _start(binary: str, opener: urllib.request.OpenerDirector) -> tuple[subprocess.Popen[bytes], str]:
    """node_exporter running on a free loopback port and answering: (process, metrics URL)."""
    for attempt in range(1, START_ATTEMPTS + 1):
        port = _free_port()
        url = f"http://{HOST}:{port}/metrics"
        with tempfile.TemporaryFile() as log:
            process = subprocess.Popen(command_line(binary, port), stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=log)
            try:
                ready = _wait_ready(opener, url, process)
            except BaseException:
                _stop(process)
                raise
            if ready:
                return process, url
            log.seek(0)
            lines = log.read().decode(errors="replace").strip().splitlines()
        reason = f"node_exporter exited with {process.returncode}" + (f": {lines[-1]}" if lines else "")
        if attempt == START_ATTEMPTS or not any("address already in use" in line for line in lines):
            raise RuntimeError(reason)
        _log(f"port {port} taken meanwhile; trying another")
    raise AssertionError("unreachable")


def _scrape(opener: urllib.request.OpenerDirector, url: str) -> tuple[float, str]:
    """One scrape: (wall seconds, body)."""
    start = time.perf_counter()
    with opener.open(url, timeout=SCRAPE_TIMEOUT_S) as response:
        body = response.read()
    return time.perf_counter() - start, body.decode()


def measure(scrapes: int = 200, warmup: int = 20) -> Measurement | None:
    """Start node_exporter on 127.0.0.1 at a free port with only the COLLECTORS enabled, wait until
    /metrics answers (at most READY_TIMEOUT_S), scrape it `warmup` times, then `scrapes` times in
    sequence, and return its CPU ms per scrape (clock-tick resolution: see the module docstring),
    the median wall ms of a scrape, its VmRSS in MiB afterwards and the series in one scrape.
    None when node_exporter is not installed (this does not install it: see ensure_installed)."""
    if scrapes < 1 or warmup < 0:
        raise ValueError("scrapes must be at least 1 and warmup at least 0")
    binary = find_binary()
    if binary is None:
        return None
    # No proxy: a scrape of 127.0.0.1 must not leave this machine whatever *_proxy says.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    process, url = _start(binary, opener)
    try:
        for _ in range(warmup):
            _scrape(opener, url)
        walls: list[float] = []
        body = ""
        ticks_before = _cpu_ticks(process.pid)
        for _ in range(scrapes):
            wall, body = _scrape(opener, url)
            walls.append(wall)
        ticks = _cpu_ticks(process.pid) - ticks_before
        rss_mib = _rss_mib(process.pid)
    finally:
        _stop(process)
    return Measurement(
        version=version(binary),
        scrapes=scrapes,
        cpu_ms_per_scrape=round(ticks / os.sysconf("SC_CLK_TCK") / scrapes * 1e3, 4),
        wall_ms_median=round(statistics.median(walls) * 1e3, 4),
        rss_mib=round(rss_mib, 2),
        series=_series(body),
    )


if __name__ == "__main__":
    if ensure_installed() is None:
        _log("unavailable")
        raise SystemExit(1)
    print(json.dumps(measure(), indent=2))
