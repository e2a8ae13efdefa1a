"""The memory a top level's union costs (issue 27, big reads streamed): a real `infosvc serve` top
level over one large upstream site (tests/support/upstream.py's: `--hosts` hosts of the site's own
GLUE JSON, every host changed at every pull), its resident set once the union is published, the
peak over it while each `--path` is read whole, and the peak over a publication (a pull of the
changed upstream: the union rebuilt and its documents made in the publisher's thread). The reads
are made just after a pull has been published, so that no publication overlaps them.

Peaks as bench/nodes_read.py takes them: /proc/PID/clear_refs (5) resets the peak, VmHWM is read
after; glibc's mmap threshold is fixed (`--mmap-threshold`), so that what one read freed is not
kept to hide the next one's peak.

    .venv/bin/python bench/union_read.py [--hosts 190000] [--reads 2] [--pythonpath DIR] [--label after]

prints a line per measure and writes bench/results/union_read.json (one entry per `--label`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from federation_pull import get, keep, pulls, start_top, stop_all, wait_for_union  # noqa: E402
from nodes_read import status_kb  # noqa: E402


def measure(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    malloc = {"MALLOC_MMAP_THRESHOLD_": str(args.mmap_threshold)} if args.mmap_threshold else {}
    port, top, upstream = start_top(workdir, args.hosts, args.interval, args.pythonpath, malloc)
    try:
        wait_for_union(top, port, workdir)
        # read between two pulls: just after one, its publication done, well before the next
        pulled = pulls(port)
        while pulls(port) <= pulled:
            time.sleep(0.2)
        time.sleep(args.settle)
        rss = status_kb(top.pid, "VmRSS") / 1024
        print(f"the union of {args.hosts} hosts published; the top's RSS {rss:.0f} MiB", flush=True)
        reads = []
        for target in args.path or ["/v1/glue", "/v1/glue?format=xml", "/v1/glue?state=Ready"]:
            for _ in range(args.reads):
                Path(f"/proc/{top.pid}/clear_refs").write_text("5")
                before = status_kb(top.pid, "VmRSS")
                began = time.monotonic()
                status, body = get(port, target)
                took = time.monotonic() - began
                assert status == 200, (target, status, body[:300])
                peak = status_kb(top.pid, "VmHWM")
                reads.append({"path": target, "body_bytes": len(body), "rss_before_mb": round(before / 1024, 1),
                              "peak_over_mb": round((peak - before) / 1024, 1), "seconds": round(took, 2)})
                print(f"GET {target}: {len(body) / 2**20:.1f} MiB in {took:.2f} s; RSS {before / 1024:.0f} MiB, "
                      f"peak +{(peak - before) / 1024:.1f} MiB while answering", flush=True)
                time.sleep(1)
        # a publication: the next pull (every host changed), the union and its documents made anew
        pulled = pulls(port)
        Path(f"/proc/{top.pid}/clear_refs").write_text("5")
        before = status_kb(top.pid, "VmRSS")
        deadline = time.monotonic() + args.interval * 3 + 300
        while pulls(port) <= pulled and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(args.settle)
        peak, after = status_kb(top.pid, "VmHWM"), status_kb(top.pid, "VmRSS")
        publication = {"rss_before_mb": round(before / 1024, 1), "peak_over_mb": round((peak - before) / 1024, 1),
                       "rss_after_mb": round(after / 1024, 1)}
        print(f"a publication: RSS {before / 1024:.0f} MiB, peak +{(peak - before) / 1024:.1f} MiB, "
              f"{after / 1024:.0f} MiB after", flush=True)
        return {"hosts": args.hosts, "rss_published_mb": round(rss, 1), "reads": reads, "publication": publication}
    finally:
        stop_all(top, upstream)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=190_000)
    p.add_argument("--reads", type=int, default=2)
    p.add_argument("--interval", type=float, default=120.0, help="the top's interval_seconds (120: the reads "
                                                                   "fit between two pulls)")
    p.add_argument("--settle", type=float, default=15.0, help="seconds for a publication to finish (15)")
    p.add_argument("--path", action="append", help="what to read (repeatable; the union in JSON and XML, "
                                                    "and filtered, when none)")
    p.add_argument("--mmap-threshold", type=int, default=128 * 1024,
                   help="the top's MALLOC_MMAP_THRESHOLD_, fixed (0: glibc's own, which grows)")
    p.add_argument("--pythonpath", help="the code the top runs, first on its path (another checkout)")
    p.add_argument("--label", default="this checkout")
    args = p.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="infosvc-bench-union-read-"))
    keep("union_read", args.label, {"label": args.label, **measure(args, workdir)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
