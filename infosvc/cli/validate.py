"""`infosvc validate FILE...`: SSS Node documents, and job documents of the three formats (SSS Job
or JobGroup XML, CCS job XML, grid job JSON v2), checked without a server.

A job document goes through the very function POST /v1/jobs reads a submission with
(`infosvc.queue.submissions.prepare`: parse_submission, the jobs resolved, what they need outside
Requested read, their host requirements compiled, their scheduling requests and a JobGroup's
dependencies checked), with the content type `infosvc submit` sends, so an error here is the
server's 400 for the same file: with `--json`, its body (`{"error", "detail"}`) with `"file"`
added. What depends on the server is not checked: its size bound on bodies, and whether a
computing element takes the job (a 503). A Node document goes through the aggregator's reader
(`codec.node_xml.parse_node`).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from infosvc.cli.jobs import MAX_DOCUMENT_BYTES, content_type_of

__all__ = ["kind_of", "run"]

#: The name of the first element of an XML document (its prefix left out), after its declaration,
#: comments, processing instructions and a DOCTYPE (which either reader then refuses).
_ROOT = re.compile(rb"(?:<\?[^>]*\?>|<!--.*?-->|<!DOCTYPE[^\[>]*(?:\[.*?\])?\s*>|\s)*"
                   rb"<(?:[A-Za-z_][\w.-]*:)?([A-Za-z_][\w.-]*)", re.S)


def kind_of(document: bytes) -> str:
    """"node" for an SSS Node document (an XML root element `Node`, or XML whose root is no job's),
    else "job": a JSON text, an XML root element `Job` or `JobGroup` (SSS or CCS), or anything
    else, which the job reader then names as what it is not."""
    text = document[3:] if document.startswith(b"\xef\xbb\xbf") else document
    head = text.lstrip(b" \t\r\n")[:4096]
    if not head.startswith(b"<"):
        return "job"
    root = _ROOT.match(head)
    return "job" if root is not None and root.group(1) in (b"Job", b"JobGroup") else "node"


def _read(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read(MAX_DOCUMENT_BYTES + 1)
    with open(name, "rb") as handle:
        return handle.read(MAX_DOCUMENT_BYTES + 1)


def _node(name: str, document: bytes, as_json: bool) -> None:
    from infosvc.codec.node_json import node_to_json
    from infosvc.codec.node_xml import parse_node

    node = parse_node(document)
    print(json.dumps({"file": name, "node": node_to_json(node)}) if as_json else f"{name}: valid SSS Node {node.id!r}")


def _format(document: bytes) -> str:
    """The format of a job document that read well, in words: a CCS job's root element carries
    the CCS namespace in its start tag."""
    from infosvc.codec.ccsjob_xml import HTTP_NAMESPACE, NAMESPACE

    head = document.lstrip(b"\xef\xbb\xbf \t\r\n")[:8192]
    root = _ROOT.match(head)
    if root is None:
        return "grid job (JSON v2)"
    start_tag = head[root.end():].split(b">", 1)[0]
    if any(namespace.encode() in start_tag for namespace in (NAMESPACE, HTTP_NAMESPACE)):
        return "CCS job (XML)"
    return f"SSS {root.group(1).decode()} (XML)"


def _job(name: str, document: bytes, as_json: bool) -> None:
    from infosvc.queue import TRUSTED, prepare

    prepared, warnings = prepare(document, content_type_of(document), TRUSTED)
    what = _format(document)
    if as_json:
        jobs: list[dict[str, Any]] = [
            {"id": item.name, "name": item.request.name or None,
             "processors": {"min": item.request.min_processors, "max": item.request.max_processors},
             "read_as_requested": list(item.request.read_as_requested)} for item in prepared]
        print(json.dumps({"file": name, "format": what, "jobs": jobs, "warnings": warnings}))
        return
    ids = ", ".join(repr(item.name) for item in prepared[:5]) + (", ..." if len(prepared) > 5 else "")
    print(f"{name}: valid {what}: {len(prepared)} job{'s' * (len(prepared) != 1)} ({ids})")
    for item in prepared:
        if item.request.read_as_requested:
            print(f"{name}: job {item.name!r} reads as Requested: {', '.join(item.request.read_as_requested)}",
                  file=sys.stderr)
    for warning in warnings:
        print(f"{name}: warning: {warning}", file=sys.stderr)


def run(files: list[str], as_json: bool) -> int:
    """Check each file; print each valid one (or its JSON), each problem of the others; 1 if any
    is not valid."""
    from infosvc.errors import DocumentError

    failed = 0
    for name in files:
        try:
            document = _read(name)
        except OSError as exc:
            failed += 1
            print(f"{name}: cannot read: {exc.strerror}", file=sys.stderr)
            continue
        try:  # a closed stdout (BrokenPipeError) is the caller's to handle: main() ends quietly
            if len(document) > MAX_DOCUMENT_BYTES:
                raise DocumentError(f"larger than {MAX_DOCUMENT_BYTES // 2**20} MB")
            if kind_of(document) == "node":
                _node(name, document, as_json)
            else:
                _job(name, document, as_json)
        except DocumentError as exc:
            failed += 1
            if as_json:
                print(json.dumps({"file": name, **exc.as_json()}))
            else:
                for problem in exc.problems:
                    print(f"{name}: {problem}", file=sys.stderr)
    return 1 if failed else 0
