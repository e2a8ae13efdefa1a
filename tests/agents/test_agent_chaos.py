"""Chaos in the agent's path (docs/reliability.md, Faults): a fake aggregator in front of the real
one that misbehaves connection by connection: answers past the agent's timeout or a byte at a
time, resets, 5xx, garbage, a 200 that is no acknowledgement, a cut body, a TLS certificate that
changes (to another of the site's CA, or to an impostor's). Some acts pass the report on before misbehaving, so the
agent sends again a sample the aggregator has stored. The agent never loses a kept sample it has
not seen acknowledged, the aggregator stores each sample once (SampleId), and the agent's memory
stays bounded (the oldest kept dropped and counted)."""

from __future__ import annotations

import http.client
import random
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from infosvc.codec.node_xml import parse_node
from infosvc_agents.agent import HostAgent
from infosvc_agents.collectors import CollectorRegistry
from infosvc_agents.push import PushLoop, Sender
from support.pki import make_ca, make_server_cert
from support.server import Server, ServerFactory, wait_for

#: The agent's timeout in these tests; the slow acts answer after it.
TIMEOUT = 0.4
#: What the fake aggregator may do with one connection; "stored-" acts pass the report on first.
ACTS = ("pass", "reset", "stored-reset", "stored-slow", "5xx", "stored-5xx", "garbage", "stored-garbage",
        "html-200", "stored-html-200", "cut-body", "stored-trickle")


def sample_ids(server: Server, host: str) -> list[str]:
    documents = [row[0] for row in server.sql("SELECT document FROM reports WHERE host_id = ? ORDER BY seq", host)]
    return [parse_node(d).extension("SampleId", "Agent") or "" for d in documents]


@dataclass
class Chaos:
    """The fake aggregator: a raw TCP (or TLS) listener, one thread per connection, each given
    the next act of `acts` (cycled); reports are passed on to `upstream` with http.client."""

    upstream: Server
    acts: list[str]
    tls: list[ssl.SSLContext | None] = field(default_factory=lambda: [None])  # per connection, cycled
    port: int = 0
    connections: int = 0
    #: (act, body, connection number) of every request read
    seen: list[tuple[str, bytes, int]] = field(default_factory=list)
    _listener: socket.socket | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closing: bool = False

    def start(self) -> Chaos:
        listener = socket.create_server(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def close(self) -> None:
        self._closing = True
        if self._listener is not None:
            self._listener.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closing:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                number = self.connections
                self.connections += 1
            act = self.acts[number % len(self.acts)]
            context = self.tls[number % len(self.tls)]
            threading.Thread(target=self._serve, args=(conn, act, context, number), daemon=True).start()

    def _serve(self, conn: socket.socket, act: str, context: ssl.SSLContext | None, number: int) -> None:
        try:
            if context is not None:
                conn.settimeout(5)
                conn = context.wrap_socket(conn, server_side=True)  # fails when the agent refuses the certificate
            head, body = read_request(conn)
            with self._lock:
                self.seen.append((act, body, number))
            status, answer = 0, b""
            if act.startswith("stored-") or act in ("pass", "cut-body"):
                status, answer = self._forward(head, body)
            act = act.removeprefix("stored-")
            if act == "pass":
                conn.sendall(response(status, answer))
            elif act == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
            elif act == "slow":  # the answer (if any) comes after the agent has given up
                time.sleep(TIMEOUT * 2.5)
                if status:
                    conn.sendall(response(status, answer))
            elif act == "5xx":
                conn.sendall(response(502, b'{"error": "bad gateway", "detail": null}'))
            elif act == "garbage":
                conn.sendall(bytes(random.getrandbits(8) for _ in range(300)))
            elif act == "html-200":
                conn.sendall(response(200, b"<html><body>Welcome to the portal</body></html>", "text/html"))
            elif act == "trickle":  # a byte at a time, each within the agent's timeout, never done
                for byte in response(status, answer) * 100:
                    conn.sendall(bytes([byte]))
                    time.sleep(TIMEOUT / 2)
            elif act == "cut-body":  # the real answer's head, and half its body
                whole = response(status, answer)
                conn.sendall(whole[:len(whole) - len(answer) // 2])
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()

    def _forward(self, head: dict[str, str], body: bytes) -> tuple[int, bytes]:
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream.port, timeout=10)
        try:
            upstream.request("POST", "/v1/nodes", body=body, headers={
                "Authorization": head["authorization"], "Content-Type": head.get("content-type", "application/xml")})
            reply = upstream.getresponse()
            return reply.status, reply.read()
        finally:
            upstream.close()


def read_request(conn: socket.socket) -> tuple[dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise OSError("closed before the request's head")
        data += chunk
    raw, body = data.split(b"\r\n\r\n", 1)
    head = {}
    for line in raw.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        head[name.strip().lower()] = value.strip()
    length = int(head.get("content-length", "0"))
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            raise OSError("closed in the body")
        body += chunk
    return head, body


def response(status: int, body: bytes, content_type: str = "application/json") -> bytes:
    return (f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n").encode() + body


@pytest.fixture
def chaos() -> Iterator[list[Chaos]]:
    made: list[Chaos] = []
    yield made
    for proxy in made:
        proxy.close()


def agent_loop(url: str, token: str, host: str, *, max_kept: int = 1000, ca_file: str | None = None) -> PushLoop:
    """The agent's own sample -> document path (no collectors: the document still carries the
    agent's SampleTime and SampleId) and push loop, fast."""
    agent = HostAgent(CollectorRegistry(), host_id=host)
    return PushLoop(agent.document, Sender(url, token, timeout=TIMEOUT, ca_file=ca_file), interval=0.03,
                    max_kept=max_kept, backoff_initial=0.01, backoff_max=0.05)


def run_through(loop: PushLoop, chaos: Chaos, calm: list[str], samples: int) -> None:
    """Run the loop through `samples` samples of chaos, then calm the proxy until all is delivered."""
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: loop.taken >= samples, timeout=60, message=f"{samples} samples through the chaos")
        chaos.acts = calm
        wait_for(lambda: not loop.kept and loop.taken > samples, timeout=30, message="delivery once calm")
    finally:
        loop.stop()
        thread.join(timeout=10)
    assert not thread.is_alive()


def check_each_stored_once(server: Server, loop: PushLoop, host: str) -> list[str]:
    ids = sample_ids(server, host)
    assert len(ids) == len(set(ids)), f"a sample stored twice: {ids}"
    numbers = [int(i.rsplit("-", 1)[1]) for i in ids]
    assert numbers == sorted(numbers), numbers  # in the order taken
    # every sample taken was delivered (once) or dropped as the oldest kept, or is still kept
    assert loop.delivered + loop.dropped + len(loop.kept) == loop.taken
    return ids


def test_chaos_in_the_agents_path_loses_nothing_and_stores_each_sample_once(
        serve_app: ServerFactory, chaos: list[Chaos]) -> None:
    server = serve_app({"store": {"history_per_host": 10000}}, agents=1)
    acts = list(ACTS) * 3
    random.Random(15).shuffle(acts)
    proxy = Chaos(server, acts).start()
    chaos.append(proxy)
    loop = agent_loop(f"http://127.0.0.1:{proxy.port}", server.agent_token(), "chaos01")
    run_through(loop, proxy, ["pass"], samples=60)
    ids = check_each_stored_once(server, loop, "chaos01")
    assert loop.dropped == 0 and loop.refused == 0
    assert len(ids) == loop.delivered == loop.taken  # none lost, none twice
    # the acts happened: samples the aggregator stored were sent again, and acknowledged once
    acted = {act for act, _, _ in proxy.seen}
    assert set(ACTS) <= acted, set(ACTS) - acted
    bodies = [body for _, body, _ in proxy.seen]
    assert len(bodies) > len(set(bodies)), "no sample was sent again"
    print(f"\nchaos: {len(bodies)} deliveries of {loop.taken} samples over {proxy.connections} connections, "
          f"{len(bodies) - len(set(bodies))} of them a sample sent again; {len(ids)} stored, each once, 0 lost")


def test_a_changing_certificate(serve_app: ServerFactory, chaos: list[Chaos], tmp_path: Path) -> None:
    """The fake aggregator's certificate changes between connections: to another issued by the
    site's CA (a renewal: delivered), or to an impostor's (refused by the agent: nothing sent)."""
    ca, ca_cert, ca_key = make_ca(tmp_path, "site-ca")
    _, other_cert, other_key = make_ca(tmp_path, "impostor-ca")
    contexts: list[ssl.SSLContext | None] = []
    for name, cert, key in (("first", ca_cert, ca_key), ("impostor", other_cert, other_key),
                            ("renewed", ca_cert, ca_key)):
        issued = make_server_cert(tmp_path, cert, key, name)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(issued.cert, issued.key)
        contexts.append(context)
    server = serve_app({"store": {"history_per_host": 10000}}, agents=1)
    proxy = Chaos(server, ["pass", "stored-reset", "pass", "stored-5xx", "stored-trickle"], tls=contexts).start()
    chaos.append(proxy)
    loop = agent_loop(f"https://127.0.0.1:{proxy.port}", server.agent_token(), "chaos02", ca_file=str(ca.cert))
    run_through(loop, proxy, ["pass"], samples=30)
    ids = check_each_stored_once(server, loop, "chaos02")
    assert loop.dropped == 0 and len(ids) == loop.delivered == loop.taken
    # the agent sent nothing over the impostor's connections (every third), and met it often
    assert not [number for _, _, number in proxy.seen if number % 3 == 1]
    assert proxy.connections >= 9 and {number % 3 for _, _, number in proxy.seen} == {0, 2}


def test_memory_stays_bounded_through_a_long_bad_spell(serve_app: ServerFactory, chaos: list[Chaos]) -> None:
    """A path that fails every way for many samples: the agent keeps at most max_kept, drops the
    oldest and counts them; once calm, the newest arrive, each once."""
    server = serve_app({"store": {"history_per_host": 10000}}, agents=1)
    proxy = Chaos(server, ["reset", "5xx", "garbage", "html-200", "slow"]).start()
    chaos.append(proxy)
    loop = agent_loop(f"http://127.0.0.1:{proxy.port}", server.agent_token(), "chaos03", max_kept=5)
    peak = 0

    def watch() -> None:
        nonlocal peak
        while not loop._stop.is_set():
            peak = max(peak, len(loop.kept))
            time.sleep(0.005)

    threading.Thread(target=watch, daemon=True).start()
    run_through(loop, proxy, ["pass"], samples=40)
    ids = check_each_stored_once(server, loop, "chaos03")
    assert peak <= 5 and loop.dropped >= 40 - 5 - 1
    assert len(ids) == loop.delivered and loop.delivered + loop.dropped == loop.taken
    numbers = [int(i.rsplit("-", 1)[1]) for i in ids]
    assert numbers == list(range(loop.dropped + 1, loop.taken + 1))  # the oldest were dropped


def test_the_aggregator_stores_a_sample_sent_again_once(serve_app: ServerFactory) -> None:
    """By its SampleId: the same sample twice is one report, acknowledged both times; the next
    sample is new; documents without a SampleId are each new."""
    from infosvc.model.node import Extension
    from support.documents import node_document

    server = serve_app(agents=1)
    token = server.agent_token()
    first = node_document("again", extra=(Extension("SampleId", "run-1", "Agent"),))
    for _ in range(3):
        reply = server.post_node(first, token)
        assert reply.status == 200 and reply.json()["host"] == "again"
    server.post_node(node_document("again", extra=(Extension("SampleId", "run-2", "Agent"),)), token)
    server.report("again", token)
    server.report("again", token)
    assert sample_ids(server, "again") == ["run-1", "run-2", "", ""]
    metrics = server.get("/metrics").body.decode().splitlines()
    assert "infosvc_reports_repeated_total 2.0" in metrics and "infosvc_reports_accepted_total 4.0" in metrics


def test_the_same_sample_while_it_is_being_stored_is_refused_for_now(serve_app: ServerFactory) -> None:
    """A sample sent again while its first copy still waits for the store (the agent timed out on
    a slow commit) is a 503: it comes again, and is then acknowledged as the stored one."""
    import asyncio

    from infosvc.model.node import Extension
    from infosvc.web.keys import AGGREGATOR
    from support.documents import node_document

    server: Any = serve_app(agents=1)
    token = server.agent_token()
    server.report("busy", token)
    store = server._runner.app[AGGREGATOR].store
    document = node_document("busy", extra=(Extension("SampleId", "run-7", "Agent"),))
    # the writer thread busy for a while: the first copy waits behind it
    blocker = asyncio.run_coroutine_threadsafe(store.write(lambda conn: time.sleep(1.5)), server._loop)
    answers: list[int] = []
    first = threading.Thread(target=lambda: answers.append(server.post_node(document, token).status))
    first.start()
    time.sleep(0.4)
    assert server.post_node(document, token).status == 503
    first.join(timeout=10)
    blocker.result(10)
    assert answers == [200]
    assert server.post_node(document, token).status == 200
    assert sample_ids(server, "busy") == ["", "run-7"]
