"""POST /v1/match: a dry run of the matcher (infosvc/matching/) over the site as it is, bounded in
requests under way, in the names its Ranges expand to, in seconds of work, and in the size of its
answer (docs/security.md, docs/matching.md)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from aiohttp import web

from infosvc.codec.submission import parse_submission
from infosvc.errors import excerpt
from infosvc.matching import (
    AnswerLimits, MatchError, MatchResult, MatchTooCostly, Requirements, Site, SiteSnapshot, SiteView, SyncedColumns,
    check_range_budget, compile_requirements, match,
)
from infosvc.matching.hostcolumns import HostColumns, columns_for
from infosvc.model.job import Job, resolve
from infosvc.model.jobneeds import read_needs
from infosvc.model.node import Node
from infosvc.errors import Invalid
from infosvc.hosts import QueryError
from infosvc.web.bodies import read_body
from infosvc.web.errors import HttpError
from infosvc.web.keys import AGGREGATOR, MATCH_GATE
from infosvc.web.negotiate import JSON

if TYPE_CHECKING:
    from infosvc.hosts import Rollup

    def _rollup_is_a_site_view(rollup: Rollup) -> SiteView:
        """For mypy alone: the roll-up POST /v1/match hands the matcher is what it reads of a site."""
        return rollup

#: The most jobs one POST /v1/match answers for: every answer lists every host with its reasons,
#: so one small body of many jobs could otherwise cost minutes of CPU and gigabytes of answer.
MAX_MATCH_JOBS = 16

#: Sites of up to this many hosts are matched on the event loop (a few ms at most, within the work
#: budget); larger ones in a worker thread, over a snapshot of the roll-up, so that the loop goes
#: on taking reports meanwhile.
RENDER_IN_THREAD_HOSTS = 500

#: POST /v1/match requests under way at once; the next is answered 503 at once, before its body is
#: read, so that a flood of matches holds neither memory nor the event loop.
MAX_MATCHES_IN_FLIGHT = 8
#: Seconds of matching and explaining one POST /v1/match may cost, all its jobs together.
MATCH_BUDGET_SECONDS = 2.0
#: Worker threads that parse and match POST /v1/match bodies: the rest wait their turn.
MATCH_WORKERS = 2

#: POST /v1/match's query parameters: (default, most).
ANSWER_PARAMETERS: dict[str, tuple[int, int]] = {
    "limit": (1000, 10_000), "rejected_limit": (100, 1000), "rejected_offset": (0, 1 << 31)}


class MatchGate:
    """How many POST /v1/match requests are under way, and the workers their parsing and matching
    take turns on."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.workers = asyncio.Semaphore(MATCH_WORKERS)


@dataclass(slots=True)
class PreparedMatch:
    """A POST /v1/match body read into jobs, checked against the request's budget, compiled."""

    jobs: list[Job]
    compiled: list[Requirements]
    warnings: list[str]
    #: per job, what it wrote outside Requested and was read as Requested (infosvc.model.jobneeds)
    read_as_requested: list[tuple[str, ...]] = field(default_factory=list)


def prepare_match(body: bytes, content_type: str) -> PreparedMatch:
    """Parse, resolve and compile a POST /v1/match body (in a worker thread: a body of 1 MB takes
    tens of ms to parse). The Ranges of all its jobs share one budget, checked before any is
    expanded."""
    job, warnings = parse_submission(body, content_type)  # SSS Job XML, CCS job XML or grid JSON v2
    read = [read_needs(one) for one in resolve(job)]
    jobs = [one for one, _ in read]
    if not jobs:
        raise Invalid("the JobGroup has no job to match")
    if len(jobs) > MAX_MATCH_JOBS:  # each answer names every host: ~2 MB and ~0.1 s at 10,000 hosts
        raise Invalid(f"a match takes at most {MAX_MATCH_JOBS} jobs; this JobGroup has {len(jobs)}",
                      "send the jobs in smaller groups")
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
    return PreparedMatch(jobs, compiled, warnings, [names for _, names in read])


def answer_limits(request: web.Request) -> AnswerLimits:
    values = {}
    for name, (default, most) in ANSWER_PARAMETERS.items():
        text = request.query.get(name)
        if text is None:
            values[name] = default
            continue
        least = 0 if name == "rejected_offset" else 1
        if not (text.isascii() and text.isdigit() and len(text) <= 12) or not least <= int(text) <= most:
            raise QueryError(name, f"expected a whole number from {least} to {most}")
        values[name] = int(text)
    return AnswerLimits(values["limit"], values["rejected_limit"], values["rejected_offset"])


def match_answer(job: Job, result: MatchResult, warnings: list[str], limits: AnswerLimits,
                 read_as_requested: tuple[str, ...] = ()) -> dict[str, Any]:
    """The answer for one job: its matches and rejected hosts, its id, the warnings, and what it
    wrote outside Requested that was read as Requested."""
    answer = result.as_json(limits)
    answer["job"] = job.id
    answer["warnings"] = warnings + list(result.notes)
    answer["read_as_requested"] = list(read_as_requested)
    return answer


def render_match(jobs: list[Job], results: list[MatchResult], warnings: list[str], group: bool,
                 limits: AnswerLimits | None = None, read: list[tuple[str, ...]] | None = None) -> str:
    """The body of POST /v1/match: one job's answer as it always was; for a JobGroup of several
    jobs, {"jobs": [...]}, each the one-job answer with the job's name too (docs/matching.md)."""
    limits = limits or AnswerLimits()
    read = read or [() for _ in jobs]
    if not group:
        return json.dumps(match_answer(jobs[0], results[0], warnings, limits, read[0]))
    return json.dumps({"jobs": [{**match_answer(job, result, warnings, limits, names), "name": job.properties.get("Name")}
                                for job, result, names in zip(jobs, results, read)]})


def match_and_render(prepared: PreparedMatch, rollup: SiteView, node_of: Callable[[str], Node | None], site: Site,
                     columns: HostColumns | SyncedColumns | None, limits: AnswerLimits) -> str:
    """Every job matched and the answer written, within the request's work budget."""
    results = [match(requirements, rollup, node_of, site, columns=columns) for requirements in prepared.compiled]
    return render_match(prepared.jobs, results, prepared.warnings, len(prepared.jobs) > 1, limits,
                        prepared.read_as_requested)


async def post_match(request: web.Request) -> web.Response:
    """A dry run: which hosts fit this job (each job of a JobGroup), best first, and why the others
    do not (infosvc/matching/). Parsing, and on large sites matching, run in worker threads; the
    whole is bounded in requests under way, in the names its Ranges expand to, in seconds of work,
    and in the size of its answer (docs/security.md)."""
    agg = request.app[AGGREGATOR]
    limits = answer_limits(request)
    gate = request.app[MATCH_GATE]
    if gate.in_flight >= MAX_MATCHES_IN_FLIGHT:
        raise HttpError(503, "too many match requests under way", "try again shortly")
    gate.in_flight += 1
    try:
        body = await read_body(request, agg.config.service)
        async with gate.workers:
            prepared = await asyncio.to_thread(prepare_match, body, request.headers.get("Content-Type", ""))
            for requirements in prepared.compiled:  # one budget for the request: its jobs share it
                requirements.start_budget(MATCH_BUDGET_SECONDS)
            entries = agg.table.entries

            def node_of(host_id: str) -> Node | None:
                entry = entries.get(host_id)
                return entry.node if entry is not None else None

            rollup = agg.table.rollup
            site = Site.of(rollup)
            # The columns kept for this roll-up: the HostTable's nodes change only with their Hosts.
            keeper = columns_for(rollup)
            try:
                if len(rollup.hosts) <= RENDER_IN_THREAD_HOSTS:
                    text = match_and_render(prepared, rollup, node_of, site, keeper, limits)
                else:
                    snapshot = SiteSnapshot(rollup, node_of)
                    synced = SyncedColumns(keeper.sync(rollup, node_of))
                    text = await asyncio.to_thread(match_and_render, prepared, snapshot, snapshot.node_of, site,
                                                   synced, limits)
            except MatchTooCostly as exc:
                raise Invalid("the job is too costly to match against this site", str(exc)) from None
    finally:
        gate.in_flight -= 1
    return web.Response(text=text, content_type=JSON)
