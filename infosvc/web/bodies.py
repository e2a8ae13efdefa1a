"""Reading a request's body: bounded in size (413, before a byte is read when the client announces
more) and in time (408), a broken one refused (400)."""

from __future__ import annotations

import asyncio
from typing import Callable

from aiohttp import web

from infosvc.config import ServiceConfig
from infosvc.web.errors import HttpError

#: Told the reason a body was refused (the report routes count them): "too_large", "timeout", "invalid".
OnRefusal = Callable[[str], None]


def _ignore(reason: str) -> None:
    pass


def refuse_announced_size(request: web.Request, service: ServiceConfig, on_refusal: OnRefusal = _ignore) -> None:
    """413 before reading when the client says the body is larger than the limit."""
    limit = service.max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        on_refusal("too_large")
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=request.content_length)


async def read_body(request: web.Request, service: ServiceConfig, on_refusal: OnRefusal = _ignore) -> bytes:
    """The request's body, refused when larger than the limit (413), not all there within the
    body timeout (408), or broken (400)."""
    refuse_announced_size(request, service, on_refusal)
    try:
        # asyncio.timeout, not wait_for: no task and no extra loop round per request.
        async with asyncio.timeout(service.body_timeout_seconds):
            return await request.read()
    except TimeoutError:
        on_refusal("timeout")
        raise HttpError(408, "request body not received in time",
                        f"the whole body must arrive within {service.body_timeout_seconds} s") from None
    except web.HTTPRequestEntityTooLarge:
        on_refusal("too_large")
        raise
    except web.RequestPayloadError as exc:  # broken compression, or framing the parser let through
        on_refusal("invalid")
        raise HttpError(400, "request body could not be read", str(exc).strip()) from None
    except ConnectionResetError:  # the client hung up before the whole body came: no one to answer
        on_refusal("invalid")
        raise HttpError(400, "connection lost before the whole body arrived") from None
