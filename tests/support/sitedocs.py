"""Upstream sites for a top level's tests: a site's GET /v1/glue JSON as the site's own code renders
it (a config, hosts through the real roll-up), to be changed by a test into what a broken or
hostile site might publish; and `FakeUpstreams`, a loopback HTTP server that answers each site's
document under its own path (`URL/NAME/v1/glue`), read afresh at every pull."""

from __future__ import annotations

import json
import threading
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from contextlib import contextmanager

from infosvc.config.site import parse_config
from infosvc.hosts.rollup import Rollup, host_from_node
from infosvc.publish.glue import Glue
from support.documents import make_node

WHEN = "2026-01-01T00:00:00Z"


def site_document(config: str = "", hosts: tuple[str, ...] = ("n1.example.org",)) -> dict[str, Any]:
    """The GLUE JSON a site with this config (TOML) and these hosts (each Ready) publishes, as an object."""
    parsed = parse_config(tomllib.loads(config))
    rollup = Rollup(parsed)
    for host in hosts:
        rollup.update(host_from_node(make_node(host), "Ready", parsed, WHEN))
    document: dict[str, Any] = json.loads(Glue(rollup).json.tree())
    return document


def body(document: dict[str, Any]) -> bytes:
    """A document as a site sends it (a lone surrogate written as its \\u escape, as JSON allows)."""
    return json.dumps(document).encode()


class FakeUpstreams:
    """Sites' documents served on loopback: `url(name)` is a site's base URL; `documents[name]`
    (bytes) is what its GET /v1/glue answers, changed at will between pulls."""

    def __init__(self) -> None:
        self.documents: dict[str, bytes] = {}
        documents = self.documents

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                name, _, rest = self.path.lstrip("/").partition("/")
                found = documents.get(name) if rest.split("?")[0] == "v1/glue" else None
                self.send_response(200 if found is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(found or b"")))
                self.end_headers()
                self.wfile.write(found or b"")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"


@contextmanager
def fake_upstreams() -> Iterator[FakeUpstreams]:
    upstreams = FakeUpstreams()
    thread = threading.Thread(target=upstreams.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield upstreams
    finally:
        upstreams.server.shutdown()
        upstreams.server.server_close()
        thread.join(10)
