"""GET /v1/glue's choice among every GLUE format: `format=json|xml` (GLUE 1.1, or the Accept header),
`format=ldif` with `schema=1.3|2.0` (both, 1.3 first, when not given: what a resource BDII's
provider prints), `format=glue2-xml`, `format=glue2-json`; `site=` names the site (GlueSiteUniqueID,
the GLUE 2.0 AdminDomain) and `base=1` adds the BDII's base entries to LDIF
(infosvc/publish/glue.py, GRID_FORMATS). The whole tree in a grid format is rendered off the
event loop, from a copy (`grid_tree`)."""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import web

from infosvc.codec.gridformat import GridOptions, valid_site
from infosvc.model.snapshot import FrozenTree
from infosvc.publish.glue import GRID_FORMATS, Glue, Rendering
from infosvc.hosts import QueryError
from infosvc.web.negotiate import format_of

#: the formats /v1/glue offers, by `?format=`
GLUE_FORMATS: Final = ("json", "xml", "ldif", "glue2-xml", "glue2-json")
#: the grid formats' own parameters
GRID_PARAMETERS: Final = ("schema", "base", "site")
_SCHEMAS: Final = {"1.3": "ldif-1.3", "2.0": "ldif-2.0"}


def glue_format(request: web.Request) -> tuple[str, GridOptions]:
    """The publishing layer's name of the format asked for, and the grid formats' options."""
    fmt = format_of(request, GLUE_FORMATS)
    query = request.query
    given = [name for name in GRID_PARAMETERS if name in query]
    if fmt in ("json", "xml"):
        if given:
            raise QueryError(given[0], "only with format=ldif, glue2-xml or glue2-json")
        return fmt, GridOptions()
    site = query.get("site")
    if site is not None and not valid_site(site):
        raise QueryError("site", "a site id: letters, digits, '_', '.', '-', at most 100")
    if fmt != "ldif":
        if "schema" in query or "base" in query:
            raise QueryError("schema" if "schema" in query else "base", "only with format=ldif")
        return fmt, GridOptions(site=site)
    schema = query.get("schema")
    if schema is not None and schema not in _SCHEMAS:
        raise QueryError("schema", "1.3 or 2.0 (both when not given)")
    base = query.get("base", "0")
    if base not in ("0", "1"):
        raise QueryError("base", "1 or 0")
    return _SCHEMAS.get(schema or "", "ldif"), GridOptions(site=site, base=base == "1")


async def grid_tree(glue: Glue, fmt: str, options: GridOptions) -> bytes:
    """The whole tree in the grid format `fmt`, of the current snapshot: the part of the tree it
    reads copied on the loop (O(subclusters)), rendered in a worker thread (a site of a thousand
    subclusters is tens of milliseconds of work)."""
    snapshot = glue.snapshot()
    frozen = FrozenTree(glue.tree)
    return await asyncio.to_thread(Rendering(frozen, GRID_FORMATS[fmt](options), lambda: snapshot).tree)
