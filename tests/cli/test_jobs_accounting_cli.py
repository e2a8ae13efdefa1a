"""`infosvc jobs --all --since ...` as sacct: the real command against a server on loopback whose
store holds more ended jobs than one page (support.jobrows writes them as the queue does)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from support.jobrows import write_ended
from support.server import Server, ServerFactory

DAY = 86400.0
JOB = ("<Job><Id>w</Id><Name>waits</Name><Executable>/bin/true</Executable>"
       "<Requested><Processors>64</Processors></Requested></Job>")


def jobs(server: Server, token: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "infosvc", "jobs", "--server", server.url, "--token-file", str(token),
                           *args], capture_output=True, text=True, timeout=60)


def test_jobs_all_since_reads_every_page_newest_ended_after_the_queue(serve_app: ServerFactory,
                                                                   tmp_path: Path) -> None:
    server = serve_app(start=False)
    now = time.time()
    write_ended(server.db, 20, lambda number: now - 5 * DAY + number)  # before --since
    write_ended(server.db, 1030, lambda number: now - DAY + number, first_id=21)  # more than a page (1,000)
    server.start()
    token = tmp_path / "token"
    token.write_text(server.tokens["submit"] + "\n")
    reply = server.request("POST", "/v1/jobs", JOB.encode(), token=server.tokens["submit"],
                           headers={"Content-Type": "application/xml"})
    assert reply.status == 201
    since = time.strftime("%Y-%m-%d", time.gmtime(now - 2 * DAY))
    done = jobs(server, token, "--all", "--since", since)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    assert [row[0] for row in rows] == ["1051"] + [str(number) for number in range(1050, 20, -1)]
    assert rows[0][3] == "Queued" and {row[3] for row in rows[1:]} == {"Finished"}
    listed = json.loads(jobs(server, token, "--all", "--since", since, "--json").stdout)
    assert len(listed["jobs"]) == 1031 and listed["truncated"] is False
    capped = jobs(server, token, "--all", "--max", "100")
    assert capped.returncode == 0 and len(capped.stdout.splitlines()) == 101
    assert "more jobs than --max 100" in capped.stderr
    finished = jobs(server, token, "--state", "Finished", "--until", since, "--json")
    assert [job["id"] for job in json.loads(finished.stdout)["jobs"]] == [str(n) for n in range(20, 0, -1)]
    live = jobs(server, token)  # without --all: the queue only, as squeue
    assert [line.split()[0] for line in live.stdout.splitlines()[1:]] == ["1051"]
    bad = jobs(server, token, "--all", "--since", "last week")
    assert bad.returncode == 1 and "400" in bad.stderr and "since" in bad.stderr and "Traceback" not in bad.stderr
