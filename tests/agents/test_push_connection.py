"""The push loop's connection: kept between samples while the interval is short, dropped before a
long wait, replaced once when the server closed it meanwhile; and the exchange's deadline kept
without a watchdog thread. Against a small HTTP/1.1 server on loopback that counts connections
and requests, and can close a connection after some answers or answer a byte at a time."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from infosvc_agents import push
from infosvc_agents.push import PushError, PushLoop, Sender

ANSWER = b'{"host":"h.example.org","state":"Ready"}'


class CountingServer:
    """Answers every POST with the aggregator's acknowledgement, keeping the connection unless
    `answers_per_connection` were given on it (then it closes it, without a word, as an idle
    timeout does). `trickle` sends each answer a byte every `trickle` seconds."""

    def __init__(self, answers_per_connection: int | None = None, trickle: float | None = None) -> None:
        self.answers_per_connection = answers_per_connection
        self.trickle = trickle
        self.connections = 0
        self.requests: list[bytes] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        answered = 0
        try:
            while True:
                line = reader.readline()
                if not line:
                    return
                length = 0
                while (header := reader.readline()) not in (b"\r\n", b""):
                    name, _, value = header.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = reader.read(length)
                with self._lock:
                    self.requests.append(body)
                whole = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
                    len(ANSWER), ANSWER)
                if self.trickle is not None:
                    for byte in whole:
                        conn.sendall(bytes([byte]))
                        time.sleep(self.trickle)
                else:
                    conn.sendall(whole)
                answered += 1
                if self.answers_per_connection is not None and answered >= self.answers_per_connection:
                    return
        except OSError:
            return
        finally:
            reader.close()
            conn.close()


@pytest.fixture
def server_factory():  # type: ignore[no-untyped-def]
    made: list[CountingServer] = []

    def make(**kwargs: object) -> CountingServer:
        made.append(CountingServer(**kwargs))  # type: ignore[arg-type]
        return made[-1]

    yield make
    for server in made:
        server.close()


def numbered() -> object:
    count = iter(range(1_000_000))
    return lambda: b"<sample %d/>" % next(count)


def test_a_short_interval_keeps_one_connection(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory()
    loop = PushLoop(numbered(), Sender(server.url, "t", timeout=5), interval=0.005, jitter=0.0)  # type: ignore[arg-type]
    loop.run(samples=30)
    assert (loop.delivered, loop.dropped, loop.refused) == (30, 0, 0)
    assert len(server.requests) == 30
    assert server.connections == 1


def test_a_long_interval_drops_the_connection_after_each_exchange(server_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(push, "KEEP_CONNECTION_BELOW", 0.0)  # every wait a long one
    server = server_factory()
    loop = PushLoop(numbered(), Sender(server.url, "t", timeout=5), interval=0.005, jitter=0.0)  # type: ignore[arg-type]
    loop.run(samples=10)
    assert loop.delivered == 10
    assert server.connections == 10


def test_a_connection_the_server_closed_is_replaced_and_nothing_is_sent_twice(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory(answers_per_connection=3)
    loop = PushLoop(numbered(), Sender(server.url, "t", timeout=5), interval=0.005, jitter=0.0)  # type: ignore[arg-type]
    loop.run(samples=20)
    assert (loop.delivered, loop.dropped, loop.refused, len(loop.kept)) == (20, 0, 0, 0)
    assert server.requests == [b"<sample %d/>" % i for i in range(20)]  # each once, in order
    assert server.connections == 7  # ceil(20 / 3): a new one only when the server had closed the last


def test_the_exchange_deadline_needs_no_thread(server_factory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A server answering a byte at a time, each well within the per-read timeout, is cut at
    DEADLINES timeouts; and no thread is started for it (the old watchdog was one per send)."""
    server = server_factory(trickle=0.05)
    sender = Sender(server.url, "t", timeout=0.3, keep_alive=True)

    start, sending = threading.Thread.start, threading.current_thread()

    def no_threads(self: threading.Thread) -> None:
        if threading.current_thread() is sending:
            raise AssertionError(f"a thread was started for the exchange: {self!r}")
        start(self)  # the server's own

    monkeypatch.setattr(threading.Thread, "start", no_threads)
    started = time.monotonic()
    with pytest.raises(PushError) as refused:
        sender.send(b"<sample/>")
    took = time.monotonic() - started
    assert refused.value.retry
    assert push.DEADLINES * 0.3 - 0.05 <= took < push.DEADLINES * 0.3 + 1.0
    # a failed exchange leaves no connection to be reused half read
    assert sender._connection is None


def test_a_sender_not_asked_to_keep_its_connection_does_not(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory()
    sender = Sender(server.url, "t", timeout=5)
    for _ in range(3):
        sender.send(b"<sample/>")
    assert server.connections == 3
