"""The job queue of one aggregator: jobs submitted, scheduled against the live hosts by the pure
policy (infosvc.sched), their tasks dispatched to executors, and every change stored before it is
seen. No HTTP: web/jobs.py is its shell.

A change is decided in memory, written (awaited: the writer commits it), and only then applied,
so nothing a client or an executor sees is lost by kill -9. The one exception is the scheduling
pass itself, which plans off the event loop on a copy (a pass over 10,000 jobs must not stall
ingest) and is applied under the queue's lock, starting only jobs still Queued by then.

A pass runs when something it depends on changes: a submission, a job's or task's end, a cancel,
a host becoming usable or not (a report that changes nothing a job needs schedules nothing), at
the next run time limit, when a placed task is due to have been started. Tasks are placed only on
hosts an executor token is bound to. A task no executor reports started within the start timeout
goes back to the queue (or fails, not rerunnable) and its host is drained (paused with the reason)
until an admin resumes it. The timeout counts from the placement (stored) or from this queue's
start when later: an executor cannot fetch a task from a server that is down."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import replace
from functools import cache, partial
from typing import Awaitable, Callable, Container, Iterable

from infosvc.loglimit import LogLimiter
from infosvc.matching import Requirements, Site
from infosvc.model.ccsjob import JobState
from infosvc.model.glue import CEQueued, ComputingElement, Host
from infosvc.model.node import Node
from infosvc.model.folding import fold
from infosvc.sched import Plan, Policy
from infosvc.sched.hosts import Allocation, HostPool, WaitingJob
from infosvc.sched.jobs import ENDED, Event, JobRecord
from infosvc.queue.cestate import SERVED, CEQueues, limit_on, refusal, run_time_ratio
from infosvc.queue.eligibility import Eligibility
from infosvc.queue.ended import EndedJobs
from infosvc.queue.jobnames import JobNames
from infosvc.queue.planning import PassPlan, could_start, explained, held_on, still_waiting
from infosvc.queue.predictions import overdue_guard, predict_queued
from infosvc.queue.machine import SiteMachine
from infosvc.queue.planners import planned
from infosvc.queue.runnable import screened
from infosvc.queue.submissions import Filer, Prepared, prepare, read_inline, requirements_again
from infosvc.queue.upkeep import held_reason, start_deadline, upkeep, wake_at
from infosvc.queue.jobcontrols import Actor, Change, cancel, note_deadlines, submission_checks
from infosvc.errors import Forbidden, Invalid, NotFound, Refused, Unavailable, excerpt
from infosvc.hosts import HostTable
from infosvc.store import Store
from infosvc.store.jobs import write_jobs

__all__ = ["JobQueue"]

log = logging.getLogger("infosvc.queue")
_failed_passes = LogLimiter(log)  # a full disk fails every pass: one traceback per kind per 10 s
#: the audit trail (infosvc/cli/logs.py): jobs filed for an owner their document named
audit = logging.getLogger("infosvc.audit")

#: While the only news is submissions that cannot start now, a pass (for the reasons, the head's
#: reservation and the CEs' figures) runs at most this long after the first of them.
REFRESH_SECONDS = 2.0


class JobQueue:
    def __init__(self, store: Store, table: HostTable, *, site: Callable[[], Site],
                 clock: Callable[[], float] = time.time, policy: Policy = Policy.EASY,
                 executors: Container[str] = frozenset(), start_timeout: float = 60.0,
                 drain: Callable[[str, str], Awaitable[object]] | None = None, keep_ended_days: float = 30) -> None:
        """`executors`: the only hosts tasks are placed on; `drain(host, reason)`: the aggregator's."""
        self.store = store
        self.table = table
        self.site = site
        self.clock = clock
        self.policy = policy
        self.start_timeout = start_timeout
        self.drain = drain
        #: placed tasks' start deadlines count from here at the earliest (see the module's docstring)
        self.started_at = clock()
        self.jobs: dict[str, JobRecord] = {}
        self.requirements: dict[str, Requirements | None] = {}
        self._shared: dict[str, Requirements] = {}
        self.names = JobNames()  # each owner's job names, for dependencies by name
        self.eligibility = Eligibility()
        self._next_id = 1
        self._lock = asyncio.Lock()
        self._poked = asyncio.Event()
        self.machine = SiteMachine(table, executors)
        #: what the last pass left free (its starts taken), and the priority of the job it reserved for
        self._room: HostPool | None = None
        self._head_priority: int | None = None
        self._refresh: asyncio.TimerHandle | None = None
        self._waiting_jobs: dict[str, WaitingJob] = {}
        self._waiting_pool: HostPool | None = None
        #: the CEs' figures of the last pass, which the CEs publish (ce_state)
        self.ce_queues = CEQueues(clock=clock)
        self.ended = EndedJobs(store, self.jobs, self.requirements, self.names, clock, keep_ended_days)

    # --- start ---------------------------------------------------------------------------

    def load(self) -> int:
        """The jobs not ended and the ended ones memory keeps (queue/ended.py; blocking: run it in a
        thread at start). Jobs with host requirements have them compiled again from their documents."""
        records = self.ended.at_start()
        groups: dict[str, list[Prepared] | None] = {}
        for job in records:
            self.jobs[job.id] = job
            self.names.add(job)
            if job.state not in ENDED and job.request.asks_hosts:
                self.requirements[job.id] = requirements_again(job, partial(self.store.job_document, int(job.id)),
                                                               groups)
        self._next_id = self.store.next_job_id()
        return len(records)

    # --- reading --------------------------------------------------------------------------

    def get(self, job_id: str) -> JobRecord:
        job = self.jobs.get(job_id)
        if job is None:
            raise NotFound(f"no job {excerpt(job_id)!r}")
        return job

    def listed(self, *, state: str | None = None, user: str | None = None, ce: str | None = None) -> list[JobRecord]:
        site = cache(self.site)  # built once a listing, if a job on hosts is asked about: Site.of reads every CE
        return [job for job in self.jobs.values() if (state is None or job.state.value.lower() == state.lower())
                and (user is None or job.owner == user) and (ce is None or ce in self.ces_of(job, site))]

    def events_of(self, job: JobRecord, limit: int) -> list[Event]:
        """The job's stored transitions, newest `limit` (blocking: read in a thread)."""
        return self.store.job_events(int(job.id), limit)

    def ces_of(self, job: JobRecord, site_now: Callable[[], Site] | None = None) -> list[str]:
        """The CEs the job is counted on: those it runs on; waiting, those of the last pass's figures."""
        if job.state is JobState.QUEUED:
            return sorted(self.ce_queues.homes.get(job.id, ()))
        site = (site_now or self.site)()
        clusters = {host.cluster for name in job.hosts if (host := self.table.rollup.hosts.get(name)) is not None}
        return sorted({ce.id for cluster in clusters for ce in site.ces.get(cluster, ())})

    def ce_state(self, ce_id: str, status: str, free_cpus: int, total_cpus: int) -> CEQueued | None:
        """What the CE publishes of this queue (model.glue.CEQueueFigures, which the roll-up reads)."""
        return self.ce_queues.ce_state(ce_id, status, free_cpus, total_cpus)

    def tasks_on(self, host: str) -> list[tuple[JobRecord, int]]:
        """The tasks dispatched to `host` and not yet ended: what its executor must run."""
        return [(job, task.index) for job in self.jobs.values() if job.state is JobState.RUNNING
                for task in job.tasks if task.state is JobState.RUNNING and task.host == host]

    # --- changes ---------------------------------------------------------------------------

    async def submit(self, body: bytes, content_type: str, *, owner: str, submitter: str, admin: bool,
                     may_name_owner: bool = False) -> tuple[list[JobRecord], list[str]]:
        """File the document's jobs as `owner` (the token's user); a document that names another
        owner is refused (Forbidden) unless `may_name_owner` (a token bound to no user, or an
        admin's), and then audited."""
        filer = Filer(owner, may_name_owner or admin)
        config = self.table.rollup.config
        # A small document that expands to nothing (~0.3 ms to read) is read on the loop; others off it
        read = (body, content_type, filer, config.scheduler.exclusive_default)
        prepared, warnings = prepare(*read) if read_inline(body) else await asyncio.to_thread(prepare, *read)
        ces, figures = config.computing_elements, self.ce_queues.figures
        warnings += submission_checks([item.request for item in prepared], admin, self.clock(), figures)
        refused = next((r for item in prepared if (r := refusal(ces, figures, item.request.estimate))), None)
        if refused is not None:
            raise Unavailable(refused, "a CE's status and policy are the site config's "
                              "[[computing_elements]]; GET /v1/glue shows them")
        await self.machine.ready()  # a warning for each job no host known now can run, or Invalid (runnable.py)
        warnings += screened(prepared, self._shared, config.scheduler.refuse_unrunnable, self.pool(),
                             self.eligibility, self.table, self.site)
        await self.ended.recall(item.request for item in prepared)
        # Ids reserved, jobs made without awaiting: submissions wait not on one another's commits nor a pass
        now = self.clock()
        first = self._next_id
        self._next_id += len(prepared)
        records: list[JobRecord] = []
        group = str(first) if len(prepared) > 1 else None
        local: dict[str, str] = {}
        for number, item in enumerate(prepared):
            local.setdefault(item.name, str(first + number))
            if item.request.name:
                local.setdefault(item.request.name, str(first + number))
        for item in prepared:
            job_id = str(first + len(records))
            request = replace(item.request, after=self.names.resolved(item.request, local, item.request.owner, self.jobs))
            records.append(JobRecord(job_id, request, now, request.owner, admin, group, submitter,
                                     reason=held_reason(request.holds), held=bool(request.after)))
        events = [Event(job.id, None, JobState.QUEUED, now, "submitted") for job in records]
        await self.store.write(write_jobs([(job, body, content_type) for job in records], [], events))
        for job, item in zip(records, prepared):
            self.jobs[job.id] = job
            if item.requirements is not None:  # one compiled Requirements for the jobs that ask alike
                self.requirements[job.id] = self._shared.setdefault(item.signature, item.requirements)
            self.names.add(job)
            if job.owner != owner:
                # which token, never the token: its role and the first characters of its digest
                audit.info("job %s filed for owner %r named by its document, by %s token %s%s", job.id,
                           job.owner, "an admin" if admin else "a submit", submitter[:8],
                           "" if admin else " (bound to no user)")
        if self._room is None or self.machine.pool is None or could_start(
                records, self._room, self.machine.pool, self.eligibility, self.requirements, self._head_priority):
            self.poke()
        elif self._refresh is None:
            self._refresh = asyncio.get_running_loop().call_later(REFRESH_SECONDS, self.poke)
        return records, warnings

    async def cancel(self, job_id: str, who: Actor) -> JobRecord:
        """Cancel a job: an administrator any, a submit token its own (queue/jobcontrols.py)."""
        return await self.alter(job_id, lambda job, now: cancel(job, who, now))

    async def task_report(self, job_id: str, task: int, *, host: str | None, began: bool,
                          exit_code: int | None = None, at_limit: bool = False,
                          why: str | None = None, attempt: int | None = None) -> JobRecord:
        """An executor's report: task `task` of the job began (`began`) or ended with `exit_code`,
        stopped by the executor at the job's run time limit if `at_limit`, `why` the executor's reason
        for an end that is not the program's own (it could not start), `attempt` the placement it is
        about (a report of an earlier one, sent late, must not end a requeued task's new run). `host` is the executor's
        (None for an admin): it must be where the task was placed."""
        async with self._lock:
            job = self.get(job_id)
            if not 0 <= task < len(job.tasks):
                raise NotFound(f"job {job_id} has no task {task}")
            record = job.tasks[task]
            if record.state is not JobState.RUNNING:
                raise Invalid(f"task {task} of job {job_id} is {record.state.value}, not running")
            if host is not None and record.host != host:
                raise Forbidden(f"task {task} of job {job_id} runs on {record.host}, not on {host}")
            if (attempt or 1) != record.attempts:  # one without it is of the first: a late one must not end a new run
                raise Invalid(f"the report is about attempt {attempt or 1} of task {task} of job {job_id}, which is "
                              f"at attempt {record.attempts}", "a report of a task placed again names its `attempt`")
            now = self.clock()
            if began:
                await self._commit(job, lambda j: j.task_began(task, now))
            else:
                if exit_code is None:
                    raise Invalid("an end report needs the exit code")
                if at_limit or job.limit_at <= now:
                    # The executor stops a task at its deadline (by its own clock, which may run
                    # ahead) and may report before the pass at the limit runs: the limit ended the
                    # job all the same, Canceled as CCS does, with the task's exit code kept.
                    def stopped(j: JobRecord) -> list[Event]:
                        j.tasks[task].exit_code = exit_code
                        return j.reach_limit(now)
                    await self._commit(job, stopped)
                else:
                    await self._commit(job, lambda j: j.task_ended(task, exit_code, now, why))
        if not began:
            self.poke()
        return job

    async def alter(self, job_id: str, decide: Callable[[JobRecord, float], Change | None]) -> JobRecord:
        """A control of a filed job (infosvc/queue/jobcontrols.py): `decide(job, now)` refuses it or
        gives the change (None: none to make), stored, request included, before it is made."""
        async with self._lock:
            job = self.get(job_id)
            change = decide(job, self.clock())
            if change is not None:
                await self._commit(job, change)
                self._waiting_jobs.pop(job_id, None)  # the next pass reads its priority and holds anew
        self.poke()
        return job

    async def _commit(self, job: JobRecord, change: Callable[[JobRecord], list[Event]]) -> None:
        """Decide `change` on a copy, store it, then make it so in memory."""
        trial = job.trial()
        events = change(trial)
        changed = [job.id] if trial.request is not job.request else []  # a control's priority or holds
        await self.store.write(write_jobs([], [trial], events, requests=changed))
        job.adopt(trial)

    # --- the scheduling pass ---------------------------------------------------------------------

    def poke(self) -> None:
        self._poked.set()

    def hosts_changed(self, hosts: Iterable[Host]) -> None:
        """The roll-up's listener: a pass only if what the scheduler reads of a host changed."""
        if self.machine.hosts_changed(hosts):
            self.poke()

    def host_removed(self, host_id: str) -> None:
        """An admin removed a host: the next pass builds the machine without it."""
        self.machine.host_removed()
        self.poke()

    async def run_forever(self, debounce: float = 0.02) -> None:
        while True:
            timeout = self._next_deadline() - self.clock()
            try:
                await asyncio.wait_for(self._poked.wait(), timeout=max(0.0, min(timeout, 60.0)))
            except TimeoutError:
                pass
            await asyncio.sleep(debounce)  # one pass for a burst of submissions
            self._poked.clear()
            try:
                await self.pass_once()
            except Exception as exc:  # noqa: BLE001 - the scheduler must outlive a bug in one pass
                _failed_passes.log(logging.ERROR, type(exc).__name__, "scheduling pass failed", exc_info=True)

    def _next_deadline(self) -> float:
        limits = min((job.limit_at for job in self.jobs.values() if job.state is JobState.RUNNING), default=math.inf)
        return min(limits, start_deadline(self.jobs, self.start_timeout, self.started_at),
                   wake_at(self.jobs.values(), self.clock()))

    def pool(self) -> HostPool:
        """The site's hosts as the scheduler's machine, kept until a host changes what it reads."""
        return self.machine.current()

    async def pass_once(self) -> None:
        """Limits, lost hosts and dependencies first; then one scheduling pass and the CEs' figures,
        planned off the loop."""
        if self._refresh is not None:
            self._refresh.cancel()
            self._refresh = None
        await self.machine.ready()
        async with self._lock:
            await self._housekeeping(self.clock())
            pool = self.pool().copy()
            ces = self.table.rollup.computing_elements()
            running, holders, finished = held_on(pool, self.jobs.values())
            if self.policy is Policy.PREDICTIVE:
                predict_queued(self.jobs.values())
            queued = self._waiting()
        now = self.clock()
        work = PassPlan(pool, running, holders, queued, now, ces, self.machine.cluster_of, run_time_ratio(finished[-1000:]),
                     self.policy, overdue_after=overdue_guard(finished, holders))
        plan, figures = await planned(work.run)
        async with self._lock:
            await self._apply(plan, pool, ces, now)
            self.ended.forget()
        self.ce_queues.figures, self.ce_queues.homes = figures, work.homes.of
        self._room = pool  # the pass took its starts on it
        self._head_priority = plan.reservation.job.priority if plan.reservation is not None else None

    async def _apply(self, plan: Plan[Allocation], pool: HostPool, ces: list[ComputingElement], now: float) -> None:
        """The plan made so: its starts stored (those still Queued) and adopted, every other queued
        job's reason, and the reservation of the job it holds one for."""
        starts, events, lowered = self._starts(plan, pool, ces, now)
        self._explain_waiting(plan, ces)
        self._reserve(plan, pool)
        note_deadlines(self.jobs.values(), now)
        if starts:
            trials = [trial for _, trial in starts]
            await self.store.write(write_jobs([], trials, events, only_if_queued=[j.id for j in trials],
                                              requests=lowered))
            for job, trial in starts:
                if job.state is JobState.QUEUED:
                    job.adopt(trial)

    def _starts(self, plan: Plan[Allocation], pool: HostPool, ces: list[ComputingElement],
                now: float) -> tuple[list[tuple[JobRecord, JobRecord]], list[Event], list[str]]:
        """(job, its started trial) for each start of the plan whose job is still Queued, their
        events, and the jobs whose run time limit a CE lowered."""
        events: list[Event] = []
        starts: list[tuple[JobRecord, JobRecord]] = []
        lowered: list[str] = []
        for start in plan.starts:
            found = self.jobs.get(start.job.id)
            if found is None or not still_waiting(found):
                continue
            allocation = start.allocation
            hosts = {pool.ids[r]: p for r, p in zip(allocation.rows, allocation.processors)}
            limit = limit_on(ces, {self.machine.cluster_of.get(host, "") for host in hosts}, found.estimate,
                             found.request.min_processors)
            trial = found.trial()
            events.extend(trial.start(hosts, allocation.exclusive, allocation.memory_mb, now, limit))
            if trial.request is not found.request:
                lowered.append(found.id)
            starts.append((found, trial))
        return starts, events, lowered

    def _explain_waiting(self, plan: Plan[Allocation], ces: list[ComputingElement]) -> None:
        """Each queued job the plan left waiting gets its reason, with the hosts its requirements
        rule out or the closed CEs when no host fits."""
        idle = ", ".join(f"{ce.unique_id} is {ce.state.status}" for ce in ces if ce.state.status not in SERVED)
        for job_id, reason in plan.waiting.items():
            waiter = self.jobs.get(job_id)
            if waiter is None or not still_waiting(waiter):
                continue
            waiter.reason = explained(reason, waiter.rejected, idle)
            waiter.reserved_at = None

    def _reserve(self, plan: Plan[Allocation], pool: HostPool) -> None:
        """The job the plan holds a reservation for: when, and on which hosts."""
        reservation = plan.reservation
        if reservation is None or reservation.allocation is None or not math.isfinite(reservation.at):
            return
        head = self.jobs.get(reservation.job.id)
        if head is not None and still_waiting(head):
            head.reserved_at = reservation.at
            head.reserved_hosts = tuple(pool.ids[r] for r in reservation.allocation.rows)
            head.reason += f" on {fold(head.reserved_hosts)}"

    def _waiting(self) -> list[tuple[WaitingJob, JobRecord, bool]]:
        """The queued jobs, each with the hosts it may use (masks over the rows of the site's pool,
        kept while the pool is the same) and whether the pass may start it (not held)."""
        base = self.pool()
        rollup = self.table.rollup
        site = cache(self.site)  # made at most once a pass, and only if a mask is to be made

        def node_of(host_id: str) -> Node | None:
            entry = self.table.get(host_id)
            return None if entry is None else entry.node

        # A queued job's WaitingJob stays the same while the pool does: made once, not every pass.
        known = self._waiting_jobs if self._waiting_pool is base else {}
        kept: dict[str, WaitingJob] = {}
        waiting = []
        for job in self.jobs.values():
            if job.state is not JobState.QUEUED:
                continue
            made = known.get(job.id)
            if made is None:
                requirements = self.requirements.get(job.id)
                mask = self.eligibility.mask(job.request, requirements, base, rollup.hosts, node_of, site)
                job.rejected = self.eligibility.rejected_for(job.request, requirements)
                made = WaitingJob(job.id, job.priority, job.submitted, job.estimate, job.request, mask, job.admin,
                                  job.predicted or math.nan)
            kept[job.id] = made
            waiting.append((made, job, not job.held and not job.holds))
        self._waiting_jobs, self._waiting_pool = kept, base
        return waiting

    async def _housekeeping(self, now: float) -> None:
        """Run time limits, hosts lost under running jobs, tasks not started in time, and
        dependencies released or broken."""
        changed, events, drain = upkeep(self.jobs, lambda host: (e := self.table.get(host)) is not None
                                        and e.state.value in ("Ready", "Paused"), now, JobRecord.trial,
                                        self.start_timeout, self.started_at)
        # Drained before the jobs go back: should the service stop in between, the job is still
        # placed there and times out again at the next start, rather than placed there again.
        for host, reason in drain.items():
            entry = self.table.get(host)
            if self.drain is None or entry is None or entry.paused:
                continue  # already drained or paused (its reason is an admin's or the first drain's)
            try:
                await self.drain(host, reason)
            except Refused as exc:  # removed meanwhile
                log.warning("host %s not drained: %s", host, exc.message)
        if changed:
            await self.store.write(write_jobs([], [trial for _, trial in changed], events))
            for job, trial in changed:
                job.adopt(trial)

