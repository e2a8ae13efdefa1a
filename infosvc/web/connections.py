"""The service's connections: how many it holds, how long a silent, slow or idle one may stay, and
the JSON answer to requests that are not valid HTTP (docs/security.md).

aiohttp on its own keeps an idle connection for 75 s, lets a client take a whole keep-alive period
to send its request's head, accepts connections until the process has no file descriptor left
(asyncio then logs a traceback for every failed accept(), thousands a second, and /healthz goes
unanswered), and answers a request it cannot parse with plain text over HTTP/1.0 after logging
the request's first bytes at ERROR, an Authorization value among them. Here:

- `Connections` caps the open connections below the open-file limit (`connection_cap`). At the cap
  the longest-idle connection is closed to make room; when every connection is busy with a request,
  a new one is answered 503 (JSON) and closed at once.
- `GuardedRequestHandler`, aiohttp's protocol for one connection, gives a client
  `header_timeout_seconds` to send a request's line and headers (a slowloris is dropped), keeps a
  connection alive between requests for `keepalive_seconds` after a request with a valid token and
  for ANONYMOUS_KEEPALIVE_SECONDS after any other, drops a client that leaves the answer unread for
  `header_timeout_seconds`, and answers aiohttp's own refusals (`describe_protocol_error`) with the
  API's {"error", "detail"} over HTTP/1.1, logged without the request's bytes.
- `LogLimiter` turns a flood of one kind of event (a failing accept(), malformed requests) into a
  line per interval with a count.
- `infosvc.web.server.run` serves an app with all of this, in place of aiohttp's `web.run_app`.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
from collections import OrderedDict
from dataclasses import dataclass
from ssl import SSLContext
from typing import Any, Callable, Final

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web import BaseRequest, RequestHandler

from infosvc.loglimit import LogLimiter
from infosvc.config import ServiceConfig
from infosvc.web.aiohttp_internals import answer_malformed_over_http11, request_in_progress
from infosvc.web.auth import caller_of
from infosvc.web.refusals import NO_ROOM, describe_protocol_error

log = logging.getLogger("infosvc.web.connections")

#: The listening socket's accept queue. asyncio also accepts up to this many connections in one
#: turn of the loop, before any of them can be refused: the file reserve below must cover them.
BACKLOG: Final = 128
#: File descriptors kept free of connections: the SQLite file with its -wal and -shm (twice: the
#: writer and the reader), the log, the event loop, the listening socket, the local agent (64);
#: and at the cap, a burst of BACKLOG connections accepted in one turn of the loop before any can
#: be admitted, plus as many closed to make room for them, whose files are freed a turn later.
RESERVED_FILES: Final = 64 + 2 * BACKLOG
#: How long a connection stays open after an answer, waiting for a next request, when that request
#: carried no valid token (service.keepalive_seconds when it did, if shorter).
ANONYMOUS_KEEPALIVE_SECONDS: Final = 2.0
#: At the cap, how many of the longest-idle connections are looked at for one to close (busy ones
#: are passed over), so that making room costs the same with 100 or 100,000 connections.
EVICTION_SCAN: Final = 64
#: How much the cap drops when accept() fails for want of files although the limit is unchanged.
OUT_OF_FILES_MARGIN: Final = 16


# --- the cap ------------------------------------------------------------------------------------

def raise_open_file_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit where that is allowed; the soft limit.

    Under deploy/infosvc.service LimitNOFILE= sets both, and setrlimit is filtered out anyway
    (SystemCallFilter=~@resources): there this only reads the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.info("cannot raise the open-file limit from %d to %d: %s", soft, hard, exc)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def connection_cap(max_connections: int, open_files: int) -> int:
    """How many connections to hold at once: `max_connections`, less if the open-file limit
    requires, with RESERVED_FILES (at most half the limit) left for everything else."""
    reserve = min(RESERVED_FILES, open_files // 2)
    return max(1, min(max_connections, open_files - reserve))


# --- one connection -----------------------------------------------------------------------------

class GuardedRequestHandler(RequestHandler):
    """aiohttp's protocol for one connection, under the policy of `Connections`.

    The hooks: connection_made / connection_lost / data_received / pause_writing / resume_writing
    (asyncio's protocol), finish_response (called once an answer is written) and handle_error
    (aiohttp's refusals). What it needs of aiohttp beyond its public API (is a request in
    progress: `busy`) is in infosvc/web/aiohttp_internals.py, with the test that checks it is there.

    With `tls`, the listening socket is plain TCP and this handler runs the TLS handshake itself
    (loop.start_tls): a connection counts, and can be closed, from the moment it is accepted; with
    create_server(ssl=...) it would be invisible to `Connections` until its handshake were over.
    """

    def __init__(self, manager: web.Server, connections: Connections, tls: SSLContext | None = None, *,
                 loop: asyncio.AbstractEventLoop, **kwargs: Any) -> None:
        super().__init__(manager, loop=loop, **kwargs)
        self.event_loop = loop
        self.connections = connections
        #: False for a connection accepted when there was no room: it is answered 503 and closed.
        self.admitted = True
        #: True between an answer and the first bytes of the next request.
        self.kept_alive = False
        #: closed by `drop` (to make room, or past a deadline)
        self.dropped = False
        self._tls = tls
        #: over TLS, the TCP connection under it (the only transport there is during the handshake)
        self._tcp: asyncio.Transport | None = None
        self._handshake: asyncio.Task[None] | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._stall: asyncio.TimerHandle | None = None

    @property
    def busy(self) -> bool:
        """A request is being handled: its handler runs, or its answer is being written."""
        return request_in_progress(self)

    # asyncio's protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        if self._tls is not None and self._tcp is None:  # accepted: the handshake comes first
            self.connections.accepted(self)
            if not self.admitted:
                transport.abort()
                return
            self._tcp = transport
            self.connections.opened(self)
            self._arm(self.connections.header_timeout)  # for the handshake and the request's head
            self._handshake = self.event_loop.create_task(self._start_tls(transport, self._tls))
            return
        if self._tls is None:
            self.connections.accepted(self)
            if not self.admitted:
                transport.write(NO_ROOM)
                transport.close()
                return
            self.connections.opened(self)
            self._arm(self.connections.header_timeout)
        super().connection_made(transport)

    async def _start_tls(self, tcp: asyncio.Transport, context: SSLContext) -> None:
        timeout = self.connections.header_timeout
        tls = None
        try:
            if not tcp.is_closing():  # the client may have left already
                tls = await self.event_loop.start_tls(tcp, self, context, server_side=True,
                                                 ssl_handshake_timeout=timeout, ssl_shutdown_timeout=timeout)
        except (OSError, asyncio.TimeoutError):  # a failed handshake (ssl.SSLError), or the client left
            pass
        finally:
            self._handshake = None
        if tls is None or self.dropped:  # failed, or closed meanwhile (to make room, or timed out)
            tcp.abort()
            self._forget()
            return
        self.connection_made(tls)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._forget()
        if self.admitted:
            super().connection_lost(exc)

    def _forget(self) -> None:
        self._disarm()
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        self.connections.closed(self)

    def data_received(self, data: bytes) -> None:
        if self.kept_alive and data:  # the next request begins: its head has header_timeout to arrive
            self.kept_alive = False
            self.connections.touch(self)
            self._arm(self.connections.header_timeout)
        super().data_received(data)

    def pause_writing(self) -> None:
        """The client does not read the answer as fast as it is written: it has header_timeout to resume."""
        super().pause_writing()
        if self._stall is None:
            self._stall = self.event_loop.call_later(self.connections.header_timeout, self._stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None

    # aiohttp's hooks

    async def finish_response(self, request: BaseRequest, resp: web.StreamResponse,
                              start_time: float | None) -> tuple[web.StreamResponse, bool]:
        answered = await super().finish_response(request, resp, start_time)
        self.kept_alive = True
        self.connections.touch(self)
        self._arm(self.connections.keepalive_for(request))
        return answered

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """The answer to a request aiohttp refused (exc: its parser's error), or to a handler's
        exception that the API's middleware let through (status 500 or 504: a bug)."""
        if request.writer.output_size > 0:  # as aiohttp: part of an answer is out, no other can follow
            raise ConnectionError("Response is sent already, cannot send another response with the error message")
        if isinstance(exc, HttpProcessingError):
            status, error, detail = describe_protocol_error(exc, max_field_size=self.max_field_size,
                                                            max_headers=self.max_headers)
            self.connections.logs.info("bad request", "refused a request from %s that is not valid HTTP: %d %s",
                                       request.remote, status, error)
        else:
            log.error("unhandled error in %s %s (aiohttp answered %d)", request.method, request.path, status,
                      exc_info=exc)
            error, detail = "internal error", "this is a bug in infosvc; the log has the details"
        response = web.json_response({"error": error, "detail": detail}, status=status)
        response.force_close()
        return response

    # deadlines

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.event_loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self.busy:  # else finish_response arms the next deadline
            self.drop()

    def _stalled(self) -> None:
        self._stall = None
        if self.transport is not None and self.writing_paused:
            self.connections.logs.info("stalled", "closed a connection from %s: its client stopped reading the answer",
                                       self.peername)
            self.drop()

    def drop(self) -> None:
        """Close now, with whatever was not yet sent: the file descriptor is free at the next turn."""
        self.dropped = True
        transport = self.transport if self.transport is not None else self._tcp
        if transport is not None and not transport.is_closing():
            transport.abort()
        self.force_close()


# --- all connections ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Policy:
    """The settings of service.* that govern connections (docs/configuration.md)."""

    max_connections: int
    keepalive_seconds: float
    header_timeout_seconds: float

    @classmethod
    def of(cls, service: ServiceConfig) -> Policy:
        return cls(service.max_connections, service.keepalive_seconds, service.header_timeout_seconds)


class Connections:
    """Every connection of the server, in order of last activity, under the cap."""

    def __init__(self, policy: Policy, open_files: int | None = None) -> None:
        self.policy = policy
        self.open_files = raise_open_file_limit() if open_files is None else open_files
        self.cap = connection_cap(policy.max_connections, self.open_files)
        if self.cap < policy.max_connections:
            log.warning("serving at most %d connections at once, not service.max_connections = %d: the open-file "
                        "limit is %d (raise LimitNOFILE= to at least %d)", self.cap, policy.max_connections,
                        self.open_files, policy.max_connections + RESERVED_FILES)
        self.header_timeout = policy.header_timeout_seconds
        self.anonymous_keepalive = min(ANONYMOUS_KEEPALIVE_SECONDS, policy.keepalive_seconds)
        self.logs = LogLimiter(log)
        #: open connections, the least recently active first
        self._open: OrderedDict[GuardedRequestHandler, None] = OrderedDict()
        #: connections accepted whose connection_made is still to come (the next turn of the loop),
        #: with when to stop counting them should it never come (asyncio failed to make a transport)
        self._accepted: OrderedDict[GuardedRequestHandler, float] = OrderedDict()
        self._shrunk_at = -float("inf")

    @property
    def count(self) -> int:
        return len(self._open) + len(self._accepted)

    def protocol_factory(self, manager: web.Server, tls: SSLContext | None = None,
                         **handler_args: Any) -> Callable[[], GuardedRequestHandler]:
        """What asyncio calls for each accepted connection: a handler for it, admitted or not.
        `tls`: the connections are TLS (the listening socket is plain TCP: see GuardedRequestHandler)."""
        loop = asyncio.get_running_loop()
        answer_malformed_over_http11(manager)

        def accepted() -> GuardedRequestHandler:
            handler = GuardedRequestHandler(manager, self, tls=tls, loop=loop, **handler_args)
            handler.admitted = self._make_room()
            self._accepted[handler] = loop.time() + 1.0
            return handler

        return accepted

    def keepalive_for(self, request: BaseRequest) -> float:
        """How long to wait for a next request after this one: longer when it came with a valid
        token, as the authorizing middleware found (infosvc/web/auth.py: the token is checked once)."""
        return self.policy.keepalive_seconds if caller_of(request) is not None else self.anonymous_keepalive

    # what the handlers tell

    def accepted(self, handler: GuardedRequestHandler) -> None:
        """connection_made: the handler is past the accept, admitted or not."""
        if self._accepted.pop(handler, None) is not None and not handler.admitted:
            self.logs.warning("no room", "refused a connection: all %d connections are busy with requests", self.cap)

    def opened(self, handler: GuardedRequestHandler) -> None:
        self._open[handler] = None

    def touch(self, handler: GuardedRequestHandler) -> None:
        if handler in self._open:
            self._open.move_to_end(handler)

    def closed(self, handler: GuardedRequestHandler) -> None:
        self._open.pop(handler, None)

    # making room

    def _make_room(self) -> bool:
        """Room for one more connection, made by closing the longest-idle ones; False if there is none.

        The longest idle: an open connection not busy with a request, the least recently active
        first; else, in a burst of connections accepted in one turn of the loop (asyncio accepts up to
        BACKLOG at once), the first of those, which is then refused when its connection_made comes."""
        self._forget_accepted()
        while self.count >= self.cap:
            idle = self._longest_idle()
            if idle is not None:
                self._open.pop(idle)
                idle.drop()
            elif self._accepted:
                idle, _ = self._accepted.popitem(last=False)
                idle.admitted = False
            else:
                return False
            self.logs.info("closed idle", "at the cap of %d connections: closed the longest-idle one to make room",
                           self.cap)
        return True

    def _longest_idle(self) -> GuardedRequestHandler | None:
        for _ in range(min(EVICTION_SCAN, len(self._open))):
            handler = next(iter(self._open))
            if not handler.busy:
                return handler
            self._open.move_to_end(handler)  # busy: it is active, not idle
        return None

    def _forget_accepted(self) -> None:
        """Accepted connections that never reached connection_made."""
        now = asyncio.get_running_loop().time()
        while self._accepted:
            handler, until = next(iter(self._accepted.items()))
            if until > now:
                break
            del self._accepted[handler]

    # accept() failing

    def loop_exception_handler(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """asyncio's exception handler, but a failing accept() is a line per LOG_INTERVAL_SECONDS and
        lowers the cap; everything else goes to asyncio's default handler."""
        exc = context.get("exception")
        message = str(context.get("message", ""))
        if message == "socket.accept() out of system resource" and isinstance(exc, OSError):
            self.out_of_files(loop.time(), exc)
        elif isinstance(exc, ValueError) and "_start_serving" in message:
            # asyncio retries accept() a second after such a failure, once per failed attempt; a retry
            # due after the listening socket was closed (at shutdown) fails on its file descriptor, -1.
            pass
        else:
            loop.default_exception_handler(context)

    def out_of_files(self, now: float, exc: OSError) -> None:
        """accept() failed: asyncio stops accepting for a second (selector_events._accept_connection),
        after trying up to BACKLOG times, so this comes in bursts. Once a second at most, the cap is
        taken again from the open-file limit, which may have been lowered; if it has not, something
        else holds files, and the cap drops by OUT_OF_FILES_MARGIN. Idle connections make room."""
        if exc.errno in (errno.EMFILE, errno.ENFILE) and now - self._shrunk_at >= 1.0:
            self._shrunk_at = now
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            cap = connection_cap(self.policy.max_connections, soft if soft != resource.RLIM_INFINITY else 1 << 20)
            self.cap = max(1, min(cap, self.cap - OUT_OF_FILES_MARGIN))
            self._make_room()
        self.logs.warning("accept", "cannot accept connections: %s; %d open, the cap is now %d",
                          exc.strerror or exc, self.count, self.cap)
