"""The store's tables and their migrations: each migration is applied once, in order, and the
file records how many it has had (PRAGMA user_version)."""

from __future__ import annotations

from typing import Callable, Final

import sqlite_utils

from infosvc.store.file import StoreError


def _migration_1(db: sqlite_utils.Database) -> None:
    db.table("hosts").create({"id": str, "document": bytes, "reported_at": float, "first_seen": float,
                              "approved": int, "paused": int}, pk="id")
    reports = db.table("reports")
    reports.create({"seq": int, "host_id": str, "reported_at": float, "document": bytes}, pk="seq")
    reports.create_index(["host_id", "seq"])
    bindings = db.table("token_bindings")
    bindings.create({"token_hash": str, "host_id": str, "bound_at": float}, pk="token_hash")
    bindings.create_index(["host_id"], unique=True)


def _migration_2(db: sqlite_utils.Database) -> None:
    """Host Ids in their canonical form (infosvc.model.hostid: lower case, no final dot), as every part
    now keys hosts. Where two stored Ids fold to one (`HostA` and `hosta`), the one already
    canonical is kept and the other's row and binding are dropped: its agent is refused until an
    admin rebinds it, rather than two hosts merging silently."""
    fold = "lower(CASE WHEN substr({c}, -1) = '.' THEN substr({c}, 1, length({c}) - 1) ELSE {c} END)"
    conn = db.conn
    for table, column in (("hosts", "id"), ("token_bindings", "host_id")):
        folded = fold.format(c=column)
        conn.execute(f"UPDATE OR IGNORE {table} SET {column} = {folded} WHERE {column} != {folded}")
        conn.execute(f"DELETE FROM {table} WHERE {column} != {folded}")
    folded = fold.format(c="host_id")
    conn.execute(f"UPDATE reports SET host_id = {folded} WHERE host_id != {folded}")


def _migration_3(db: sqlite_utils.Database) -> None:
    """The job queue (infosvc/store/jobs.py): each job's newest row, and every transition."""
    conn = db.conn
    conn.execute("""CREATE TABLE jobs (
        id INTEGER PRIMARY KEY, grp TEXT, owner TEXT NOT NULL, admin INTEGER NOT NULL, submitter TEXT NOT NULL,
        submitted REAL NOT NULL,
        state TEXT NOT NULL, reason TEXT NOT NULL, held INTEGER NOT NULL, hosts TEXT NOT NULL,
        exclusive INTEGER NOT NULL, memory REAL NOT NULL, started REAL, ended REAL, exit_code INTEGER,
        tasks TEXT NOT NULL, request TEXT NOT NULL, document BLOB NOT NULL, content_type TEXT NOT NULL)""")
    conn.execute("CREATE INDEX jobs_open ON jobs (state) WHERE state IN ('Queued', 'Running')")
    conn.execute("""CREATE TABLE job_events (
        seq INTEGER PRIMARY KEY, job_id INTEGER NOT NULL, task INTEGER, state TEXT NOT NULL, at REAL NOT NULL,
        detail TEXT NOT NULL)""")
    conn.execute("CREATE INDEX job_events_job ON job_events (job_id, seq)")


def _migration_4(db: sqlite_utils.Database) -> None:
    """Admin decisions with their reasons, kept as events (what a host's state was at a past time,
    GET /v1/glue?at=), and an index to find each host's report of a past time."""
    conn = db.conn
    conn.execute("ALTER TABLE hosts ADD COLUMN reason TEXT")
    conn.execute("""CREATE TABLE host_events (
        seq INTEGER PRIMARY KEY, host_id TEXT NOT NULL, at REAL NOT NULL, action TEXT NOT NULL, reason TEXT)""")
    conn.execute("CREATE INDEX host_events_host ON host_events (host_id, seq)")
    conn.execute("CREATE INDEX reports_time ON reports (host_id, reported_at)")


def _migration_5(db: sqlite_utils.Database) -> None:
    """Delta reports (infosvc/model/nodedelta.py): a report that builds on a whole one names its
    number (reports.base); a host's row keeps its newest whole report (document, and its number:
    base_seq) and the newest delta of it (delta; NULL when the newest report is whole)."""
    conn = db.conn
    conn.execute("ALTER TABLE reports ADD COLUMN base INTEGER")
    conn.execute("ALTER TABLE hosts ADD COLUMN delta BLOB")
    conn.execute("ALTER TABLE hosts ADD COLUMN base_seq INTEGER")
    conn.execute("UPDATE hosts SET base_seq = (SELECT max(seq) FROM reports WHERE reports.host_id = hosts.id)")


def _migration_6(db: sqlite_utils.Database) -> None:
    """The hosts as the server held them at its last clean stop, in a form that reads back without
    parsing their documents (infosvc/codec/node_compact.py): a row is used at start only while its
    host's newest report is the one it was made from (the same reported_at)."""
    db.conn.execute("""CREATE TABLE host_snapshot (
        host_id TEXT PRIMARY KEY, reported_at REAL NOT NULL, node BLOB NOT NULL, base BLOB)""")


def _migration_7(db: sqlite_utils.Database) -> None:
    """Accounting: ended jobs are kept for `[scheduler] keep_ended_days` and read from the store a
    page at a time (GET /v1/jobs), not held in memory. Only an ended job has an end time, so these
    partial indexes hold the ended jobs alone: by end time (any ended state), and by state and end
    time (`?state=Finished`), each page read in index order, newest first."""
    conn = db.conn
    conn.execute("CREATE INDEX jobs_ended ON jobs (ended, id) WHERE ended IS NOT NULL")
    conn.execute("CREATE INDEX jobs_state_ended ON jobs (state, ended, id) WHERE ended IS NOT NULL")


def _migration_8(db: sqlite_utils.Database) -> None:
    """A submitted document is stored once (job_documents, by the id of its first job, which a
    JobGroup's jobs name as their group), not in each of its jobs' rows: a group of 1,000 jobs
    stored its document 1,000 times. Rows stored before keep theirs in jobs.document (read when
    job_documents has none); new rows store an empty one there. The index finds a group's jobs,
    for the pruning that drops a document with the last job it is of."""
    conn = db.conn
    conn.execute("CREATE TABLE job_documents (id INTEGER PRIMARY KEY, document BLOB NOT NULL, content_type TEXT NOT NULL)")
    conn.execute("CREATE INDEX jobs_group ON jobs (grp) WHERE grp IS NOT NULL")


def _migration_9(db: sqlite_utils.Database) -> None:
    """A user's ended jobs (GET /v1/jobs?user=), by end time: without it each page read every ended
    job. The state is in the index too, after the order, not before it: `?user=&state=` is then
    told from the index alone (no row read for the owner's jobs of another state; the count reads
    no row at all), and `?user=` alone stays in one ordered range. An index on (owner, state, ended)
    would be a second one to write for each job that ends, and SQLite, with no statistics (the store
    runs no ANALYZE), does not choose it once `since` or `until` is asked too."""
    db.conn.execute("CREATE INDEX jobs_owner_ended ON jobs (owner, ended, id, state) WHERE ended IS NOT NULL")


def _migration_10(db: sqlite_utils.Database) -> None:
    """Slurm submissions whose sbatch went unanswered, each by its mark (the job's comment) and the
    account it went as: the job may be in Slurm, or come to be, and is withdrawn once Slurm answers,
    after a restart too (web/slurmside.py)."""
    db.conn.execute("CREATE TABLE slurm_withdrawals (marker TEXT PRIMARY KEY, account TEXT NOT NULL, since REAL NOT NULL)")


#: Schema migrations, applied in order; the database records how many it has had.
MIGRATIONS: Final[list[Callable[[sqlite_utils.Database], None]]] = [
    _migration_1, _migration_2, _migration_3, _migration_4, _migration_5, _migration_6,
    _migration_7, _migration_8, _migration_9, _migration_10]

def migrate(db: sqlite_utils.Database) -> int:
    """Bring the schema up to date; returns the schema version."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise StoreError(f"database schema version {version} is newer than this infosvc knows ({len(MIGRATIONS)})")
    for number in range(version, len(MIGRATIONS)):
        with db.conn:
            db.conn.execute("BEGIN IMMEDIATE")
            MIGRATIONS[number](db)
            db.conn.execute(f"PRAGMA user_version={number + 1}")
    return len(MIGRATIONS)

