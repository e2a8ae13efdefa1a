"""`infosvc simulate` on inputs an outside review found it mishandled: job numbers repeated or
negative (the conventions order one instant's arrivals by job number), a `--site` answer of
another shape, `--processors` with `--site`, and machines past any real one. Each was a
traceback or a schedule against the conventions."""

from __future__ import annotations

import csv
import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

POLICIES = ("fcfs", "easy", "predictive")


def line(number: int, submit: int, run: int, processors: int, requested: int) -> str:
    return f"{number} {submit} -1 {run} {processors} -1 -1 {processors} {requested} -1 1 1 1 1 1 1 -1 -1\n"


def simulate(tmp_path: Path, text: str, *args: str) -> tuple[subprocess.CompletedProcess[str], list[tuple[int, float]]]:
    trace = tmp_path / "t.swf"
    trace.write_text(text)
    out = tmp_path / "s.csv"
    out.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-m", "infosvc", "simulate", str(trace), "--schedule", str(out), "--quiet",
                           *args], capture_output=True, text=True, timeout=120)
    rows = list(csv.DictReader(out.open())) if out.exists() else []
    return done, [(int(r["job_id"]), float(r["start"])) for r in rows]


@pytest.mark.parametrize("policy", POLICIES)
def test_negative_job_numbers_of_one_submit_time_go_by_number(tmp_path: Path, policy: str) -> None:
    # one instant's arrivals go by job number, and -2 < -1 (the ids compared as text put -1 first)
    done, starts = simulate(tmp_path, line(-1, 0, 10, 1, 10) + line(-2, 0, 10, 1, 10), "--processors", "1",
                            "--policy", policy)
    assert done.returncode == 0, done.stderr
    assert sorted(starts) == [(-2, 0.0), (-1, 10.0)]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("second", [0, 5])
def test_a_repeated_job_number_is_two_jobs(tmp_path: Path, policy: str, second: int) -> None:
    # the queue's maps are keyed by a job's id, which was its number alone: a KeyError traceback
    done, starts = simulate(tmp_path, line(1, 0, 10, 1, 10) + line(1, second, 10, 1, 10) + line(2, 1, 10, 1, 10),
                            "--processors", "1", "--policy", policy)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-500:]
    # the two of number 1 in the order of the file where their submit times tie: 0, 10, then 2 at 20
    assert [s for _, s in starts] == [0.0, 10.0, 20.0] and sorted(n for n, _ in starts) == [1, 1, 2]
    assert json.loads(done.stdout)["jobs"] == 3


class _Site(http.server.BaseHTTPRequestHandler):
    answer = b"{}"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("answer", [
    '{"hosts":[1]}', '{"hosts":null}', '{"hosts":"x"}', '{"hosts":{"a":1}}',
    '{"hosts":[{"state":"Ready","total_cpus":"abc"}]}', '{"hosts":[{"state":"Ready","total_cpus":Infinity}]}',
    '{"hosts":[{"state":"Ready","total_cpus":NaN}]}', '{"hosts":[{"state":"Ready","total_cpus":[8]}]}',
    '{"hosts":[{"state":"Ready","total_cpus":' + "9" * 4000 + '}]}',
    '{"hosts":[{"state":"Ready","total_cpus":1e300}]}',
    '{"hosts":[{"state":"Ready","total_cpus":true}]}',
    '{"hosts":[{"state":"Ready","total_cpus":-100},{"state":"Ready","total_cpus":8}]}',
])
def test_a_site_answer_of_another_shape_is_one_line_and_status_1(tmp_path: Path, site: str, answer: str) -> None:
    _Site.answer = answer.encode()
    done, _ = simulate(tmp_path, line(1, 0, 10, 1, 10), "--site", "--server", site)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-300:]
    assert len(done.stderr.strip().splitlines()) == 1 and site in done.stderr, done.stderr


def test_a_site_of_a_live_host_is_its_machine(tmp_path: Path, site: str) -> None:
    _Site.answer = b'{"hosts":[{"state":"Ready","total_cpus":4},{"state":"Down","total_cpus":64},"junk"]}'
    done, _ = simulate(tmp_path, line(1, 0, 10, 1, 10), "--site", "--server", site)
    assert done.returncode == 1  # a host that is not an object: the answer is not the shape read
    _Site.answer = b'{"hosts":[{"state":"Ready","total_cpus":4},{"state":"Down","total_cpus":64}]}'
    done, _ = simulate(tmp_path, line(1, 0, 10, 1, 10), "--site", "--server", site)
    assert done.returncode == 0 and json.loads(done.stdout)["processors"] == 4, done.stderr


def test_processors_comes_before_the_site(tmp_path: Path, site: str) -> None:
    # docs/simulation.md: the machine is --processors, else --site, else MaxProcs, else MaxNodes
    _Site.answer = b'{"hosts":[{"state":"Ready","total_cpus":4}]}'
    done, _ = simulate(tmp_path, line(1, 0, 10, 1, 10), "--processors", "64", "--site", "--server", site)
    assert done.returncode == 0 and json.loads(done.stdout)["processors"] == 64, done.stderr


@pytest.mark.parametrize("args", [["--processors", str(10 ** 400)], ["--processors", str(2 ** 64), "--hosts", "2"],
                                  ["--processors", str(2 ** 53)], ["--processors", "10000000", "--hosts", "10000000"]])
def test_a_machine_past_any_real_one_is_bad_usage(tmp_path: Path, args: list[str]) -> None:
    done, _ = simulate(tmp_path, line(1, 0, 10, 1, 10), *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-300:]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
