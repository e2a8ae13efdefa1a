"""Accounting (infosvc/queue/accounting.py, GET /v1/jobs): ended jobs kept in the store for
`[scheduler] keep_ended_days`, outliving restarts, listed after the jobs not ended, newest ended
first, a page at a time; since/until, the cursor, the 400s; pruning at start; and a start that
reads only the newest ended jobs into memory. Real servers on loopback, real SQLite files; the
jobs of the past written as the queue writes them (support.jobrows)."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

import pytest

from infosvc.queue.ended import KEPT_ENDED
from infosvc.web import jobs as web_jobs
from infosvc.web.jobs import JOBS_PAGE_BYTES
from infosvc.web.keys import JOB_QUEUE
from support.jobrows import write_ended
from support.server import InProcessServer, Server, ServerFactory, wait_for

JOB = """<Job><Id>{name}</Id><Name>{name}</Name>{deps}<Executable>/bin/true</Executable>
<Requested><Processors>{procs}</Processors></Requested></Job>"""
DAY = 86400.0


def submit(server: Server, name: str, procs: int = 1, deps: str = "") -> str:
    reply = server.request("POST", "/v1/jobs", JOB.format(name=name, procs=procs, deps=deps).encode(),
                           token=server.tokens["submit"], headers={"Content-Type": "application/xml"})
    assert reply.status == 201, (reply.status, reply.body)
    return str(reply.json()["id"])


def state_of(server: Server, job_id: str) -> str:
    reply = server.get(f"/v1/jobs/{job_id}")
    assert reply.status == 200, reply.body
    return str(reply.json()["state"])


def run_to_end(server: Server, job_id: str, exit_code: int) -> None:
    """The executor of n0 starts the job's task and ends it with `exit_code`."""
    wait_for(lambda: state_of(server, job_id) == "Running", message=f"job {job_id} running")
    token = server.tokens["exec0"]
    path = f"/v1/jobs/{job_id}/tasks/0/events"
    assert server.request("POST", path, b'{"event": "started"}', token=token).status == 200
    body = f'{{"event": "ended", "exit_code": {exit_code}}}'.encode()
    assert server.request("POST", path, body, token=token).status == 200


def listing(server: Server, query: str = "") -> Any:
    reply = server.get(f"/v1/jobs{query}")
    assert reply.status == 200, (reply.status, reply.body)
    return reply.json()


def ids(answer: Any) -> list[str]:
    return [job["id"] for job in answer["jobs"]]


def every_page(server: Server, query: str) -> tuple[list[str], int]:
    """The ids of every page, following `next`; and how many pages."""
    found: list[str] = []
    path: str | None = f"/v1/jobs{query}"
    pages = 0
    while path is not None:
        reply = server.get(path)
        assert reply.status == 200, (reply.status, reply.body)
        found += ids(reply.json())
        path = reply.json()["next"]
        assert reply.json()["truncated"] is (path is not None)
        pages += 1
    return found, pages


def iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def test_ended_jobs_outlive_a_restart_listed_after_the_jobs_not_ended(serve: ServerFactory) -> None:
    """The real `infosvc serve`, stopped and started again on its file: the ended jobs are listed
    and read by id as before, each state by itself, after the job still queued."""
    server = serve(agents=1, executors={"exec0": "n0"})
    server.report("n0", server.agent_token(), processors=4)
    finished = submit(server, "ok")
    run_to_end(server, finished, 0)
    waiting = submit(server, "big", procs=64)  # no host has 64 processors: it waits
    canceled = submit(server, "gone", procs=64)
    assert server.request("DELETE", f"/v1/jobs/{canceled}", token=server.tokens["submit"]).status == 200
    failed = submit(server, "bad")
    run_to_end(server, failed, 3)
    wait_for(lambda: state_of(server, failed) == "Failed", message="job failed")
    before = listing(server)
    server.restart()
    after = listing(server)
    assert ids(after) == [waiting, failed, canceled, finished] == ids(before)
    assert after["total"] == 4 and after["next"] is None and after["truncated"] is False
    assert [job["state"] for job in after["jobs"]] == ["Queued", "Failed", "Canceled", "Finished"]
    assert ids(listing(server, "?state=Finished")) == [finished]
    assert ids(listing(server, "?state=failed")) == [failed]
    assert ids(listing(server, "?state=Queued")) == [waiting]
    one = server.get(f"/v1/jobs/{failed}").json()
    assert one["exit_code"] == 3 and [e["state"] for e in one["events"] if e["task"] is None][-1] == "Failed"


@pytest.fixture
def past(serve_app: ServerFactory, tmp_path: Any) -> InProcessServer:
    """A site with 5 jobs ended an hour apart, ten hours ago and on (ids 1-5), and 3 jobs waiting
    (ids 6-8: no host is big enough)."""
    server = serve_app(start=False)
    base = (time.time() // 3600 - 10) * 3600
    write_ended(server.db, 5, lambda number: base + number * 3600)
    server.start()
    for name in ("w1", "w2", "w3"):
        submit(server, name, procs=64)
    server.base = base  # type: ignore[attr-defined]
    return server  # type: ignore[return-value]


def test_pages_hold_the_jobs_not_ended_then_the_newest_ended_each_once(past: InProcessServer) -> None:
    whole = ["6", "7", "8", "5", "4", "3", "2", "1"]
    everything = listing(past)
    assert ids(everything) == whole and everything["total"] == 8 and everything["next"] is None
    exact = listing(past, "?limit=8")  # exactly one page: no next page to follow
    assert ids(exact) == whole and exact["next"] is None
    for limit in range(1, 8):
        found, pages = every_page(past, f"?limit={limit}")
        assert found == whole and pages == -(-8 // limit), limit
    first = listing(past, "?limit=3")  # the jobs not ended fill it: the next page starts at the ended ones
    assert ids(first) == ["6", "7", "8"] and first["total"] == 8
    assert first["next"].startswith("/v1/jobs?") and "limit=3" in first["next"]
    assert ids(listing(past, first["next"][len("/v1/jobs"):])) == ["5", "4", "3"]
    assert ids(listing(past, "?state=Queued&limit=3")) == ["6", "7", "8"]
    assert listing(past, "?state=Queued&limit=3")["next"] is None
    empty = listing(past, "?state=Failed")
    assert empty == {"jobs": [], "total": 0, "truncated": False, "next": None}
    assert ids(listing(past, "?user=nobody")) == []
    found, _ = every_page(past, "?state=Finished&limit=2")
    assert found == ["5", "4", "3", "2", "1"]


def test_since_and_until_select_ended_jobs_by_their_end_both_included(past: InProcessServer) -> None:
    base: float = past.base  # type: ignore[attr-defined]
    between = f"?since={quote(iso(base + 2 * 3600))}&until={quote(iso(base + 4 * 3600))}"
    assert ids(listing(past, between)) == ["4", "3", "2"]  # the waiting jobs came after `until`
    assert ids(listing(past, f"?since={quote(iso(base + 4 * 3600))}")) == ["6", "7", "8", "5", "4"]
    assert ids(listing(past, between + "&state=Finished")) == ["4", "3", "2"]
    assert ids(listing(past, f"?state=Finished&since={base + 2 * 3600 + 0.5}")) == ["5", "4", "3"]
    assert ids(listing(past, f"?state=Finished&until={base + 2 * 3600 - 0.5}")) == ["1"]
    assert ids(listing(past, f"?since={base + 5 * 3600}&until={base + 5 * 3600}&state=Finished")) == ["5"]
    # an instant in another offset, and a date (midnight UTC)
    plus_one = time.strftime("%Y-%m-%dT%H:%M:%S+01:00", time.gmtime(base + 5 * 3600 + 3600))
    assert ids(listing(past, f"?state=Finished&since={quote(plus_one)}")) == ["5"]
    day = time.strftime("%Y-%m-%d", time.gmtime(base + 5 * 3600 + DAY))
    assert ids(listing(past, f"?since={day}")) == ["6", "7", "8"]  # none ended since tomorrow; the waiting jobs
    assert ids(listing(past, f"?until={base}")) == []  # the waiting jobs were submitted after it
    paged, pages = every_page(past, f"?since={base + 3 * 3600}&limit=2")
    assert paged == ["6", "7", "8", "5", "4", "3"] and pages == 3


@pytest.mark.parametrize("query", [
    "?state=Sleeping", "?state=", "?limit=0", "?limit=10001", "?limit=x", "?limit=%C2%B2", "?limit=-1",
    "?since=yesterday", "?until=nan", "?since=inf", "?since=2026-13-01", "?since=10&until=5",
    "?cursor=zzz", "?cursor=a-1", "?cursor=e1.5", "?cursor=", "?cursor=a99999999999999999999",
    "?state=Queued&state=Finished", "?limit=1&limit=2", "?color=red"])
def test_bad_parameters_are_a_400_naming_the_parameter(serve_app: ServerFactory, query: str) -> None:
    server = serve_app()
    reply = server.get(f"/v1/jobs{query}")
    assert reply.status == 400, (query, reply.status, reply.body)
    named = query[1:].split("=")[0]
    assert reply.json()["detail"]["parameter"] == ("until" if "until=5" in query else named), reply.body


def test_old_ended_jobs_are_pruned_at_start_but_the_newest_id(serve_app: ServerFactory) -> None:
    server = serve_app(start=False)
    now = time.time()
    write_ended(server.db, 10, lambda number: now - 40 * DAY + number)  # past keep_ended_days (30)
    write_ended(server.db, 2, lambda number: now - 29 * DAY, first_id=11)
    server.start()
    wait_for(lambda: server.sql("SELECT count(*) FROM jobs")[0][0] == 2, message="the old jobs pruned")
    assert server.sql("SELECT id FROM jobs ORDER BY id") == [(11,), (12,)]
    assert server.sql("SELECT DISTINCT job_id FROM job_events ORDER BY job_id") == [(11,), (12,)]
    assert ids(listing(server)) == ["12", "11"]
    assert server.get("/v1/jobs/3").status == 404


def test_the_newest_job_is_kept_so_that_no_id_is_given_twice(serve_app: ServerFactory) -> None:
    server = serve_app(start=False)
    write_ended(server.db, 5, lambda number: time.time() - 40 * DAY + number)
    server.start()
    wait_for(lambda: server.sql("SELECT count(*) FROM jobs")[0][0] == 1, message="the old jobs pruned")
    assert ids(listing(server)) == ["5"]
    assert submit(server, "next", procs=64) == "6"


def test_keep_ended_days_keeps_them_longer(serve_app: ServerFactory) -> None:
    server = serve_app({"scheduler": {"keep_ended_days": 60}}, start=False)
    write_ended(server.db, 3, lambda number: time.time() - 40 * DAY + number)
    server.start()
    assert ids(listing(server)) == ["3", "2", "1"]


def test_a_start_reads_only_the_newest_ended_jobs_and_the_rest_from_the_store(serve_app: ServerFactory) -> None:
    """Past KEPT_ENDED, ended jobs stay in the store: listed, read by id, and depended on."""
    count = KEPT_ENDED + 200
    server = serve_app(agents=1, executors={"exec0": "n0"}, start=False)
    base = time.time() - DAY
    write_ended(server.db, count, lambda number: base + number)
    server.start()
    assert isinstance(server, InProcessServer)  # its app is at hand: what the queue holds in memory
    queue = server._runner.app[JOB_QUEUE]
    assert len(queue.jobs) == KEPT_ENDED and min(int(job) for job in queue.jobs) == count - KEPT_ENDED + 1
    found, pages = every_page(server, "?limit=1000")
    assert found == [str(number) for number in range(count, 0, -1)] and pages == 2
    assert listing(server, "?limit=1")["total"] == count
    oldest = server.get("/v1/jobs/1").json()
    assert oldest["state"] == "Finished" and oldest["events"][0]["detail"] == "submitted"
    server.report("n0", server.agent_token(), processors=4)
    after = submit(server, "after", deps="<Dependency>1</Dependency>")  # job 1 is in the store only
    wait_for(lambda: state_of(server, after) == "Running", message="the dependent job started")
    for unknown in ("\u00b2", "99999999999999999999", str(count + 5)):  # no job of the queue, nor in the store
        reply = server.request("POST", "/v1/jobs", JOB.format(name="x", procs=1, deps=f"<Dependency>{unknown}</Dependency>")
                               .encode(), token=server.tokens["submit"], headers={"Content-Type": "application/xml"})
        assert reply.status == 400 and "depends on" in reply.json()["error"], (unknown, reply.body)


def test_ce_lists_the_ended_jobs_that_ran_on_its_hosts(serve_app: ServerFactory) -> None:
    server = serve_app(agents=1, start=False)
    now = time.time()
    write_ended(server.db, 2, lambda number: now - 100 + number)  # on n0
    server.start()
    assert ids(listing(server, "?ce=default")) == []  # n0 has not reported: on no CE's hosts
    server.report("n0", server.agent_token(), processors=4)
    assert ids(listing(server, "?ce=default")) == ["2", "1"] and listing(server, "?ce=default")["total"] == 2
    assert ids(listing(server, "?ce=default&state=Finished&limit=1")) == ["2"]
    assert ids(listing(server, "?ce=elsewhere")) == []


def test_a_page_stops_at_its_byte_bound_and_the_next_goes_on_from_there(past: InProcessServer) -> None:
    # Each submission is within its own budget; a page of many of them is not: 40 jobs of a
    # 120,000-character name answered 4.8 MB in one page (10,000 of them, 1.2 GB).
    name = "n" * 120_000
    long = [submit(past, f"{name}{i}", procs=64) for i in range(40)]
    reply = past.get("/v1/jobs")
    first = reply.json()
    assert 1 <= len(first["jobs"]) < 40 and first["truncated"] is True and first["total"] == 8 + 40
    assert len(reply.body) <= JOBS_PAGE_BYTES + 130_000  # the bound, and at most the job that passed it
    found, pages = every_page(past, "")
    assert found == ["6", "7", "8", *long, "5", "4", "3", "2", "1"] and pages >= 2
    assert ids(listing(past, "?limit=2")) == ["6", "7"]  # the limit still bounds a page of small jobs


def test_pages_cut_by_bytes_anywhere_list_every_job_once(past: InProcessServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # a bound a job or two long: the page stops within the jobs not ended, at their end, at the
    # first ended job (its next page starts the ended ones) and among the ended ones
    whole = ["6", "7", "8", "5", "4", "3", "2", "1"]
    size = len(json.dumps(listing(past, "?limit=1")["jobs"][0], separators=(",", ":")))
    for bound in range(size // 2, size * 5, max(1, size // 7)):
        monkeypatch.setattr(web_jobs, "JOBS_PAGE_BYTES", bound)
        for query in ("", "?limit=3"):
            found, path = [], f"/v1/jobs{query}"
            while path is not None:
                answer = listing(past, path[len("/v1/jobs"):])
                parts = [len(json.dumps(job, separators=(",", ":"))) for job in answer["jobs"]]
                assert len(parts) == 1 or sum(parts) <= bound, (bound, query, parts)
                found += ids(answer)
                path = answer["next"]
            assert found == whole, (bound, query)


def test_a_page_cut_by_bytes_reads_no_more_ended_jobs_than_it_holds(serve_app: ServerFactory,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # each ended job may be large (its hosts, its names): a page cut short by its byte bound read
    # every job `limit` allowed (10,000) before it was cut; now a batch at a time
    from infosvc.queue.accounting import ENDED_BATCH
    from infosvc.store import Store

    server = serve_app(agents=1, start=False)
    now = time.time()
    write_ended(server.db, 600, lambda number: now - 1000 + number)
    server.start()
    read: list[int] = []
    ended_jobs = Store.ended_jobs

    def counted(self: Store, *args: Any) -> Any:
        found = ended_jobs(self, *args)
        read.append(len(found))
        return found

    monkeypatch.setattr(Store, "ended_jobs", counted)
    size = len(json.dumps(listing(server, "?limit=1")["jobs"][0], separators=(",", ":")))
    read.clear()
    monkeypatch.setattr(web_jobs, "JOBS_PAGE_BYTES", size * 3)
    page = listing(server, "?limit=10000")
    assert len(page["jobs"]) == 3 and page["truncated"] is True and page["total"] == 600
    assert sum(read) <= 3 + ENDED_BATCH, read
    found, pages = every_page(server, "?limit=10000")
    assert found == [str(number) for number in range(600, 0, -1)] and pages == 200
