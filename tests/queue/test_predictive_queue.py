"""The job queue under `[scheduler] policy = "predictive"` (infosvc/queue/jobqueue.py,
queue/predictions.py, queue/planning.py): predictions from each owner's ended jobs, the slack order
within a CCS priority, the priorities still first; a real Aggregator and SQLite store on a clock the
test moves, as tests/queue/test_queue.py."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

import pytest

from infosvc.matching import Site
from infosvc.model.ccsjob import JobState
from infosvc.publish.jobs import job_json
from infosvc.sched import Policy
from infosvc.model.ccsjob import JobState
from infosvc.hosts.aggregator import Aggregator
from infosvc.config.site import parse_config
from infosvc.queue.jobqueue import JobQueue
from infosvc.hosts.tokens import Role, Tokens, new_token
from infosvc.store import Store

from support.documents import node_document

START = 1_800_000_000.0


class PredictiveSite:
    """One host of one processor, and a queue by `predictive`, on a clock the test moves."""

    def __init__(self, path: Path) -> None:
        self.now = START
        self.store = Store(path)
        self.tokens = Tokens()
        self.agg = Aggregator(parse_config({"scheduler": {"policy": "predictive"}}), self.store, self.tokens,
                              clock=lambda: self.now, monotonic=lambda: self.now)
        self.queue = JobQueue(self.store, self.agg.table, site=lambda: Site.of(self.agg.table.rollup),
                              clock=lambda: self.now, policy=Policy.PREDICTIVE,
                              executors=self.tokens.executor_hosts)
        self.agg.on_change.append(self.queue.hosts_changed)
        self.agg.tree.read_queue(self.queue)
        self.loop = asyncio.new_event_loop()
        self.tokens.add(new_token(), Role.EXECUTOR, host="h1")  # the test plays its executor (task_report)
        key = self.tokens.add(new_token(), Role.AGENT)
        self.run(lambda: self.agg.ingest(key, node_document("h1", processors=1)))

    def run(self, work: Callable[[], Awaitable[Any]]) -> Any:
        return self.loop.run_until_complete(work())

    def submit(self, name: str, owner: str, limit: int, priority: int | None = None) -> str:
        rank = "" if priority is None else f"<Priority>{priority}</Priority>"
        body = (f"<Job><Id>{name}</Id><Name>{name}</Name><Executable>/bin/true</Executable>{rank}"
                f"<Requested><Processors>1</Processors><Duration>{limit}</Duration></Requested></Job>")
        records, _ = self.run(lambda: self.queue.submit(body.encode(), "application/xml", owner=owner,
                                                         submitter="s", admin=False))
        return str(records[0].id)

    def end(self, job_id: str) -> None:
        self.run(lambda: self.queue.task_report(job_id, 0, host="h1", began=True))
        self.run(lambda: self.queue.task_report(job_id, 0, host="h1", began=False, exit_code=0))

    def schedule(self) -> None:
        self.run(self.queue.pass_once)

    def state(self, job_id: str) -> JobState:
        return self.queue.get(job_id).state

    def close(self) -> None:
        self.loop.close()
        self.store.close()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[PredictiveSite]:
    made = PredictiveSite(tmp_path / "q.sqlite")
    yield made
    made.close()


def test_a_short_job_by_its_owner_s_history_goes_ahead_of_a_long_one_submitted_before(site: PredictiveSite) -> None:
    first = site.submit("first", "alice", 1000)
    site.schedule()
    assert site.state(first) is JobState.RUNNING
    other = site.submit("other", "erin", 5000)
    blocker = site.submit("blocker", "carol", 5000)
    site.now += 100
    site.end(first)  # alice's jobs take 100 s, whatever they ask
    site.schedule()
    site.now += 1000
    site.end(other)
    site.schedule()
    assert site.state(blocker) is JobState.RUNNING  # it waited 1,100 s: the guard's bound is 275 s
    bob = site.submit("bob", "bob", 1000)  # no history: predicted by its limit
    site.now += 10
    alice = site.submit("alice", "alice", 1000)  # predicted 100 s: slack 1,000 s, bob's 10,000 s
    site.schedule()
    assert [job_json(site.queue.get(j))["predicted_run_seconds"] for j in (bob, alice)] == [1000, 100]
    assert "expected at" in site.queue.get(alice).reason  # alice's is the head now: both its times
    site.now += 50
    site.end(blocker)
    site.schedule()
    assert (site.state(alice), site.state(bob)) == (JobState.RUNNING, JobState.QUEUED)


def alice_takes_100_seconds(site: PredictiveSite) -> None:
    """One job of alice's runs 100 s, started as it came: what her next jobs are predicted from."""
    first = site.submit("first", "alice", 1000)
    site.schedule()
    site.now += 100
    site.end(first)


def test_where_no_job_has_waited_yet_the_queue_is_easy_s_order(site: PredictiveSite) -> None:
    # The same short job, on a site where every job so far started as it came: the guard's bound is
    # 0 (no floor), so every job is overdue, in submission order, and the short one does not pass.
    alice_takes_100_seconds(site)
    blocker = site.submit("blocker", "carol", 5000)
    site.schedule()
    assert site.state(blocker) is JobState.RUNNING  # at once: the longest wait here is 0
    bob = site.submit("bob", "bob", 1000)
    site.now += 10
    alice = site.submit("alice", "alice", 1000)  # predicted 100 s: the slack order would put it first
    site.now += 50
    site.end(blocker)
    site.schedule()
    assert (site.state(bob), site.state(alice)) == (JobState.RUNNING, JobState.QUEUED)


def test_the_ccs_priorities_still_come_first(site: PredictiveSite) -> None:
    alice_takes_100_seconds(site)
    blocker = site.submit("blocker", "carol", 5000)
    site.schedule()
    urgent = site.submit("urgent", "bob", 1000, priority=3)  # AboveNormal, predicted by its limit
    short = site.submit("short", "alice", 1000)  # Normal, predicted 100 s
    site.end(blocker)
    site.schedule()
    assert (site.state(urgent), site.state(short)) == (JobState.RUNNING, JobState.QUEUED)


def test_the_guard_follows_the_longest_wait_of_the_sites_own_jobs(site: PredictiveSite) -> None:
    # Once a job here has waited 40 h, the guard's bound is a quarter of that, 10 h: a job that has
    # waited 7 h is still in the slack order, and a short one goes ahead of it.
    alice_takes_100_seconds(site)
    blocker = site.submit("blocker", "carol", 500_000)
    site.schedule()
    waiter = site.submit("waiter", "bob", 1000)
    site.now += 40 * 3600
    site.end(blocker)
    site.schedule()
    assert site.state(waiter) is JobState.RUNNING  # it waited 40 h
    site.end(waiter)
    again = site.submit("again", "carol", 500_000)
    site.schedule()
    old = site.submit("old", "dave", 5000)  # no history: predicted 5,000 s, a slack of 50,000 s
    site.now += 7 * 3600
    short = site.submit("short", "alice", 1000)  # predicted 100 s: its key is 25,200 + 1,000 s after old's submission
    site.end(again)
    site.schedule()
    assert (site.state(short), site.state(old)) == (JobState.RUNNING, JobState.QUEUED)


def test_a_prediction_reads_the_job_s_own_limit_by_the_part_of_theirs_the_owner_s_jobs_ran(
        site: PredictiveSite) -> None:
    alice_takes_100_seconds(site)  # a tenth of its 1,000 s limit
    blocker = site.submit("blocker", "carol", 5000)
    site.schedule()
    longer = site.submit("longer", "alice", 5000)
    shorter = site.submit("shorter", "alice", 200)
    site.schedule()
    assert site.state(blocker) is JobState.RUNNING
    # a tenth of each one's limit, where the mean of her run times would say 100 s for both
    assert [job_json(site.queue.get(j))["predicted_run_seconds"] for j in (longer, shorter)] == [500, 20]


def test_a_job_whose_start_lowered_its_limit_counts_its_run_against_what_it_asked(tmp_path: Path) -> None:
    # a review: a 10 h job killed at its CE's 1 h limit ran the whole of the limit it ran under,
    # and its owner's next 10 h job was predicted at 10 h; it ran a tenth of what it asked
    from infosvc.queue.predictions import history_of
    from infosvc.store.jobs import request_json, request_of

    site = PredictiveSite(tmp_path / "lowered.sqlite")
    try:
        first = site.submit("first", "alice", 36_000)
        job = site.queue.get(first)
        job.start({"h1": 1}, True, 0.0, site.now, limit=3600)
        assert (job.estimate, job.request.asked_estimate) == (3600, 36_000)
        assert request_of(request_json(job.request)) == job.request  # kept across a restart
        job.started, job.ended = site.now, site.now + 3600
        assert history_of([job]).predict("alice", 36_000) == 3600
    finally:
        site.close()


def test_an_asked_limit_of_infinity_is_kept_as_such(tmp_path: Path) -> None:
    from infosvc.store.jobs import request_json, request_of
    from infosvc.sched.request import JobRequest

    lowered = JobRequest("j", "alice", estimate=3600, asked_estimate=math.inf)
    assert request_of(request_json(lowered)).asked_estimate == math.inf
    assert request_of(request_json(JobRequest("j", "alice"))).asked_estimate is None
