"""The job queue without a server (infosvc/queue/jobqueue.py): a real Aggregator and SQLite store,
driven by a clock the test moves, so that what happens at a run time limit is decided by the test,
not by the machine's load."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

import pytest

from infosvc.matching import Site
from infosvc.model.ccsjob import JobState
from infosvc.hosts.aggregator import Aggregator
from infosvc.config.site import parse_config
from infosvc.errors import Unavailable
from infosvc.queue.jobcontrols import Actor
from infosvc.queue.jobqueue import JobQueue
from infosvc.hosts.tokens import Role, Tokens, new_token
from infosvc.store import Store

from support.documents import make_node, node_document

ADMIN = Actor(admin=True, submitter="s", user=None, name="an administrator")
START = 1_800_000_000.0


class Site_:
    """An aggregator with hosts and a queue on one clock; `run` drives a coroutine on one loop."""

    def __init__(self, path: Path, config: dict[str, Any] | None = None) -> None:
        self.now = START
        self.store = Store(path)
        self.tokens = Tokens()
        self.keys: dict[str, str] = {}
        self.agg = Aggregator(parse_config(config or {}), self.store, self.tokens, clock=lambda: self.now,
                              monotonic=lambda: self.now)
        self.queue = self.new_queue()
        self.loop = asyncio.new_event_loop()

    def new_queue(self) -> JobQueue:
        queue = JobQueue(self.store, self.agg.table, site=lambda: Site.of(self.agg.table.rollup), clock=lambda: self.now,
                         executors=self.tokens.executor_hosts)
        self.agg.on_change.append(queue.hosts_changed)
        self.agg.tree.read_queue(queue)
        return queue

    def run(self, work: Callable[[], Awaitable[Any]]) -> Any:
        return self.loop.run_until_complete(work())

    def executor(self, name: str) -> None:
        """An executor token bound to host `name`: the tests play its executor (task_report)."""
        if name not in self.tokens.executor_hosts:
            self.tokens.add(new_token(), Role.EXECUTOR, host=name)

    def host(self, name: str, **kwargs: Any) -> None:
        """A report for host `name`, with its own agent token (a token reports for one host), and
        an executor token bound to it."""
        self.executor(name)
        key = self.keys.get(name) or self.keys.setdefault(name, self.tokens.add(new_token(), Role.AGENT))
        self.run(lambda: self.agg.ingest(key, node_document(name, **kwargs)))

    def submit(self, body: str, owner: str = "alice") -> list[str]:
        records, _ = self.run(lambda: self.queue.submit(body.encode(), "application/xml", owner=owner,
                                                         submitter="s", admin=False))
        return [job.id for job in records]

    def schedule(self) -> None:
        self.run(self.queue.pass_once)

    def close(self) -> None:
        self.loop.close()
        self.store.close()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site_]:
    made = Site_(tmp_path / "q.sqlite")
    yield made
    made.close()


def sss(name: str, processors: int = 1, more: str = "") -> str:
    return (f"<Job><Id>{name}</Id><Name>{name}</Name><Executable>/bin/true</Executable>"
            f"<Requested><Processors>{processors}</Processors>{more}</Requested></Job>")


def test_an_end_reported_past_the_limit_is_the_limit_not_a_failure(site: Site_) -> None:
    # The executor kills a task at its deadline and reports the end; the report can reach the queue
    # before the queue's own pass at the limit. The limit ended the job either way: Canceled.
    site.host("h1")
    [job_id] = site.submit(sss("limited", more="<Duration>10</Duration>"))
    site.schedule()
    job = site.queue.get(job_id)
    assert job.state is JobState.RUNNING
    site.run(lambda: site.queue.task_report(job_id, 0, host="h1", began=True))
    site.now += 10.5
    site.run(lambda: site.queue.task_report(job_id, 0, host="h1", began=False, exit_code=-15))
    assert job.state is JobState.CANCELED, job.reason
    assert "run time limit" in job.reason
    assert job.tasks[0].exit_code == -15


def test_an_end_reported_before_the_limit_is_the_task_s_own(site: Site_) -> None:
    site.host("h1")
    [job_id] = site.submit(sss("limited", more="<Duration>10</Duration>"))
    site.schedule()
    site.now += 9.5
    job = site.run(lambda: site.queue.task_report(job_id, 0, host="h1", began=False, exit_code=2))
    assert job.state is JobState.FAILED and job.exit_code == 2


def test_the_pass_at_the_limit_cancels(site: Site_) -> None:
    site.host("h1")
    [job_id] = site.submit(sss("limited", more="<Duration>10</Duration>"))
    site.schedule()
    site.now += 9.9
    site.schedule()
    assert site.queue.get(job_id).state is JobState.RUNNING
    site.now += 0.1
    site.schedule()
    job = site.queue.get(job_id)
    assert job.state is JobState.CANCELED and "run time limit of 10 s" in job.reason


def test_an_executor_that_stopped_a_task_at_its_limit_is_believed_before_the_queue_s_clock(site: Site_) -> None:
    # The executor's clock runs ahead of the aggregator's: it says it stopped the task at the limit.
    site.host("h1")
    [job_id] = site.submit(sss("limited", more="<Duration>10</Duration>"))
    site.schedule()
    site.now += 9.0
    job = site.run(lambda: site.queue.task_report(job_id, 0, host="h1", began=False, exit_code=143, at_limit=True))
    assert job.state is JobState.CANCELED and "run time limit" in job.reason


def at(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(START + seconds))


def test_the_reasons_name_the_reservation_its_time_and_hosts(site: Site_) -> None:
    for name in ("h1", "h2", "h3"):
        site.host(name)
    [running] = site.submit(sss("a", more="<Duration>100</Duration>"))
    site.schedule()
    assert site.queue.get(running).hosts == {"h1": 4}  # exclusive: the whole host; equal hosts: by id
    [wide] = site.submit(sss("wide", 12, more="<Duration>100</Duration>"))
    [short, long] = [site.submit(sss("short", more="<Duration>50</Duration>"))[0],
                     site.submit(sss("long", more="<Duration>500</Duration>"))[0]]
    site.schedule()
    assert site.queue.get(wide).reason == ("first in the queue: waiting for 12 processors, 8 free on idle hosts; "
                                           f"reserved to start at {at(100)} on h[1-3]")
    assert site.queue.get(wide).reserved_at == START + 100
    assert site.queue.get(short).state is JobState.RUNNING and site.queue.get(short).hosts == {"h2": 4}
    # h3 is free now, but the long job would still hold it at the reservation
    assert site.queue.get(long).reason == f"would delay {wide}, reserved to start at {at(100)}"


# --- the computing elements: figures from the plan, Policy and Status --------------------------------

def ce_site(tmp_path: Path, name: str = "ce.sqlite", **ce: Any) -> Site_:
    config = {"clusters": [{"id": "c", "nodes": "h[1-3]"}],
              "computing_elements": [{"id": "ce1", "clusters": ["c"], **ce}]}
    made = Site_(tmp_path / name, config)
    for host in ("h1", "h2", "h3"):
        made.host(host)
    return made


def test_the_ce_figures_are_the_plan_s(tmp_path: Path) -> None:
    site = ce_site(tmp_path)
    try:
        [a] = site.submit(sss("a", more="<Duration>100</Duration>"))
        site.schedule()
        [wide, short, long] = [site.submit(sss(name, procs, more=f"<Duration>{limit}</Duration>"))[0]
                               for name, procs, limit in (("wide", 12, 100), ("short", 1, 50), ("long", 1, 500))]
        site.schedule()
        assert [site.queue.get(j).state for j in (a, wide, short, long)] == [
            JobState.RUNNING, JobState.QUEUED, JobState.RUNNING, JobState.QUEUED]
        [ce] = site.agg.table.rollup.computing_elements()
        state = ce.state
        assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (2, 2, 4)
        assert state.free_cpus == 4  # h3: a holds h1 and short h2, whole (exclusive)
        # By hand, on 12 processors (hosts of 4): 4 free now, 4 more at 50 (short), 4 at 100 (a).
        # wide (12 for 100 s) at 100..200; long (a whole host for 500 s) at 200..700; the new job
        # (a whole host, an hour: no MaxWallClockTime) fits beside long from 200.
        assert state.worst_response_time == 200 and state.estimated_response_time == 200
        site.now += 30
        assert site.agg.table.rollup.computing_elements()[0].state.estimated_response_time == 170
        assert [(job.local_id, job.status, job.local_owner) for job in ce.jobs] == [
            (a, "RUNNING", "alice"), (short, "RUNNING", "alice"), (wide, "SCHEDULED", "alice"),
            (long, "WAITING", "alice")]
    finally:
        site.close()


def test_max_running_jobs(tmp_path: Path) -> None:
    site = ce_site(tmp_path, policy={"max_running_jobs": 1})
    try:
        first, second = site.submit(sss("one"))[0], site.submit(sss("two"))[0]
        site.schedule()
        assert site.queue.get(first).state is JobState.RUNNING
        assert site.queue.get(second).state is JobState.QUEUED
        assert site.queue.get(second).reason == "its computing element has its maximum of running jobs"
        site.schedule()  # now the CE's hosts are closed to new jobs
        assert site.queue.get(second).state is JobState.QUEUED
        site.run(lambda: site.queue.task_report(first, 0, host="h1", began=False, exit_code=0))
        site.schedule()
        assert site.queue.get(second).state is JobState.RUNNING
    finally:
        site.close()


def test_max_total_jobs_refuses_submissions(tmp_path: Path) -> None:
    site = ce_site(tmp_path, policy={"max_total_jobs": 2})
    try:
        site.submit(sss("one", 64))
        site.submit(sss("two", 64))
        site.schedule()
        with pytest.raises(Unavailable, match="ce1 holds its maximum of 2 jobs"):
            site.submit(sss("three"))
    finally:
        site.close()


def test_max_wall_clock_time_is_the_limit_of_jobs_without_one_and_refuses_longer(tmp_path: Path) -> None:
    site = ce_site(tmp_path, policy={"max_wall_clock_time": 2, "max_cpu_time": 6})
    try:
        with pytest.raises(Unavailable, match="ce1 allows at most 2 minutes of wall-clock time"):
            site.submit(sss("long", more="<Duration>121</Duration>"))
        [free, wide] = site.submit(sss("free"))[0], site.submit(sss("wide", 4))[0]
        site.schedule()
        assert site.queue.get(free).estimate == 120.0  # MaxWallClockTime, 2 minutes
        assert site.queue.get(wide).estimate == 90.0  # MaxCPUTime 6 minutes over its 4 processors
        restarted = site.new_queue()
        restarted.load()
        assert restarted.get(free).estimate == 120.0  # the lowered limit is stored
        site.now += 120
        site.schedule()
        assert site.queue.get(free).state is JobState.CANCELED
    finally:
        site.close()


@pytest.mark.parametrize("status", ["Closed", "Draining"])
def test_closed_and_draining_ces_refuse_submissions(tmp_path: Path, status: str) -> None:
    site = ce_site(tmp_path, status=status)
    try:
        with pytest.raises(Unavailable, match=f"ce1 is {status}"):
            site.submit(sss("one"))
    finally:
        site.close()


def test_a_queueing_ce_accepts_but_starts_nothing(tmp_path: Path) -> None:
    site = ce_site(tmp_path, status="Queueing")
    try:
        [job_id] = site.submit(sss("one"))
        site.schedule()
        job = site.queue.get(job_id)
        assert job.state is JobState.QUEUED
        assert "no computing element serves jobs now (ce1 is Queueing)" in job.reason
        assert site.agg.table.rollup.computing_elements()[0].state.waiting_jobs == 1
    finally:
        site.close()


def test_a_submission_after_the_hosts_changed_is_the_pass_s_to_judge(site: Site_) -> None:
    """The submission finds its hosts on the site's hosts now (whether any can run it); the last
    pass's room is over the hosts before a new one came, and says nothing of it."""
    site.host("h1")
    site.submit(sss("first"))
    site.schedule()
    site.host("h2")
    site.queue._poked.clear()
    [featured] = site.submit(sss("featured", more="<Feature>x</Feature>"))  # a ValueError (masks of 2 hosts on 1)
    assert site.queue._poked.is_set()
    site.schedule()
    assert "no usable host meets its requirements (h[1-2]: Feature: asked x" in site.queue.get(featured).reason


def test_a_submission_that_cannot_start_now_waits_for_the_refresh_pass(site: Site_) -> None:
    site.host("h1")
    [first] = site.submit(sss("first"))
    site.schedule()
    assert site.queue.get(first).state is JobState.RUNNING
    site.queue._poked.clear()
    [second] = site.submit(sss("second"))  # h1 is held: it cannot start, and starts nothing
    assert not site.queue._poked.is_set() and site.queue._refresh is not None
    assert site.queue.get(second).reason == "waiting for 1 processor, 0 free on idle hosts"
    limited = sss("limited", more="<Duration>60</Duration>")  # asks a CE something: the matcher's
    [first_limited] = site.submit(limited)
    # its hosts were found at submission (whether any host can run it: queue/runnable.py), so the
    # last pass's room tells it cannot start now either: no pass at once
    assert not site.queue._poked.is_set() and site.queue._refresh is not None
    assert site.queue.get(first_limited).reason == "waiting for 1 processor, 0 free on idle hosts"
    site.schedule()  # the refresh: second is the head, reserved
    assert site.queue._refresh is None
    site.queue._poked.clear()
    site.submit(limited)
    assert not site.queue._poked.is_set()  # asking alike: the pass's hosts for it are known
    site.queue._poked.clear()
    urgent = sss("urgent").replace("<Requested>", "<Priority>4</Priority><Requested>")
    site.submit(urgent)  # before the reserved head: the pass judges at once
    assert site.queue._poked.is_set()
    site.queue._poked.clear()
    site.run(lambda: site.queue.task_report(first, 0, host="h1", began=False, exit_code=0))
    assert site.queue._poked.is_set()  # an end frees what a waiting job needs


def test_a_host_lost_under_running_jobs_requeues_the_rerunnable_and_fails_the_rest(tmp_path: Path) -> None:
    site = Site_(tmp_path / "lost.sqlite", {"lifecycle": {"heartbeat_seconds": 10, "missed_heartbeats": 1}})
    try:
        site.host("h1")
        site.host("h2")
        [rerun] = site.submit(sss("rerun"))  # an SSS task is Restartable unless it says not
        ccs = ('<Job xmlns="http://www.microsoft.com/ComputeCluster/" Name="once" MinimumNumberOfProcessors="1" '
               'MaximumNumberOfProcessors="1"><Tasks><Task CommandLine="x" IsRerunnable="false"/></Tasks></Job>')
        [once] = site.submit(ccs)
        site.schedule()
        assert site.queue.get(rerun).hosts == {"h1": 4} and site.queue.get(once).hosts == {"h2": 4}
        site.now += 30
        site.host("h1")  # h1 reports again; h2 is silent past its deadline
        site.agg.sweep()
        assert site.agg.table.get("h2").state.value == "Unreachable"
        site.schedule()
        job = site.queue.get(once)
        assert job.state is JobState.FAILED and "h2 became unreachable" in job.reason
        assert site.queue.get(rerun).state is JobState.RUNNING  # its host lives on
        site.now += 30
        site.host("h2")  # back: h1 is now the silent one
        site.agg.sweep()
        site.schedule()
        job = site.queue.get(rerun)
        assert job.state is JobState.RUNNING and job.hosts == {"h2": 4}, (job.state, job.reason)
        assert job.tasks[0].attempts == 2
        events = [(e.state.value, e.detail) for e in site.store.job_events(int(rerun)) if e.task is None]
        assert ("Queued", "host h1 became unreachable; rerunnable tasks requeued") in events
    finally:
        site.close()


def test_the_spec_s_simple_example_waits_for_its_unenveloped_16_processors(site: Site_) -> None:
    """<Processors>16</Processors> directly under Job (the SSS spec's simple example) is what the
    job needs: on 8 processors it waits, named as 16; with 16 more it starts on them."""
    simple = (Path(__file__).resolve().parents[1] / "fixtures" / "sss-job-examples" / "simple.xml").read_text()
    site.host("h1", processors=8)
    [job_id] = site.submit(simple, owner="scottmo")  # the example's User: its own token files it
    site.schedule()
    job = site.queue.get(job_id)
    assert job.request.min_processors == job.request.max_processors == 16
    assert job.request.read_as_requested == ("Processors",)
    assert job.state is JobState.QUEUED and "needs 16 processors; the hosts it may use have 8" in job.reason, job.reason
    site.host("h2", processors=8)
    site.schedule()
    job = site.queue.get(job_id)
    assert job.state is JobState.RUNNING and job.hosts == {"h1": 8, "h2": 8}


def test_the_machine_is_built_off_the_loop_and_misses_no_change_made_meanwhile(site: Site_) -> None:
    """A build in a thread while hosts change on the loop: the pool it installs holds every host as
    the table has it, or is built again; never a pool that misses a change made meanwhile."""
    table = site.agg.table
    for number in range(3001):
        site.executor(f"h{number:04d}")
    for number in range(3000):  # enough that a build takes a while
        table.report(make_node(f"h{number:04d}", processors=2), site.now)
    machine = site.queue.machine
    built: list[int] = []

    async def build_while_hosts_change() -> None:
        building = asyncio.ensure_future(machine.ready())
        await asyncio.sleep(0)  # the build has taken the hosts and is in its thread
        await asyncio.sleep(0)
        changed = [table.report(make_node("h3000", processors=2), site.now),
                   table.report(make_node("h0000", processors=2, state="Offline"), site.now)]
        machine.hosts_changed([table.rollup.hosts[e.id] for e in changed])
        await building
        built.append(0 if machine.pool is None else len(machine.pool.ids))

    site.run(build_while_hosts_change)
    assert built == [3001]  # built again off the loop, with the changes
    pool = machine.current()
    assert not pool.usable[pool.row["h0000"]] and pool.usable[pool.row["h3000"]]


def test_two_builds_at_once_share_one_and_miss_no_change(site: Site_) -> None:
    """Submissions wait for the machine too (a job no host can run is said so at once): two callers
    of ready() at once, hosts changing meanwhile. The second used to end the first's record of the
    changes (a TypeError: a 500 on POST /v1/jobs, seen under load); now they share one build."""
    table = site.agg.table
    for number in range(2001):
        site.executor(f"h{number:04d}")
    for number in range(2000):
        table.report(make_node(f"h{number:04d}", processors=2), site.now)
    machine = site.queue.machine

    async def two_builds() -> None:
        first = asyncio.ensure_future(machine.ready())
        await asyncio.sleep(0)
        second = asyncio.ensure_future(machine.ready())
        await asyncio.sleep(0)
        changed = table.report(make_node("h2000", processors=2), site.now)
        machine.hosts_changed([table.rollup.hosts[changed.id]])
        await asyncio.gather(first, second)

    site.run(two_builds)
    assert machine.pool is not None and "h2000" in machine.pool.row


def test_failing_passes_log_one_traceback_per_kind_per_interval(site: Site_, monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A full disk fails every pass (a pass after each submission, report, end): one ERROR with its
    traceback per kind of failure per 10 s, not one per pass, so that the log's disk is not filled too."""
    import asyncio
    import contextlib
    import logging

    import infosvc.queue.jobqueue
    from infosvc.loglimit import LogLimiter

    monkeypatch.setattr(infosvc.queue.jobqueue, "_failed_passes", LogLimiter(infosvc.queue.jobqueue.log))
    passes = []

    async def failing() -> None:
        passes.append(1)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(site.queue, "pass_once", failing)

    async def poke_often() -> None:
        runner = asyncio.ensure_future(site.queue.run_forever(debounce=0.001))
        for _ in range(30):
            site.queue.poke()
            await asyncio.sleep(0.01)
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner

    with caplog.at_level(logging.ERROR, logger="infosvc.queue"):
        site.run(poke_often)
    failed = [r for r in caplog.records if r.getMessage().startswith("scheduling pass failed")]
    assert len(passes) >= 10 and len(failed) == 1 and failed[0].exc_info is not None


def test_each_vo_view_counts_the_jobs_whose_project_names_it(tmp_path: Path) -> None:
    """GLUE 1.3's GlueVOView per VO of the CE's rules: the jobs that name the VO as their Project;
    a CE none of whose jobs names one shows its own figures in each view."""
    from infosvc.codec import ldif
    from infosvc.codec.gridformat import GridOptions
    from infosvc.publish.glue import Glue

    def views() -> dict[str, tuple[str, str]]:
        text = Glue(site.agg.tree).rendering("ldif-1.3", GridOptions()).tree().decode()
        return {dn.split(",")[0].split("=")[1]: (a["GlueCEStateRunningJobs"], a["GlueCEStateWaitingJobs"])
                for dn, attrs in ldif.parse(text).items() if dn.startswith("GlueVOViewLocalID=")
                for a in (dict(attrs),)}

    site = ce_site(tmp_path, access_control=["VO:atlas", "VO:cms", "VOMS:/ops/Role=lcgadmin"])
    try:
        [plain] = site.submit(sss("plain", 4))
        site.schedule()
        assert views() == {"atlas": ("1", "0"), "cms": ("1", "0"), "ops": ("1", "0")}  # the CE's own
        site.run(lambda: site.queue.cancel(plain, ADMIN))
        for name, project in (("a1", "atlas"), ("a2", "atlas"), ("a3", "atlas"), ("a4", "atlas"), ("c1", "cms")):
            site.submit(sss(name, 4).replace("<Executable>", f"<Project>{project}</Project><Executable>"))
        site.schedule()
        assert views() == {"atlas": ("3", "1"), "cms": ("0", "1"), "ops": ("0", "0")}
        [ce] = site.agg.tree.computing_elements()
        assert (ce.state.running_jobs, ce.state.waiting_jobs) == (3, 2)  # the CE's figures count them all
    finally:
        site.close()


# --- a control made while a pass plans ------------------------------------------------------------

def test_a_hold_put_on_while_a_pass_plans_keeps_the_job_from_starting(site: Site_, monkeypatch: pytest.MonkeyPatch) -> None:
    # The pass plans off the loop on a copy, outside the queue's lock: an admin's hold acknowledged
    # meanwhile must still keep the job from starting when the plan is applied (the plan saw it unheld).
    from infosvc.queue import jobcontrols as controls
    from infosvc.queue.planning import PassPlan

    site.host("h1")
    [job_id] = site.submit(sss("a"))
    entered, go = threading.Event(), threading.Event()
    plan = PassPlan.run

    def slow_plan(work: PassPlan) -> Any:
        entered.set()
        assert go.wait(10)
        return plan(work)
    monkeypatch.setattr(PassPlan, "run", slow_plan)
    admin = controls.Actor(admin=True, submitter="admin", user=None, name="an administrator")

    async def scenario() -> None:
        passing = asyncio.ensure_future(site.queue.pass_once())
        while not entered.is_set():
            await asyncio.sleep(0.001)
        await site.queue.alter(job_id, lambda job, now: controls.hold(job, "System", admin, now))
        go.set()
        await passing
    site.run(scenario)
    job = site.queue.get(job_id)
    assert job.state is JobState.QUEUED and job.holds == ("System",)
    assert job.reason == "held: System hold"
    restarted = site.new_queue()
    restarted.load()
    assert restarted.get(job_id).state is JobState.QUEUED  # the store did not start it either
    monkeypatch.setattr(PassPlan, "run", plan)
    site.schedule()
    assert site.queue.get(job_id).state is JobState.QUEUED
