"""Every refusal as the API's JSON error, {"error": ..., "detail": ...}, with its status: the site's
refusals by kind, bad documents and parameters, the store's failures, and refusals of the HTTP
layer itself (`HttpError`). A 5xx other than the store's is a bug, and is logged."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import Any, Awaitable, Callable

from aiohttp import web

from infosvc.errors import MESSAGE_CHARS, DocumentError, excerpt
from infosvc.loglimit import LogLimiter
from infosvc.errors import Conflict, Forbidden, Invalid, NotFound, Refused, TooLarge, Unavailable
from infosvc.hosts import QueryError
from infosvc.store import StoreCorrupt, StoreError

log = logging.getLogger("infosvc.web")
#: A write refused by the store (a full disk) is one line per route per interval: a client can
#: repeat it at will, and the store has logged why.
store_refusals = LogLimiter(log)

#: The status of each kind of the site's refusals.
STATUS_OF: dict[type[Refused], int] = {Forbidden: 403, NotFound: 404, Invalid: 400, Conflict: 409, Unavailable: 503,
                                       TooLarge: 413}


class HttpError(Refused):
    """A refusal of the HTTP layer's own, with its status: no token (401), a body too large (413)
    or too slow (408), too much under way (503)."""

    def __init__(self, status: int, message: str, detail: str | None = None) -> None:
        super().__init__(message, detail)
        self.status = status


def status_of(exc: Refused) -> int:
    if isinstance(exc, HttpError):
        return exc.status
    return next(status for kind, status in STATUS_OF.items() if isinstance(exc, kind))


def error_body(status: int, error: str, detail: Any = None) -> web.Response:
    """The JSON error answer; its texts cut to MESSAGE_CHARS, whatever input they quote."""
    if isinstance(detail, str):
        detail = excerpt(detail, MESSAGE_CHARS)
    return web.json_response({"error": excerpt(error, MESSAGE_CHARS), "detail": detail}, status=status)


def refusal(exc: Refused | QueryError) -> web.Response:
    """The answer to a refusal of the site's or of a parameter: its status, its JSON, and for a 503
    of the HTTP layer's (too much under way) a Retry-After."""
    if isinstance(exc, QueryError):
        return error_body(400, str(exc), exc.detail())
    response = error_body(status_of(exc), exc.message, exc.detail)
    if isinstance(exc, HttpError) and exc.status == 503:
        response.headers["Retry-After"] = "1"
    return response


@web.middleware
async def errors_as_json(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    try:
        return await handler(request)
    except Refused as exc:
        return refusal(exc)
    except DocumentError as exc:
        return web.json_response(exc.as_json(), status=400)
    except QueryError as exc:
        return refusal(exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = error_body(exc.status, exc.reason,
                              exc.text if exc.text and exc.text != f"{exc.status}: {exc.reason}" else None)
        if "Allow" in exc.headers:  # a 405 names the methods the resource has (RFC 9110)
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except asyncio.CancelledError:
        raise
    except StoreCorrupt:
        # The file is damaged: trying again will not mend it, so not a 503 with Retry-After (agents
        # would retry for ever). The store has logged it, naming the file, once a minute at most.
        return error_body(500, "store damaged",
                          "the server's database is damaged; its operator must restore it from a backup")
    except (StoreError, sqlite3.Error) as exc:
        # The disk is full or the file is locked: nothing was kept, and the sender may try again.
        route = request.match_info.route.resource
        where = f"{request.method} {route.canonical if route is not None else request.path}"
        store_refusals.error(where, "store unavailable in %s: %s", where, exc)
        response = error_body(503, "store unavailable", "nothing was stored; try again later")
        response.headers["Retry-After"] = "5"
        return response
    except Exception:
        log.exception("unhandled error in %s %s", request.method, request.path)
        return error_body(500, "internal error", "this is a bug in infosvc; the log has the details")
