"""Every parser of outside input raises only its own error, whatever it is given: DocumentError for
the SSS Node, SSS Job, CCS job and grid job readers and for parse_submission; for an SWF trace,
parse_swf never raises (a bad line is counted and reported) and read_swf raises only OSError.

Two kinds of input, by hypothesis: arbitrary bytes, and valid documents (the fixtures) mutated:
bytes deleted, inserted (from a pool of fragments that parsers trip on: markup, entities, invalid
UTF-8, NUL, surrogates), replaced, numbers changed to extreme or malformed ones, elements or
arrays nested thousands deep, the document truncated or its middle repeated. schemathesis cannot
do this (it wraps XML bodies in <data>); tests/web/test_hostile_corpus.py sends the named cases to
the real routes. Example counts are moderate here; FUZZ_EXAMPLES=N in the environment runs more.
"""

from __future__ import annotations

import gzip
import io
import os
import re
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import FIXTURES
from support.documents import node_document
from infosvc.codec.ccsjob_xml import parse_ccs_job
from infosvc.codec.gridjob_json import parse_grid_job
from infosvc.codec.job_xml import parse_job
from infosvc.codec.node_xml import parse_node
from infosvc.codec.submission import parse_submission
from infosvc.codec.swf import parse_swf, read_swf
from infosvc.errors import DocumentError

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "120"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _read(*paths: Path) -> list[bytes]:
    return [path.read_bytes() for path in paths]


NODES = [node_document("fz01.example.org", features=("BigMem", "GPU")), node_document("fz02", processors=64)]
SSS_JOBS = _read(*sorted(p for p in (FIXTURES / "sss-job-examples").glob("*.xml") if "as-printed" not in p.name),
                 FIXTURES / "jobs" / "sss-job.xml")
CCS_JOBS = _read(*(FIXTURES / "ccs" / name for name in ("full.xml", "licenses.xml", "sweep.xml", "taskflow.xml")))
GRID_JOBS = _read(*sorted(p for p in (FIXTURES / "gridjob").glob("*.json") if "corrected" in p.name or "-" not in p.stem
                          or p.stem in ("all-fields", "environment")), FIXTURES / "jobs" / "grid-job.json")
SWF = (b"; Version: 2.2\n; MaxProcs: 128\n; Note: a trace\n;   continued\n"
       + b"".join(f"{i} {i * 10} 5 {100 + i} {1 + i % 8} -1 -1 {1 + i % 8} 300 -1 1 {i % 3} 1 -1 1 1 -1 -1\n".encode()
                  for i in range(1, 12)))

#: What parsers trip on, inserted whole.
FRAGMENTS = [b"<", b">", b"</", b"/>", b"&", b"&amp;", b"&#0;", b"&#x110000;", b"&lol;", b"<!DOCTYPE x>",
             b"<!ENTITY x 'y'>", b"<![CDATA[", b"]]>", b"<?pi?>", b"<!--", b"-->", b'"', b"'", b"=", b"xmlns=\"urn:x\"",
             b"xsi:nil=\"true\"", b"{", b"}", b"[", b"]", b",", b":", b"null", b"true", b"\"\\ud800\"", b"\\u0000",
             b"\x00", b"\xff", b"\xfe\xff", b"\xef\xbb\xbf", b"\xc0\xbc", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
             b"\x01", b"\r\n", b"\t", b" " * 40, b"-", b".", b"e", b"1e999", b"-1", b"9" * 40, b"NaN", b"Infinity",
             b"node[1-99999999]", b"(a+)+$", b";", b"@group"]
#: What a number becomes.
NUMBERS = [b"0", b"-0", b"-1", b"-99999", b"1.5", b"1e308", b"1e309", b"-1e309", b"99999999999999999999999999999",
           b"NaN", b"inf", b"0x10", b"1_000", b"", b" 1", b"\xd9\xa3", b"1" * 400, b"2147483648", b"-2147483649",
           b"9223372036854775808", b"18446744073709551616", b"1e-400", b"00001", b"+5", b"P1D", b"PT-1S"]
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?")


@st.composite
def mutated(draw: st.DrawFn, documents: list[bytes], *, json: bool = False) -> bytes:
    """A document of `documents` with one to four mutations."""
    data = bytearray(draw(st.sampled_from(documents)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "insert", "replace", "number", "number", "nest", "truncate", "repeat"]))
        at = draw(st.integers(0, len(data)))
        if kind == "delete" and data:
            data[at:at + draw(st.integers(1, 16))] = b""
        elif kind == "insert":
            data[at:at] = draw(st.sampled_from(FRAGMENTS) | st.binary(min_size=1, max_size=8))
        elif kind == "replace" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "number":
            numbers = list(_NUMBER.finditer(bytes(data)))
            if numbers:
                found = draw(st.sampled_from(numbers))
                data[found.start():found.end()] = draw(st.sampled_from(NUMBERS))
        elif kind == "nest":
            depth = draw(st.sampled_from([2, 50, 300, 3000]))
            if json:
                data[at:at] = b"[" * depth + b"1" + b"]" * depth
            else:
                data[at:at] = b"<a>" * depth + b"</a>" * depth
        elif kind == "truncate":
            del data[at:]
        elif kind == "repeat" and data:
            end = draw(st.integers(at, min(len(data), at + 200)))
            data[at:at] = bytes(data[at:end]) * draw(st.integers(2, 40))
    return bytes(data)


def only(error: type[BaseException] | tuple[type[BaseException], ...], read: Callable[[bytes], Any],
         document: bytes) -> None:
    """`read(document)` returns, or raises `error`; anything else fails the test (with its cause)."""
    try:
        read(document)
    except error:
        pass


def _submission(content_type: str) -> Callable[[bytes], Any]:
    return lambda body: parse_submission(body, content_type)


#: name -> (the reader, the valid documents it is fuzzed from, whether they are JSON)
PARSERS: dict[str, tuple[Callable[[bytes], Any], list[bytes], bool]] = {
    "node_xml.parse_node": (parse_node, NODES, False),
    "job_xml.parse_job": (parse_job, SSS_JOBS, False),
    "ccsjob_xml.parse_ccs_job": (parse_ccs_job, CCS_JOBS, False),
    "gridjob_json.parse_grid_job": (parse_grid_job, GRID_JOBS, True),
    "submission, SSS Job": (_submission("application/xml"), SSS_JOBS, False),
    "submission, CCS job": (_submission("text/xml"), CCS_JOBS, False),
    "submission, grid job": (_submission("application/json"), GRID_JOBS, True),
    "submission, untyped": (_submission(""), SSS_JOBS + CCS_JOBS + GRID_JOBS, False),
}


def test_the_fixtures_are_valid() -> None:
    """The mutations start from documents each parser takes, so that they reach past the first check."""
    for name, (read, documents, _) in PARSERS.items():
        for document in documents:
            read(document)


@pytest.mark.parametrize("name", list(PARSERS))
def test_mutated_documents_raise_only_document_error(name: str) -> None:
    read, documents, json = PARSERS[name]

    @FUZZ
    @given(mutated(documents, json=json))
    def check(document: bytes) -> None:
        only(DocumentError, read, document)

    check()


@pytest.mark.parametrize("name", list(PARSERS))
def test_arbitrary_bytes_raise_only_document_error(name: str) -> None:
    read = PARSERS[name][0]
    start = b"{" if PARSERS[name][2] else b"<"

    @FUZZ
    @given(st.binary(max_size=400), st.booleans())
    def check(data: bytes, markup: bool) -> None:
        only(DocumentError, read, start + data if markup else data)

    check()


# --- SWF -------------------------------------------------------------------------------------

def test_the_swf_fixture_is_read() -> None:
    trace = parse_swf(io.StringIO(SWF.decode()))
    assert len(trace.records) == 11 and trace.malformed == 0 and trace.header["MaxProcs"] == "128"


@FUZZ
@given(st.one_of(mutated([SWF]), st.binary(max_size=600)))
def test_parse_swf_never_raises(data: bytes) -> None:
    trace = parse_swf(io.StringIO(data.decode("utf-8", "replace")))
    assert trace.malformed == 0 or trace.problems


@FUZZ
@given(st.one_of(mutated([SWF]), mutated([gzip.compress(SWF, mtime=0)]), st.binary(max_size=300)),
       st.booleans())
def test_read_swf_raises_only_os_error(tmp_path_factory: pytest.TempPathFactory, data: bytes,
                                       gzipped: bool) -> None:
    path = tmp_path_factory.mktemp("swf") / "trace.swf"
    path.write_bytes(gzip.compress(data, mtime=0) if gzipped else data)
    only(OSError, read_swf, path)  # type: ignore[arg-type]


# Words a job line's field may hold beside plain whole numbers: about 2**53 (past which a float no
# longer holds every whole number), the sign of zero, numbers written otherwise, too large, not
# finite, not numbers
SWF_ODD_WORDS = ["-0", "-00", "-0_0", "-01", "007", "+3", "1_000", "9007199254740991", "9007199254740992", "-9007199254740993",
                 "9" * 25, "-" + "9" * 25, "1.5", "-0.0", "2e3", "1e400", "-1e400", "nan", "inf", "0x10", "abc",
                 "1" * 310, "1.7e308"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.integers(-5, 5000).map(str), min_size=18, max_size=18), min_size=1, max_size=12),
       st.lists(st.tuples(st.integers(0, 11), st.integers(0, 17), st.sampled_from(SWF_ODD_WORDS)), max_size=3))
def test_job_lines_read_at_once_are_read_as_each_line_alone(lines: list[list[str]],
                                                            odd: list[tuple[int, int, str]]) -> None:
    """A batch of job lines is read by columns (whole-number fields by int() where that is
    exact): its records, to the type and sign of each value, and its problems are those of
    reading each line alone."""
    from infosvc.codec.swf import _fields

    for line, field, word in odd:
        lines[line % len(lines)][field] = word
    trace = parse_swf(io.StringIO("".join(" ".join(words) + "\n" for words in lines)))
    alone = [_fields(words, number) for number, words in enumerate(lines, 1)]
    assert [repr(r) for r in trace.records] == [repr(r) for r in alone if not isinstance(r, str)]
    assert trace.problems == [f"line {n}: {r}" for n, r in enumerate(alone, 1) if isinstance(r, str)]


def test_an_overlong_swf_line_is_reported_not_held(tmp_path: Path) -> None:
    """A gzipped trace of one 64 MB line (64 KB on disk) was read into one string before its
    fields were counted; now a line past MAX_LINE characters is a malformed line, read in pieces."""
    from infosvc.codec.swf import MAX_LINE

    path = tmp_path / "long.swf.gz"
    with gzip.open(path, "wb") as out:
        out.write(SWF)
        for _ in range(64):
            out.write(b"1" * 2**20)
        out.write(b"\n" + SWF.splitlines(keepends=True)[-1])
    trace = read_swf(path)
    assert len(trace.records) == 12 and trace.malformed == 1, trace.problems
    assert f"longer than {MAX_LINE}" in trace.problems[0] and len(trace.problems[0]) < 200
    assert trace.records[-1].line == 17  # lines keep their numbers past the long one
