"""Cross-origin reads (CORS), only for the origins the site config lists (service.cors_origins).

Without that list a browser keeps every page of another origin from reading the API with its
visitor's token, and the app has no middleware here at all. A site whose portal on another origin
shows the API's data lists that origin; the middleware is then the outermost, so refusals (401,
404, 503 with Retry-After) carry the headers too and the portal's script can read why. It grants
no access: the route's own access (infosvc/web/auth.py) still decides, and a preflight, which a
browser sends without the token, only says which methods and headers a path takes.

Never `Access-Control-Allow-Credentials`: the API reads no cookie, nor any credential a browser
adds by itself; a token travels in the Authorization header, which the portal's script sets from
what its user gave it. So a page can use only the tokens it holds, never one the browser keeps.
Answers written before a request reaches the app (a malformed request, no room for a connection:
infosvc/web/refusals.py) carry no header.
"""

from __future__ import annotations

from typing import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from infosvc.config import ANY_ORIGIN

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: the request headers the API reads that a browser does not allow by itself (Accept it does)
ALLOWED_HEADERS = "Authorization, Content-Type"
#: the answers' headers a client needs beyond those a browser shows a script anyway
EXPOSED_HEADERS = "Allow, ETag, Location, Retry-After"
#: how long a browser may keep a preflight's answer, in seconds
MAX_AGE = "600"


def cors(origins: tuple[str, ...]) -> tuple[Middleware, ...]:
    """The middleware for service.cors_origins (`origins`), or none when it lists none."""
    if not origins:
        return ()
    any_origin = origins == (ANY_ORIGIN,)
    allowed = frozenset(origins)

    def allow_origin(origin: str | None) -> str | None:
        if origin is None:
            return None
        return ANY_ORIGIN if any_origin else origin if origin in allowed else None

    @web.middleware
    async def cross_origin(request: web.Request, handler: Handler) -> web.StreamResponse:
        granted = allow_origin(request.headers.get("Origin"))
        if granted is not None and _is_preflight(request):
            return _preflight(request, granted)
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # a redirect: errors_as_json answers every error itself
            _mark(exc, granted)
            raise
        _mark(response, granted)
        return response

    return (cross_origin,)


def _is_preflight(request: web.Request) -> bool:
    # Only a path the route table has: its OPTIONS is the router's 405, naming the path's methods.
    return (request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers
            and isinstance(request.match_info.http_exception, web.HTTPMethodNotAllowed))


def _preflight(request: web.Request, granted: str) -> web.Response:
    refusal = request.match_info.http_exception
    assert isinstance(refusal, web.HTTPMethodNotAllowed)
    response = web.Response(status=204, headers={
        "Access-Control-Allow-Methods": ", ".join(sorted(refusal.allowed_methods)),
        "Access-Control-Allow-Headers": ALLOWED_HEADERS,
        "Access-Control-Max-Age": MAX_AGE,
    })
    _mark(response, granted, expose=False)  # a preflight's own headers are read by the browser alone
    return response


def _mark(response: web.StreamResponse, granted: str | None, expose: bool = True) -> None:
    """Whether an answer carries the headers depends on the request's Origin, so every answer says
    so (Vary) to the caches between; only an allowed origin's gets them."""
    vary = response.headers.get("Vary")
    if vary is None:
        response.headers["Vary"] = "Origin"
    elif "origin" not in (v.strip().lower() for v in vary.split(",")):
        response.headers["Vary"] = f"{vary}, Origin"
    if granted is not None:
        response.headers["Access-Control-Allow-Origin"] = granted
        if expose:
            response.headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS
