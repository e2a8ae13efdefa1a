"""Which rendering a request asks for: `?format=` first, else its Accept header."""

from __future__ import annotations

from aiohttp import web

from infosvc.site.query import QueryError

JSON = "application/json"
XML = "application/xml"


def wants_xml(request: web.Request) -> bool:
    fmt = request.query.get("format")
    if fmt is not None:
        if fmt not in ("json", "xml"):
            raise QueryError("format", "expected json or xml")
        return fmt == "xml"
    accept = request.headers.get("Accept", "")
    return ("application/xml" in accept or "text/xml" in accept) and JSON not in accept
