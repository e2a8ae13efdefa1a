"""How the store reads ended jobs a page at a time (infosvc/store/jobs.py read_ended, count_ended; GET
/v1/jobs): every combination of the listing's filters is read in an index's order, newest first,
with no sort of every matching job per batch of a page (SQLite's temp B-tree), and a user's jobs by
an index of their own (migration 9). A real store file with a few thousand ended jobs, written as
the queue writes them (support.jobrows); the plans SQLite gives for the very statements the reads
run, and their answers, page after page, against the jobs filtered here."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path
from typing import Any, Iterator

import pytest

from infosvc.model.ccsjob import JobState
from infosvc.sched.jobs import JobRecord
from infosvc.store import MIGRATIONS, Store, connect
from infosvc.store.jobs import EndedQuery, count_ended, read_ended

from support.jobrows import write_ended

START = 1_800_000_000.0
# alice's Finished jobs 1..2400, bob's Canceled 2401..2700, alice's Failed 2701..2800; every third
# job ends at the same time as the one before it, so that pages also part jobs of one end time.
ALICE, BOB, FAILED = 2400, 300, 100
#: what a listing may filter by (infosvc/queue/accounting.py), each with a value that selects some
FILTERS: dict[str, Any] = {"state": "Canceled", "owner": "alice", "since": START + 300.0, "until": START + 2600.0,
                           "hosts": '["n0"]'}
#: ended jobs read at a time, as a listing reads them (infosvc/queue/accounting.py ENDED_BATCH)
BATCH = 64


def ended_at(number: int) -> float:
    return START + number - (number % 3 == 0)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    path = tmp_path_factory.mktemp("ended") / "infosvc.sqlite"
    write_ended(path, ALICE, ended_at, owner="alice")
    write_ended(path, BOB, ended_at, first_id=ALICE + 1, owner="bob", state=JobState.CANCELED)
    write_ended(path, FAILED, ended_at, first_id=ALICE + BOB + 1, owner="alice", state=JobState.FAILED)
    made = Store(path)
    yield made
    made.close()


class Recording:
    """A connection that keeps each statement run through it, with its arguments."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.statements: list[tuple[str, list[Any]]] = []

    def execute(self, sql: str, args: Any = ()) -> sqlite3.Cursor:
        self.statements.append((sql, list(args)))
        return self.conn.execute(sql, args)


def plan(conn: sqlite3.Connection, statement: tuple[str, list[Any]]) -> list[str]:
    sql, args = statement
    return [step[-1] for step in conn.execute("EXPLAIN QUERY PLAN " + sql, args)]


def queries() -> Iterator[tuple[str, EndedQuery]]:
    for size in range(len(FILTERS) + 1):
        for names in itertools.combinations(FILTERS, size):
            yield "+".join(names) or "none", EndedQuery(**{name: FILTERS[name] for name in names})


def selects(job: JobRecord, query: EndedQuery) -> bool:
    ended = job.ended
    return (ended is not None and query.state in (None, job.state.value) and query.owner in (None, job.owner)
            and (query.since is None or ended >= query.since) and (query.until is None or ended <= query.until)
            and (query.hosts is None or "n0" in job.hosts))


@pytest.mark.parametrize("label,query", list(queries()), ids=[label for label, _ in queries()])
def test_every_filter_reads_its_pages_in_index_order_and_lists_each_job_once(store: Store, label: str,
                                                                             query: EndedQuery) -> None:
    """A page's batches after its first, and every page after the first, start below a cursor: each
    such read used to sort every ended job the filter selects (`since` without `until`: 135 ms a
    batch of 65 at 50,000 jobs); and a user's jobs were found by reading every ended job."""
    conn = connect(store.path).conn
    try:
        recording: Any = Recording(conn)  # read_ended and count_ended take it for the connection
        first = [job.id for job in read_ended(recording, query, None, BATCH)]
        before = (START + 10.0**6, 10**9)  # above every job: a filter that selects none is read below a cursor too
        listed: list[str] = []
        while True:
            batch = read_ended(recording, query, before, BATCH)
            listed += [job.id for job in batch]
            if len(batch) < BATCH:
                break
            before = (batch[-1].ended or 0.0, int(batch[-1].id))
        total = count_ended(recording, query)
        steps = [plan(conn, statement) for statement in recording.statements]
    finally:
        conn.close()
    everyone = sorted((job for job in store.jobs() if selects(job, query)),
                      key=lambda job: (job.ended or 0.0, int(job.id)), reverse=True)
    assert listed == [job.id for job in everyone] and total == len(everyone)
    assert first == listed[:BATCH]
    for step in steps:
        assert not any("TEMP B-TREE" in line or "MULTI-INDEX OR" in line for line in step), step
        assert not any(line.startswith("SCAN jobs") for line in step), step  # every job read
        if query.owner is not None:
            assert "jobs_owner_ended" in step[0], step
    counted = steps[-1]
    if query.hosts is None:  # the count reads the index alone; the hosts are in the row
        assert "COVERING INDEX" in counted[0], counted


def test_a_store_of_schema_8_gets_the_index_of_a_user_s_ended_jobs(tmp_path: Path) -> None:
    path = tmp_path / "infosvc.sqlite"
    write_ended(path, 30, ended_at, owner="alice")
    write_ended(path, 20, ended_at, first_id=31, owner="bob", state=JobState.CANCELED)
    with sqlite3.connect(path) as old:  # as schema 8 left it, its jobs there: migration 9 only adds this index
        old.execute("DROP INDEX IF EXISTS jobs_owner_ended")
        old.execute("DROP TABLE IF EXISTS slurm_withdrawals")  # migration 10's
        old.execute("PRAGMA user_version = 8")
    store = Store(path)
    try:
        assert [job.id for job in store.ended_jobs(EndedQuery(owner="bob"), (ended_at(40), 40), 5)] == \
            ["39", "38", "37", "36", "35"]
        assert store.count_ended(EndedQuery(owner="bob", state="Canceled")) == 20
    finally:
        store.close()
    check = sqlite3.connect(path)
    try:
        assert check.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) >= 9
        (sql,) = check.execute("SELECT sql FROM sqlite_master WHERE name = 'jobs_owner_ended'").fetchone()
        assert "WHERE ended IS NOT NULL" in sql
        columns = [row[2] for row in check.execute("PRAGMA index_info(jobs_owner_ended)")]
        assert columns[:3] == ["owner", "ended", "id"]
    finally:
        check.close()
