"""Load shedding: a server allowed two reports under way, overloaded by many agents posting at once,
answers the excess 503 with Retry-After and stores none of it; every report it answered 200 is
stored exactly once (docs/reliability.md)."""

from __future__ import annotations

import re
import threading

import pytest

from support.documents import node_document
from support.server import Reply, ServerFactory

# Many concurrent posts from threads, timed against each other: alone, not beside other tests.
pytestmark = pytest.mark.serial

AGENTS = 24
ROUNDS = 8


def burst(server: object, tokens: list[str], start: int) -> dict[tuple[str, int], Reply]:
    """Every agent posts ROUNDS reports, each numbered (its Sequence), from a thread of its own, all at once."""
    answers: dict[tuple[str, int], Reply] = {}
    go = threading.Barrier(len(tokens))

    def agent(i: int, token: str) -> None:
        host = f"shed{i:02d}.example.org"
        go.wait()
        for n in range(start, start + ROUNDS):
            answers[(host, n)] = server.post_node(node_document(host, sequence=n), token)  # type: ignore[attr-defined]

    threads = [threading.Thread(target=agent, args=(i, token)) for i, token in enumerate(tokens)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_overload_is_shed_with_503_and_retry_after_and_nothing_acknowledged_is_lost(serve: ServerFactory) -> None:
    server = serve(config={"service": {"max_pending_reports": 2}}, agents=AGENTS)
    tokens = [server.agent_token() for _ in range(AGENTS)]
    answers: dict[tuple[str, int], Reply] = {}
    # A burst is usually enough; a few more if this machine happened to keep up with one.
    for attempt in range(5):
        answers |= burst(server, tokens, attempt * ROUNDS)
        if any(reply.status == 503 for reply in answers.values()):
            break
    shed = {key: reply for key, reply in answers.items() if reply.status == 503}
    taken = {key for key, reply in answers.items() if reply.status == 200}
    assert shed, "no report was shed: the server never had more than two under way"
    assert taken, "every report was shed"
    assert {reply.status for reply in answers.values()} == {200, 503}
    for reply in shed.values():
        assert reply.is_error(503), reply.body
        assert reply.json()["error"] == "too many reports under way"
        assert reply.headers.get("retry-after", "").isdigit() and int(reply.headers["retry-after"]) >= 1

    stored: dict[tuple[str, int], int] = {}
    for host, document in server.sql("SELECT host_id, document FROM reports"):
        found = re.search(rb'<Extension name="Sequence" type="Test">(\d+)</Extension>', document)
        assert found is not None
        stored[(host, int(found[1]))] = stored.get((host, int(found[1])), 0) + 1
    assert {key for key in taken if stored.get(key) != 1} == set(), "an acknowledged report is missing or twice"
    assert set(stored) == taken, "a report answered 503 was stored"

    # Each refusal is counted under its own reason, and the server is still well.
    metrics = server.get("/metrics").body.decode()
    counted = re.search(r'^infosvc_reports_rejected_total\{reason="overloaded"\} (\S+)$', metrics, re.M)
    assert counted is not None and float(counted[1]) == len(shed)
    assert server.get("/healthz").status == 200
    for host in {host for host, _ in taken}:
        newest = max(n for h, n in taken if h == host)
        served = server.get(f"/v1/nodes/{host}").json()
        assert {"name": "Sequence", "type": "Test", "value": str(newest)} in served["extensions"]
