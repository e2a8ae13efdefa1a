"""POST /v1/admin/hosts/{id}/{action}: an admin's decision on a host (approve, pause, resume)."""

from __future__ import annotations

from aiohttp import web

from infosvc.model.hostid import canonical
from infosvc.site.errors import NotFound
from infosvc.web.keys import AGGREGATOR

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
    return web.json_response({"host": entry.id, "state": entry.state.value})
