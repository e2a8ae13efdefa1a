"""The agent's push loop sends deltas (docs/api.md, Delta reports) to a real server: after a whole
sample the server named as base, the next ones go as deltas and the host reads as the newest
whole sample; a 409 (the host removed meanwhile) makes it send that sample whole and go on; a
change of a static fact goes whole; a server that names no base gets whole samples only."""

from __future__ import annotations

import copy
import threading

from support.server import ServerFactory
from infosvc.codec.node_json import node_to_json
from infosvc.model.node import Node
from infosvc.model.nodedelta import base_sample
from infosvc.codec.node_xml import parse_node
from infosvc_agents.agent import HostAgent
from infosvc_agents.push import PushLoop, Sample, Sender

HOST = "delta-agent.example.org"


class Samples:
    """This machine's agent, its samples kept as taken; `features` may be changed between them."""

    def __init__(self) -> None:
        self.agent = HostAgent.for_host(host_id=HOST)
        self.taken: list[Node] = []

    def __call__(self) -> Sample:
        node = self.agent.node()
        self.taken.append(copy.deepcopy(node))
        return Sample(node)


def readings(node: dict) -> tuple[object, ...]:
    return (node["available"], node["utilized"], node.get("state"),
            [e for e in node["extensions"] if e.get("type") == "Agent"])


def test_samples_after_the_first_go_as_deltas_and_the_host_reads_whole(serve_app: ServerFactory) -> None:
    server = serve_app({}, agents=1)
    samples = Samples()
    loop = PushLoop(samples, Sender(server.url, server.agent_token(), timeout=5), interval=0.01, jitter=0.0)
    loop.run(samples=8)
    assert (loop.delivered, loop.deltas, loop.refused, loop.dropped) == (8, 7, 0, 0)
    assert [row[0] for row in server.sql("SELECT base IS NULL FROM reports ORDER BY seq")] == [1] + [0] * 7
    stored = [row[0] for row in server.sql("SELECT length(document) FROM reports ORDER BY seq")]
    assert max(stored[1:]) < stored[0] / 3
    published = server.get(f"/v1/nodes/{HOST}").json()
    assert readings(published) == readings(node_to_json(samples.taken[-1]))
    assert published["name"] == samples.taken[-1].name


def test_a_conflict_sends_the_sample_whole_and_deltas_go_on(serve_app: ServerFactory) -> None:
    server = serve_app({}, agents=1)
    samples = Samples()
    loop = PushLoop(samples, Sender(server.url, server.agent_token(), timeout=5), interval=0.01, jitter=0.0)
    loop.run(samples=3)
    assert server.admin(HOST, "remove").status == 200  # the server no longer holds the base
    loop.run(samples=4)
    assert (loop.delivered, loop.refused, loop.dropped) == (7, 0, 0)
    assert loop.deltas == 2 + 3  # the first after the removal went whole
    assert 'infosvc_reports_rejected_total{reason="no_base"} 1.0' in server.get("/metrics").body.decode()
    assert readings(server.get(f"/v1/nodes/{HOST}").json()) == readings(node_to_json(samples.taken[-1]))


def test_a_changed_static_fact_goes_whole_and_becomes_the_base(serve_app: ServerFactory) -> None:
    server = serve_app({}, agents=1)
    samples = Samples()
    loop = PushLoop(samples, Sender(server.url, server.agent_token(), timeout=5), interval=0.01, jitter=0.0)
    loop.run(samples=2)
    samples.agent.features = ("gpu",)
    loop.run(samples=3)
    kinds = [row[0] for row in server.sql("SELECT base IS NULL FROM reports ORDER BY seq")]
    assert kinds == [1, 0, 1, 0, 0]
    assert server.get(f"/v1/nodes/{HOST}").json()["features"] == ["gpu"]


def test_a_server_that_names_no_base_gets_whole_samples(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An aggregator from before deltas answers {"host", "state"}: it would take a delta for a
    whole report, so none is sent."""
    import http.server

    bodies: list[bytes] = []

    class Old(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - the standard library's name
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            answer = b'{"host": "%s", "state": "Ready"}' % HOST.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    old = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Old)
    threading.Thread(target=old.serve_forever, daemon=True).start()
    try:
        loop = PushLoop(Samples(), Sender(f"http://127.0.0.1:{old.server_port}", "t", timeout=5), interval=0.01)
        loop.run(samples=4)
    finally:
        old.shutdown()
    assert loop.delivered == 4 and loop.deltas == 0
    assert [base_sample(parse_node(body)) for body in bodies] == [None] * 4
    assert all(parse_node(body).configured.items for body in bodies)
