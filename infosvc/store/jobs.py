"""The queue's tables: every job as its newest row (what it asked, its state, where it runs, its
tasks) and every transition of a job or task, timestamped. A submission, a scheduling decision
and an executor's report are each one operation run by the group-commit writer, so an
acknowledged job is on disk before the submitter hears of it and survives kill -9."""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Iterator

from infosvc.model.ccsjob import JobState
from infosvc.model.job import Condition
from infosvc.sched.jobs import Event, JobRecord, TaskRecord
from infosvc.sched.request import After, JobRequest, TaskRequest
from infosvc.store.writer import Operation

__all__ = ["EndedQuery", "count_ended", "count_events", "next_job_id", "prune_ended", "read_ended", "read_events",
           "read_jobs", "read_jobs_by_id", "write_jobs"]


def _number(value: float) -> float | None:
    return None if value is None or math.isinf(value) else value


def request_json(request: JobRequest) -> str:
    data = asdict(request)
    data["estimate"] = _number(request.estimate)
    if request.asked_estimate is None:
        del data["asked_estimate"]  # rows as before it was kept
    elif math.isinf(request.asked_estimate):
        data["asked_estimate"] = "inf"  # JSON has no infinity; null is "not lowered"
    for task in data["tasks"]:
        task["estimate"] = _number(task["estimate"])
    return json.dumps(data, separators=(",", ":"))


def request_of(text: str) -> JobRequest:
    data: dict[str, Any] = json.loads(text)
    inf = math.inf
    tasks = tuple(TaskRequest(**{**task, "environment": tuple(tuple(pair) for pair in task["environment"]),
                                 "after": tuple(task["after"]),
                                 "estimate": inf if task["estimate"] is None else task["estimate"]})
                  for task in data.pop("tasks"))
    after = tuple(After(item["job"], Condition(item["condition"]), item["code"], item["by_name"], item.get("label", ""))
                  for item in data.pop("after"))
    asked = data.pop("asked_nodes")
    if data.get("asked_estimate") == "inf":
        data["asked_estimate"] = inf
    return JobRequest(**{**data, "estimate": inf if data["estimate"] is None else data["estimate"],
                         "asked_nodes": None if asked is None else tuple(asked),
                         "required_nodes": tuple(data["required_nodes"]),
                         "licenses": tuple((feature, int(count)) for feature, count in data.get("licenses", ())),
                         "tasks": tasks, "after": after})


def _tasks_json(tasks: list[TaskRecord]) -> str:
    return json.dumps([[t.state.value, t.host, t.dispatched, t.began, t.ended, t.exit_code, t.attempts]
                       for t in tasks], separators=(",", ":"))


def _tasks_of(text: str) -> list[TaskRecord]:
    return [TaskRecord(index, JobState(state), host, dispatched, began, ended, code, attempts)
            for index, (state, host, dispatched, began, ended, code, attempts) in enumerate(json.loads(text))]


_COLUMNS = ("id", "grp", "owner", "admin", "submitter", "submitted", "state", "reason", "held", "hosts", "exclusive",
            "memory", "started", "ended", "exit_code", "tasks")


def _row(job: JobRecord) -> list[Any]:
    return [int(job.id), job.group, job.owner, int(job.admin), job.submitter, job.submitted, job.state.value, job.reason,
            int(job.held), json.dumps(job.hosts), int(job.exclusive), job.memory_mb, job.started, job.ended,
            job.exit_code, _tasks_json(job.tasks)]


def write_jobs(new: Iterable[tuple[JobRecord, bytes, str]], changed: Iterable[JobRecord],
               events: Iterable[Event], *, only_if_queued: Iterable[str] = (),
               requests: Iterable[str] = ()) -> Operation:
    """New jobs (with the document and its content type: stored once for the jobs of one group,
    under the group's id), changed jobs' rows, and the events, in one transaction. `only_if_queued`: jobs among `changed` whose row is written only if it is still
    Queued in the store (a start decided off the event loop, which a cancel may have overtaken).
    `requests`: jobs among `changed` whose request changed too."""
    new, changed, events = list(new), list(changed), list(events)
    guarded, rewritten = set(only_if_queued), set(requests)

    def write(conn: sqlite3.Connection) -> None:
        placeholders = ",".join("?" * len(_COLUMNS))
        stored: set[int] = set()
        for job, document, content_type in new:
            conn.execute(f"INSERT INTO jobs ({','.join(_COLUMNS)}, request, document, content_type) "
                         f"VALUES ({placeholders}, ?, x'', ?)",
                         _row(job) + [request_json(job.request), content_type])
            key = _document_key(job)
            if key not in stored:
                stored.add(key)
                conn.execute("INSERT INTO job_documents (id, document, content_type) VALUES (?, ?, ?)",
                             [key, document, content_type])
        assignments = ",".join(f"{column} = ?" for column in _COLUMNS[1:])
        for job in changed:
            row = _row(job)
            guard = " AND state = 'Queued'" if job.id in guarded else ""
            if job.id in rewritten:  # a start lowered its run time limit to the CE's
                conn.execute(f"UPDATE jobs SET {assignments}, request = ? WHERE id = ?{guard}",
                             row[1:] + [request_json(job.request), row[0]])
            else:
                conn.execute(f"UPDATE jobs SET {assignments} WHERE id = ?{guard}", row[1:] + [row[0]])
        conn.executemany("INSERT INTO job_events (job_id, task, state, at, detail) VALUES (?, ?, ?, ?, ?)",
                         [(int(e.job), e.task, e.state.value, e.at, e.detail) for e in events])

    return write


def _document_key(job: JobRecord) -> int:
    """Where a job's document is stored: under its group's id (its first job's), else its own."""
    return int(job.group) if job.group is not None else int(job.id)


def next_job_id(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT max(id) FROM jobs").fetchone()
    return int(row[0] or 0) + 1


def read_jobs(conn: sqlite3.Connection, *, ended: bool = True) -> Iterator[JobRecord]:
    """Every job (or only those not ended), in id order."""
    where = "" if ended else " WHERE state IN ('Queued', 'Running')"
    for row in conn.execute(f"SELECT {','.join(_COLUMNS)}, request FROM jobs{where} ORDER BY id"):
        yield _record(row)


def _record(row: tuple[Any, ...]) -> JobRecord:
    (id_, group, owner, admin, submitter, submitted, state, reason, held, hosts, exclusive, memory, started, ended_at,
     code, tasks, request) = row
    return JobRecord(str(id_), request_of(request), submitted, owner, bool(admin), group, submitter, JobState(state),
                     reason, bool(held), json.loads(hosts), bool(exclusive), memory, started, ended_at, code,
                     _tasks_of(tasks))


def read_jobs_by_id(conn: sqlite3.Connection, ids: Iterable[int]) -> list[JobRecord]:
    """The jobs of these ids that the store holds, in id order."""
    wanted = sorted(set(ids))
    found: list[JobRecord] = []
    for start in range(0, len(wanted), 500):  # well under SQLite's bound on parameters
        chunk = wanted[start:start + 500]
        found += map(_record, conn.execute(f"SELECT {','.join(_COLUMNS)}, request FROM jobs WHERE id IN "
                                           f"({','.join('?' * len(chunk))}) ORDER BY id", chunk))
    return found


@dataclass(frozen=True, slots=True)
class EndedQuery:
    """Which ended jobs a listing reads: of one ended state (None: any), of one owner, ended in
    [since, until], on one of `hosts` (a JSON array of host names; None: anywhere)."""

    state: str | None = None
    owner: str | None = None
    since: float | None = None
    until: float | None = None
    hosts: str | None = None

    def where(self) -> tuple[str, list[Any]]:
        # `ended IS NOT NULL` is what the partial indexes of migrations 7 and 9 are made on: only
        # ended jobs have an end time. Ordered by (ended, id) they are read a page at a time, newest
        # first: by state, by owner, or any (tests/store/test_ended_reads.py holds every plan).
        terms, args = ["ended IS NOT NULL"], []
        # With an owner, the owner's index is read, never the state's (the unary + keeps SQLite from
        # choosing it): its work is then bounded by that owner's ended jobs, the state told from the
        # index entry, where the state's index could read every user's jobs of that state, a row
        # each (`?user=nobody&state=Finished`).
        state = "+state = ?" if self.owner is not None else "state = ?"
        for term, value in ((state, self.state), ("owner = ?", self.owner), ("ended >= ?", self.since),
                            ("ended <= ?", self.until)):
            if value is not None:
                terms.append(term)
                args.append(value)
        if self.hosts is not None:
            terms.append("EXISTS (SELECT 1 FROM json_each(jobs.hosts) AS h WHERE h.key IN "
                         "(SELECT value FROM json_each(?)))")
            args.append(self.hosts)
        return " AND ".join(terms), args


def read_ended(conn: sqlite3.Connection, query: EndedQuery, before: tuple[float, int] | None,
               limit: int) -> list[JobRecord]:
    """The ended jobs `query` selects, newest ended first (then highest id), below the cursor
    `before` (an (ended, id) a previous page ended at), at most `limit`."""
    where, args = query.where()
    if before is not None:
        # A row value (SQLite 3.15), not `ended < ? OR (ended = ? AND id < ?)`: with `ended >= ?`
        # (since=) SQLite read that OR as two ranges of the index and sorted every job they held,
        # for each batch of a page (a temp B-tree); this is one range, read in the index's order.
        where += " AND (ended, id) < (?, ?)"
        args += [before[0], before[1]]
    return [_record(row) for row in conn.execute(
        f"SELECT {','.join(_COLUMNS)}, request FROM jobs WHERE {where} ORDER BY ended DESC, id DESC LIMIT ?",
        [*args, limit])]


def count_ended(conn: sqlite3.Connection, query: EndedQuery) -> int:
    where, args = query.where()
    return int(conn.execute(f"SELECT count(*) FROM jobs WHERE {where}", args).fetchone()[0])


def prune_ended(cutoff: float, batch: int, keep: Iterable[int] = ()) -> Operation:
    """Delete up to `batch` jobs that ended before `cutoff`, with their events, oldest first; the
    operation answers how many. Never the job of the highest id (the next job's id is one above it:
    ids are not used twice), nor those of `keep` (jobs a queued job still depends on)."""
    kept = json.dumps(sorted(set(keep)))

    def prune(conn: sqlite3.Connection) -> int:
        rows = conn.execute(
            "SELECT id, grp FROM jobs WHERE ended IS NOT NULL AND ended < ? AND id < (SELECT max(id) FROM jobs) "
            "AND id NOT IN (SELECT value FROM json_each(?)) ORDER BY ended LIMIT ?", [cutoff, kept, batch]).fetchall()
        ids = [row[0] for row in rows]
        if ids:
            marks = ",".join("?" * len(ids))
            conn.execute(f"DELETE FROM job_events WHERE job_id IN ({marks})", ids)
            conn.execute(f"DELETE FROM jobs WHERE id IN ({marks})", ids)
            # a document goes with the last job it is of (a group's first job may end long before its last)
            keys = sorted({int(group) if group is not None else job for job, group in rows})
            conn.executemany("DELETE FROM job_documents WHERE id = ? AND NOT EXISTS (SELECT 1 FROM jobs WHERE id = ?) "
                             "AND NOT EXISTS (SELECT 1 FROM jobs WHERE grp = ?)", [(key, key, str(key)) for key in keys])
        return len(ids)

    return prune


def read_document(conn: sqlite3.Connection, job_id: int) -> tuple[bytes, str] | None:
    """The document job `job_id` came in (its group's), and its content type; a row stored before
    documents were kept apart has its own."""
    row = conn.execute("SELECT coalesce(d.document, j.document), coalesce(d.content_type, j.content_type) FROM jobs j "
                       "LEFT JOIN job_documents d ON d.id = coalesce(CAST(j.grp AS INTEGER), j.id) WHERE j.id = ?",
                       [job_id]).fetchone()
    return None if row is None else (bytes(row[0]), row[1])


def count_events(conn: sqlite3.Connection, job_id: int, details: Iterable[str]) -> int:
    """How many of job `job_id`'s own events (not its tasks') have a detail LIKE one of `details`."""
    likes = list(details)
    matched = " OR ".join(["detail LIKE ?"] * len(likes)) or "0"
    return int(conn.execute(f"SELECT count(*) FROM job_events WHERE job_id = ? AND task IS NULL AND ({matched})",
                            [job_id, *likes]).fetchone()[0])


def read_events(conn: sqlite3.Connection, job_id: int, limit: int = 1000) -> list[Event]:
    return [Event(str(job), task, JobState(state), at, detail) for job, task, state, at, detail in conn.execute(
        "SELECT job_id, task, state, at, detail FROM job_events WHERE job_id = ? ORDER BY seq LIMIT ?",
        [job_id, limit])]
