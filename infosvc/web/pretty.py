"""Every JSON and XML answer ends with a newline, and `?pretty=1` on any route indents it for a
person reading it in a terminal: the outermost middleware, after errors have become answers, so
refusals are readable too. Indenting re-reads our own answer (XML through safexml); a large one
is joined and indented in a worker thread, one at a time (`Turns`), and a large answer that lacks
its newline is written with it (`Joined`), not copied: nothing large is copied on the event loop.

Large answers are written a slice at a time (`InSlices`, `Joined`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.payload import Payload

from infosvc.codec.xmltext import indented
from infosvc.publish.glue import Parts
from infosvc.hosts import QueryError
from infosvc.web.errors import HttpError, refusal
from infosvc.web.turns import Turns
from infosvc.web.keys import INDENTS, known

#: the query parameter every route that answers JSON or XML takes
PRETTY = "pretty"
#: answers past this are indented in a worker thread
OFF_LOOP_BYTES = 64 * 1024
#: answers past this are written this much at a time (InSlices)
SLICE_BYTES = 1024 * 1024
#: answers past this are not indented (a 400): re-reading an answer holds the interpreter lock, and
#: so the event loop, whatever thread does it, some 20 ms a MB at a stretch (lxml's parse and its
#: indent, json.loads): a top level's union of 37 MB held the loop 0.25-0.5 s per `?pretty=1`
PRETTY_MAX_BYTES = 2 << 20
#: large answers waiting to be indented, past the one being indented (a 503 past them)
INDENTS_WAITING = 4
_YES, _NO = ("1", "true", "yes"), ("0", "false", "no", "")
_XML = ("application/xml", "text/xml")


def _indent(body: bytes, xml: bool) -> bytes:
    if xml:
        return indented(body)
    return json.dumps(json.loads(body), indent=2, ensure_ascii=False).encode() + b"\n"


def filters_of(request: web.Request, *also: str) -> list[tuple[str, str]]:
    """The query's items but `pretty` (and `also`): what a route's own parameters are read from."""
    return [(key, value) for key, value in request.query.items() if key != PRETTY and key not in also]


def wants_pretty(request: web.Request) -> bool:
    values = request.query.getall(PRETTY, [])
    if not values:
        return False
    if len(values) > 1:  # else `?pretty=&pretty=banana` passed, only the first value read
        raise QueryError(PRETTY, "given once: 1 or 0 (true or false)")
    value = values[0]
    if value.lower() in _YES:
        return True
    if value.lower() in _NO:
        return False
    raise QueryError(PRETTY, "1 or 0 (true or false)")


def _pretty_asked(request: web.Request) -> bool:
    try:
        return wants_pretty(request)
    except QueryError:
        return False  # the route's own check answers 400 for it; an error answer is left as it is


class InSlices(Payload):
    """A large answer written a slice at a time, each awaited: written whole, asyncio's transport
    copies what the socket did not take at once (on Python 3.11, 99 MB of a top level's union held
    the loop ~30 ms per read), and the loop waits for nothing between the slices."""

    _value: bytes

    def __init__(self, value: bytes, content_type: str) -> None:
        super().__init__(value, content_type=content_type)
        self._size = len(value)

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self._value.decode(encoding, errors)

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(self, writer: AbstractStreamWriter, content_length: int | None) -> None:
        view = memoryview(self._value)[:content_length]
        for start in range(0, len(view), SLICE_BYTES):
            await writer.write(view[start:start + SLICE_BYTES])


class Joined(Payload):
    """An answer made of parts already in memory (each host's cached rendering, issue 27), written
    a slice of parts at a time and never joined into one body: GET /v1/nodes of 10,000 hosts held
    a 64 MB body, and a copy for its newline, while it was answered. Its size is the parts' sum
    (counted where they were made, for `Parts`), so Content-Length is exact; `?pretty=1` joins it
    (`joined`) in the worker thread that indents it."""

    _value: list[bytes]

    def __init__(self, parts: list[bytes], content_type: str) -> None:
        super().__init__(parts, content_type=content_type)
        self._total = parts.size if isinstance(parts, Parts) else sum(map(len, parts))
        self._size = self._total

    @property
    def size(self) -> int:
        return self._total

    def joined(self) -> bytes:
        return b"".join(self._value)

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.joined().decode(encoding, errors)

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(self, writer: AbstractStreamWriter, content_length: int | None) -> None:
        left = self._total if content_length is None else min(content_length, self._total)
        batch: list[bytes | memoryview] = []
        size = 0
        for whole in self._value:
            if left <= 0:
                break
            part: bytes | memoryview = memoryview(whole)[:left] if len(whole) > left else whole
            left -= len(part)
            if len(part) >= SLICE_BYTES:
                # a part of its own past a slice (an answer given its newline): written a slice at
                # a time, as InSlices writes one, never joined
                if batch:
                    await writer.write(b"".join(batch))
                    batch, size = [], 0
                view = memoryview(part)
                for start in range(0, len(view), SLICE_BYTES):
                    await writer.write(view[start:start + SLICE_BYTES])
                continue
            batch.append(part)
            size += len(part)
            if size >= SLICE_BYTES:
                await writer.write(b"".join(batch))
                batch, size = [], 0
        if batch:
            await writer.write(b"".join(batch))


def _in_slices(response: web.Response) -> web.Response:
    body = response.body
    if isinstance(body, bytes) and len(body) > SLICE_BYTES:
        response.body = InSlices(body, response.headers.get("Content-Type", "application/octet-stream"))
    return response


@web.middleware
async def readable(request: web.Request,
                   handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    response = await handler(request)
    if not isinstance(response, web.Response):
        return response
    body = response.body
    xml = response.content_type in _XML
    text = xml or response.content_type == "application/json"
    if isinstance(body, Joined):
        if not text or not _pretty_asked(request):
            return response  # written as it is, its newline its own
    elif not isinstance(body, bytes) or not body:
        return response
    elif not text:
        return _in_slices(response)
    elif not _pretty_asked(request):
        if not body.endswith(b"\n"):
            # The large documents (GLUE trees, a top level's union) are mostly rendered with their
            # newline; one that is not (GLUE 2.0 JSON) is written followed by it, not copied.
            response.body = (body + b"\n" if len(body) <= OFF_LOOP_BYTES
                             else Joined([body, b"\n"], response.content_type))
        return _in_slices(response)
    # this middleware is outside the one that makes refusals answers: it makes its own
    try:
        response.body = await _indented(request, body, xml)
    except (QueryError, HttpError) as exc:
        answer = refusal(exc)
        assert isinstance(answer.body, bytes)
        answer.body = _indent(answer.body, False)  # indented, as asked
        return answer
    return _in_slices(response)


async def _indented(request: web.Request, body: bytes | Joined, xml: bool) -> bytes:
    """The answer indented: on the event loop when it is small, else joined and indented in a
    worker thread in its turn (INDENTS): each is a parse of the answer and a copy or two of it.
    QueryError past PRETTY_MAX_BYTES."""
    size = body.size if isinstance(body, Joined) else len(body)
    whole = body.joined if isinstance(body, Joined) else (lambda: body)
    if size <= OFF_LOOP_BYTES:
        return _indent(whole(), xml)
    if size > PRETTY_MAX_BYTES:
        raise QueryError(PRETTY, f"answers past {PRETTY_MAX_BYTES >> 20} MiB are not indented (this one is "
                         f"{size:,} bytes)", hint="ask without pretty, or for fewer hosts")
    turns = request.app.get(INDENTS)
    if turns is None:  # an app made without make_app (a test's)
        return await asyncio.to_thread(lambda: _indent(whole(), xml))
    return await turns.run(lambda: _indent(whole(), xml), known=known(request))


def compact_json(data: Any, status: int = 200) -> web.Response:
    """An answer of `data` as compact JSON (no spaces): what the job routes answer."""
    return web.json_response(data, status=status, dumps=lambda value: json.dumps(value, separators=(",", ":")))
