"""A restart with many ended jobs in the store: how long until `infosvc serve` says /healthz "ok"
(its hosts and its queue read; of which the store's PRAGMA quick_check at open, which reads every
page of the file, and the queue's load, each as the server's log says), its memory then (the whole process: VmRSS, and VmHWM, the most it
held), and the time of a page of the accounting listing (GET /v1/jobs?state=Finished&limit=1000:
the newest, and one from the middle by its cursor).

For each count, a fresh store is written with that many ended jobs (tests/support/jobrows.py: as
the queue writes them, each from a real SSS document, ended within the last 20 days so that none is
pruned), then the real `infosvc serve` is started on it `--starts` times.

    .venv/bin/python bench/ended_jobs.py [--counts 0,10000,100000] [--starts 3]

prints a line per count (the median of the starts) and writes bench/results/ended_jobs.json. Run it
with another checkout's interpreter (its `.venv/bin/python`) to measure that checkout's code.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
from serving import free_port  # noqa: E402
from support.jobrows import write_ended  # noqa: E402

DAY = 86400.0


def get(port: int, path: str, token: str | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
    answer = conn.getresponse()
    return answer.status, answer.read()


def health(port: int) -> str | None:
    try:
        status, body = get(port, "/healthz")
        return str(json.loads(body)["status"]) if status in (200, 503) else None
    except (OSError, ValueError, KeyError):
        return None


def memory_kib(pid: int) -> dict[str, int]:
    figures = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            figures[key] = int(value.split()[0])
    return figures


def one_start(directory: str, middle_cursor: str | None) -> dict[str, float]:
    port = free_port()
    started = time.monotonic()
    output = open(f"{directory}/log", "w")
    server = subprocess.Popen([sys.executable, "-m", "infosvc", "serve", "--db", f"{directory}/db.sqlite",
                               "--tokens", f"{directory}/tokens", "--listen", f"127.0.0.1:{port}"],
                              stdout=output, stderr=subprocess.STDOUT, cwd=directory)
    try:
        while health(port) != "ok":
            if server.poll() is not None:
                raise RuntimeError(f"infosvc serve exited with {server.returncode}")
            time.sleep(0.005)
        ready = time.monotonic() - started
        time.sleep(0.5)  # its first scheduling pass and the start's pruning have run
        memory = memory_kib(server.pid)
        clock = time.monotonic()
        status, body = get(port, "/v1/jobs?state=Finished&limit=1000")
        first_page = time.monotonic() - clock
        assert status == 200, body[:200]
        answer = json.loads(body)
        middle = None
        if middle_cursor is not None:  # a page from halfway down the ended jobs, by its cursor
            clock = time.monotonic()
            status, body = get(port, f"/v1/jobs?state=Finished&limit=1000&cursor={middle_cursor}")
            middle = time.monotonic() - clock if status == 200 else None
        log = Path(directory, "log").read_text()
        check = re.search(r"quick_check of .*: ok in ([0-9.]+) s", log)
        loaded = re.search(r"job queue: [0-9]+ jobs read from the store in ([0-9.]+) s", log)
        return {"ready_s": ready, "quick_check_s": float(check.group(1)) if check else float("nan"),
                "queue_load_s": float(loaded.group(1)) if loaded else float("nan"), "rss_mib": memory["VmRSS"] / 1024, "peak_rss_mib": memory["VmHWM"] / 1024,
                "first_page_s": first_page, "middle_page_s": middle if middle is not None else float("nan"),
                "listed_total": answer.get("total", len(answer["jobs"]))}
    finally:
        server.terminate()
        server.wait(timeout=60)
        output.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="0,10000,100000")
    parser.add_argument("--starts", type=int, default=3)
    opts = parser.parse_args()
    results: dict[str, object] = {"python": sys.executable}
    now = time.time()
    for count in [int(text) for text in opts.counts.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "tokens").write_text(f"admin {secrets.token_hex(16)}\n")
            clock = time.monotonic()

            def ended_at(number: int) -> float:  # spread over 19 days ending a day ago: none is pruned
                return now - 20 * DAY + number * (19 * DAY / count)

            if count:
                write_ended(Path(tmp, "db.sqlite"), count, ended_at)
            written = time.monotonic() - clock
            half = count // 2
            cursor = f"e{ended_at(half)!r}_{half}" if half else None  # as the page ending at job `half` gives
            runs = [one_start(tmp, cursor) for _ in range(opts.starts)]
            figures = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
            figures["store_mib"] = Path(tmp, "db.sqlite").stat().st_size / 2**20 if count else 0.0
            results[str(count)] = figures
            print(f"{count:>7} ended jobs ({figures['store_mib']:.0f} MiB store, written in {written:.0f} s): "
                  f"/healthz ok in {figures['ready_s']:.2f} s (the store's quick_check {figures['quick_check_s']:.2f} s, "
                  f"the queue's jobs read in {figures['queue_load_s']:.2f} s), RSS {figures['rss_mib']:.0f} MiB "
                  f"(peak {figures['peak_rss_mib']:.0f} MiB), a page of 1,000 ended jobs in "
                  f"{figures['first_page_s'] * 1000:.0f} ms (from the middle {figures['middle_page_s'] * 1000:.0f} ms),"
                  f" total listed {figures['listed_total']:.0f}", flush=True)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "ended_jobs.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
