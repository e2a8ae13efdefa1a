"""The web page: GET / and GET /page/{name}, the static files of infosvc/web/static/ shipped in the
package (docs/web-page.md). The page is plain HTML, CSS and ES modules with no build step and
nothing fetched from elsewhere; it reads the site from the API (/v1/glue, /v1/nodes, /v1/jobs)
with the API's own access, so serving the files themselves needs no token.

Only the files named in FILES are served, each read once: a name is looked up in the table, never
joined to a path, so no request can reach another file. Every answer carries a strict
Content-Security-Policy (scripts, styles and fetches from this origin only, no inline script or
style, no frames), nosniff, and an ETag that a browser revalidates (Cache-Control: no-cache), so
an upgraded server's page is the one shown without a stale mix of old and new modules.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import resources

from aiohttp import web

from infosvc.errors import NotFound

_JS = "text/javascript; charset=utf-8"

#: Every file of the page, with its media type: what /page/{name} serves, and nothing else.
FILES: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "page.css": "text/css; charset=utf-8",
    "page.js": _JS,
    "api.js": _JS,
    "view.js": _JS,
    "host.js": _JS,
    "plot.js": _JS,
    "dom.js": _JS,
    "icon.svg": "image/svg+xml",
}

#: What the page may load and do: its own files and the API on this origin, nothing inline (the
#: page's scripts build the DOM with textContent, and a host name is never markup).
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

HEADERS: dict[str, str] = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",  # kept, but revalidated by ETag on every use
}


@functools.cache
def page_file(name: str) -> tuple[bytes, str]:
    """A file of the page and its ETag, read from the installed package once."""
    body = resources.files("infosvc.web").joinpath("static", name).read_bytes()
    return body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _answer(request: web.Request, name: str) -> web.Response:
    body, etag = page_file(name)
    headers = {**HEADERS, "ETag": etag}
    if etag in (tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")):
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, headers={**headers, "Content-Type": FILES[name]})


async def get_index(request: web.Request) -> web.Response:
    return _answer(request, "index.html")


async def get_page_file(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in FILES:
        raise NotFound(f"no page file {name[:100]!r}", f"one of {', '.join(FILES)}")
    return _answer(request, name)
