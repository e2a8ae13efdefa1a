"""`infosvc serve`'s event loop: the app served with every connection under `Connections`
(infosvc/web/connections.py), in place of aiohttp's `web.run_app`, until SIGINT, SIGTERM or SIGHUP."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from ssl import SSLContext
from typing import Callable

from aiohttp import web

from infosvc.web.connections import BACKLOG, Connections, Policy

log = logging.getLogger("infosvc.web")

#: how long a thread may hold the GIL while another waits for it (CPython's default: 5 ms). The
#: large work is done in worker threads (a top level's union of 190,000 hosts, history pages,
#: matches) so that the event loop answers meanwhile; but each time the loop wakes it waits for the
#: GIL up to this long, several times per request: at 5 ms, /healthz p99 was 70 to 125 ms during a
#: top level's pulls of 40,000 hosts, at 1 ms 50 ms. A top level only: on a site, whose big thread
#: is the store's writer, it cost ingest ~6 % of its rate (bench/ingest.py, parse floor ratio 0.494
#: against 0.523 at 5 ms, one run each) for nothing a site needs.
GIL_SWITCH_SECONDS = 0.001


def run(app: web.Application, *, host: str, port: int, ssl_context: SSLContext | None, policy: Policy,
        listening: Callable[[], None] | None = None, top_level: bool = False) -> None:
    """Serve `app` until SIGINT, SIGTERM or SIGHUP, as aiohttp's web.run_app does, with each connection a
    GuardedRequestHandler under a `Connections`. Errors at start (the store, the address) propagate;
    `listening()` is called once the address is bound, and not if it cannot be. A `top_level` builds
    its union in a thread: the loop takes the GIL back sooner."""
    if top_level:
        sys.setswitchinterval(GIL_SWITCH_SECONDS)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    main = loop.create_task(_serve(app, host, port, ssl_context, policy, listening))
    try:
        loop.run_until_complete(main)
    except (web.GracefulExit, KeyboardInterrupt):
        pass
    finally:
        try:
            if not main.done():
                main.cancel()
                try:
                    loop.run_until_complete(main)
                except asyncio.CancelledError:
                    pass
        finally:
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()


async def _serve(app: web.Application, host: str, port: int, ssl_context: SSLContext | None, policy: Policy,
                 listening: Callable[[], None] | None) -> None:
    loop = asyncio.get_running_loop()
    connections = Connections(policy)
    loop.set_exception_handler(connections.loop_exception_handler)
    # SIGINT and SIGTERM raise GracefulExit; access_log=None: no line per request.
    runner = web.AppRunner(app, handle_signals=True, access_log=None)
    # SIGHUP (the terminal of a server started by hand closed, or a reload asked of a service that
    # has none) stops it as SIGTERM does: its default killed it at once, without its snapshot.
    loop.add_signal_handler(signal.SIGHUP, _hung_up)
    try:
        # The app's start-up: the store is opened here. Should it fail, the contexts it entered
        # (the collector's schedule, an open store) are left by the cleanup below.
        await runner.setup()
        assert runner.server is not None
        factory = connections.protocol_factory(runner.server, tls=ssl_context,
                                               keepalive_timeout=policy.keepalive_seconds, access_log=None)
        server = await loop.create_server(factory, host, port, backlog=BACKLOG)  # TLS: see GuardedRequestHandler
        if listening is not None:
            listening()
        try:
            await asyncio.Event().wait()  # until cancelled
        finally:
            server.close()
    finally:
        await runner.cleanup()  # open connections closed, the app's cleanup: the store is closed


def _hung_up() -> None:
    log.warning("SIGHUP: stopping; the service reads its configuration and tokens only as it starts "
                "(start it again to change them)")
    raise web.GracefulExit()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks still running at exit and wait for them (aiohttp's run_app does the same)."""
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
