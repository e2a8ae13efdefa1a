"""The store's reads behind a page of GET /v1/jobs over many ended jobs (infosvc/store/jobs.py
read_ended, count_ended), for each combination of the listing's filters: one batch of 64 ended jobs
read below a cursor (as every batch after a page's first, and every page after the first, is), and
the count each page gives as its total. The plans are asserted by tests/store/test_ended_reads.py;
this says what they cost.

A fresh store of COUNT ended jobs (tests/support/jobrows.py, as the queue writes them): 99% alice's,
Finished; 1% bob's, Canceled; ended a second apart over the last days.

    .venv/bin/python bench/ended_listing.py [--count 50000] [--repeat 5]

prints a line per filter (the median of the repeats, in ms) and writes bench/results/ended_listing.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from infosvc.model.ccsjob import JobState  # noqa: E402
from infosvc.store import Store  # noqa: E402
from infosvc.store.jobs import EndedQuery  # noqa: E402
from support.jobrows import write_ended  # noqa: E402

FILTERS: dict[str, Any] = {"state": "Canceled", "owner": "alice", "since": 0.0, "until": 1e12, "hosts": '["n0"]'}


def median_ms(work: Callable[[], object], repeat: int) -> float:
    return round(statistics.median(timeit.repeat(work, number=1, repeat=repeat)) * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, Any] = {"count": args.count}
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "infosvc.sqlite"
        now, bob = time.time(), args.count // 100
        write_ended(path, args.count - bob, lambda n: now - 20 * 86400 + n, owner="alice")
        write_ended(path, bob, lambda n: now - 25 * 86400 + n, first_id=args.count - bob + 1, owner="bob",
                    state=JobState.CANCELED)
        queries = [("+".join(names) or "none", EndedQuery(**{name: FILTERS[name] for name in names}))
                   for size in range(len(FILTERS) + 1) for names in itertools.combinations(FILTERS, size)]
        # a user and a state apart: the heaviest user's rarest state, a user of no job and the commonest
        queries += [("owner=alice+state=Canceled", EndedQuery(state="Canceled", owner="alice")),
                    ("owner=nobody+state=Finished", EndedQuery(state="Finished", owner="nobody"))]
        store = Store(path)
        try:
            before = (now, 10**9)  # below the newest: a page's second batch
            for label, query in queries:
                read = median_ms(lambda: store.ended_jobs(query, before, 65), args.repeat)
                counted = median_ms(lambda: store.count_ended(query), args.repeat)
                results[label] = {"batch_ms": read, "count_ms": counted}
                print(f"{label:32s} batch of 65 {read:8.2f} ms   count {counted:8.2f} ms", flush=True)
        finally:
            store.close()
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "ended_listing.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
