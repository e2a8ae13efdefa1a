"""Where a host's memory goes in the aggregator (issue 27, item 3): N hosts, each this machine's own
agent document (`infosvc-agent --once`) made that host's (nodes_read.agent_documents), parsed and put in the host table
(the newest Node, the GLUE Host in the roll-up, whatever else it keeps of a report) and rendered as GET
/v1/nodes and /v1/glue render them; tracemalloc over it all, grouped by the line that allocated.

    .venv/bin/python bench/host_memory.py [--hosts 10000] [--top 15]

prints the bytes a host costs in all and by where they were allocated (in-process: no server).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from infosvc.codec.node_xml import parse_node  # noqa: E402
from infosvc.config import SiteConfig  # noqa: E402
from infosvc.hosts import HostTable  # noqa: E402
from infosvc.publish.glue import Glue  # noqa: E402
from nodes_read import agent_documents  # noqa: E402


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--hosts", type=int, default=10_000)
    args.add_argument("--top", type=int, default=15)
    opts = args.parse_args()
    documents = agent_documents(opts.hosts)
    gc.collect()
    tracemalloc.start(1)
    before = tracemalloc.take_snapshot()
    table = HostTable(SiteConfig())
    glue = Glue(table.rollup)
    now = time.time()
    for document in documents:
        received = bytes(memoryview(document))  # a copy made while traced, as a body read is: counted if kept
        entry = table.report(parse_node(received), now)
        entry.json()  # GET /v1/nodes' rendering, cached on the entry
    glue.warm(list(table.rollup.hosts.values()))  # each host's GLUE fragments, as the server keeps them
    gc.collect()
    after = tracemalloc.take_snapshot()
    stats = after.compare_to(before, "lineno")
    total = sum(s.size_diff for s in stats)
    print(f"{opts.hosts} hosts, {sum(map(len, documents)) / opts.hosts:.0f} B a report: "
          f"{total / opts.hosts / 1024:.1f} KiB a host in all")
    for stat in stats[:opts.top]:
        frame = stat.traceback[0]
        where = f"{Path(frame.filename).relative_to(ROOT) if frame.filename.startswith(str(ROOT)) else frame.filename}:{frame.lineno}"
        print(f"  {stat.size_diff / opts.hosts:8.0f} B a host  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
