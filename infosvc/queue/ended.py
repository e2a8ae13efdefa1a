"""The queue's ended jobs: kept in the store for `[scheduler] keep_ended_days` (accounting: GET
/v1/jobs reads them there, infosvc/queue/accounting.py), and in memory only the newest KEPT_ENDED
(the owners' run times the `predictive` policy reads, the CEs' run time ratio) and those a queued
job depends on (upkeep releases it by them). A start reads no more than those, so that its time
and memory do not grow with the ended jobs stored; older ones are read back by id when asked for
(GET /v1/jobs/{id}, a new submission's dependency). Pruning deletes a batch per write, on the
store's writer thread, at start and every hour."""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable

from infosvc.errors import NotFound, excerpt
from infosvc.loglimit import LogLimiter
from infosvc.matching import Requirements
from infosvc.model.ccsjob import JobState
from infosvc.queue.jobnames import JobNames
from infosvc.sched.jobs import ENDED, JobRecord
from infosvc.sched.request import JobRequest
from infosvc.store import Store, StoreCorrupt
from infosvc.store.jobs import EndedQuery, prune_ended

__all__ = ["FORGET_SLACK", "KEPT_ENDED", "PRUNE_BATCH", "PRUNE_SECONDS", "EndedJobs"]

log = logging.getLogger("infosvc.queue")
_failures = LogLimiter(log)

#: The newest ended jobs kept in memory.
KEPT_ENDED = 1_000
#: Ended jobs past KEPT_ENDED are let go of this many at a time, not at every end.
FORGET_SLACK = 100
#: Ended jobs pruned from the store per write (each its own savepoint of the group writer).
PRUNE_BATCH = 500
#: How often ended jobs past `keep_ended_days` are looked for (and at start).
PRUNE_SECONDS = 3600.0
DAY = 86400.0


def numbers(ids: Iterable[str]) -> list[int]:
    """The queue's ids among `ids` (a dependency's JobId may be any text) as the store's numbers:
    only as the queue spells them (str of a number from 1), which is how memory knows them too, so
    that `01` is not a second name of job 1 (read from the store while memory held its newer copy)."""
    return [int(job) for job in ids if job.isascii() and job.isdigit() and len(job) <= 18 and job[0] != "0"]


def depended_on(jobs: Iterable[JobRecord]) -> set[str]:
    """The jobs that queued jobs depend on: kept in memory while they wait."""
    return {after.job for job in jobs if job.state is JobState.QUEUED for after in job.request.after}


class EndedJobs:
    """The ended jobs of one queue: its `jobs` and `requirements` (the queue's own dicts, changed in
    place) against its store, on its clock."""

    def __init__(self, store: Store, jobs: dict[str, JobRecord], requirements: dict[str, Requirements | None],
                 names: JobNames, clock: Callable[[], float], keep_days: float) -> None:
        self.store = store
        self.jobs = jobs
        self.requirements = requirements
        self.names = names
        self.clock = clock
        self.keep_days = keep_days

    def at_start(self) -> list[JobRecord]:
        """What a start reads (blocking): the jobs not ended, the newest KEPT_ENDED ended ones, and
        the ended jobs a queued one depends on."""
        records = self.store.jobs(ended=False)
        records += self.store.ended_jobs(EndedQuery(), None, KEPT_ENDED)
        known = {job.id for job in records}
        records += self.store.jobs_by_id(numbers(depended_on(records) - known))
        return sorted(records, key=lambda job: int(job.id))

    async def find(self, job_id: str) -> JobRecord:
        """A job in memory, or an ended one read from the store."""
        job = self.jobs.get(job_id)
        if job is None:
            found = await asyncio.to_thread(self.store.jobs_by_id, numbers([job_id]))
            if not found:
                raise NotFound(f"no job {excerpt(job_id)!r}")
            job = found[0]
        return job

    async def count_events(self, job_id: str, details: Iterable[str]) -> int:
        """How many of job `job_id`'s own stored events have a detail LIKE one of `details` (its
        controls, to bound them: queue/jobcontrols.py); 0 for an id the queue never gives."""
        number = numbers([job_id])
        return await asyncio.to_thread(self.store.count_job_events, number[0], details) if number else 0

    def _let_go(self, jobs: Iterable[JobRecord]) -> None:
        pinned = depended_on(self.jobs.values())
        for job in jobs:
            if job.id not in pinned:
                del self.jobs[job.id]
                self.requirements.pop(job.id, None)

    def forget(self) -> None:
        """Let go of the ended jobs past the newest KEPT_ENDED (they stay in the store)."""
        ended = [job for job in self.jobs.values() if job.state in ENDED]
        if len(ended) > KEPT_ENDED + FORGET_SLACK:
            ended.sort(key=lambda job: (job.ended or 0.0, int(job.id)))
            self._let_go(ended[:len(ended) - KEPT_ENDED])

    async def recall(self, requests: Iterable[JobRequest]) -> None:
        """The ended jobs these depend on (by id, or by their owner's name for one) that memory has
        let go of, read back from the store: a dependency is resolved, and released, from memory."""
        requests = list(requests)
        named = {after.job for request in requests for after in request.after if not after.by_name}
        named |= {job for request in requests for after in request.after
                  if (job := self.names.newest(request.owner, after.job)) is not None}
        wanted = numbers(job for job in named if job not in self.jobs)
        if wanted:
            for found in await asyncio.to_thread(self.store.jobs_by_id, wanted):
                if found.state in ENDED:
                    self.jobs.setdefault(found.id, found)

    async def prune(self) -> int:
        """Delete from the store the jobs ended more than `keep_days` ago, a batch per write, and
        let go of them in memory; how many. The store keeps the job of the highest id (ids are
        not given twice), and memory its copy."""
        cutoff = self.clock() - self.keep_days * DAY
        pruned = 0
        while True:
            done = int(await self.store.write(prune_ended(cutoff, PRUNE_BATCH, numbers(depended_on(self.jobs.values())))))
            pruned += done
            if done < PRUNE_BATCH:
                break
            await asyncio.sleep(0)
        newest = max(map(int, self.jobs), default=0)
        self._let_go([job for job in self.jobs.values() if job.state in ENDED and (job.ended or 0.0) < cutoff
                      and int(job.id) != newest])
        return pruned

    async def prune_forever(self, interval: float = PRUNE_SECONDS) -> None:
        """`prune` now and every `interval` seconds."""
        while True:
            try:
                pruned = await self.prune()
                if pruned:
                    log.info("%d jobs ended more than %g days ago deleted from the store", pruned, self.keep_days)
            except StoreCorrupt as exc:  # the store said so once, with what to do; no stack to add to it
                _failures.log(logging.ERROR, "StoreCorrupt", "pruning ended jobs failed: the store is %s", exc)
            except Exception as exc:  # noqa: BLE001 - tried again at the next interval
                _failures.log(logging.ERROR, type(exc).__name__, "pruning ended jobs failed", exc_info=True)
            await asyncio.sleep(interval)
