"""The agent's HTTP/1.1 client: one connection to the aggregator, kept between exchanges, every
read and write within what is left of the exchange's deadline.

The standard library's http.client imports ssl and the email package whatever the URL (about 7 MiB
of the agent's resident memory, a third of it); the agent asks one thing of HTTP: POST or GET a
body and read at most a few KiB of the answer. So this is that, over a plain socket, and TLS
(infosvc_agents/tls.py, which imports ssl) only for an https server. Answers are read by
Content-Length, chunked, or to the connection's end; a status line or header that is not HTTP,
too long a line or too many headers is a ProtocolError, which ends the connection.
"""

from __future__ import annotations

import re
import socket
import time
from typing import TYPE_CHECKING, Any, BinaryIO, Final

if TYPE_CHECKING:
    import ssl

#: the longest status or header line read, and the most headers
MAX_LINE: Final = 8192
MAX_HEADERS: Final = 100
#: a chunk's size: hex digits alone (int(..., 16) would also take a sign, "0x", "_" and spaces, and a
#: size of -1 read the answer to the connection's end whatever the limit), at most 64 bits of them
CHUNK_SIZE: Final = re.compile(rb"[0-9A-Fa-f]{1,16}")


def host_header(host: str, port: int) -> str:
    """The Host header's value for host:port: an IPv6 address in brackets, as in its URL."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ProtocolError(OSError):
    """The answer is not HTTP/1.x as this client reads it."""


class Deadline:
    """When the exchange under way must have ended (monotonic seconds), and the bound of each read
    and write; shared by a connection and its socket."""

    __slots__ = ("at", "each", "whole")

    def __init__(self, each: float, whole: float) -> None:
        self.at = 0.0
        self.each = each
        self.whole = whole

    def start(self) -> None:
        self.at = time.monotonic() + self.whole

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the exchange took longer than {self.whole:g} s")
        return min(self.each, left)


class DeadlineSocket(socket.socket):
    """A socket whose every read and write waits at most what is left of the exchange's deadline:
    no watchdog thread per exchange."""

    deadline: Deadline

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self.settimeout(self.deadline.left())
        return super().recv_into(buffer, nbytes, flags)

    def sendall(self, data: Any, flags: int = 0) -> None:
        self.settimeout(self.deadline.left())
        super().sendall(data, flags)


def connect(host: str, port: int, deadline: Deadline) -> DeadlineSocket:
    """socket.create_connection, each address tried within what is left of the deadline."""
    error: OSError | None = None
    for family, kind, proto, _, address in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = DeadlineSocket(family, kind, proto)
        sock.deadline = deadline
        try:
            sock.settimeout(deadline.left())
            sock.connect(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error if error is not None else OSError(f"no address for {host}")


class Answer:
    """What came back: the status, the headers (names in lower case), at most `limit` bytes of
    the body, and whether the connection can carry another exchange."""

    __slots__ = ("status", "headers", "body", "reusable")

    def __init__(self, status: int, headers: dict[str, str], body: bytes, reusable: bool) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.reusable = reusable


class Connection:
    """One HTTP/1.1 connection to host:port (over TLS with `context`), opened at the first
    exchange; `exchange` raises OSError (ProtocolError, TimeoutError, a reset) when it fails, and
    the connection is then closed."""

    def __init__(self, host: str, port: int, deadline: Deadline, context: "ssl.SSLContext | None" = None) -> None:
        self.host, self.port, self.deadline, self.context = host, port, deadline, context
        self.sock: socket.socket | None = None
        self._reader: BinaryIO | None = None
        #: exchanges this connection carried (0: new)
        self.used = 0

    def open(self) -> None:
        sock: socket.socket = connect(self.host, self.port, self.deadline)
        if self.context is not None:
            from infosvc_agents.tls import wrap

            sock = wrap(sock, self.context, self.host, self.deadline)
        self.sock = sock
        self._reader = sock.makefile("rb")

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        if self.sock is not None:
            self.sock.close()
        self.sock = self._reader = None

    def exchange(self, method: str, target: str, headers: dict[str, str], body: bytes | None,
                 limit: int) -> Answer:
        try:
            if self.sock is None:
                self.open()
            assert self.sock is not None and self._reader is not None
            head = [f"{method} {target} HTTP/1.1", f"Host: {host_header(self.host, self.port)}",
                    "Accept-Encoding: identity",
                    *(f"{name}: {value}" for name, value in headers.items())]
            if body is not None:
                head.append(f"Content-Length: {len(body)}")
            request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
            self.sock.sendall(request + body if body is not None and len(body) < 65536 else request)
            if body is not None and len(body) >= 65536:
                self.sock.sendall(body)
            answer = self._answer(self._reader, limit)
        except BaseException:
            self.close()
            raise
        self.used += 1
        if not answer.reusable:
            self.close()
        return answer

    @staticmethod
    def _answer(reader: BinaryIO, limit: int) -> Answer:
        while True:
            status, version, headers = _head(reader)
            if status >= 200:
                break  # 1xx: an interim answer, the real one follows
        reusable = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        encoding = headers.get("transfer-encoding", "").lower()
        if encoding:
            if encoding != "chunked":
                raise ProtocolError(f"answer in an unknown transfer encoding {encoding[:40]!r}")
            body, whole = _chunked(reader, limit)
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                raise ProtocolError("answer with an unreadable Content-Length") from None
            if length < 0:
                raise ProtocolError("answer with a negative Content-Length")
            body = reader.read(min(length, limit))
            if len(body) < min(length, limit):
                raise ProtocolError("answer cut short")
            whole = length <= limit
        else:  # to the connection's end
            body, whole, reusable = reader.read(limit), False, False
        return Answer(status, headers, body, reusable and whole)


def _line(reader: BinaryIO) -> bytes:
    line = reader.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise ProtocolError("answer line too long")
    if not line:
        raise ConnectionResetError("the server closed the connection without an answer")
    return line


def _head(reader: BinaryIO) -> tuple[int, str, dict[str, str]]:
    words = _line(reader).decode("latin-1").split(None, 2)
    if len(words) < 2 or not words[0].startswith("HTTP/1.") or not (words[1].isdigit() and len(words[1]) == 3):
        raise ProtocolError(f"not an HTTP answer: {' '.join(words)[:60]!r}")
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        line = _line(reader)
        if line in (b"\r\n", b"\n"):
            return int(words[1]), words[0], headers
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon or not name or name != name.strip():
            raise ProtocolError(f"not an HTTP header: {line[:60]!r}")
        headers[name.lower()] = value.strip()
    raise ProtocolError("too many headers in the answer")


def _chunked(reader: BinaryIO, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of a chunked body, and whether that is all of it (read to its end)."""
    parts: list[bytes] = []
    size = 0
    while True:
        # chunk-size [ BWS ";" chunk-ext ] CRLF: the extensions are ignored
        size_field = _line(reader).split(b";", 1)[0].rstrip(b" \t\r\n")
        if not CHUNK_SIZE.fullmatch(size_field):
            raise ProtocolError(f"unreadable chunk size {size_field[:40]!r}")
        length = int(size_field, 16)
        if length == 0:
            while _line(reader) not in (b"\r\n", b"\n"):  # the trailer
                pass
            return b"".join(parts), True
        if size + length > limit:
            parts.append(reader.read(limit - size))
            return b"".join(parts), False
        chunk = reader.read(length)
        if len(chunk) < length:
            raise ProtocolError("answer cut short")
        parts.append(chunk)
        size += length
        _line(reader)  # the chunk's CRLF
