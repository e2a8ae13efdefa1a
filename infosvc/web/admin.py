"""POST /v1/admin/hosts/{id}/{action}: an admin's decision on a host (approve, pause, resume)."""

from __future__ import annotations

import logging

from aiohttp import web

from infosvc.model.hostid import canonical
from infosvc.site.errors import NotFound
from infosvc.web.auth import caller_of
from infosvc.web.keys import AGGREGATOR

audit = logging.getLogger("infosvc.audit")

ADMIN_ACTIONS: dict[str, dict[str, bool]] = {
    "approve": {"approved": True},
    "pause": {"paused": True},
    "resume": {"paused": False},
}


async def post_admin(request: web.Request) -> web.Response:
    action = request.match_info["action"]
    if action not in ADMIN_ACTIONS:
        raise NotFound(f"no admin action {action!r}", f"one of {', '.join(ADMIN_ACTIONS)}")
    entry = await request.app[AGGREGATOR].set_flags(canonical(request.match_info["id"]), **ADMIN_ACTIONS[action])
    caller = caller_of(request)
    audit.info("admin %s of %s by token %s: now %s", action, entry.id,
               caller.key[:8] if caller is not None else "?", entry.state.value)
    return web.json_response({"host": entry.id, "state": entry.state.value})
