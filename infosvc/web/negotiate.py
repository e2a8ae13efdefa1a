"""The format a request asks for (infosvc/publish/negotiation.py decides), and the media types."""

from __future__ import annotations

from typing import Sequence

from aiohttp import web

from infosvc.publish.negotiation import choose

JSON = "application/json"
XML = "application/xml"


def format_of(request: web.Request, offered: Sequence[str] = ("json", "xml")) -> str:
    return choose(request.query.get("format"), request.headers.get("Accept", ""), offered)


def wants_xml(request: web.Request) -> bool:
    return format_of(request) == "xml"
