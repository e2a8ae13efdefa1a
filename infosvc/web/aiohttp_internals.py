"""What the service's connection handler (web/connections.py, `GuardedRequestHandler`) needs of
aiohttp beyond its documented API, all here, so that an aiohttp upgrade that changes it breaks
this module's test (tests/web/test_aiohttp_internals.py) rather than the connection policy,
silently. Checked against aiohttp 3.14.

- `RequestHandler._request_in_progress` (a slot, a bool): aiohttp sets it around a request's
  handler and the writing of its answer (web_protocol._handle_request). No public hook says that a
  connection is busy with a request; without it, making room at the cap or a deadline would
  close connections in the middle of a request (`request_in_progress`).
- `web_protocol.ERROR`: the message (method UNKNOWN, HTTP/1.0) aiohttp hands the request factory
  in place of a request it could not parse; answered over HTTP/1.1 like every other answer
  (`answer_malformed_over_http11`). The factory itself is public: `web.Server.request_factory`,
  which each RequestHandler reads when it is made.

The handler's event loop is the one it was made with, kept by the handler itself, not aiohttp's
`RequestHandler._loop`.
"""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import StreamReader, web, web_protocol
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http import HttpVersion11, RawRequestMessage

#: aiohttp's stand-in for a request it could not parse, and the same over HTTP/1.1
ERROR: Final[RawRequestMessage] = web_protocol.ERROR
ERROR_11: Final = ERROR._replace(version=HttpVersion11)


def request_in_progress(handler: web.RequestHandler) -> bool:
    """A request is being handled on the connection: its handler runs, or its answer is being written."""
    return bool(handler._request_in_progress)


def answer_malformed_over_http11(server: web.Server) -> None:
    """Make every handler made from now on for `server` build the request aiohttp could not parse
    as HTTP/1.1 (the answer's status line then says HTTP/1.1, like every other answer's)."""
    make_request = server.request_factory

    def request_factory(message: RawRequestMessage, payload: StreamReader, protocol: web.RequestHandler,
                        writer: AbstractStreamWriter, task: asyncio.Task[None]) -> web.BaseRequest:
        return make_request(ERROR_11 if message is ERROR else message, payload, protocol, writer, task)

    server.request_factory = request_factory
