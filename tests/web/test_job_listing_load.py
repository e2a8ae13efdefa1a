"""GET /v1/jobs under load an anonymous client can make (a review's findings): a `ce=` listing
built the site's CE map again for every job it looked at, on the event loop (a site of 200 CEs:
4-5 s a request, /healthz as long); listings were not bounded in number and read the store in the
worker threads the scheduling pass plans in (24 anonymous listings at once held a job's start
15 s); the jobs not ended were rendered on the event loop in one go (10,000 of them: /healthz
0.2 s a listing, 0.75 s with four). Real servers on loopback, real SQLite files."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Iterator

import pytest

from infosvc.queue import accounting
from infosvc.store import Store
from infosvc.web import jobs as web_jobs
from infosvc.web.keys import JOB_QUEUE
from support.jobrows import write_ended
from support.overlap import Overlap
from support.server import InProcessServer, ServerFactory, wait_for

JOB = """<Job><Id>{name}</Id><Name>{name}</Name><Executable>/bin/true</Executable>
<Requested><Processors>{procs}</Processors></Requested></Job>"""


def submit(server: InProcessServer, name: str, procs: int = 1) -> str:
    reply = server.request("POST", "/v1/jobs", JOB.format(name=name, procs=procs).encode(),
                           token=server.tokens["submit"], headers={"Content-Type": "application/xml"})
    assert reply.status == 201, (reply.status, reply.body)
    return str(reply.json()["id"])


@pytest.fixture
def site(serve_app: ServerFactory) -> Iterator[InProcessServer]:
    """A site of one host, n0, with its executor, and 300 jobs that ended on it."""
    server = serve_app(agents=1, executors={"exec0": "n0"}, start=False)
    now = time.time()
    write_ended(server.db, 300, lambda number: now - 1000 + number)
    server.start()
    assert isinstance(server, InProcessServer)
    server.report("n0", server.agent_token(), processors=4)
    yield server


def test_a_ce_listing_builds_the_site_s_ce_map_once(site: InProcessServer) -> None:
    queue = site._runner.app[JOB_QUEUE]
    built = []
    real = queue.site

    def counted() -> Any:
        built.append(1)
        return real()

    queue.site = counted
    try:
        reply = site.get("/v1/jobs?ce=default&limit=10000")
        assert reply.status == 200 and reply.json()["total"] == 300, reply.body[:300]
        assert len(built) <= 2, f"the site's CE map built {len(built)} times for one listing"
        built.clear()
        assert site.get("/v1/jobs?ce=nowhere").json()["total"] == 0
        assert len(built) <= 2, f"the site's CE map built {len(built)} times for one listing"
    finally:
        queue.site = real


def test_the_scheduling_pass_has_threads_of_its_own(site: InProcessServer) -> None:
    # every worker thread of the loop's default pool busy (as with many listings, history reads and
    # events at once): the pass that starts a job must not wait for one of them
    release = threading.Event()

    async def fill() -> None:
        loop = asyncio.get_running_loop()
        for _ in range(64):  # more than the default pool's threads (min(32, CPUs + 4))
            loop.run_in_executor(None, release.wait)

    jobs = site._runner.app[JOB_QUEUE].jobs  # read here: GET /v1/jobs/{id} reads its events in a worker thread
    submit(site, "wide", procs=64)  # waits: its submission has the scheduler's machine built, with n0 in it
    asyncio.run_coroutine_threadsafe(fill(), site._loop).result(10)
    try:
        job = submit(site, "now")
        wait_for(lambda: jobs[job].state.value != "Queued", timeout=10,
                 message="the job started while every default worker thread was busy")
    finally:
        release.set()


def test_listings_take_turns_and_a_reader_with_a_token_has_places_of_its_own(
        site: InProcessServer, monkeypatch: pytest.MonkeyPatch) -> None:
    overlap = Overlap()
    real = Store.ended_jobs

    def slow(self: Store, *args: Any) -> Any:
        with overlap.timed():
            return real(self, *args)

    monkeypatch.setattr(Store, "ended_jobs", slow)
    path = "/v1/jobs?state=Finished&limit=10"
    statuses, (anonymous, known) = overlap.during_flood(site.get, [path] * 16, lambda: (
        site.get(path, timeout=60), site.get(path, token=site.tokens["submit"], timeout=60)))
    assert overlap.most == 1, f"{overlap.most} listings read the store at once"
    assert 503 in statuses and anonymous.status == 503, (statuses, anonymous.status)
    assert anonymous.headers["retry-after"] and anonymous.json()["error"]
    assert known.status == 200 and len(known.json()["jobs"]) == 10, known.body[:300]


def test_the_jobs_not_ended_are_rendered_a_slice_at_a_time(site: InProcessServer,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # the loop counts its turns; each job's rendering notes the count: one turn for every job
    # was the event loop held for the whole page
    for n in range(3 * accounting.RENDER_SLICE):
        submit(site, f"w{n}", procs=64)  # no host is big enough: they wait
    turns = [0]
    running = [True]

    async def count() -> None:
        while running[0]:
            turns[0] += 1
            await asyncio.sleep(0)

    ticker = asyncio.run_coroutine_threadsafe(count(), site._loop)
    seen: list[int] = []
    real = web_jobs._job_text

    def noted(job: Any) -> str:
        seen.append(turns[0])
        return real(job)

    monkeypatch.setattr(web_jobs, "_job_text", noted)
    try:
        page = site.get("/v1/jobs?state=Queued&limit=10000").json()
    finally:
        running[0] = False
        ticker.result(10)
    assert len(page["jobs"]) == 3 * accounting.RENDER_SLICE
    assert len(set(seen)) >= 3, f"{len(seen)} jobs rendered in {len(set(seen))} turns of the event loop"


class _CancelBetweenSlices:
    """accounting's asyncio, whose first turn given back between two slices runs a cancel of
    `victim` to its end first (as a DELETE handled there would)."""

    def __init__(self, queue: Any, victim: str) -> None:
        self.queue, self.victim, self.done = queue, victim, False

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def sleep(self, delay: float) -> None:
        if not self.done:
            self.done = True
            from infosvc.queue.jobcontrols import Actor

            await self.queue.cancel(self.victim, Actor(True, "x", None, "test"))
        await asyncio.sleep(delay)


@pytest.mark.parametrize("query", ["", "state=Queued&"])
def test_a_job_that_ends_between_two_slices_is_listed_once_and_as_asked(
        site: InProcessServer, monkeypatch: pytest.MonkeyPatch, query: str) -> None:
    # a review: it was rendered Canceled among the jobs not ended, and read again from the store
    # in the same page; and a listing of Queued jobs held it
    ids = [submit(site, f"w{n}", procs=64) for n in range(accounting.RENDER_SLICE + 10)]
    victim = ids[-1]
    monkeypatch.setattr(accounting, "asyncio", _CancelBetweenSlices(site._runner.app[JOB_QUEUE], victim))
    page = site.get(f"/v1/jobs?{query}limit=10000").json()
    listed = [job["id"] for job in page["jobs"]]
    assert len(listed) == len(set(listed)), "a job listed twice in one page"
    if query:
        assert {job["state"] for job in page["jobs"]} == {"Queued"} and victim not in listed
    else:
        assert listed.count(victim) == 1
