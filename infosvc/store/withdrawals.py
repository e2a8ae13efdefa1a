"""Slurm submissions to withdraw (migration 10): an sbatch left unanswered may have made a job, which
the server cancels once Slurm answers (web/slurmside.py); kept here so that a restart meanwhile
does not forget it."""

from __future__ import annotations

import sqlite3

from infosvc.store.writer import Operation


def keep_withdrawal(marker: str, account: str, since: float) -> Operation:
    def write(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT OR REPLACE INTO slurm_withdrawals (marker, account, since) VALUES (?, ?, ?)",
                     [marker, account, since])

    return write


def drop_withdrawal(marker: str) -> Operation:
    def write(conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM slurm_withdrawals WHERE marker = ?", [marker])

    return write


def read_withdrawals(conn: sqlite3.Connection) -> list[tuple[str, str, float]]:
    """(marker, account, since) of each submission still to withdraw, oldest first."""
    return [(str(m), str(a), float(t)) for m, a, t in
            conn.execute("SELECT marker, account, since FROM slurm_withdrawals ORDER BY since, marker")]
