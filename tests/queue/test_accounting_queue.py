"""The queue's ended jobs over time (infosvc/queue/jobqueue.py: prune, the memory it keeps): a real
store and aggregator on a clock the test moves, so that `keep_ended_days` passes in a moment."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any, Iterator

import pytest

from infosvc.config.site import parse_config
from infosvc.errors import NotFound
from infosvc.hosts.aggregator import Aggregator
from infosvc.hosts.tokens import Tokens
from infosvc.matching import Site
from infosvc.model.ccsjob import JobState
from infosvc.queue.ended import FORGET_SLACK, KEPT_ENDED, numbers
from infosvc.queue import submissions
from infosvc.queue.jobcontrols import Actor
from infosvc.queue.jobqueue import JobQueue
from infosvc.store import Store, StoreCorrupt

from support.jobrows import write_ended

ADMIN = Actor(admin=True, submitter="s", user=None, name="an administrator")
START = 1_800_000_000.0
DAY = 86400.0
JOB = b"<Job><Id>j</Id><Executable>/bin/true</Executable><Requested><Processors>64</Processors></Requested></Job>"


class Clocked:
    """A store, its aggregator and a queue keeping ended jobs `days`, all on the test's clock."""

    def __init__(self, path: Path, days: int = 30) -> None:
        self.now = START
        self.store = Store(path)
        self.agg = Aggregator(parse_config({}), self.store, Tokens(), clock=lambda: self.now,
                              monotonic=lambda: self.now)
        self.queue = JobQueue(self.store, self.agg.table, site=lambda: Site.of(self.agg.table.rollup),
                              clock=lambda: self.now, keep_ended_days=days)
        self.loop = asyncio.new_event_loop()

    def ended_job(self) -> str:
        """A job submitted now and canceled now (it asks more than any host has)."""
        records, _ = self.loop.run_until_complete(self.queue.submit(JOB, "application/xml", owner="alice",
                                                                    submitter="s", admin=True))
        job_id = records[0].id
        self.loop.run_until_complete(self.queue.cancel(job_id, ADMIN))
        return job_id

    def stored(self) -> list[str]:
        return [job.id for job in self.store.jobs()]


@pytest.fixture
def clocked(tmp_path: Path) -> Iterator[Clocked]:
    made = Clocked(tmp_path / "q.sqlite")
    yield made
    made.loop.close()
    made.store.close()


def test_ended_jobs_are_pruned_once_keep_ended_days_have_passed(clocked: Clocked) -> None:
    first = clocked.ended_job()
    clocked.now += 10 * DAY
    second, third = clocked.ended_job(), clocked.ended_job()
    clocked.now = START + 30 * DAY  # the first ended exactly 30 days ago: kept
    assert clocked.loop.run_until_complete(clocked.queue.ended.prune()) == 0 and clocked.stored() == [first, second, third]
    clocked.now += 1
    assert clocked.loop.run_until_complete(clocked.queue.ended.prune()) == 1 and clocked.stored() == [second, third]
    assert first not in clocked.queue.jobs
    clocked.now += 100 * DAY  # every one past its time: the newest is kept, so that its id is never given again
    assert clocked.loop.run_until_complete(clocked.queue.ended.prune()) == 1 and clocked.stored() == [third]
    assert clocked.store.job_events(int(second)) == [] and clocked.store.job_events(int(third))
    assert clocked.ended_job() == str(int(third) + 1)


def test_pruning_goes_in_batches(tmp_path: Path) -> None:
    write_ended(tmp_path / "q.sqlite", 1203, lambda number: START - 40 * DAY + number)
    clocked = Clocked(tmp_path / "q.sqlite")
    try:
        clocked.queue.load()
        assert clocked.loop.run_until_complete(clocked.queue.ended.prune()) == 1202
        assert clocked.stored() == ["1203"] and list(clocked.queue.jobs) == ["1203"]
    finally:
        clocked.loop.close()
        clocked.store.close()


def test_a_running_queue_lets_go_of_ended_jobs_past_those_it_keeps(clocked: Clocked) -> None:
    """Memory holds the newest KEPT_ENDED ended jobs (and at most FORGET_SLACK more between passes);
    the store holds them all."""
    made = [clocked.ended_job() for _ in range(KEPT_ENDED + FORGET_SLACK + 1)]
    clocked.loop.run_until_complete(clocked.queue.pass_once())
    kept = [job.id for job in clocked.queue.jobs.values() if job.state is JobState.CANCELED]
    assert kept == made[-KEPT_ENDED:]
    assert len(clocked.stored()) == len(made)


def test_pruning_a_damaged_store_says_so_in_one_line_without_a_stack(clocked: Clocked,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    # The store answers every write to a damaged file with StoreCorrupt, having logged the damage
    # and what to do once (infosvc/store); the hourly prune adds one line, not a traceback.
    async def damaged(operation: object) -> object:
        raise StoreCorrupt(clocked.store.path, "database disk image is malformed")

    clocked.store.write = damaged  # type: ignore[method-assign]

    async def one_round() -> None:
        pruning = asyncio.ensure_future(clocked.queue.ended.prune_forever(interval=3600))
        await asyncio.sleep(0.05)
        pruning.cancel()

    with caplog.at_level("ERROR", logger="infosvc.queue"):
        clocked.loop.run_until_complete(one_round())
    lines = [r for r in caplog.records if "pruning ended jobs failed" in r.getMessage()]
    assert len(lines) == 1 and not lines[0].exc_info, lines
    assert "damaged (database disk image is malformed)" in lines[0].getMessage()


def group_document(jobs: int, padding: int = 10_000, feature: str = "") -> bytes:
    asks = f"<Feature>{feature}</Feature>" if feature else ""
    return (f"<JobGroup><Id>g</Id><JobDefaults><Executable>/bin/true</Executable><Environment>"
            f"<Variable name='PAD'>{'p' * padding}</Variable></Environment></JobDefaults>"
            + "".join(f"<Job><Id>j{i}</Id><Requested><Processors>64</Processors>{asks}</Requested></Job>"
                      for i in range(jobs))
            + "</JobGroup>").encode()


def test_a_group_s_document_is_stored_once_and_kept_while_one_of_its_jobs_is(clocked: Clocked, tmp_path: Path) -> None:
    # Each of a group's jobs stored the whole document: 1,000 jobs of a 256 KiB document wrote 256 MB.
    body = group_document(50)
    records, _ = clocked.loop.run_until_complete(clocked.queue.submit(body, "application/xml", owner="alice",
                                                                      submitter="s", admin=True))
    ids = [job.id for job in records]
    with sqlite3.connect(tmp_path / "q.sqlite") as conn:
        assert conn.execute("SELECT count(*), sum(length(document)) FROM job_documents").fetchone() == (1, len(body))
        assert conn.execute("SELECT sum(length(document)) FROM jobs").fetchone() == (0,)
    assert all(clocked.store.job_document(int(job_id)) == (body, "application/xml") for job_id in ids)
    for job_id in ids:
        clocked.loop.run_until_complete(clocked.queue.cancel(job_id, ADMIN))
    clocked.now += 31 * DAY
    assert clocked.loop.run_until_complete(clocked.queue.ended.prune()) == 49  # the newest job is kept
    assert clocked.store.job_document(int(ids[-1])) == (body, "application/xml")
    later = clocked.ended_job()
    clocked.now += 31 * DAY
    assert clocked.loop.run_until_complete(clocked.queue.ended.prune()) == 1
    with sqlite3.connect(tmp_path / "q.sqlite") as conn:  # the group's document went with its last job
        assert conn.execute("SELECT id FROM job_documents").fetchall() == [(int(later),)]


def test_a_restart_reads_a_group_s_document_once(clocked: Clocked, monkeypatch: pytest.MonkeyPatch) -> None:
    body = group_document(30, padding=10, feature="gpu")
    records, _ = clocked.loop.run_until_complete(clocked.queue.submit(body, "application/xml", owner="alice",
                                                                      submitter="s", admin=True))
    read: list[int] = []
    real = submissions.prepare

    def counting(*args: Any) -> Any:
        read.append(len(args[0]))
        return real(*args)
    monkeypatch.setattr(submissions, "prepare", counting)
    restarted = JobQueue(clocked.store, clocked.agg.table, site=lambda: Site.of(clocked.agg.table.rollup),
                         clock=lambda: clocked.now)
    assert restarted.load() == 30
    assert read == [len(body)]  # not once per job: 1,000 jobs read a 256 KiB document 1,000 times
    assert all(restarted.requirements[job.id] is not None for job in records)
    assert {restarted.requirements[job.id] is restarted.requirements[records[0].id] for job in records} == {True}


def test_jobs_stored_before_documents_were_kept_apart_read_their_own(clocked: Clocked, tmp_path: Path) -> None:
    # A database of schema 7 kept each job's document in its row; migration 8 leaves those rows be.
    body = group_document(3, padding=10, feature="gpu")
    records, _ = clocked.loop.run_until_complete(clocked.queue.submit(body, "application/xml", owner="alice",
                                                                      submitter="s", admin=True))
    with sqlite3.connect(tmp_path / "q.sqlite") as conn:
        conn.execute("UPDATE jobs SET document = ?", [body])
        conn.execute("DELETE FROM job_documents")
    assert [clocked.store.job_document(int(job.id)) for job in records] == [(body, "application/xml")] * 3
    restarted = JobQueue(clocked.store, clocked.agg.table, site=lambda: Site.of(clocked.agg.table.rollup),
                         clock=lambda: clocked.now)
    assert restarted.load() == 3 and all(restarted.requirements[job.id] is not None for job in records)


def test_only_the_queue_s_own_spelling_of_an_id_is_read_from_the_store(clocked: Clocked) -> None:
    """`01` read job 1 from the store (GET /v1/jobs/01), a second name for it, and the stored copy
    where memory held a newer one; ids are the queue's str() of a number from 1."""
    assert numbers(["1", "12", "01", "0", "+1", "-1", " 1", "1 ", "1.0", "\u0661", "\uff11", "", "x"]) == [1, 12]
    job_id = clocked.ended_job()
    found = clocked.loop.run_until_complete(clocked.queue.ended.find(job_id))
    assert found.id == job_id
    with pytest.raises(NotFound):
        clocked.loop.run_until_complete(clocked.queue.ended.find("0" + job_id))
