"""POST /v1/match apart from HTTP: a dry run of the queue's matcher over the site as it is. The
document is read as a submission is (infosvc.queue.submissions.read_document: one preparation, the
needs read once), its jobs compiled within one budget of names and seconds (and at most
matching.MAX_TERMS terms each), and matched on the event loop when that is cheap (a small site, and
few steps: `match_steps`), else over a snapshot in a worker thread (docs/matching.md,
docs/security.md).

On a site whose queue schedules (some host runs an executor), a host's available processors are
the scheduler's idle ones (infosvc.queue.processors: configured less allocated, none on a host the
scheduler does not place on), not the load its agent reports: the dry run says what a submission
would find. The answer shows each host's split and its load beside (`Scheduled`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from infosvc.errors import Invalid, excerpt
from infosvc.hosts import HostTable
from infosvc.matching import (
    MatchError, MatchResult, Requirements, Site, SiteSnapshot, SiteView, SyncedColumns, check_range_budget,
    compile_requirements, match,
)
from infosvc.matching.hostcolumns import HostColumns, columns_for
from infosvc.model.glue import Host
from infosvc.model.job import Job
from infosvc.model.node import Node
from infosvc.queue.processors import Split
from infosvc.queue.submissions import read_document

if TYPE_CHECKING:
    from infosvc.hosts import Rollup

    def _rollup_is_a_site_view(rollup: Rollup) -> SiteView:
        """For mypy alone: the roll-up a dry run hands the matcher is what it reads of a site."""
        return rollup

__all__ = ["INLINE_MATCH_STEPS", "MATCH_BUDGET_SECONDS", "MAX_MATCH_JOBS", "RENDER_IN_THREAD_HOSTS", "PreparedMatch",
           "Scheduled", "dry_run", "match_all", "match_steps", "prepare_match"]

#: The most jobs one POST /v1/match answers for: every answer lists every host with its reasons,
#: so one small body of many jobs could otherwise cost minutes of CPU and gigabytes of answer.
MAX_MATCH_JOBS = 16
#: Sites of more than this many hosts are matched in a worker thread, over a snapshot of the
#: roll-up, so that the loop goes on taking reports meanwhile; smaller ones too when the match is
#: costly (INLINE_MATCH_STEPS).
RENDER_IN_THREAD_HOSTS = 500
#: A match of at most this many steps (`match_steps`: hosts x each job's terms, a Feature pattern
#: once per feature of the site's widest node; about a microsecond a step) runs on the event loop,
#: at once; a costlier one in a worker thread, over a snapshot, as a large site's: 500 NE patterns
#: against 128 hosts of 200 features held the loop 21 s. A job of 3 terms on 500 hosts is 2,000.
INLINE_MATCH_STEPS = 10_000
#: Seconds of matching and explaining one POST /v1/match may cost, all its jobs together.
MATCH_BUDGET_SECONDS = 2.0


@dataclass(slots=True)
class PreparedMatch:
    """A POST /v1/match body read into jobs, checked against the request's budget, compiled."""

    jobs: list[Job]
    compiled: list[Requirements]
    warnings: list[str]
    #: per job, what it wrote outside Requested and was read as Requested (infosvc.model.jobneeds)
    read_as_requested: list[tuple[str, ...]] = field(default_factory=list)


def _too_many(count: int) -> Invalid:
    # each answer names every host: ~2 MB and ~0.1 s at 10,000 hosts
    return Invalid(f"a match takes at most {MAX_MATCH_JOBS} jobs; this JobGroup has {count}",
                   "send the jobs in smaller groups")


def prepare_match(body: bytes, content_type: str) -> PreparedMatch:
    """Read, resolve and compile a POST /v1/match body (in a worker thread: a body of 1 MB takes
    tens of ms to parse). The Ranges of all its jobs share one budget, checked before any is
    expanded."""
    document = read_document(body, content_type, MAX_MATCH_JOBS, _too_many)
    jobs = [needs.job for needs in document.needs]
    if not jobs:
        raise Invalid("the JobGroup has no job to match")
    try:
        check_range_budget(jobs)
    except MatchError as exc:
        raise Invalid("the job cannot be matched as written", str(exc)) from None
    compiled = []
    for one in jobs:
        try:
            compiled.append(compile_requirements(one))
        except MatchError as exc:
            detail = str(exc) if len(jobs) == 1 else f"job {excerpt(one.id)}: {exc}"
            raise Invalid("the job cannot be matched as written", detail) from None
    for requirements in compiled:  # one budget for the request: its jobs share it
        requirements.start_budget(MATCH_BUDGET_SECONDS)
    return PreparedMatch(jobs, compiled, document.warnings, [needs.read_as_requested for needs in document.needs])


def match_steps(prepared: PreparedMatch, hosts: int, features: int) -> int:
    """About how many steps matching the prepared jobs against `hosts` hosts of at most `features`
    features each takes (Requirements.host_steps; the static part, once per subcluster, left out)."""
    return hosts * sum(requirements.host_steps(features) for requirements in prepared.compiled)


def _widest(prepared: PreparedMatch, nodes: Iterable[Node]) -> int:
    """The most features of one node of `nodes`, where a job asks a Feature pattern (else 0: no
    term's cost depends on them)."""
    if not any(requirements.patterns for requirements in prepared.compiled):
        return 0
    return max((len(node.features) for node in nodes), default=0)


def match_all(prepared: PreparedMatch, site_view: SiteView, node_of: Callable[[str], Node | None], site: Site,
              columns: HostColumns | SyncedColumns | None) -> list[MatchResult]:
    """Every job of the request matched, within its work budget (MatchTooCostly past it)."""
    return [match(requirements, site_view, node_of, site, columns=columns) for requirements in prepared.compiled]


@dataclass(frozen=True, slots=True)
class Scheduled:
    """What the dry run read of each host's processors: the scheduler's split, and the free
    processors the host's load leaves (what it reports; 0 for a host that takes no job)."""

    split: Mapping[str, Split]
    load_free: dict[str, int]

    def host(self, host_id: str) -> dict[str, object]:
        split = self.split.get(host_id)
        return {"processors": None if split is None else split.as_json(), "load_free_cpus": self.load_free.get(host_id)}


def _as_scheduled(split: Mapping[str, Split]) -> Callable[[Host], Host]:
    """A host as the scheduler has it: its idle processors its available ones."""
    def host_as(host: Host) -> Host:
        found = split.get(host.unique_id)
        return host if found is None else replace(host, available_cpus=found.idle)
    return host_as


async def dry_run(prepared: PreparedMatch, table: HostTable,
                  answer: Callable[[list[MatchResult], Scheduled | None], str],
                  split: Mapping[str, Split] | None = None) -> str:
    """The prepared jobs matched against the site now and the answer written by `answer`: on the
    loop when that is cheap (a small site, at most INLINE_MATCH_STEPS steps), else in a worker
    thread over a snapshot (the loop takes reports meanwhile; infosvc.web.match runs MATCH_WORKERS
    such at a time). With `split` (the queue's, infosvc.queue.processors), each host's available
    processors are its idle ones there, matched host by host (the kept columns hold the load's)."""
    entries = table.entries

    def node_of(host_id: str) -> Node | None:
        entry = entries.get(host_id)
        return entry.node if entry is not None else None

    rollup = table.rollup
    site = Site.of(rollup)
    hosts = len(rollup.hosts)
    # on the loop only when cheap: a small site, and a match of few steps on it
    inline = hosts <= RENDER_IN_THREAD_HOSTS and match_steps(
        prepared, hosts, _widest(prepared, (entry.node for entry in entries.values()))) <= INLINE_MATCH_STEPS
    if split is not None:
        plain: SiteView = rollup
        read_node = node_of
        if not inline:  # copied on the loop, read in the thread
            copy = SiteSnapshot(rollup, node_of)
            plain, read_node = copy, copy.node_of

        def scheduled() -> str:
            view = SiteSnapshot(plain, read_node, _as_scheduled(split))
            seen = Scheduled(split, {host.unique_id: host.free_cpus for host in plain.hosts.values()})
            return answer(match_all(prepared, view, view.node_of, site, None), seen)

        return scheduled() if inline else await asyncio.to_thread(scheduled)
    keeper = columns_for(rollup)  # kept for this roll-up: the table's nodes change only with their Hosts
    if inline:
        return answer(match_all(prepared, rollup, node_of, site, keeper), None)
    snapshot = SiteSnapshot(rollup, node_of)
    synced = SyncedColumns(keeper.sync(rollup, node_of))

    def work() -> str:
        return answer(match_all(prepared, snapshot, snapshot.node_of, site, synced), None)

    return await asyncio.to_thread(work)
