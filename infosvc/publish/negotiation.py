"""Which format a reader asks for, decided in one place: the `format` query parameter when given
(an unknown one is an error naming the accepted ones), else the Accept header (XML when it names
application/xml or text/xml and not JSON), else JSON. A new format (LDIF, GLUE 2.0) is a name
here and a module in publish/."""

from __future__ import annotations

from typing import Final, Sequence

from infosvc.hosts import QueryError

#: Each format's name and media types; the first is the default.
MEDIA_TYPES: Final = {"json": ("application/json",), "xml": ("application/xml", "text/xml")}


def choose(format_parameter: str | None, accept: str, offered: Sequence[str] = ("json", "xml")) -> str:
    """The name of the format to answer in, one of `offered`."""
    if format_parameter is not None:
        if format_parameter not in offered:
            raise QueryError("format", f"expected {' or '.join(offered)}")
        return format_parameter
    if "application/json" in accept:
        return "json"
    for name in offered:
        if any(media in accept for media in MEDIA_TYPES.get(name, ())):
            return name
    return offered[0]
