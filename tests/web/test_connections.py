"""Connections (infosvc/web/connections.py; docs/security.md).

Idle, silent and slow clients cannot take the service's file descriptors: there is a cap on
connections below the open-file limit, the longest-idle connections are closed first to make room,
a client must send its request's head within service.header_timeout_seconds, a client without a
valid token is kept alive only briefly, and a failing accept() is one log line, not a flood.
Requests that aiohttp cannot parse are answered with the API's JSON error over HTTP/1.1 and logged
without any of their bytes.

Each attack runs against a real server on loopback, bounded in count and time, while another
thread times GET /healthz on fresh connections: its p99 stays under 50 ms.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import multiprocessing
import os
import resource
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import http_exceptions

from support.documents import node_document

from support.server import Server, ServerFactory, request
from test_tls import Pki, pki  # noqa: F401 - `pki` is a fixture
from infosvc.web import connections
from infosvc.web.connections import connection_cap
from infosvc.loglimit import LogLimiter
from infosvc.web.refusals import describe_protocol_error

# Latency and timeouts measured from outside: run alone, not beside other tests (make test).
pytestmark = pytest.mark.serial

P99_LIMIT = 0.050
MARKER = "SECRET-MARKER-7f3a"


# --- measuring /healthz while an attack runs --------------------------------------------------

@dataclass
class HealthProbe:
    """GET /healthz on a fresh connection every `interval` seconds, from a thread, each timed.
    A request that fails or does not answer 200 within `timeout` counts as infinitely slow."""

    port: int
    interval: float = 0.005
    timeout: float = 2.0
    tls: ssl.SSLContext | None = None
    samples: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                reply = request(self.port, "GET", "/healthz", timeout=self.timeout, tls=self.tls)
                ok = reply.status == 200
                if not ok:
                    self.errors.append(f"{reply.status} {reply.body[:200]!r}")
            except (OSError, http.client.HTTPException) as exc:
                ok = False
                self.errors.append(repr(exc))
            self.samples.append(time.perf_counter() - started if ok else math.inf)
            self._stop.wait(self.interval)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout + 1)

    def run_for(self, seconds: float) -> HealthProbe:
        with self:
            time.sleep(seconds)
        return self

    def p99(self) -> float:
        ordered = sorted(self.samples)
        return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]

    def check(self, minimum: int = 100) -> float:
        failed = sum(1 for s in self.samples if s == math.inf)
        assert len(self.samples) >= minimum, f"only {len(self.samples)} /healthz requests were made"
        assert failed == 0, (f"{failed} of {len(self.samples)} GET /healthz failed or took over {self.timeout} s: "
                             f"{self.errors[:3]}")
        p99 = self.p99()
        assert p99 < P99_LIMIT, f"/healthz p99 {p99 * 1000:.1f} ms over {len(self.samples)} requests"
        print(f"/healthz p99 {p99 * 1000:.1f} ms over {len(self.samples)} requests")
        return p99


# --- raw sockets ------------------------------------------------------------------------------

def open_sockets(port: int, count: int, first_bytes: bytes = b"", timeout: float = 0.5,
                 give_up_after: int = 3) -> list[socket.socket]:
    """Up to `count` connections that send `first_bytes` and then nothing. A connect that takes
    longer than `timeout` is skipped (a full accept queue drops the SYN); after `give_up_after`
    such in a row the server is taken to accept no more."""
    opened = []
    failed = 0
    while len(opened) < count and failed < give_up_after:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        except OSError:
            failed += 1
            continue
        failed = 0
        if first_bytes:
            try:
                s.sendall(first_bytes)
            except OSError:
                pass
        opened.append(s)
    return opened


def close_all(sockets: list[socket.socket]) -> None:
    for s in sockets:
        s.close()


def is_closed(s: socket.socket) -> bool:
    """Whether the server has closed this connection (EOF or reset), without waiting."""
    readable, _, _ = select.select([s], [], [], 0)
    if not readable:
        return False
    try:
        s.setblocking(False)
        return s.recv(65536) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


def exchange(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Send `data` on a new connection and read until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:  # the server may answer and close before all of an oversized request is sent
            pass
        received = b""
        try:
            while chunk := s.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
        return received


@dataclass
class RawReply:
    status_line: str
    headers: dict[str, str]
    body: bytes

    @classmethod
    def parse(cls, data: bytes) -> RawReply:
        head, sep, body = data.partition(b"\r\n\r\n")
        assert sep, f"no complete answer: {data[:300]!r}"
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", len(body)))
        return cls(lines[0], headers, body[:length])

    def json_error(self) -> dict[str, Any]:
        assert self.headers.get("content-type", "").startswith("application/json"), self
        data = json.loads(self.body)
        assert isinstance(data, dict) and set(data) == {"error", "detail"} and data["error"], data
        return data


def complete(data: bytes) -> bool:
    """Whether `data` holds a whole answer (with a Content-Length)."""
    if b"\r\n\r\n" not in data:
        return False
    reply = RawReply.parse(data)
    return len(reply.body) == int(reply.headers["content-length"])


def log_lines(server: Server) -> list[str]:
    return server.log.read_text(errors="replace").splitlines()


def report_succeeds(server: Server, host: str, token: str) -> None:
    reply = server.post_node(node_document(host), token, timeout=2.0)
    assert reply.status == 200, (reply.status, reply.body)


# --- idle connections and the open-file limit -------------------------------------------------

def test_idle_connections_beyond_the_open_file_limit_leave_the_service_answering(serve: ServerFactory) -> None:
    """With the usual 1,024 files allowed, 1,100 idle connections (silent, or a
    request line and no more) must not stop /healthz or an agent's report, nor flood the log."""
    server = serve(open_files=1024)
    token = server.agent_token()
    before = len(log_lines(server))
    held = open_sockets(server.port, 550) + open_sockets(server.port, 550, b"GET /healthz HTTP/1.1\r\n")
    try:
        probe = HealthProbe(server.port).run_for(1.5)
        report_succeeds(server, "idle-test", token)
        probe.check()
    finally:
        close_all(held)
    added = log_lines(server)[before:]
    assert len(added) < 20, "\n".join(added[:40])
    assert not any("Traceback" in line for line in added)


def test_the_longest_idle_connection_is_closed_first_at_the_cap(serve: ServerFactory) -> None:
    server = serve({"service": {"max_connections": 16}})
    held = []
    try:
        for _ in range(16):
            held += open_sockets(server.port, 1)
            time.sleep(0.01)  # the order the server sees them in
        newest = open_sockets(server.port, 1)
        assert len(held) == 16 and len(newest) == 1
        deadline = time.monotonic() + 2
        while not is_closed(held[0]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert is_closed(held[0]), "the longest-idle connection was not closed to make room"
        assert not any(is_closed(s) for s in held[1:] + newest)
        assert server.get("/healthz", timeout=2.0).status == 200  # room made again, by closing held[1]
    finally:
        close_all(held + newest)


def test_a_new_connection_is_refused_with_json_when_every_connection_is_busy(serve: ServerFactory) -> None:
    """At the cap with no idle connection to close, a new one gets 503 at once and is closed."""
    server = serve({"service": {"max_connections": 8, "body_timeout_seconds": 5.0}})
    busy = open_sockets(server.port, 8, b"POST /v1/match HTTP/1.1\r\nHost: t\r\nContent-Type: application/xml\r\n"
                                        b"Content-Length: 1000\r\n\r\n<Job")  # the handlers wait for the body
    try:
        assert len(busy) == 8
        time.sleep(0.2)
        started = time.monotonic()
        reply = RawReply.parse(exchange(server.port, b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n", timeout=3))
        assert time.monotonic() - started < 1.0
        assert reply.status_line.startswith("HTTP/1.1 503 ")
        reply.json_error()
        assert reply.headers.get("retry-after")
    finally:
        close_all(busy)
    assert server.get("/healthz", timeout=2.0).status == 200


def test_accept_failures_are_one_log_line_and_the_service_recovers(serve: ServerFactory) -> None:
    """If the process runs out of files anyway (its limit lowered under it here), asyncio's accept()
    traceback per attempt becomes one line, idle connections make room and /healthz answers again."""
    server = serve()
    assert server.process is not None
    pid = server.process.pid
    assert len(os.listdir(f"/proc/{pid}/fd")) < 50
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (700, 700))  # its cap is still 1,024 connections
    before = len(log_lines(server))
    held = open_sockets(server.port, 1000, timeout=0.5)
    try:
        deadline = time.monotonic() + 4
        answered = False
        while not answered and time.monotonic() < deadline:
            try:
                answered = server.get("/healthz", timeout=1.0).status == 200
            except (OSError, http.client.HTTPException):
                pass
        assert answered, "/healthz did not answer again within 4 s"
        HealthProbe(server.port).run_for(1.5).check()
    finally:
        close_all(held)
    added = log_lines(server)[before:]
    assert sum("accept" in line for line in added) <= 3, "\n".join(added[:40])
    assert len(added) < 20 and not any("Traceback" in line for line in added), "\n".join(added[:40])


# --- slow and idle clients --------------------------------------------------------------------

def test_slowloris_connections_are_dropped_after_the_header_timeout(serve: ServerFactory) -> None:
    """Clients that trickle their request head a byte at a time are closed once
    service.header_timeout_seconds have passed since they connected."""
    server = serve({"service": {"header_timeout_seconds": 1.0}})
    slow = open_sockets(server.port, 100, b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ")
    opened = time.monotonic()
    closed_after: dict[int, float] = {}
    stop = threading.Event()

    def trickle() -> None:
        while not stop.is_set() and len(closed_after) < len(slow):
            for i, s in enumerate(slow):
                if i in closed_after:
                    continue
                if is_closed(s):
                    closed_after[i] = time.monotonic() - opened
                    continue
                try:
                    s.send(b"a")
                except OSError:
                    closed_after[i] = time.monotonic() - opened
            stop.wait(0.2)

    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()
    try:
        probe = HealthProbe(server.port).run_for(1.5)
        trickler.join(timeout=3.0)
    finally:
        stop.set()
        trickler.join()
        close_all(slow)
    assert len(slow) == 100 and len(closed_after) == 100, f"{100 - len(closed_after)} slow clients still connected"
    assert max(closed_after.values()) < 1.0 + 1.0
    probe.check()


def test_a_silent_connection_is_closed_after_the_header_timeout(serve: ServerFactory) -> None:
    server = serve({"service": {"header_timeout_seconds": 0.5}})
    (silent,) = open_sockets(server.port, 1)
    try:
        silent.settimeout(3.0)
        started = time.monotonic()
        assert silent.recv(100) == b""
        assert 0.4 < time.monotonic() - started < 1.5
    finally:
        silent.close()


def test_clients_without_a_valid_token_are_kept_alive_briefly(serve: ServerFactory) -> None:
    """An anonymous reader's idle connection is closed after ~2 s; a token holder's is kept for
    service.keepalive_seconds, and a wrong token counts as none."""
    server = serve({"service": {"keepalive_seconds": 30.0}})
    conns = {name: http.client.HTTPConnection("127.0.0.1", server.port, timeout=5) for name in
             ("anonymous", "wrong token", "admin")}
    headers = {"anonymous": {}, "wrong token": {"Authorization": "Bearer not-a-token-of-this-server"},
               "admin": {"Authorization": f"Bearer {server.tokens['admin']}"}}
    try:
        for name, conn in conns.items():
            conn.request("GET", "/v1/nodes", headers=headers[name])
            response = conn.getresponse()
            response.read()
            assert response.status == 200 and not response.will_close, name
        sockets = {name: conn.sock for name, conn in conns.items()}
        time.sleep(3.0)
        assert is_closed(sockets["anonymous"]) and is_closed(sockets["wrong token"])
        assert not is_closed(sockets["admin"])
        conns["admin"].request("GET", "/healthz", headers=headers["admin"])
        assert conns["admin"].getresponse().status == 200 and conns["admin"].sock is sockets["admin"]
    finally:
        for conn in conns.values():
            conn.close()


def test_clients_that_stop_reading_the_answer_are_dropped(serve: ServerFactory) -> None:
    """A slow reader: requests pipelined, the answers left unread (a closed TCP window), so that the
    server's writes stall. Dropped once they have stalled for header_timeout_seconds."""
    server = serve({"service": {"header_timeout_seconds": 1.0}})
    readers = []
    for _ in range(5):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", server.port))
        # ~10 MB of answers: more than the kernel's socket buffers (tcp_wmem's 4 MB at most) hold
        s.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: t\r\n\r\n" * 300)
        readers.append(s)
    try:
        probe = HealthProbe(server.port).run_for(2.5)
        received = []
        for s in readers:
            s.settimeout(3.0)
            got = 0
            try:
                while chunk := s.recv(65536):
                    got += len(chunk)
            except (ConnectionResetError, socket.timeout):
                pass
            received.append(got)
    finally:
        close_all(readers)
    assert max(received) < 300 * 32_000, f"a client that stopped reading was sent all its answers: {received}"
    probe.check()


def test_silent_tls_connections_are_dropped_and_do_not_lock_out_https_clients(serve: ServerFactory, pki: Pki) -> None:
    """Over TLS, a connection counts from the TCP accept: 100 silent ones (no ClientHello) beyond a
    cap of 32 are closed to make room, longest-idle first, and each after header_timeout_seconds."""
    server = serve({"service": {"header_timeout_seconds": 1.0, "max_connections": 32}},
                   extra_args=("--tls-cert", str(pki.server.cert), "--tls-key", str(pki.server.key)),
                   ca_file=pki.ca.cert)
    silent = open_sockets(server.port, 100)
    opened = time.monotonic()
    try:
        probe = HealthProbe(server.port, tls=server.tls).run_for(2.0)
        wait_closed = time.monotonic() + 2.5 - (time.monotonic() - opened)
        while not all(is_closed(s) for s in silent) and time.monotonic() < wait_closed:
            time.sleep(0.05)
        assert all(is_closed(s) for s in silent), f"{sum(not is_closed(s) for s in silent)} silent TLS clients left"
    finally:
        close_all(silent)
    probe.check()


# --- requests aiohttp cannot parse --------------------------------------------------------------

TLS_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + MARKER.encode() + b"\r\n\r\n"

MALFORMED: list[tuple[str, bytes, int]] = [
    ("oversized Authorization header",
     f"GET /healthz HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {MARKER}{'x' * 9000}\r\n\r\n".encode(), 431),
    ("oversized header name", f"GET /healthz HTTP/1.1\r\nHost: t\r\nX-{MARKER}{'x' * 9000}: 1\r\n\r\n".encode(), 431),
    ("oversized request line", f"GET /healthz?{MARKER}{'x' * 9000} HTTP/1.1\r\nHost: t\r\n\r\n".encode(), 431),
    ("too many headers", ("GET /healthz HTTP/1.1\r\nHost: t\r\n"
                          + "".join(f"X-{i}: {MARKER}\r\n" for i in range(200)) + "\r\n").encode(), 431),
    ("duplicate Content-Length", f"POST /v1/nodes HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {MARKER}\r\n"
                                 f"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd".encode(), 400),
    ("Content-Length with chunked", f"POST /v1/match HTTP/1.1\r\nHost: t\r\nX-Token: {MARKER}\r\n"
                                    "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".encode(), 400),
    ("bad chunk size", f"POST /v1/match HTTP/1.1\r\nHost: t\r\nContent-Type: application/xml\r\n"
                       f"Transfer-Encoding: chunked\r\n\r\nZZ{MARKER}\r\nabc\r\n0\r\n\r\n".encode(), 400),
    ("invalid Content-Length", f"POST /v1/match HTTP/1.1\r\nHost: t\r\nContent-Length: 1{MARKER}\r\n\r\n".encode(),
     400),
    ("invalid method", f"G@T /healthz HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {MARKER}\r\n\r\n".encode(), 400),
    ("unknown HTTP version", f"GET /healthz HTTP/9.9\r\nHost: t\r\nAuthorization: Bearer {MARKER}\r\n\r\n".encode(),
     400),
    ("space in a header name", f"GET /healthz HTTP/1.1\r\nHost: t\r\nBad Header: {MARKER}\r\n\r\n".encode(), 400),
    ("NUL in a header value", f"GET /healthz HTTP/1.1\r\nHost: t\r\nX-A: {MARKER}\x00\r\n\r\n".encode(), 400),
    ("TLS on the http port", TLS_HELLO, 400),
    ("garbage", b"\x00\x01\x02\x03 " + MARKER.encode() + b"\r\n\r\n", 400),
]


@pytest.fixture(scope="module")
def parsing_server(module_serve: ServerFactory) -> Server:
    return module_serve()


@pytest.mark.parametrize("name, data, status", MALFORMED, ids=[case[0] for case in MALFORMED])
def test_malformed_requests_get_the_json_error_and_leave_no_trace_in_the_log(
        parsing_server: Server, name: str, data: bytes, status: int) -> None:
    """aiohttp's own refusals as the API's JSON error, over HTTP/1.1, with no
    byte of the request in the answer or the log (an Authorization value is a secret)."""
    reply = RawReply.parse(exchange(parsing_server.port, data))
    assert reply.status_line.startswith(f"HTTP/1.1 {status} "), reply
    error = reply.json_error()
    assert MARKER not in json.dumps(error) and MARKER.encode() not in reply.body
    assert reply.headers.get("connection", "").lower() == "close"
    log = parsing_server.log.read_text(errors="replace")
    assert MARKER not in log
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]


def test_a_malformed_request_on_a_kept_alive_connection_gets_the_json_error(parsing_server: Server) -> None:
    """A good request, answered; then a bad one on the same connection: JSON, and the connection closed."""
    with socket.create_connection(("127.0.0.1", parsing_server.port), timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        first = b""
        while not complete(first):
            first += s.recv(65536)
        assert RawReply.parse(first).status_line.startswith("HTTP/1.1 200 ")
        s.sendall(f"GET /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\nX: {MARKER}\r\n\r\n"
                  .encode())
        second = b""
        while chunk := s.recv(65536):
            second += chunk
    reply = RawReply.parse(second)
    assert reply.status_line.startswith("HTTP/1.1 400 ")
    assert reply.json_error() == {"error": "invalid body framing", "detail": "Duplicate Content-Length"}
    assert MARKER not in parsing_server.log.read_text(errors="replace")


def _flood_malformed(port: int, seconds: float, limit: int, sent: Any) -> None:
    """In a child process: malformed requests round-robin on new connections, for `seconds` or `limit` requests."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and sent.value < limit:
        _, data, _ = MALFORMED[sent.value % len(MALFORMED)]
        try:
            exchange(port, data, timeout=2.0)
        except OSError:
            pass
        sent.value += 1


def test_a_flood_of_malformed_requests_leaves_healthz_fast_and_the_log_short(serve: ServerFactory) -> None:
    server = serve()
    before = len(log_lines(server))
    fork = multiprocessing.get_context("fork")
    sent = fork.Value("i", 0)
    flooder = fork.Process(target=_flood_malformed, args=(server.port, 2.5, 5000, sent))
    flooder.start()
    try:
        probe = HealthProbe(server.port).run_for(2.5)
    finally:
        flooder.join(timeout=10)
    added = log_lines(server)[before:]
    assert len(added) < 20, f"{len(added)} log lines, starting:\n" + "\n".join(added[:20])
    assert MARKER not in "\n".join(added)
    assert sent.value > 500
    print(f"{sent.value} malformed requests")
    probe.check()


# --- the parts, in-process --------------------------------------------------------------------

@pytest.mark.parametrize("exc", [
    http_exceptions.LineTooLong(f"Bearer {MARKER}".encode(), 8190),
    http_exceptions.InvalidHeader(MARKER.encode()),
    http_exceptions.BadStatusLine(f"GET /{MARKER} HTTP/1.1"),
    http_exceptions.BadHttpMethod(f"{MARKER} / HTTP/1.1"),
    http_exceptions.BadHttpMessage(f"Invalid header token:\n\n  b'Bad Header: {MARKER}'\n     ^"),
    http_exceptions.BadStatusLine(error=f"Bad status line:\n  Invalid HTTP version:\n\n  b'GET / {MARKER}'\n  ^"),
    http_exceptions.TransferEncodingError(f"Unexpected LF in chunk-extension: b'{MARKER}\\n'"),
    http_exceptions.ContentLengthError(f"Invalid Content-Length: {MARKER}"),
    http_exceptions.InvalidURLError(MARKER),
    http_exceptions.TransferEncodingError(MARKER),
    http_exceptions.BadHttpMessage(MARKER),
])
def test_protocol_errors_are_described_without_the_request_bytes(exc: http_exceptions.HttpProcessingError) -> None:
    status, error, detail = describe_protocol_error(exc, max_field_size=8190, max_headers=128)
    assert status in (400, 431) and error
    assert MARKER not in error and MARKER not in detail


def test_llhttp_reasons_are_kept_in_the_detail() -> None:
    exc = http_exceptions.BadHttpMessage("Duplicate Content-Length:\n\n  b'Content-Length: 4'\n  ^")
    assert describe_protocol_error(exc, max_field_size=8190, max_headers=128) == (
        400, "invalid body framing", "Duplicate Content-Length")


@pytest.mark.parametrize("setting, soft, expected", [
    (1024, 20000, 1024),       # the setting, when the files allow it
    (1024, 1024, 1024 - connections.RESERVED_FILES),  # else the limit less the files for everything else
    (64, 100, 50),             # a tiny limit: half of it is kept in reserve
    (64, 2, 1),
])
def test_the_connection_cap_stays_under_the_open_file_limit(setting: int, soft: int, expected: int) -> None:
    assert connection_cap(setting, soft) == expected


def test_the_log_limiter_writes_one_line_per_interval_and_counts_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    limiter = LogLimiter(logging.getLogger("test.limiter"), interval=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="test.limiter"):
        for _ in range(8000):
            limiter.warning("accept", "cannot accept: %s", "too many open files")
        now[0] += 10.0
        limiter.warning("accept", "cannot accept: %s", "too many open files")
        limiter.warning("other", "something else")
    assert [r.getMessage() for r in caplog.records] == [
        "cannot accept: too many open files",
        "cannot accept: too many open files (and 7999 more like it in the last 10 s)",
        "something else",
    ]

