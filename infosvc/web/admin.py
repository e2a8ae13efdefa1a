"""POST /v1/admin/hosts/{hosts}/{action}: an admin's decision on a host or on a NodeSet of hosts
(approve, pause, resume, remove), with a reason that GLUE, status and /v1/nodes then show."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from ClusterShell.NodeSet import NodeSetParseError
from infosvc.errors import Invalid, NotFound
from infosvc.hosts import HostEntry
from infosvc.hosts import QueryError
from infosvc.web.auth import caller_of
from infosvc.web.keys import AGGREGATOR

audit = logging.getLogger("infosvc.audit")

ADMIN_ACTIONS: dict[str, dict[str, bool]] = {
    "approve": {"approved": True},
    "pause": {"paused": True},
    "resume": {"paused": False},
    "remove": {},
}
#: the query parameters of an admin action
PARAMETERS = ("reason", "history")
#: a reason is a line for people, shown in every rendering of the host: kept short
REASON_MAX = 200


def _reason(request: web.Request) -> str | None:
    reason = request.query.get("reason")
    if reason is None:
        return None
    reason = " ".join(reason.split())
    if len(reason) > REASON_MAX or not reason.isprintable():
        raise QueryError("reason", f"at most {REASON_MAX} printable characters")
    return reason or None


def _purge(request: web.Request, action: str) -> bool:
    history = request.query.get("history")
    if history is None:
        return False
    if action != "remove" or history not in ("keep", "purge"):
        raise QueryError("history", "keep or purge, and only to remove a host")
    return history == "purge"


def _said(entry: HostEntry, state: str) -> dict[str, Any]:
    said: dict[str, Any] = {"host": entry.id, "state": state}
    if entry.reason is not None:
        said["reason"] = entry.reason
    return said


async def post_admin(request: web.Request) -> web.Response:
    action = request.match_info["action"]
    if action not in ADMIN_ACTIONS:
        raise NotFound(f"no admin action {action!r}", f"one of {', '.join(ADMIN_ACTIONS)}")
    reason, purge = _reason(request), _purge(request, action)
    named = request.match_info["id"]
    agg = request.app[AGGREGATOR]
    try:
        hosts = agg.hosts_named(named)
    except NodeSetParseError as exc:
        raise Invalid(f"not a host Id or NodeSet: {exc}", "a host Id, or a NodeSet such as cn[07-08]") from None
    if not hosts:
        raise NotFound(f"no host {named!r}", "GET /v1/nodes lists the hosts")
    done: list[dict[str, Any]] = []
    gone: list[str] = []  # removed by another decision since they were named
    try:
        for host in hosts:
            try:
                if action == "remove":
                    entry = await agg.remove(host, purge=purge, reason=reason)
                    done.append({"host": entry.id, "state": "Removed"})
                else:
                    entry = await agg.set_flags(host, action=action, reason=reason, **ADMIN_ACTIONS[action])
                    done.append(_said(entry, entry.state.value))
            except NotFound:
                gone.append(host)
    finally:  # what was done is audited, whatever stopped the rest
        if done:
            caller = caller_of(request)
            audit.info("admin %s of %s by token %s%s%s", action, named,
                       caller.key[:8] if caller is not None else "?", f" ({reason})" if reason else "",
                       f"; gone meanwhile: {', '.join(gone)}" if gone else "")
    if not done:
        raise NotFound(f"no host {named!r}", "GET /v1/nodes lists the hosts")
    if len(done) == 1 and not gone and named.strip().lower().rstrip(".") in (done[0]["host"],
                                                                           done[0]["host"].split(".")[0]):
        return web.json_response(done[0])
    return web.json_response({"hosts": done, **({"gone": gone} if gone else {})})
