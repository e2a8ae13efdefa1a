"""What an operator audits, in the log: every admin action, refused tokens (one
line per kind per interval), hosts changing state; one JSON object a line with --log-format json."""

from __future__ import annotations

import json
from typing import Any

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
