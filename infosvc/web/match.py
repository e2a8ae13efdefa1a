"""POST /v1/match: the HTTP shell of the queue's dry run (infosvc.queue.dryrun), bounded in
requests under way and in the size of its answer; its terms, the names its Ranges expand to and
its seconds of work are bounded by the dry run (docs/security.md, docs/matching.md). GET /v1/processors: the
hosts' processors as the scheduler counts them, which the dry run reads (infosvc.queue.processors)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from infosvc.errors import Invalid
from infosvc.hosts import QueryError
from infosvc.matching import AnswerLimits, MatchResult, MatchTooCostly
from infosvc.model.job import Job
from infosvc.queue import Scheduled, dry_run, prepare_match, scheduler_view, totals
from infosvc.web.bodies import read_body
from infosvc.web.errors import HttpError
from infosvc.web.keys import AGGREGATOR, JOB_QUEUE, MATCH_GATE
from infosvc.web.negotiate import JSON

#: POST /v1/match requests under way at once; the next is answered 503 at once, before its body is
#: read, so that a flood of matches holds neither memory nor the event loop.
MAX_MATCHES_IN_FLIGHT = 8
#: Worker threads that parse and match POST /v1/match bodies (the costly matches among them): the
#: rest wait their turn.
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
                 read_as_requested: tuple[str, ...] = (), scheduled: Scheduled | None = None) -> dict[str, Any]:
    """The answer for one job: its matches and rejected hosts, its id, the warnings, and what it
    wrote outside Requested that was read as Requested; with `scheduled`, each match's processors
    as the scheduler counts them and the load's free ones beside (free_cpus is then the idle)."""
    answer = result.as_json(limits)
    answer["processors_from"] = "load" if scheduled is None else "scheduler"
    if scheduled is not None:
        for found in answer["matches"]:
            found.update(scheduled.host(found["host"]))
    answer["job"] = job.id
    answer["warnings"] = warnings + list(result.notes)
    answer["read_as_requested"] = list(read_as_requested)
    return answer


def render_match(jobs: list[Job], results: list[MatchResult], warnings: list[str], group: bool,
                 limits: AnswerLimits | None = None, read: list[tuple[str, ...]] | None = None,
                 scheduled: Scheduled | None = None) -> str:
    """The body of POST /v1/match: one job's answer as it always was; for a JobGroup of several
    jobs, {"jobs": [...]}, each the one-job answer with the job's name too (docs/matching.md)."""
    limits = limits or AnswerLimits()
    read = read or [() for _ in jobs]
    if not group:
        return json.dumps(match_answer(jobs[0], results[0], warnings, limits, read[0], scheduled))
    return json.dumps({"jobs": [{**match_answer(job, result, warnings, limits, names, scheduled),
                                 "name": job.properties.get("Name")}
                                for job, result, names in zip(jobs, results, read)]})


async def post_match(request: web.Request) -> web.Response:
    """A dry run: which hosts fit this job (each job of a JobGroup), best first, and why the others
    do not (infosvc/matching/). Parsing, and a match that is costly (a large site, or many terms
    on it: infosvc.queue.dryrun.match_steps), run in worker threads; the whole is bounded in
    requests under way, in terms per job, in the names its Ranges expand to, in seconds of work
    (charged per host), and in the size of its answer (docs/security.md)."""
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
            group = len(prepared.jobs) > 1

            def answer(results: list[MatchResult], scheduled: Scheduled | None) -> str:
                return render_match(prepared.jobs, results, prepared.warnings, group, limits,
                                    prepared.read_as_requested, scheduled)

            schedules, split = await scheduler_view(request.app[JOB_QUEUE])  # read so when the queue schedules
            try:
                text = await dry_run(prepared, agg.table, answer, split if schedules else None)
            except MatchTooCostly as exc:
                raise Invalid("the job is too costly to match against this site", str(exc)) from None
    finally:
        gate.in_flight -= 1
    return web.Response(text=text, content_type=JSON)


async def get_processors(request: web.Request) -> web.Response:
    """Each host's processors as the scheduler counts them (allocated, idle, other, total: sinfo's
    %C), the site's sums, and whether the queue schedules at all (some host runs an executor)."""
    schedules, split = await scheduler_view(request.app[JOB_QUEUE])
    body = {"schedules": schedules, "total": totals(split.values()).as_json(),
            "hosts": {host: figures.as_json() for host, figures in sorted(split.items())}}
    return web.Response(text=json.dumps(body, separators=(",", ":")), content_type=JSON)
