"""/healthz timed from a process of its own while a test's threads load the server: what the
attack tests measure (a p99 under 50 ms), bounded in requests and in time."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from support.server import Server

#: Polls GET /healthz from a process of its own (so that the attack's threads in this process do
#: not delay the timing): argv port, samples, and a file whose presence stops it; prints latencies.
POLLER = """
import http.client, os, sys, time
port, samples, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
deadline = time.monotonic() + 60
latencies = []
while (len(latencies) < samples or not os.path.exists(stop)) and time.monotonic() < deadline:
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    response.read()
    connection.close()
    assert response.status == 200, response.status
    latencies.append(time.perf_counter() - started)
    time.sleep(0.01)
print(" ".join(f"{x:.6f}" for x in latencies))
"""


def healthz_p99_during(server: Server, attack: Callable[[], object], count: int, workers: int = 4,
                       samples: int = 100) -> float:
    """The p99 of healthz_latencies_during's, in seconds."""
    latencies = healthz_latencies_during(server, attack, count, workers, samples)
    return statistics.quantiles(latencies, n=100)[98]


def healthz_latencies_during(server: Server, attack: Callable[[], object], count: int, workers: int = 4,
                             samples: int = 100) -> list[float]:
    """`attack` sent from `workers` threads, at least `count` times and until a poller process has
    timed `samples` GET /healthz (for 60 s at most); each /healthz's latency in seconds, in order.
    Bounded: every request has a timeout, and every loop stops by itself."""
    stop = Path(tempfile.mkdtemp()) / "stop"
    poller = subprocess.Popen([sys.executable, "-c", POLLER, str(server.port), str(samples), str(stop)],
                              stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60

    def attacker(share: int) -> None:
        sent = 0
        while (sent < share or poller.poll() is None) and time.monotonic() < deadline:
            attack()
            sent += 1
            if sent >= share:
                stop.touch()

    try:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(attacker, [max(1, count // workers)] * workers))
    finally:
        stop.touch()
        out, _ = poller.communicate(timeout=70)
    latencies = [float(x) for x in out.split()]
    assert poller.returncode == 0 and len(latencies) >= samples, (poller.returncode, len(latencies))
    return latencies
