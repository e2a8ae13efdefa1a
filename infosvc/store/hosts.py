"""The host operations of the store: what a report, an admin decision and a token binding write,
and how hosts, their history and the bindings are read back. Each write is a function of the
connection, run by the group-commit writer inside its transaction."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from infosvc.store.writer import Operation


@dataclass(slots=True)
class HostRecord:
    """One host as stored: its newest report and what the admin decided about it."""

    id: str
    document: bytes
    reported_at: float
    first_seen: float
    approved: bool
    paused: bool
    reason: str | None = None
    #: the newest report when it is a delta of `document` (None: `document` is the newest)
    delta: bytes | None = None
    #: the number of `document` in the reports (None: not known, a store from before deltas)
    base_seq: int | None = None
    #: the host as the last clean stop held it, in the snapshot's form, while that is still its
    #: newest report (None: read the documents), and its base when that differs
    snapshot: bytes | None = None
    snapshot_base: bytes | None = None


@dataclass(frozen=True, slots=True)
class SnapshotRow:
    """One host as held at a clean stop: its newest report's time, and the host (and the whole
    report its deltas build on, when that differs) in the snapshot's form."""

    host_id: str
    reported_at: float
    node: bytes
    base: bytes | None


@dataclass(frozen=True, slots=True)
class HostEvent:
    """An admin's decision on a host, as kept: approve, pause, resume or remove."""

    host_id: str
    at: float
    action: str
    reason: str | None


@dataclass(slots=True)
class Report:
    host_id: str
    document: bytes
    reported_at: float
    approved: bool  # the host's approval, should this report create it
    #: a delta report: the number of the whole report it builds on (None: a whole report)
    base: int | None = None


def write_report(report: Report, bind_token: str | None, keep: int) -> Operation:
    """The report as the host's newest, in its history (of at most `keep`, and the whole report
    the oldest of them builds on); with `bind_token`, that token digest bound to the host in the
    same operation (a claim is kept only with the report that made it). The operation gives the
    report's number in the history."""

    def write(conn: sqlite3.Connection) -> int:
        if bind_token is not None:
            # Several reports in flight may carry the same first claim (Aggregator.ingest): the
            # first to commit makes it. A clash on host_id (another token's claim) still fails.
            conn.execute("INSERT INTO token_bindings (token_hash, host_id, bound_at) VALUES (?, ?, ?) "
                         "ON CONFLICT(token_hash) DO NOTHING", [bind_token, report.host_id, report.reported_at])
        seq = conn.execute("INSERT INTO reports (host_id, reported_at, document, base) VALUES (?, ?, ?, ?)",
                           [report.host_id, report.reported_at, report.document, report.base]).lastrowid
        assert seq is not None
        if report.base is None:
            conn.execute(
                "INSERT INTO hosts (id, document, reported_at, first_seen, approved, paused, base_seq) "
                "VALUES (?, ?, ?, ?, ?, 0, ?) ON CONFLICT(id) DO UPDATE SET document = excluded.document, "
                "reported_at = excluded.reported_at, delta = NULL, base_seq = excluded.base_seq",
                [report.host_id, report.document, report.reported_at, report.reported_at, int(report.approved), seq])
        else:
            # Only over the whole report it builds on: should a whole one have come meanwhile (two
            # senders), the host's row keeps that newer base.
            conn.execute("UPDATE hosts SET delta = ?, reported_at = ? WHERE id = ? AND base_seq = ?",
                         [report.document, report.reported_at, report.host_id, report.base])
        # Bounded history: drop this host's reports older than its newest `keep`, but the whole
        # report the oldest kept one builds on (every other delta kept builds on it or on a whole
        # report kept: a delta builds on its host's newest whole report).
        conn.execute(
            "WITH cut AS (SELECT seq FROM reports WHERE host_id = :host ORDER BY seq DESC LIMIT 1 OFFSET :older) "
            "DELETE FROM reports WHERE host_id = :host AND seq < (SELECT seq FROM cut) AND seq IS NOT "
            "(SELECT base FROM reports WHERE host_id = :host AND seq >= (SELECT seq FROM cut) ORDER BY seq LIMIT 1)",
            {"host": report.host_id, "older": keep - 1})
        return seq

    return write


def write_flags(host_id: str, approved: bool | None, paused: bool | None,
                event: HostEvent | None = None) -> Callable[[sqlite3.Connection], bool]:
    """An admin decision (kept as `event` too, with its reason); the operation says whether the
    host exists."""

    def write(conn: sqlite3.Connection) -> bool:
        changed = 0
        if approved is not None:
            changed = conn.execute("UPDATE hosts SET approved = ? WHERE id = ?", [int(approved), host_id]).rowcount
        if paused is not None:
            changed = conn.execute("UPDATE hosts SET paused = ? WHERE id = ?", [int(paused), host_id]).rowcount
        if event is not None and changed:
            conn.execute("UPDATE hosts SET reason = ? WHERE id = ?", [event.reason, host_id])
            _write_event(conn, event)
        return changed > 0

    return write


def _write_event(conn: sqlite3.Connection, event: HostEvent) -> None:
    conn.execute("INSERT INTO host_events (host_id, at, action, reason) VALUES (?, ?, ?, ?)",
                 [event.host_id, event.at, event.action, event.reason])


def write_removal(event: HostEvent, purge: bool) -> Callable[[sqlite3.Connection], bool]:
    """A host removed: its row and its snapshot row go; its history of reports and decisions is kept
    (and the removal added to it), or with `purge` goes too. Its token binding stays: the token
    still names it."""

    def write(conn: sqlite3.Connection) -> bool:
        host_id = event.host_id
        existed = conn.execute("DELETE FROM hosts WHERE id = ?", [host_id]).rowcount > 0
        conn.execute("DELETE FROM host_snapshot WHERE host_id = ?", [host_id])
        if purge:
            conn.execute("DELETE FROM reports WHERE host_id = ?", [host_id])
            conn.execute("DELETE FROM host_events WHERE host_id = ?", [host_id])
        elif existed:
            _write_event(conn, event)
        return existed

    return write


def write_binding(token_hash: str, host_id: str) -> Operation:
    def write(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO token_bindings (token_hash, host_id, bound_at) VALUES (?, ?, ?)",
                     [token_hash, host_id, time.time()])

    return write


def drop_binding(token_hash: str) -> Operation:
    def write(conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM token_bindings WHERE token_hash = ?", [token_hash])

    return write


def write_snapshot(rows: list[SnapshotRow]) -> Operation:
    """The snapshot replaced by `rows`."""

    def write(conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM host_snapshot")
        conn.executemany("INSERT INTO host_snapshot (host_id, reported_at, node, base) VALUES (?, ?, ?, ?)",
                         [(r.host_id, r.reported_at, r.node, r.base) for r in rows])

    return write


def read_hosts(conn: sqlite3.Connection) -> Iterator[HostRecord]:
    """Every host, with its snapshot row where that was made from its newest report."""
    for row in conn.execute(
            "SELECT h.id, h.document, h.reported_at, h.first_seen, h.approved, h.paused, h.reason, h.delta, "
            "h.base_seq, s.node, s.base FROM hosts h "
            "LEFT JOIN host_snapshot s ON s.host_id = h.id AND s.reported_at = h.reported_at"):
        yield HostRecord(row[0], row[1], row[2], row[3], bool(row[4]), bool(row[5]), row[6], row[7], row[8], row[9],
                         row[10])


def read_history(conn: sqlite3.Connection, host_id: str, limit: int, since: float = float("-inf"),
                 until: float = float("inf")) -> list[tuple[float, bytes]]:
    """The host's newest `limit` reports received in [since, until], newest first, as they came
    (a delta as the delta)."""
    rows = conn.execute("SELECT reported_at, document FROM reports WHERE host_id = ? AND reported_at >= ? "
                        "AND reported_at <= ? ORDER BY seq DESC LIMIT ?", [host_id, since, until, limit]).fetchall()
    return [(row[0], row[1]) for row in rows]


def read_history_pages(conn: sqlite3.Connection, host_id: str, limit: int, since: float, until: float,
                       before: int | None) -> Iterator[tuple[int, float, bytes, bytes | None]]:
    """The host's reports received in [since, until] and numbered below `before` (None: from the
    newest), newest first, at most `limit`, each with its number and, for a delta, the whole
    report it builds on: one at a time, so that a reader that has what it wants stops reading
    the rest."""
    yield from conn.execute(
        "SELECT r.seq, r.reported_at, r.document, b.document FROM reports r LEFT JOIN reports b ON b.seq = r.base "
        "WHERE r.host_id = ? AND r.reported_at >= ? AND r.reported_at <= ? AND r.seq < ? ORDER BY r.seq DESC LIMIT ?",
        [host_id, since, until, (1 << 63) - 1 if before is None else before, limit])


def read_host_events(conn: sqlite3.Connection, host_id: str | None = None, until: float = float("inf")) -> list[HostEvent]:
    """Admin decisions up to `until`, oldest first (of one host, or of all)."""
    query = "SELECT host_id, at, action, reason FROM host_events WHERE at <= ?"
    args: list[object] = [until]
    if host_id is not None:
        query += " AND host_id = ?"
        args.append(host_id)
    return [HostEvent(*row) for row in conn.execute(query + " ORDER BY seq", args)]


class PastViewTooLarge(Exception):
    """More hosts were published at the instant than a past view holds: refused, not cut short."""

    def __init__(self, at: float, hosts: int, limit: int) -> None:
        super().__init__(f"{hosts} hosts were published at {at}, more than the {limit} a past view holds")
        self.at = at
        self.hosts = hosts
        self.limit = limit


#: The hosts published at :at, chosen in one query over the reports' index (reports_time:
#: host_id, reported_at, and the report's number): each host's newest report (the highest number;
#: SQLite takes the bare reported_at from that row) received at or before :at, unless an admin removed the host since that report and at or before :at (a
#: removal is kept as a host_events row, action 'remove'; a host that reported again after it is
#: back). Only then the bound: `total` says how many there are, so that more than :limit is
#: refused before any document is read. The documents (and a delta's base) are read row by row,
#: in the order of `live` (no ORDER BY out here: it would sort them, every document at once).
REPORTS_AT = """
    SELECT live.host_id, live.reported_at, r.document, b.document, live.total
    FROM (SELECT newest.host_id, newest.seq, newest.reported_at, count(*) OVER () AS total
          FROM (SELECT host_id, max(seq) AS seq, reported_at FROM reports
                WHERE reported_at <= :at GROUP BY host_id) AS newest
          WHERE NOT EXISTS (SELECT 1 FROM host_events e WHERE e.host_id = newest.host_id
                            AND e.action = 'remove' AND e.at >= newest.reported_at AND e.at <= :at)
          ORDER BY newest.host_id LIMIT :limit + 1) AS live
    JOIN reports r ON r.seq = live.seq
    LEFT JOIN reports b ON b.seq = r.base"""


def read_reports_at(conn: sqlite3.Connection, at: float,
                    limit: int) -> Iterator[tuple[str, float, bytes, bytes | None]]:
    """Each host published at `at`: its newest report received at or before `at`, and for a delta
    the whole report it builds on (what the service held of the site then), by host Id. A host
    removed at or before `at` and not heard from since is not in it; a removed host's history
    is otherwise kept, and it is in the views of before its removal. PastViewTooLarge, before
    any is read, when more than `limit` hosts were published then. The documents are read one
    at a time, as they are taken."""
    rows = conn.execute(REPORTS_AT, {"at": at, "limit": limit})
    for host_id, reported_at, document, base, total in rows:
        if total > limit:
            raise PastViewTooLarge(at, total, limit)
        yield host_id, reported_at, document, base


def read_bindings(conn: sqlite3.Connection) -> dict[str, str]:
    """token hash -> host id."""
    return dict(conn.execute("SELECT token_hash, host_id FROM token_bindings").fetchall())
