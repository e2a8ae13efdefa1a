"""What describes the service rather than the site, open to all: GET /healthz, /openapi.json and
/schemas/{name} (the files of schemas/ served as they are)."""

from __future__ import annotations

import functools

from aiohttp import web

from infosvc import __version__
from infosvc.codec.safexml import SCHEMA_DIR
from infosvc.errors import NotFound
from infosvc.web.opening import OPEN, start_failure
from infosvc.web.keys import AGGREGATOR, LRMS_READER
from infosvc.web.negotiate import JSON, XML

#: The files of schemas/ served at /schemas/{name}: what /openapi.json refers to, and the XML
#: Schemas that bodies are validated with.
PUBLISHED_SCHEMAS: dict[str, str] = {
    "openapi.json": JSON,
    "sss-node.schema.json": JSON,
    "glue.schema.json": JSON,
    "sss-node.xsd": XML,
    "glue-ce-1.1.xsd": XML,
    # what POST /v1/jobs reads (docs/api.md)
    "gridjob-v2.schema.json": JSON,
    "sss-job.xsd": XML,
    "ccs-job.xsd": XML,
}


@functools.cache
def published_schema(name: str) -> bytes:
    """A file of schemas/, read once and served as it is."""
    return (SCHEMA_DIR / name).read_bytes()


async def get_openapi(request: web.Request) -> web.Response:
    return web.Response(body=published_schema("openapi.json"), content_type=JSON)


async def get_schema(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in PUBLISHED_SCHEMAS:
        raise NotFound(f"no schema {name!r}", f"one of {', '.join(PUBLISHED_SCHEMAS)}")
    return web.Response(body=published_schema(name), content_type=PUBLISHED_SCHEMAS[name])


async def healthz(request: web.Request) -> web.Response:
    agg = request.app[AGGREGATOR]
    error = agg.store_failure()
    if error is not None:  # reports are not stored: say so to whoever watches
        return web.json_response({"status": "failing", "error": error,
                                  "version": __version__, "hosts": len(agg.table)}, status=503)
    if (failure := start_failure(request.app)) is not None:
        return web.json_response({"status": "failing", "error": failure, "version": __version__, "hosts": 0},
                                 status=503)
    if not request.app[OPEN].is_set():  # the hosts are being read (infosvc/web/opening.py)
        return web.json_response({"status": "starting", "version": __version__, "hosts": len(agg.table)})
    said: dict[str, object] = {"status": "ok", "version": __version__, "hosts": len(agg.tree)}
    reader = request.app.get(LRMS_READER)
    if reader is not None:  # the batch system's last read: fresh, or stale and why (docs/slurm.md)
        said["lrms"] = reader.health()
    return web.json_response(said)
