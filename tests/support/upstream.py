"""A large upstream site for a top level: its GET /v1/glue (JSON) of N hosts, rendered by the site's
own code for one host and repeated under other ids (rendering N hosts afresh would take minutes
at 190,000), in two versions whose every host's reported_at differs, served by a small aiohttp
process that alternates them: every pull is a change of all its hosts, the worst case. Used by
tests/web/test_federation_load.py and bench/federation_pull.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from infosvc.publish.glue import Glue
from infosvc.config.site import SiteConfig
from infosvc.hosts.rollup import Rollup, host_from_node
from support.documents import make_node

VERSIONS = ("2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z")
_TEMPLATE = "templatehost"


def site_document(hosts: int, reported_at: str) -> bytes:
    """A site's GLUE JSON with `hosts` hosts h000000, h000001, ... in one subcluster."""
    config = SiteConfig()
    rollup = Rollup(config)
    rollup.update(host_from_node(make_node(_TEMPLATE), "Ready", config, reported_at))
    tree = json.loads(Glue(rollup).json.tree())
    one = json.dumps(tree["hosts"][0], separators=(",", ":"))
    sub = tree["subclusters"][0]
    sub["host_count"] = sub["live_hosts"] = hosts
    sub["total_cpus"] *= hosts
    sub["free_cpus"] *= hosts
    sub["hosts"] = ["@IDS@"]
    tree["hosts"] = ["@HOSTS@"]
    ids = [f"h{i:06d}" for i in range(hosts)]
    text = json.dumps(tree, separators=(",", ":"))
    text = text.replace('["@IDS@"]', "[" + ",".join(f'"{i}"' for i in ids) + "]")
    text = text.replace('["@HOSTS@"]', "[" + ",".join(one.replace(_TEMPLATE, i) for i in ids) + "]")
    return text.encode()


SERVER = """
import sys
from aiohttp import web
bodies = [open(path, "rb").read() for path in sys.argv[2:]]
served = [0]

async def glue(request):
    served[0] += 1
    return web.Response(body=bodies[served[0] % len(bodies)], content_type="application/json")

async def healthz(request):
    return web.json_response({"status": "ok", "served": served[0]})

app = web.Application()
app.router.add_get("/v1/glue", glue)
app.router.add_get("/healthz", healthz)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


def serve_upstream(directory: Path, hosts: int, port: int) -> subprocess.Popen[bytes]:
    """The upstream's process on `port`, answering the two versions in turn; returns once it answers."""
    paths = []
    for n, stamp in enumerate(VERSIONS):
        path = directory / f"upstream-{hosts}.{n}.json"
        if not path.exists():
            path.write_bytes(site_document(hosts, stamp))
        paths.append(str(path))
    process = subprocess.Popen([sys.executable, "-c", SERVER, str(port), *paths])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return process
        except OSError:
            if process.poll() is not None:
                raise RuntimeError("the upstream's process exited") from None
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the upstream did not answer within 60 s")
