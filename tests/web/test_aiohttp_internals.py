"""What the connection handler needs of aiohttp beyond its public API (infosvc/web/aiohttp_internals.py),
checked on the installed aiohttp: an upgrade that renames, removes or retypes any of it fails here,
loudly, rather than leaving every connection looking idle or an override never called."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from aiohttp import web, web_protocol
from aiohttp.http import HttpVersion10, HttpVersion11, RawRequestMessage

from infosvc.web import aiohttp_internals
from infosvc.web.connections import Connections, GuardedRequestHandler, Policy

#: the hooks of aiohttp's RequestHandler (and asyncio's protocol) GuardedRequestHandler overrides
HOOKS = {"__init__", "connection_made", "connection_lost", "data_received", "pause_writing", "resume_writing",
         "finish_response", "handle_error"}


def slots_of(cls: type) -> set[str]:
    return {name for klass in cls.__mro__ for name in getattr(klass, "__slots__", ())}


async def handler_of(server: web.Server) -> GuardedRequestHandler:
    connections = Connections(Policy(100, 5.0, 5.0), open_files=4096)
    return GuardedRequestHandler(server, connections, loop=asyncio.get_running_loop())


async def _ok(request: web.BaseRequest) -> web.StreamResponse:
    return web.Response()


def test_a_request_in_progress_is_a_bool_slot_of_the_request_handler() -> None:
    async def check() -> None:
        handler = await handler_of(web.Server(_ok))
        assert handler._request_in_progress is False and aiohttp_internals.request_in_progress(handler) is False
        handler._request_in_progress = True  # as aiohttp sets it around a request
        assert handler.busy

    assert "_request_in_progress" in slots_of(web.RequestHandler)
    asyncio.run(check())


def test_an_unparsable_request_is_the_error_message_and_is_made_http11_through_the_public_factory() -> None:
    error = web_protocol.ERROR
    assert isinstance(error, RawRequestMessage) and error.method == "UNKNOWN" and error.version == HttpVersion10
    assert (aiohttp_internals.ERROR_11.method, aiohttp_internals.ERROR_11.version) == ("UNKNOWN", HttpVersion11)
    made: list[RawRequestMessage] = []

    async def check() -> None:
        server = web.Server(_ok)
        server.request_factory = lambda message, *rest: made.append(message)  # type: ignore[assignment,return-value]
        aiohttp_internals.answer_malformed_over_http11(server)
        handler = await handler_of(server)
        # a handler takes the server's factory when it is made
        assert handler._request_factory is server.request_factory
        args: list[Any] = [None] * 4
        server.request_factory(error, *args)
        server.request_factory(error._replace(method="GET"), *args)

    asyncio.run(check())
    assert [(m.method, m.version) for m in made] == [("UNKNOWN", HttpVersion11), ("GET", HttpVersion10)]


def test_every_hook_overridden_is_still_aiohttps_with_the_same_parameters() -> None:
    overridden = {name for name, value in vars(GuardedRequestHandler).items()
                  if callable(value) and hasattr(web.RequestHandler, name)}
    assert overridden == HOOKS
    for name in ("finish_response", "handle_error", "data_received", "connection_made", "connection_lost"):
        ours = list(inspect.signature(getattr(GuardedRequestHandler, name)).parameters)
        theirs = list(inspect.signature(getattr(web.RequestHandler, name)).parameters)
        assert ours == theirs, name
    assert "loop" in inspect.signature(web.RequestHandler.__init__).parameters


def test_the_handlers_own_attributes_shadow_none_of_aiohttps() -> None:
    async def own() -> set[str]:
        return set(vars(await handler_of(web.Server(_ok))))

    names = asyncio.run(own())
    assert "event_loop" in names and not names & slots_of(web.RequestHandler)
