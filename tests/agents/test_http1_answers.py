"""The agent's HTTP/1.1 client against hostile or unusual servers: a chunk size that is not hex
digits (a negative one read everything to the connection's end, whatever the limit), and the Host
header of an IPv6 server (its address in brackets)."""

from __future__ import annotations

import socket
import threading
from typing import Callable

import pytest

from infosvc_agents.http1 import Connection, Deadline, ProtocolError, host_header
from infosvc_agents.push import PushError, Sender

ACK = b'{"host":"h.example.org"}'


class OneShotServer:
    """Reads one request's head, keeps it, writes `answer(request)` and closes; on `family`'s loopback."""

    def __init__(self, answer: Callable[[bytes], bytes], family: socket.AddressFamily = socket.AF_INET) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        host = "::1" if family == socket.AF_INET6 else "127.0.0.1"
        self._listener = socket.create_server((host, 0), family=family)
        self.host, self.port = host, self._listener.getsockname()[1]
        self.url = f"http://[{host}]:{self.port}" if family == socket.AF_INET6 else f"http://{host}:{self.port}"
        threading.Thread(target=self._serve, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                head = b""
                try:
                    while b"\r\n\r\n" not in head:
                        more = conn.recv(4096)
                        if not more:
                            break
                        head += more
                    self.requests.append(head)
                    conn.sendall(self.answer(head))
                except OSError:
                    pass


def _connection(port: int) -> Connection:
    deadline = Deadline(5.0, 10.0)
    deadline.start()
    return Connection("127.0.0.1", port, deadline)


def _chunked(size_line: bytes, then: bytes) -> Callable[[bytes], bytes]:
    return lambda _request: (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                             + size_line + b"\r\n" + then)


@pytest.mark.parametrize("size_line", [b"-1", b"-0", b"+10", b"0x10", b"1_0", b" 10", b"\xd9\xa1",
                                       b"11111111111111111", b"", b";ext"])
def test_a_chunk_size_that_is_not_hex_digits_is_refused(size_line: bytes) -> None:
    # 1 MiB after the size: read to its end, a negative size would ignore the 4 KiB limit.
    server = OneShotServer(_chunked(size_line, b"x" * (1 << 20)))
    try:
        connection = _connection(server.port)
        with pytest.raises(ProtocolError):
            connection.exchange("GET", "/x", {}, None, 4096)
        assert connection.sock is None  # closed
    finally:
        server.close()


def test_a_negative_chunk_size_through_the_sender_is_a_delivery_failure_within_the_limit() -> None:
    server = OneShotServer(_chunked(b"-1", b"x" * (1 << 20)))
    try:
        with pytest.raises(PushError) as failure:
            Sender(server.url, "t", timeout=5.0).call("GET", "/x", limit=4096)
        assert failure.value.retry
    finally:
        server.close()


@pytest.mark.parametrize("size_line", [b"18", b"18;name=value", b"18 ;name", b"0000000000000018", b"0018"])
def test_hex_chunk_sizes_with_or_without_extensions_are_read(size_line: bytes) -> None:
    body = ACK  # 24 bytes: 0x18
    server = OneShotServer(_chunked(size_line, body + b"\r\n0\r\n\r\n"))
    try:
        answer = _connection(server.port).exchange("GET", "/x", {}, None, 4096)
        assert answer.body == body
    finally:
        server.close()


def test_a_chunk_over_the_limit_is_cut_at_the_limit() -> None:
    server = OneShotServer(_chunked(b"FFFFFFFFFFFFFFFF", b"y" * 10000))
    try:
        answer = _connection(server.port).exchange("GET", "/x", {}, None, 4096)
        assert answer.body == b"y" * 4096 and not answer.reusable
    finally:
        server.close()


@pytest.mark.parametrize(("host", "port", "expected"), [
    ("::1", 8080, "[::1]:8080"),
    ("fe80::1", 443, "[fe80::1]:443"),
    ("127.0.0.1", 8080, "127.0.0.1:8080"),
    ("head.example.org", 80, "head.example.org:80"),
])
def test_host_header(host: str, port: int, expected: str) -> None:
    assert host_header(host, port) == expected


def _has_ipv6_loopback() -> bool:
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback here")
def test_an_ipv6_server_is_sent_its_address_in_brackets() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(ACK), ACK)
    server = OneShotServer(lambda _request: ok, socket.AF_INET6)
    try:
        assert Sender(server.url, "t").call("GET", "/v1/x") == (200, ACK)
        hosts = [line for line in server.requests[0].split(b"\r\n") if line.lower().startswith(b"host:")]
        assert hosts == [b"Host: [::1]:%d" % server.port]
    finally:
        server.close()
