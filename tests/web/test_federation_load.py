"""A top level pulling a large site (docs/grid.md, Federation), on real servers: before, the union
was rebuilt and rendered on the event loop at the first read after each pull, and freed there
too: one upstream of 190,000 hosts stalled the top's /healthz 4 to 5 s after every pull. Now the
union and its documents are built in a worker thread after each pull, reads are answered the last
complete union meanwhile, never a part of one, and /healthz p99 stays low.

Here the upstream and the top level share two cores with the poller and the reads, and a CI
machine is shared besides: with the fix in, /healthz p99 was 20 to 50 ms here and 63 and 122 ms
on CI, single samples up to 150 ms. What the test holds is what tells a stall from that noise:
the old code held the loop 0.5 s and more after every pull at this size, so no more than one
sample of 400 ms or more (a pull makes one each), and a p99 under 200 ms. The issue's 50 ms is
bench/federation_pull.py's figure, measured alone.

The upstream is 30,000 hosts (support/upstream.py), every host changed at every pull; a pull and
its union take a few seconds of CPU on a shared machine, so they overlap the reads throughout.
bench/federation_pull.py measures the same at 190,000 hosts."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import pytest

from support.latency import healthz_latencies_during
from support.server import Reply, Server, ServerFactory, free_port, wait_for
from support.upstream import VERSIONS, serve_upstream

pytestmark = pytest.mark.serial  # latency measured from outside: run alone (make test)

HOSTS = 30_000


def pulls_ok(top: Server) -> float:
    for line in top.get("/metrics").body.decode().splitlines():
        if line.startswith("infosvc_federation_pulls_total{") and 'result="ok"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def one_whole_union(reply: Reply) -> bool:
    """The answer is a whole union of one pull: every host there, all of the same version."""
    counts = [reply.body.count(f'"reported_at":"{stamp}"'.encode()) for stamp in VERSIONS]
    return reply.status == 200 and sorted(counts) == [0, HOSTS]


def test_pulls_of_a_large_site_leave_the_top_level_quick(serve: ServerFactory, tmp_path: Path) -> None:
    upstream_port = free_port()
    upstream = serve_upstream(tmp_path, HOSTS, upstream_port)
    try:
        top = serve(start=False)
        top.config_file.write_text("\n".join([
            "[federation]", "interval_seconds = 3.0", "delete_delay_seconds = 3600.0", "timeout_seconds = 60.0",
            f"max_body_bytes = {1 << 28}", "[[federation.upstreams]]",
            f'url = "http://127.0.0.1:{upstream_port}"', 'name = "big"']) + "\n")
        top.start()
        wait_for(lambda: one_whole_union(top.get("/v1/glue", timeout=60)), timeout=120, interval=0.5,
                 message=f"the first union of {HOSTS} hosts")
        pulled = pulls_ok(top)
        answers: list[Reply] = []

        def read_the_union() -> None:
            answers.append(top.get("/v1/glue", timeout=60))
            time.sleep(0.5)

        started = time.monotonic()
        latencies = healthz_latencies_during(top, read_the_union, count=16, workers=1, samples=400)
        p99 = statistics.quantiles(latencies, n=100)[98]
        stalls = [round(x * 1000) for x in latencies if x >= 0.400]
        took = time.monotonic() - started
        pulls = pulls_ok(top) - pulled
        print(f"/healthz p99 {p99 * 1000:.1f} ms, max {max(latencies) * 1000:.0f} ms over {took:.1f} s: {pulls:.0f} pulls of {HOSTS} hosts, "
              f"{len(answers)} reads of the union")
        assert pulls >= 2, f"only {pulls:.0f} pulls during the reads: nothing was measured"
        # each read, during a rebuild or not, is the whole of one union: never a part, never a mix
        partial = [a.status if a.status != 200 else len(a.body) for a in answers if not one_whole_union(a)]
        assert not partial, f"{len(partial)} of {len(answers)} reads were not one whole union: {partial[:3]}"
        versions = {next(s for s in VERSIONS if f'"reported_at":"{s}"'.encode() in a.body) for a in answers}
        assert len(versions) == 2, "the reads saw one version only: the union was not replaced while read"
        assert len(stalls) <= 1, f"/healthz stalled {stalls} ms during {pulls:.0f} pulls of {HOSTS} hosts"
        assert p99 < 0.200, f"/healthz p99 {p99 * 1000:.1f} ms during {pulls:.0f} pulls of {HOSTS} hosts"
        assert json.loads(top.get("/healthz").body)["upstreams"][0]["hosts"] == HOSTS
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)
