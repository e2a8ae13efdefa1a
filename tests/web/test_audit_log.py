"""What an operator audits, in the log: every admin action, refused tokens (one
line per kind per interval), hosts changing state; one JSON object a line with --log-format json."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from infosvc.cli.logs import TextFormatter
from support.server import ServerFactory, wait_for


def log_records(text: str) -> list[dict[str, Any]]:
    """The log's records; the banner (stdout, for people) is the only line that is not one."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith(("infosvc: serving", "  ", "--- "))]
    return [json.loads(line) for line in lines]


def test_the_audit_trail_as_json_lines(serve: ServerFactory) -> None:
    server = serve({"lifecycle": {"heartbeat_seconds": 0.4, "missed_heartbeats": 1}}, agents=2,
                   extra_args=("--log-format", "json"))
    server.report("h1", server.agent_token())
    assert server.admin("h1", "pause").status == 200
    for _ in range(3):
        assert server.post_node(b"<Node/>", "not-a-token-at-all-really").status == 401

    def audited() -> list[dict[str, Any]] | None:
        records = log_records(server.log.read_text())
        audit = [r for r in records if r["logger"] == "infosvc.audit"]
        text = [r["message"] for r in audit]
        wanted = (any("h1: new -> Ready" in m for m in text) and any("admin pause of h1" in m for m in text)
                  and any("h1: Paused -> Unreachable" in m or "h1 is now Unreachable" in m for m in text)
                  and any("unknown token" in m for m in text))
        return audit if wanted else None

    audit = wait_for(audited, timeout=20, message="the audit lines")
    for record in audit:
        assert {"time", "level", "logger", "message"} <= set(record)
    refused = [r for r in audit if "unknown token" in r["message"]]
    assert len(refused) == 1  # three refusals in a moment: one line, the rest counted in the next
    assert all("not-a-token" not in r["message"] for r in audit)  # never the token itself


def test_a_refused_path_cannot_forge_a_log_line(serve: ServerFactory) -> None:
    """A path's newline, CR, ESC, C1 and bidi characters, percent-encoded, reach the log escaped:
    the refusal stays one line, and no line of the log is the audit record the path carries."""
    server = serve(agents=1)
    forged = "infosvc: WARNING infosvc.audit: admin remove of cn01 by admin"
    path = ("/v1/jobs/1%0A" + forged.replace(" ", "%20") + "%0D%1B[2J%C2%9B%E2%80%AE%E2%81%A6%7F%E2%80%A8x")
    assert server.request("DELETE", path).status == 401

    def refused() -> list[str]:
        return [line for line in server.log.read_text().splitlines() if "refused: missing bearer token" in line]

    line, = wait_for(refused, timeout=20, message="the refusal's line")
    assert line.startswith("infosvc: WARNING infosvc.audit: refused: missing bearer token (DELETE /v1/jobs/1\\n")
    assert "\\r\\x1b[2J\\x9b\\u202e\\u2066\\x7f\\u2028x from 127.0.0.1)" in line
    server.stop()
    text = server.log.read_text()
    assert [ln for ln in text.splitlines() if ln.startswith(forged)] == []
    assert text.count("\n") == len(text.splitlines())  # no CR, U+2028 or other line break but the record's own
    assert not any(char in text for char in "\r\x1b\x9b\u202e\u2066\x7f\u2028")
    # every line is a record, the banner (stdout) or the test's start marker
    assert all(ln.startswith(("infosvc: ", "  ", "--- ")) for ln in text.splitlines() if ln)


def test_json_log_keeps_the_value_and_escapes_the_rest(serve: ServerFactory) -> None:
    server = serve(agents=1, extra_args=("--log-format", "json"))
    assert server.request("DELETE", "/v1/jobs/1%0Ax%1B%C2%9B%E2%80%AEy").status == 401
    message = wait_for(lambda: [r["message"] for r in log_records(server.log.read_text())
                                if "missing bearer token" in r["message"]], timeout=20, message="the refusal")[0]
    assert "/v1/jobs/1\nx\x1b\x9b\u202ey" in message  # JSON escapes; the value decodes as it came
    raw = server.log.read_text()
    assert not any(char in raw for char in "\x1b\x9b\u202e")


def test_a_traceback_cannot_pass_for_a_record() -> None:
    """An exception's message is a client's as often as not: its lines follow the record, each
    marked, and its controls escaped, as the record's own."""
    try:
        raise ValueError("bad\ninfosvc: WARNING infosvc.audit: admin remove of cn01\x1b[2J")
    except ValueError:
        record = logging.LogRecord("infosvc.web", logging.ERROR, __file__, 1, "failed on %s", ("a\u202eb",),
                                   sys.exc_info())
    text = TextFormatter().format(record)
    lines = text.split("\n")
    assert lines[0] == "infosvc: ERROR infosvc.web: failed on a\\u202eb"
    assert all(line.startswith("  | ") for line in lines[1:]) and len(lines) > 3
    assert "  | infosvc: WARNING infosvc.audit: admin remove of cn01\\x1b[2J" in lines
