"""The queue's listing as accounting reads it (GET /v1/jobs, `infosvc jobs --all`, as sacct): the
jobs not ended first, from the queue's memory, in id order; then the ended jobs, newest ended first,
from the store, where they are kept for `[scheduler] keep_ended_days`. One page at a time, each
page's end a cursor the next starts from: `a<id>` (the jobs not ended, past that id), `e` (the
ended jobs, from the newest) or `e<ended>_<id>` (the ended jobs below that end time and id).

Paging walks the jobs not ended before the ended ones, so a job that ends while a client pages may
be listed twice (once queued or running, once ended), and none is missed."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Callable, Final

from infosvc.model.ccsjob import JobState
from infosvc.queue.jobqueue import JobQueue
from infosvc.sched.jobs import ENDED, JobRecord
from infosvc.store.jobs import EndedQuery

__all__ = ["ACTIVE_STATES", "Cursor", "Listing", "Page", "RENDER_SLICE", "listing_page"]

ACTIVE_STATES: Final = frozenset({JobState.QUEUED, JobState.RUNNING})
_CURSOR = re.compile(r"a([0-9]{1,18})|e|e([0-9]{1,12}(?:\.[0-9]{1,20})?)_([0-9]{1,18})")


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a page starts: past the job not ended of id `active_after`; or, `ended` set, among the
    ended jobs below (`before`: their (ended, id); None: from the newest)."""

    active_after: int = 0
    ended: bool = False
    before: tuple[float, int] | None = None

    @classmethod
    def parse(cls, text: str) -> Cursor | None:
        """The cursor a page gave as its `next`; None for anything else."""
        found = _CURSOR.fullmatch(text)
        if found is None:
            return None
        active, ended, job = found.groups()
        if active is not None:
            return cls(active_after=int(active))
        return cls(ended=True, before=None if ended is None else (float(ended), int(job)))

    def __str__(self) -> str:
        if not self.ended:
            return f"a{self.active_after}"
        return "e" if self.before is None else f"e{self.before[0]!r}_{self.before[1]}"


@dataclass(frozen=True, slots=True)
class Listing:
    """What a listing asks: one state (None: every one), one owner, the jobs on one CE's hosts,
    ended in [since, until] (jobs not ended: submitted by `until`), `limit` of them from `cursor`."""

    state: JobState | None = None
    user: str | None = None
    ce: str | None = None
    since: float | None = None
    until: float | None = None
    limit: int = 1000
    cursor: Cursor = field(default_factory=Cursor)


@dataclass(slots=True)
class Page:
    """One page: its jobs as the caller rendered them (the jobs not ended, then the ended ones), the
    cursor of the next page (None: this was the last), and how many jobs the listing holds in all."""

    parts: list[str]
    next: Cursor | None
    total: int


#: Ended jobs are read from the store this many at a time, so that a page cut short by its byte
#: bound never holds more of them in memory than it renders.
ENDED_BATCH: Final = 64
#: The jobs not ended are rendered on the event loop (which changes them) this many at a time, the
#: loop free between slices (~5 ms each): 10,000 in one go held it 0.2 s.
RENDER_SLICE: Final = 256


def _active(queue: JobQueue, listing: Listing) -> list[JobRecord]:
    """The listing's jobs not ended, in id order (on the event loop: the queue's memory)."""
    if listing.state is not None and listing.state not in ACTIVE_STATES:
        return []
    found = [job for job in queue.listed(state=None if listing.state is None else listing.state.value,
                                         user=listing.user, ce=listing.ce)
             if job.state in ACTIVE_STATES and (listing.until is None or job.submitted <= listing.until)]
    found.sort(key=lambda job: int(job.id))
    return found


def _hosts_of_ce(queue: JobQueue, ce: str) -> list[str]:
    """The hosts of CE `ce` now (those of its clusters): an ended job ran on it if on one of them."""
    site = queue.site()
    clusters = {cluster for cluster, ces in site.ces.items() if any(each.id == ce for each in ces)}
    return sorted(name for name, host in queue.table.rollup.hosts.items() if host.cluster in clusters)


def _ended_query(queue: JobQueue, listing: Listing) -> EndedQuery | None:
    if listing.state is not None and listing.state not in ENDED:
        return None
    hosts = None if listing.ce is None else json.dumps(_hosts_of_ce(queue, listing.ce))
    return EndedQuery(None if listing.state is None else listing.state.value, listing.user, listing.since,
                      listing.until, hosts)


class _Filling:
    """A page being filled: rendered parts, at most `limit` of them and, past the first, at most
    `budget` characters."""

    def __init__(self, render: Callable[[JobRecord], str], limit: int, budget: int) -> None:
        self.render, self.limit, self.budget = render, limit, budget
        self.parts: list[str] = []
        self.size = 0

    @property
    def room(self) -> int:
        return self.limit - len(self.parts)

    def take(self, job: JobRecord) -> bool:
        """Add `job` to the page if it fits; whether it did."""
        if len(self.parts) >= self.limit:
            return False
        part = self.render(job)
        if self.parts and self.size + len(part) > self.budget:
            return False
        self.parts.append(part)
        self.size += len(part)
        return True


async def listing_page(queue: JobQueue, listing: Listing, render: Callable[[JobRecord], str], budget: int) -> Page:
    """One page of the listing, each job as `render` writes it: at most `listing.limit` jobs and,
    past the first, at most `budget` characters; the next page goes on from its last job. The jobs
    not ended come from memory (rendered on the event loop, which changes them); the ended ones are
    read from the store and rendered in a worker thread, ENDED_BATCH at a time, until the page is
    full: a page cut short never holds more of them than it renders. The caller bounds how many
    listings are under way (web/jobs.py: they take turns)."""
    active = _active(queue, listing)
    query = _ended_query(queue, listing)
    cursor = listing.cursor
    page = _Filling(render, listing.limit, budget)
    store = queue.store
    rendered: set[int] = set()  # a job that ends between two slices is not read again as ended
    if not cursor.ended:
        last = cursor.active_after
        for job in active:
            if int(job.id) <= cursor.active_after:
                continue
            if job.state not in ACTIVE_STATES or (listing.state is not None and job.state is not listing.state):
                continue  # it changed between two slices: no longer what the listing asks
            if not page.take(job):
                counted = 0 if query is None else await asyncio.to_thread(store.count_ended, query)
                return Page(page.parts, Cursor(active_after=last), len(active) + counted)
            last = int(job.id)
            rendered.add(last)
            if len(page.parts) % RENDER_SLICE == 0:
                await asyncio.sleep(0)  # the loop's turn: a job may change meanwhile (above)
    if query is None:
        return Page(page.parts, None, len(active))
    ended_query = query

    def ended() -> tuple[Cursor | None, int]:
        before = cursor.before if cursor.ended else None
        while True:
            asked = min(ENDED_BATCH, page.room + 1)  # one more than the room: is there a next page?
            batch = store.ended_jobs(ended_query, before, asked)
            for job in batch:
                if int(job.id) in rendered:
                    before = (job.ended or 0.0, int(job.id))
                    continue
                if not page.take(job):
                    return Cursor(ended=True, before=before), store.count_ended(ended_query)
                before = (job.ended or 0.0, int(job.id))
            if len(batch) < asked:
                return None, store.count_ended(ended_query)

    following, counted = await asyncio.to_thread(ended)
    return Page(page.parts, following, len(active) + counted)
