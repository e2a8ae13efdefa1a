"""`infosvc validate` (infosvc/cli/validate.py) as a user runs it: job documents of the three formats
give the very error the server's POST /v1/jobs gives for the same file, and SSS Node documents are
checked as before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infosvc.cli.jobs import content_type_of
from infosvc.cli.validate import kind_of
from support.documents import node_document
from support.server import InProcessServer, ServerFactory

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CCS = 'xmlns="http://www.microsoft.com/ComputeCluster/"'

#: Bad job documents of each format, by name: each is refused by POST /v1/jobs with a 400.
BAD = {
    # SSS Job and JobGroup XML
    "sss-not-well-formed.xml": b"<Job><Id>x</Id>",
    "sss-unknown-element.xml": b"<Job><Id>x</Id><Gpu>1</Gpu></Job>",
    "sss-not-a-number.xml": b"<Job><Id>x</Id><Requested><Processors>many</Processors></Requested></Job>",
    "sss-priority.xml": b"<Job><Id>x</Id><Priority>Urgent</Priority></Job>",
    "sss-op.xml": b'<Job><Id>x</Id><Requested><Architecture op="GT">x86_64</Architecture></Requested></Job>',
    "sss-doctype.xml": b'<?xml version="1.0"?><!DOCTYPE Job [<!ENTITY e "x">]><Job><Id>&e;</Id></Job>',
    "sss-cycle.xml": (b'<JobGroup><Id>g</Id><Job><Id>a</Id><Dependency>b</Dependency></Job>'
                      b'<Job><Id>b</Id><Dependency>a</Dependency></Job></JobGroup>'),
    "sss-unenveloped.xml": (b"<Job><Id>x</Id><Feature>ib</Feature><Requested><Memory group='-1'>1</Memory>"
                            b"<Memory conj='Or' group='1' preference='2'>2</Memory></Requested></Job>"),
    "sss-empty-range.xml": b'<Job><Id>x</Id><Requested><Processors op="GE">8</Processors>'
                           b'<Processors op="LE">4</Processors></Requested></Job>',
    "elaborate-as-printed.xml": (FIXTURES / "sss-job-examples" / "elaborate-as-printed.xml").read_bytes(),
    "elaborate.xml": (FIXTURES / "sss-job-examples" / "elaborate.xml").read_bytes(),
    # CCS job XML
    "ccs-cycle.xml": (FIXTURES / "ccs" / "cycle.xml").read_bytes(),
    "ccs-entity.xml": (FIXTURES / "ccs" / "entity.xml").read_bytes(),
    "ccs-range.xml": (f'<Job {CCS} MinimumNumberOfProcessors="4" MaximumNumberOfProcessors="2">'
                      '<Tasks><Task CommandLine="x"/></Tasks></Job>').encode(),
    "ccs-attribute.xml": f'<Job {CCS} Colour="blue"><Tasks><Task CommandLine="x"/></Tasks></Job>'.encode(),
    # grid job JSON
    "grid-misspelled.json": (FIXTURES / "gridjob" / "files-as-published.json").read_bytes(),
    "grid-task-entry.json": (FIXTURES / "gridjob" / "requirements-job-level.json").read_bytes(),
    "grid-version.json": b'{"version": 3, "tasks": [{"id": "a", "definition": {"version": 3, "executable": "x"}}]}',
    "grid-not-json.json": b'{"version": 2,',
    "grid-array.json": b"[1, 2]",
    # neither
    "neither.txt": b"hello",
}


def validate(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "infosvc", "validate", *args], capture_output=True, timeout=60,
                          input=stdin)


@pytest.fixture
def server(serve_app: ServerFactory) -> InProcessServer:
    return serve_app(agents=1)  # type: ignore[return-value]


def posted(server: InProcessServer, document: bytes) -> tuple[int, object]:
    """The server's answer to `infosvc submit` of this document: the content type it sends."""
    reply = server.request("POST", "/v1/jobs", document, token=server.tokens["submit"],
                           headers={"Content-Type": content_type_of(document)})
    return reply.status, reply.json()


def test_a_bad_job_of_each_format_gets_the_server_s_own_error(server: InProcessServer, tmp_path: Path) -> None:
    paths = []
    for name, document in BAD.items():
        (tmp_path / name).write_bytes(document)
        paths.append(str(tmp_path / name))
    done = validate("--json", *paths)
    assert done.returncode == 1, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["file"] for line in lines] == paths
    for (name, document), line in zip(BAD.items(), lines):
        status, body = posted(server, document)
        assert status == 400, (name, body)
        assert {key: value for key, value in line.items() if key != "file"} == body, name
    # and without --json, each problem of the server's detail, with where it is, a line on stderr
    names = ["sss-not-a-number.xml", "grid-task-entry.json"]
    done = validate(*(str(tmp_path / name) for name in names))
    assert done.returncode == 1 and not done.stdout
    errors = iter(done.stderr.decode().splitlines())
    for name in names:
        _, body = posted(server, BAD[name])
        assert isinstance(body, dict)
        for problem in body["detail"]:
            line = next(errors)
            assert line.startswith(f"{tmp_path / name}: {problem['message']} ("), line
            assert all(f"{key} {problem[key]}" in line for key in ("line", "element", "attribute") if key in problem)
    assert next(errors, None) is None


def test_good_jobs_of_each_format_are_valid_as_the_server_takes_them(server: InProcessServer) -> None:
    files = [FIXTURES / "sss-job-examples" / "simple.xml", FIXTURES / "ccs" / "full.xml",
             FIXTURES / "gridjob" / "all-fields.json"]
    done = validate("--json", *map(str, files))
    assert done.returncode == 0, done.stderr
    simple, ccs, grid = (json.loads(line) for line in done.stdout.splitlines())
    assert simple["format"] == "SSS Job (XML)" and ccs["format"] == "CCS job (XML)"
    assert grid["format"] == "grid job (JSON v2)"
    assert simple["jobs"] == [{"id": "PBS.1234.0", "name": None, "processors": {"min": 16, "max": 16},
                               "read_as_requested": ["Processors"]}]
    for path, checked in zip(files, (simple, ccs, grid)):
        status, body = posted(server, path.read_bytes())
        assert status == 201, body
        assert isinstance(body, dict) and body["warnings"] == checked["warnings"]
        assert body["processors"]["min"] == checked["jobs"][0]["processors"]["min"]
    done = validate(str(files[0]))
    assert done.stdout.decode() == f"{files[0]}: valid SSS Job (XML): 1 job ('PBS.1234.0')\n"
    assert done.stderr.decode() == f"{files[0]}: job 'PBS.1234.0' reads as Requested: Processors\n"


def test_node_documents_are_checked_as_before(tmp_path: Path) -> None:
    good = tmp_path / "node.xml"
    good.write_bytes(node_document("n1.example"))
    bad = tmp_path / "bad.xml"
    bad.write_bytes(b"<Node><Id>bad</Id><Configured><Processors>many</Processors></Configured></Node>")
    done = validate("--json", str(good), str(bad))
    assert done.returncode == 1
    node, error = (json.loads(line) for line in done.stdout.splitlines())
    assert node["node"]["id"] == "n1.example"
    assert error["file"] == str(bad) and "Processors" in json.dumps(error["detail"])
    done = validate("-", stdin=node_document("n2.example"))
    assert done.returncode == 0 and done.stdout.decode() == "-: valid SSS Node 'n2.example'\n"


@pytest.mark.parametrize(("document", "kind"), [
    (b"<Node/>", "node"), (b'\xef\xbb\xbf<?xml version="1.0"?>\n<!-- a node -->\n<sss:Node xmlns:sss="x"/>', "node"),
    (b"<Other/>", "node"), (b"<Job/>", "job"), (b"  <JobGroup>", "job"), (f"<Job {CCS}/>".encode(), "job"),
    (b'<!DOCTYPE Job [<!ENTITY e "x">]><Job/>', "job"), (b'{"version": 2}', "job"), (b"", "job"), (b"hello", "job"),
])
def test_what_a_document_is_checked_as(document: bytes, kind: str) -> None:
    assert kind_of(document) == kind
