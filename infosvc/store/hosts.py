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


@dataclass(slots=True)
class Report:
    host_id: str
    document: bytes
    reported_at: float
    approved: bool  # the host's approval, should this report create it


def write_report(report: Report, bind_token: str | None, keep: int) -> Operation:
    """The report as the host's newest, in its history (of at most `keep`); with `bind_token`,
    that token digest bound to the host in the same operation (a claim is kept only with the
    report that made it)."""

    def write(conn: sqlite3.Connection) -> None:
        if bind_token is not None:
            # Several reports in flight may carry the same first claim (Aggregator.ingest): the
            # first to commit makes it. A clash on host_id (another token's claim) still fails.
            conn.execute("INSERT INTO token_bindings (token_hash, host_id, bound_at) VALUES (?, ?, ?) "
                         "ON CONFLICT(token_hash) DO NOTHING", [bind_token, report.host_id, report.reported_at])
        conn.execute(
            "INSERT INTO hosts (id, document, reported_at, first_seen, approved, paused) VALUES (?, ?, ?, ?, ?, 0) "
            "ON CONFLICT(id) DO UPDATE SET document = excluded.document, reported_at = excluded.reported_at",
            [report.host_id, report.document, report.reported_at, report.reported_at, int(report.approved)])
        conn.execute("INSERT INTO reports (host_id, reported_at, document) VALUES (?, ?, ?)",
                     [report.host_id, report.reported_at, report.document])
        # Bounded history: drop this host's reports older than its newest `keep`.
        conn.execute(
            "DELETE FROM reports WHERE host_id = ? AND seq < (SELECT seq FROM reports WHERE host_id = ? "
            "ORDER BY seq DESC LIMIT 1 OFFSET ?)", [report.host_id, report.host_id, keep - 1])

    return write


def write_flags(host_id: str, approved: bool | None, paused: bool | None) -> Callable[[sqlite3.Connection], bool]:
    """An admin decision; the operation says whether the host exists."""

    def write(conn: sqlite3.Connection) -> bool:
        changed = 0
        if approved is not None:
            changed = conn.execute("UPDATE hosts SET approved = ? WHERE id = ?", [int(approved), host_id]).rowcount
        if paused is not None:
            changed = conn.execute("UPDATE hosts SET paused = ? WHERE id = ?", [int(paused), host_id]).rowcount
        return changed > 0

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


def read_hosts(conn: sqlite3.Connection) -> Iterator[HostRecord]:
    for row in conn.execute("SELECT id, document, reported_at, first_seen, approved, paused FROM hosts"):
        yield HostRecord(row[0], row[1], row[2], row[3], bool(row[4]), bool(row[5]))


def read_history(conn: sqlite3.Connection, host_id: str, limit: int) -> list[tuple[float, bytes]]:
    rows = conn.execute("SELECT reported_at, document FROM reports WHERE host_id = ? ORDER BY seq DESC LIMIT ?",
                        [host_id, limit]).fetchall()
    return [(row[0], row[1]) for row in rows]


def read_bindings(conn: sqlite3.Connection) -> dict[str, str]:
    """token hash -> host id."""
    return dict(conn.execute("SELECT token_hash, host_id FROM token_bindings").fetchall())
