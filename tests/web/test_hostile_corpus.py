"""The hostile corpus of tests/fixtures/hostile/ (README.md there): bad documents of every format,
each posted to its real route on a real server, gets a 4xx whose body names the reason, quickly,
and nothing is stored (the row counts of every table unchanged); oversized ones are made here.
SWF traces go through `infosvc simulate` (a clear error and exit status, never a traceback) and
the codec. A pattern that takes a backtracking engine exponential time is answered at once,
because the matcher runs RE2 (shown against Python's re on the same pattern).

tests/codec/test_hostile_xml.py holds the XML attacks in every encoding; this corpus covers the
other ways a document can be bad, for every format.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import FIXTURES
from support.server import Reply, Server, ServerFactory
from infosvc.codec.swf import read_swf
from infosvc.matching import guarded_regex

CORPUS = FIXTURES / "hostile"
#: Seconds any refusal may take (they take milliseconds).
QUICK = 2.0

#: file -> a word or phrase the refusal says (in its error or detail); every file of the corpus
#: but the SWF traces is here (a guard checks it).
REASONS: dict[str, str] = {
    "node/xxe.xml": "DOCTYPE",
    "node/billion-laughs.xml": "DOCTYPE",
    "node/deep-nesting.xml": "depth",
    "node/truncated.xml": "not well-formed",
    "node/wrong-type.xml": "'four' is not a valid value",
    "node/unknown-element.xml": "not allowed",
    "node/huge-number.xml": "too large",
    "node/huge-integer.xml": "too large",
    "node/negative-count.xml": "'-4' is not a valid value",
    "node/invalid-utf8.xml": "Invalid bytes in character encoding",
    "node/not-xml.xml": "not well-formed",
    "sss-job/xxe.xml": "DOCTYPE",
    "sss-job/billion-laughs.xml": "DOCTYPE",
    "sss-job/deep-nesting.xml": "depth",
    "sss-job/truncated.xml": "not well-formed",
    "sss-job/wrong-type.xml": "'many' is not a valid value",
    "sss-job/unknown-element.xml": "element Pony in Job is not supported",
    "sss-job/huge-number.xml": "too large",
    "sss-job/huge-integer.xml": "is not a valid value",
    "sss-job/negative-count.xml": "'-4' is not a valid value",
    "sss-job/invalid-utf8.xml": "Invalid bytes in character encoding",
    "sss-job/backreference-pattern.xml": "Perl syntax without backre",
    "sss-job/lookaround-pattern.xml": "invalid perl operator",
    "sss-job/huge-range.xml": "at most 16384",
    "ccs/xxe.xml": "DOCTYPE",
    "ccs/billion-laughs.xml": "DOCTYPE",
    "ccs/deep-nesting.xml": "depth",
    "ccs/truncated.xml": "not well-formed",
    "ccs/wrong-type.xml": "'two' is not a valid value",
    "ccs/unknown-element.xml": "not allowed",
    "ccs/huge-number.xml": "is not a valid value",
    "ccs/negative-count.xml": "less than the minimum",
    "ccs/inverted-range.xml": "more than MaximumNumberOfProcessors",
    "ccs/dependency-cycle.xml": "cycle",
    "ccs/invalid-utf8.xml": "Invalid bytes in character encoding",
    "grid/deep-nesting.json": "more than 64 deep",
    "grid/deep-meta.json": "more than 64 deep",
    "grid/truncated.json": "not valid JSON",
    "grid/wrong-type.json": "'count' must be an integer, not a string",
    "grid/unknown-attribute.json": "unknown attribute 'pony'",
    "grid/unknown-top-level.json": "unknown attribute 'priority'",
    "grid/huge-number.json": "'count' must be an integer",
    "grid/huge-integer.json": "more than 4300 digits",
    "grid/negative-code.json": "less than the minimum of 0",
    "grid/no-tasks.json": "must not be empty",
    "grid/duplicate-key.json": "given twice",
    "grid/nan.json": "NaN is not a JSON number",
    "grid/invalid-utf8.json": "not UTF-8",
    "grid/lone-surrogate.json": "lone surrogate",
    "grid/not-an-object.json": "a JSON array",
}

#: format directory -> the routes its documents go to: (path, token name or None, content type)
ROUTES: dict[str, list[tuple[str, str | None, str]]] = {
    "node": [("/v1/nodes", "agent0", "application/xml")],
    "sss-job": [("/v1/match", None, "application/xml"), ("/v1/jobs", "submit", "application/xml")],
    "ccs": [("/v1/match", None, "text/xml"), ("/v1/jobs", "submit", "text/xml")],
    "grid": [("/v1/match", None, "application/json"), ("/v1/jobs", "submit", "application/json")],
}


def oversized() -> dict[str, bytes]:
    """A document of each format past every bound (2 MB), well-formed up to its size."""
    pad = "x" * (2 * 2**20)
    return {
        "node/oversize.xml": f'<Node><Id>big.example.org</Id><Extension name="pad">{pad}</Extension></Node>'.encode(),
        "sss-job/oversize.xml": f"<Job><Id>big</Id><Name>{pad}</Name></Job>".encode(),
        "ccs/oversize.xml": (f'<Job xmlns="http://www.microsoft.com/ComputeCluster/" Name="{pad}"><Tasks>'
                             '<Task CommandLine="x"/></Tasks></Job>').encode(),
        "grid/oversize.json": json.dumps({"version": 2, "tasks": [{"id": "t", "definition": {
            "version": 2, "executable": "/bin/true", "description": pad}}]}).encode(),
    }


def cases() -> list[tuple[str, str, str | None, str]]:
    """(corpus file or generated name, route, token name, content type) for every document and route."""
    names = sorted(REASONS) + sorted(oversized())
    return [(name, path, token, kind) for name in names for path, token, kind in ROUTES[name.split("/")[0]]]


@pytest.fixture(scope="module")
def site(module_serve_app: ServerFactory) -> Server:
    server = module_serve_app(agents=2)
    server.report("a1.example.org", server.agent_token(), features=("a" * 60 + "b",))
    return server


def says(reply: Reply, words: str) -> bool:
    return words.lower() in json.dumps(reply.json(), ensure_ascii=False).lower()


def test_every_corpus_file_has_its_reason() -> None:
    files = {p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file()}
    documents = {name for name in files if not name.startswith("swf/") and name != "README.md"}
    assert documents == set(REASONS)
    assert {name for name in files if name.startswith("swf/")} == set(SWF_OUTCOMES)


@pytest.mark.parametrize(("name", "path", "token", "kind"), cases(),
                         ids=[f"{name}->{path}" for name, path, _, _ in cases()])
def test_each_bad_document_is_a_4xx_with_its_reason_and_nothing_stored(site: Server, name: str, path: str,
                                                                        token: str | None, kind: str) -> None:
    generated = oversized()
    body = generated[name] if name in generated else (CORPUS / name).read_bytes()
    rows = site.row_counts()
    started = time.perf_counter()
    reply = site.request("POST", path, body, token=None if token is None else site.tokens[token],
                         headers={"Content-Type": kind})
    took = time.perf_counter() - started
    if name in generated:  # refused by its announced size, before a byte of it is read
        assert reply.is_error(413) and says(reply, "body size"), (reply.status, reply.body[:300])
    else:
        assert reply.is_error(400), (reply.status, reply.body[:300])
        assert says(reply, REASONS[name]), reply.body[:600]
    assert len(reply.body) < 4000, len(reply.body)  # the reason, not the document echoed
    assert took < QUICK, took
    assert site.row_counts() == rows
    assert site.get("/healthz").status == 200


# --- regular expressions: RE2 --------------------------------------------------------------

CATASTROPHIC = "(a+)+$"


def test_the_matcher_runs_re2_not_a_backtracking_engine() -> None:
    assert type(guarded_regex("a+")).__module__.split(".")[0] == "re2"


def test_a_catastrophic_pattern_is_answered_at_once(site: Server) -> None:
    """(a+)+$ against a Feature of 60 a's and a b: Python's re takes about twice as long for each
    more character (timed on 22 here), so 2^38 times that at 60; RE2 answers in milliseconds."""
    subject = "a" * 22 + "b"
    started = time.perf_counter()
    assert re.match(CATASTROPHIC, subject) is None
    backtracking = time.perf_counter() - started
    assert backtracking > 0.02, backtracking  # the pattern is catastrophic for a backtracking engine
    job = f'<Job><Id>re</Id><Requested><Feature aggregation="Pattern">{CATASTROPHIC}</Feature></Requested></Job>'
    for path, token in (("/v1/match", None), ("/v1/jobs", site.tokens["submit"])):
        started = time.perf_counter()
        reply = site.request("POST", path, job.encode(), token=token, headers={"Content-Type": "application/xml"})
        took = time.perf_counter() - started
        assert reply.status in (200, 201), reply.body[:300]
        assert took < 1.0, f"{path}: {took:.2f} s"
    assert site.request("POST", "/v1/match", job.replace(CATASTROPHIC, "a+b").encode(),
                        headers={"Content-Type": "application/xml"}).json()["matches"]  # it does match
    started = time.perf_counter()
    assert site.get("/healthz").status == 200 and time.perf_counter() - started < 0.5


# --- SWF ---------------------------------------------------------------------------------------

#: trace -> (exit status of `infosvc simulate`, what its stderr says; None: no error, a summary)
SWF_OUTCOMES: dict[str, tuple[int, str | None]] = {
    "swf/truncated.swf.gz": (1, "not a readable gzip file"),
    "swf/damaged.swf.gz": (1, "not a readable gzip file"),
    "swf/not-gzip.swf.gz": (1, "not a readable gzip file"),
    "swf/binary.swf": (1, "no line of the trace is a job"),
    "swf/wrong-types.swf": (1, "no line of the trace is a job"),
    "swf/huge-numbers.swf": (1, "no line of the trace is a job"),
    "swf/invalid-utf8.swf": (1, "no line of the trace is a job"),
    "swf/negative-counts.swf": (0, None),  # read, and skipped by the simulation's conventions
    "swf/more-processors-than-machine.swf": (0, None),
    "swf/no-records.swf": (0, None),
    "swf/no-machine-size.swf": (2, "neither MaxProcs nor MaxNodes"),
}


@pytest.mark.parametrize("name", sorted(SWF_OUTCOMES))
def test_each_bad_trace_is_a_clear_error_of_infosvc_simulate(name: str) -> None:
    status, words = SWF_OUTCOMES[name]
    done = subprocess.run([sys.executable, "-m", "infosvc", "simulate", "--quiet", str(CORPUS / name)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == status, (done.returncode, done.stderr[-1000:])
    assert "Traceback" not in done.stderr, done.stderr
    assert all(len(line) < 400 for line in done.stderr.splitlines())
    if words is None:
        summary = json.loads(done.stdout)
        # no job runs, and every record the codec read is counted as skipped by the conventions:
        # none is lost between reading and simulating
        records = len(read_swf(CORPUS / name).records)
        assert summary["jobs"] == 0 and summary["skipped"] == records and summary["malformed_lines"] == 0
    else:
        assert words in done.stderr, done.stderr
        assert done.stdout == ""


@pytest.mark.parametrize("name", sorted(SWF_OUTCOMES))
def test_each_bad_trace_is_read_or_refused_by_the_codec(name: str) -> None:
    try:
        trace = read_swf(CORPUS / name)
    except OSError as exc:
        assert name.endswith(".gz") and "gzip" in str(exc)
        return
    assert all(len(problem) < 200 for problem in trace.problems)
    assert trace.malformed >= len(trace.problems)


def test_an_swf_trace_unpacking_to_gigabytes_is_not_held_whole(tmp_path: Path) -> None:
    """A 256 MB line of digits in a 256 KB gzip: read in pieces (its memory bounded), a malformed line."""
    import gzip

    path = tmp_path / "bomb.swf.gz"
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(b"; MaxProcs: 4\n")
        chunk = b"1" * 2**20
        for _ in range(256):
            out.write(chunk)
        out.write(b"\n1 0 5 100 2 -1 -1 2 300 -1 1 1 1 -1 1 1 -1 -1\n")
    # The child's own peak (VmHWM: its memory since exec), not ru_maxrss, which Linux carries over
    # from the parent at fork: under the whole suite a worker of 190 MB made every child "peak" there.
    code = ("import re, sys; from infosvc.codec.swf import read_swf; t = read_swf(sys.argv[1]); "
            "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()); "
            "print(len(t.records), t.malformed, hwm[1])")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=300)
    records, malformed, peak_kb = (int(word) for word in done.stdout.split())
    assert (records, malformed) == (1, 1), done.stderr
    assert peak_kb < 150 * 1024, f"peak RSS {peak_kb // 1024} MB"  # the line alone is 256 MB as a str
