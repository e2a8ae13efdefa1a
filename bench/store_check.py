"""Benchmark of the store's check at start (PRAGMA quick_check) at 10,000 hosts.

Every `infosvc serve` runs PRAGMA quick_check over the whole SQLite file before it serves
(infosvc/store/), so the start takes longer as the file grows: hosts x
reports kept per host (`store.history_per_host`, 100 by default) x document size. This builds
stores as the service writes them and times the check.

For each `--reports` (reports per host): a store of `--hosts` hosts filled through
infosvc.store.Store.add_report, round-robin (as reports arrive: every host's first report, then
every host's second, ...), with the real agent's document varied per host (bench/ingest.py, ~6 KB),
the Store closed (so all is in the main file). Then:
  - quick_check, warm: the file in the OS page cache, as far as it fits (median of `--rounds`);
  - quick_check, cold: the file dropped from the page cache first (fsync, then
    posix_fadvise(DONTNEED)), so read from the disk, as after a reboot (`--cold-rounds`);
  - Store() open, warm and cold: the lock, the file read ahead in order (infosvc.store.read_ahead),
    quick_check, migrations: what the start pays before the host table is rebuilt;
  - integrity_check, warm, once (with --integrity): what the fuller check would cost instead.
Each figure is printed as it is measured.

Run with `python bench/store_check.py [--hosts 10000] [--reports 5 --reports 100] [--rounds 3]`;
prints a table and writes bench/results/store_check.json. It needs about 6 GB of free disk for
100 reports per host at 10,000 hosts (in --dir, default a temporary directory, removed after), and
~20 minutes with --integrity, most of it quick_check from the disk; so it is not in `make bench`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ingest import fleet_documents, host_name  # noqa: E402


def fill(db: Path, documents: list[bytes], reports: int) -> float:
    """The store as the service leaves it; returns the seconds it took."""
    from infosvc.store import Report, Store

    started = time.perf_counter()
    store = Store(db, history_per_host=reports)
    now = time.time()

    async def add_all() -> None:
        for k in range(reports):
            await asyncio.gather(*(store.add_report(Report(host_name(i), doc, now + k, True))
                                   for i, doc in enumerate(documents)))

    asyncio.run(add_all())
    store.close()
    return time.perf_counter() - started


def drop_from_page_cache(db: Path) -> None:
    fd = os.open(db, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def pragma(db: Path, name: str) -> float:
    started = time.perf_counter()
    conn = sqlite3.connect(db)
    try:
        found = [row[0] for row in conn.execute(f"PRAGMA {name}")]
    finally:
        conn.close()
    assert found == ["ok"], found
    return time.perf_counter() - started


def timed(action: Callable[[], Any], rounds: int, before: Callable[[], None] | None = None) -> dict[str, float]:
    times = []
    for _ in range(rounds):
        if before is not None:
            before()
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return {"median_s": statistics.median(times), "best_s": min(times), "worst_s": max(times)}


def measure(workdir: Path, documents: list[bytes], reports: int, rounds: int, cold_rounds: int,
            integrity: bool) -> dict[str, Any]:
    from infosvc.store import Store

    db = workdir / f"check-{reports}.sqlite"
    result: dict[str, Any] = {"hosts": len(documents), "reports_per_host": reports}

    def say(name: str, value: Any) -> None:
        result[name] = value
        shown = f"{value['median_s']:.2f} s (best {value['best_s']:.2f})" if isinstance(value, dict) else value
        print(f"  {reports} reports/host: {name} = {shown}", flush=True)

    say("fill_s", round(fill(db, documents, reports), 1))
    say("file_bytes", db.stat().st_size)
    say("quick_check_first", timed(lambda: pragma(db, "quick_check"), 1))
    say("quick_check_warm", timed(lambda: pragma(db, "quick_check"), rounds))
    say("store_open_warm", timed(lambda: Store(db).close(), rounds))
    if integrity:
        say("integrity_check_warm", timed(lambda: pragma(db, "integrity_check"), 1))
    say("quick_check_cold", timed(lambda: pragma(db, "quick_check"), cold_rounds, lambda: drop_from_page_cache(db)))
    say("store_open_cold", timed(lambda: Store(db).close(), cold_rounds, lambda: drop_from_page_cache(db)))
    for suffix in ("", "-wal", "-shm", ".lock"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=10000)
    p.add_argument("--reports", type=int, action="append", help="reports kept per host (5 and 100)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cold-rounds", type=int, default=1)
    p.add_argument("--integrity", action="store_true", help="also time PRAGMA integrity_check, once")
    p.add_argument("--dir", type=Path, help="where to build the stores (a temporary directory)")
    args = p.parse_args(argv)

    documents = fleet_documents(args.hosts)
    workdir = Path(tempfile.mkdtemp(prefix="infosvc-bench-check-", dir=args.dir))
    try:
        runs = [measure(workdir, documents, reports, args.rounds, args.cold_rounds, args.integrity) for reports in args.reports or [5, 100]]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results = {"cpus": os.cpu_count(), "python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version,
               "document_bytes_mean": statistics.fmean(map(len, documents)), "runs": runs}

    print(f"{args.hosts} hosts, documents of {results['document_bytes_mean']:.0f} bytes on average, SQLite {sqlite3.sqlite_version}")
    print("seconds; warm: the file in the page cache; cold: read from the disk, as after a reboot")
    print(f"{'reports/host':>12} {'file MiB':>9} {'fill':>6} {'quick_check warm':>17} {'cold':>7} "
          f"{'Store() warm':>13} {'cold':>7} {'integrity_check warm':>21}")
    for run in runs:
        integrity_s = f"{run['integrity_check_warm']['median_s']:21.2f}" if "integrity_check_warm" in run else f"{'-':>21}"
        print(f"{run['reports_per_host']:12d} {run['file_bytes'] / 2**20:9.0f} {run['fill_s']:6.0f} "
              f"{run['quick_check_warm']['median_s']:17.2f} {run['quick_check_cold']['median_s']:7.2f} "
              f"{run['store_open_warm']['median_s']:13.2f} {run['store_open_cold']['median_s']:7.2f} {integrity_s}")
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "store_check.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
