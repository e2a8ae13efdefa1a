"""Ended jobs of the past written into a store's SQLite file as the queue writes them (store/jobs.py's
write_jobs, each job read from a real SSS document by the submission code), thousands a second:
for the tests and the benchmark (bench/ended_jobs.py) of what reads them back, without running
each job through a server first."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable

from infosvc.model.ccsjob import JobState
from infosvc.queue import prepare
from infosvc.queue.submissions import Filer
from infosvc.sched.jobs import Event, JobRecord
from infosvc.store import Store
from infosvc.store.jobs import write_jobs

DOCUMENT = (b"<Job><Id>past</Id><Name>past</Name><Executable>/bin/true</Executable>"
            b"<Requested><Processors>1</Processors></Requested></Job>")
#: jobs written per transaction
BATCH = 5000


def write_ended(db: Path, count: int, ended_at: Callable[[int], float], *, first_id: int = 1, owner: str = "alice",
                state: JobState = JobState.FINISHED, run_seconds: float = 60.0) -> None:
    """Jobs first_id .. first_id + count - 1, each ended (`state`) at ended_at(its id) after running
    `run_seconds`, with their events; the store made (migrated) if it is not there yet."""
    prepared, _ = prepare(DOCUMENT, "application/xml", Filer(owner))
    request = prepared[0].request
    store = Store(db)

    async def write() -> None:
        for start in range(first_id, first_id + count, BATCH):
            new, events = [], []
            for number in range(start, min(start + BATCH, first_id + count)):
                at = ended_at(number)
                job = JobRecord(str(number), request, at - run_seconds - 10, owner, submitter="past")
                job.started, job.hosts = at - run_seconds, {"n0": 1}
                events += [Event(job.id, None, JobState.QUEUED, job.submitted, "submitted"), *job.end(state, at, "past")]
                if state is JobState.FINISHED:
                    job.exit_code = 0
                new.append((job, DOCUMENT, "application/xml"))
            await store.write(write_jobs(new, [], events))

    try:
        asyncio.run(write())
    finally:
        store.close()
