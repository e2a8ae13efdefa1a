"""The complete jobs docs/job-formats.md shows, one of each format, are the files of
tests/fixtures/jobs/ byte for byte, and those files are jobs that `infosvc validate` finds valid and
that a real server takes and starts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from infosvc.cli.jobs import content_type_of
from support.server import ServerFactory, wait_for

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Complete jobs, one of each format"
FIXTURES = ["tests/fixtures/jobs/sss-job.xml", "tests/fixtures/jobs/ccs-job.xml", "tests/fixtures/jobs/grid-job.json"]
#: A fixture named in backticks, then (before any other fence) the fenced block that shows it.
EXAMPLE = re.compile(r"`(tests/fixtures/jobs/[\w.-]+)`(?:(?!```).)*?```(xml|json)\n(.*?)```", re.S)


def examples() -> list[tuple[str, str, str]]:
    text = (ROOT / "docs" / "job-formats.md").read_text(encoding="utf-8")
    assert text.count(SECTION) == 1
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return EXAMPLE.findall(section)


def test_the_doc_shows_each_format_s_fixture_as_it_is() -> None:
    found = examples()
    assert [path for path, _, _ in found] == FIXTURES
    for path, language, shown in found:
        assert language == path.rsplit(".", 1)[1]
        assert shown.encode("utf-8") == (ROOT / path).read_bytes(), f"docs/job-formats.md shows {path} otherwise"


def test_each_is_valid_and_a_real_server_starts_it(serve_app: ServerFactory) -> None:
    done = subprocess.run([sys.executable, "-m", "infosvc", "validate", *(str(ROOT / path) for path in FIXTURES)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(": valid ") == len(FIXTURES)
    server = serve_app(agents=2, executors={"exec1": "n1.example.org", "exec2": "n2.example.org"})
    for host in ("n1.example.org", "n2.example.org"):
        server.report(host, server.agent_token(), processors=4, memory_mb=16384, features=("ssd",))
    token = server.tokens["submit"]
    for path in FIXTURES:
        document = (ROOT / path).read_bytes()
        reply = server.request("POST", "/v1/jobs", document, token=token,
                               headers={"Content-Type": content_type_of(document)})
        assert reply.status == 201, (path, reply.body)
        job = reply.json()
        assert job["warnings"] == [], (path, job)

        def state() -> str:
            return str(server.get(f"/v1/jobs/{job['id']}").json()["state"])

        wait_for(lambda: state() == "Running", message=f"{path} running")
        if path.endswith("sss-job.xml"):
            assert job["read_as_requested"] == ["Processors", "Memory", "Feature"]
            assert job["processors"]["min"] == 4
        # cancelled, so that the next one finds the hosts free
        assert server.request("DELETE", f"/v1/jobs/{job['id']}", token=token).status == 200
        wait_for(lambda: state() == "Canceled", message=f"{path} canceled")
