"""The service's start: it answers at once, and reads its hosts meanwhile.

Reading a large site's hosts takes seconds (a crash leaves no snapshot: every report parsed
again), so the server listens before they are read: the routes open to all that need no host
(health, the API's description, the web page's files) answer at once, and every other request
waits until the hosts are read, then is answered as usual, whole. A request that would wait past
`OPENING_WAIT_SECONDS` is a 503 with Retry-After. GET /healthz says "starting" meanwhile, with
how many hosts are read so far.
"""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import web

from infosvc.web.errors import HttpError

#: set once the hosts are read and the queue, the GLUE renderings and the sweeper are running
OPEN = web.AppKey("open", asyncio.Event)
#: the start's task (web/app.py's _open): a failure of it is the service's failure, said by /healthz
OPENING: web.AppKey["asyncio.Task[None]"] = web.AppKey("opening")
#: the longest a request waits for the start before a 503
OPENING_WAIT_SECONDS: Final = 30.0


def start_failure(app: web.Application) -> str | None:
    """Why the start failed (the hosts could not be read), or None."""
    opening = app[OPENING]
    if opening.done() and not opening.cancelled() and (error := opening.exception()) is not None:
        return f"the start failed: {type(error).__name__}: {error}"
    return None


async def until_open(request: web.Request, public: bool) -> None:
    """Hold a request that needs the hosts until they are read (see the module's docstring).
    The authorizing middleware calls it once the route's access is checked: a middleware of its
    own would be one more layer for every request, the reports' included."""
    opened = request.app[OPEN]
    if opened.is_set() or public:  # a route open to all needs no host (health, the API's description, the page)
        return
    waiting = asyncio.ensure_future(opened.wait())
    opening = request.app[OPENING]
    await asyncio.wait((waiting, opening), timeout=OPENING_WAIT_SECONDS, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if (failure := start_failure(request.app)) is not None:
        raise HttpError(503, failure, "its operator must read the server's log")
    if not opened.is_set():
        raise HttpError(503, "starting: the hosts are still being read", "try again after Retry-After")
