"""Clock skew between agents and the server (docs/reliability.md, Faults; infosvc/hosts/clockskew.py):
agents whose clocks are off (their SampleTime written by hand) are shown with their skew in
/v1/nodes, the GLUE JSON host and GET /metrics, and named in the audit log when past the
threshold; a backlog delivered late after an outage is not taken for a slow clock."""

from __future__ import annotations

import json
import time

from jsonschema import Draft202012Validator

from support import ROOT
from support.documents import node_document
from support.server import Server, ServerFactory

GLUE_SCHEMA = Draft202012Validator(json.loads((ROOT / "schemas" / "glue.schema.json").read_text()))
NODE_SCHEMA = json.loads((ROOT / "schemas" / "sss-node.schema.json").read_text())


def stamp(offset: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset))


def report(server: Server, host: str, token: str, offset: float | None) -> None:
    document = node_document(host, sample_time=None if offset is None else stamp(offset))
    assert server.post_node(document, token).status == 200


def skew_of(server: Server, host: str) -> float | None:
    node = server.get(f"/v1/nodes/{host}").json()
    glue = server.get(f"/v1/glue/hosts/{host}").json()
    assert glue.get("clock_skew_seconds") == node.get("clock_skew_seconds")
    value = node.get("clock_skew_seconds")
    return None if value is None else float(value)


def metric(server: Server, host: str) -> float | None:
    for line in server.get("/metrics").body.decode().splitlines():
        if line.startswith(f'infosvc_host_clock_skew_seconds{{node="{host}"}} '):
            return float(line.split()[-1])
    return None


def audit_lines(server: Server, host: str) -> list[str]:
    return [line for line in server.log.read_text().splitlines()
            if "infosvc.audit" in line and f"host {host}: clock skew" in line]


def test_skewed_agents_are_shown_and_audited(serve_app: ServerFactory) -> None:
    server = serve_app(agents=5)
    tokens = {host: server.agent_token() for host in ("ahead", "behind", "synced", "late", "silent")}
    report(server, "ahead", tokens["ahead"], +120)
    report(server, "behind", tokens["behind"], -300)
    report(server, "synced", tokens["synced"], 0)
    report(server, "silent", tokens["silent"], None)  # no SampleTime: no figure

    assert 118 <= (skew_of(server, "ahead") or 0) <= 120.5
    assert -302 <= (skew_of(server, "behind") or 0) <= -299.5
    assert abs(skew_of(server, "synced") or 99) <= 2
    assert skew_of(server, "silent") is None
    assert 118 <= (metric(server, "ahead") or 0) <= 120.5 and metric(server, "silent") is None
    # audited once each, past the threshold; the synced one not at all
    ahead = audit_lines(server, "ahead")
    assert len(ahead) == 1 and ("+120 s" in ahead[0] or "+119 s" in ahead[0]), ahead
    assert len(audit_lines(server, "behind")) == 1 and not audit_lines(server, "synced")
    assert "-300 s" in audit_lines(server, "behind")[0] or "-301 s" in audit_lines(server, "behind")[0]
    report(server, "ahead", tokens["ahead"], +120)
    assert len(audit_lines(server, "ahead")) == 1  # not once per report

    # a backlog kept through an outage arrives late: the freshest sample still decides
    report(server, "late", tokens["late"], 0)
    for minutes_ago in (9, 8, 7, 6, 5, 4, 3, 2, 1):
        report(server, "late", tokens["late"], -60 * minutes_ago)
    assert abs(skew_of(server, "late") or 99) <= 2
    assert not audit_lines(server, "late")

    # the figures are in the published schemas
    GLUE_SCHEMA.validate(server.get("/v1/glue").json())
    node_schema = Draft202012Validator(NODE_SCHEMA)
    for node in server.get("/v1/nodes").json():
        node_schema.validate(node)


def test_a_clock_set_right_is_seen_within_the_window() -> None:
    """ClockSkew alone, on a clock of its own: set forward, seen at once; set back (or a burst of
    late samples), seen once the window has passed; audited going past and coming back."""
    from infosvc.hosts.clockskew import WINDOW_SECONDS, ClockSkew
    from support.documents import make_node

    skew = ClockSkew()
    now = 1_800_000_000.0

    def sample(offset: float, delay: float = 0.0) -> float | None:
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + offset - delay))
        return skew.observe("h", make_node("h", sample_time=at), now)

    assert sample(0) == 0
    now += 60
    assert sample(-200) == 0  # late, or set back: the window still holds the fresh one
    assert "h" not in skew.beyond
    now += WINDOW_SECONDS
    assert sample(-200) == -200 and "h" in skew.beyond  # still so a window later: set back
    now += 60
    assert sample(+5) == 5 and "h" not in skew.beyond  # set right: seen at once
    for _ in range(40):  # a burst of late samples, each fresher: the deque stays short
        now += 0.01
        sample(0, delay=300)
    assert sample(0) == 5 and len(skew._seen["h"]) <= 16
