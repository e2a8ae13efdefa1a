"""Who is asking, and whether they may: one middleware authorizes every request by its route's
access in the route table (infosvc/web/routes.py), so that a route cannot forget it.

The token is read once per request: the middleware keeps the caller on the request, the handler
that needs the agent's binding reads it there, and the connection's keep-alive (a valid token
earns the longer one, infosvc/web/connections.py) asks the request, not the tokens again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from typing import Awaitable, Callable

from aiohttp import web

from infosvc.errors import excerpt
from infosvc.loglimit import LogLimiter
from infosvc.hosts import QueryError
from infosvc.hosts import Role, Tokens
from infosvc.web.bodies import refuse_announced_size
from infosvc.web.pretty import wants_pretty
from infosvc.web.errors import HttpError
from infosvc.web.keys import AGGREGATOR, CALLER, CONFIG, ROUTE_TABLE
from infosvc.web.opening import OPEN, until_open

log = logging.getLogger("infosvc.web")
_refusals = LogLimiter(logging.getLogger("infosvc.audit"))

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]



class Access(Enum):
    """Who may call a route."""

    PUBLIC = "public"  # anyone: health and the API's description
    READ = "read"  # anyone, or any token when service.read_token_required
    AGENT = "agent"  # an agent token
    ADMIN = "admin"  # an admin token
    SUBMIT = "submit"  # a submit or admin token (jobs)
    EXECUTOR = "executor"  # an executor or admin token (reports of tasks' start and end)


ROLES: dict[Access, tuple[Role, ...]] = {Access.READ: tuple(Role), Access.AGENT: (Role.AGENT,),
                                         Access.ADMIN: (Role.ADMIN,), Access.SUBMIT: (Role.SUBMIT, Role.ADMIN),
                                         Access.EXECUTOR: (Role.EXECUTOR, Role.ADMIN)}


@dataclass(frozen=True, slots=True)
class Caller:
    """A request's valid token, as its digest (the key of its binding), and its role."""

    key: str
    role: Role


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header (the scheme is case-insensitive, RFC 9110)."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def caller_of(request: web.BaseRequest) -> Caller | None:
    """The caller the middleware found for this request: None without a valid token."""
    return request.get(CALLER)


def _identify(request: web.Request, tokens: Tokens) -> Caller | None:
    token = bearer_token(request.headers.get("Authorization"))
    found = tokens.check(token) if token is not None else None
    caller = Caller(*found) if found is not None else None
    request[CALLER] = caller
    return caller


def _check(request: web.Request, caller: Caller | None, access: Access) -> None:
    roles = ROLES[access]
    if caller is None:
        if bearer_token(request.headers.get("Authorization")) is None:
            raise HttpError(401, "missing bearer token", "send 'Authorization: Bearer TOKEN'")
        raise HttpError(401, "unknown token")
    if caller.role not in roles:
        raise HttpError(403, f"a {caller.role.value} token may not do this",
                        f"needs a token of role {' or '.join(r.value for r in roles)}")


@web.middleware
async def authorize(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse the request unless its route's access allows its caller. A request for no route
    (aiohttp's 404 or 405) passes; a route missing from the table is refused, as a bug."""
    if request.match_info.http_exception is not None:
        return await handler(request)
    route = request.app[ROUTE_TABLE].get(request.match_info.handler)
    if route is None:
        log.error("%s %s has no entry in the route table: refused", request.method, request.path)
        raise HttpError(403, "this route has no access rule", "this is a bug in infosvc")
    agg = request.app[AGGREGATOR]
    on_refusal = agg.count_refused if route.counts_reports else None
    try:
        if request.method in ("POST", "PUT", "PATCH"):
            # Before the token is even looked at: a client announcing too much is not read at all.
            refuse_announced_size(request, request.app[CONFIG].service)
        caller = _identify(request, agg.tokens)
        if route.access in (Access.AGENT, Access.ADMIN, Access.SUBMIT, Access.EXECUTOR) or (
                route.access is Access.READ and request.app[CONFIG].service.read_token_required):
            _check(request, caller, route.access)
    except web.HTTPRequestEntityTooLarge:
        if on_refusal is not None:
            on_refusal("too_large")
        raise
    except HttpError as exc:
        if on_refusal is not None:
            on_refusal("unauthorized" if exc.status == 401 else "forbidden")
        # who was refused, never what they presented; a flood is one line per kind per interval
        _refusals.warning(f"{exc.status} {exc.message}", "refused: %s (%s %s from %s)", exc.message,
                          request.method, request.path[:200], request.remote)
        raise
    unknown = sorted(set(request.query) - set(route.accepted))
    if unknown:
        accepted = ", ".join(route.accepted) or "none"
        raise QueryError(excerpt(unknown[0]), f"unknown; this route takes {accepted}", route.accepted)
    if route.pretty:
        wants_pretty(request)  # a value that is no yes or no is refused here, with the others
    if not request.app[OPEN].is_set():
        await until_open(request, public=route.access is Access.PUBLIC)
    return await handler(request)
