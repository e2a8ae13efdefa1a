"""The job queue over HTTP (docs/api.md): POST /v1/jobs (a submit or admin token), GET /v1/jobs and
GET /v1/jobs/{id}, DELETE /v1/jobs/{id} (cancel), and the executor's two routes: the tasks placed
on its host, and a task's start and end."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Final, Mapping
from urllib.parse import urlencode

from aiohttp import web

from infosvc.errors import excerpt
from infosvc.model.ccsjob import JobState
from infosvc.publish.jobs import event_json, job_json, task_order_json
from infosvc.sched.jobs import JobRecord
from infosvc.model.ccsjob import JobState
from infosvc.errors import Invalid
from infosvc.hosts import Role
from infosvc.hosts import QueryError, parse_time
from infosvc.queue import Cursor, Listing, listing_page
from infosvc.web.auth import Caller, caller_of
from infosvc.web.bodies import read_body
from infosvc.web.jobcontrols import actor_of
from infosvc.web.pretty import compact_json
from infosvc.web import slurmjobs
from infosvc.web.keys import AGGREGATOR, JOB_LISTINGS, JOB_QUEUE, JOB_READERS, SLURM, known

#: A page of GET /v1/jobs holds at most this many jobs (`limit`), DEFAULT_LISTED unless it says.
MAX_LISTED: Final = 10_000
DEFAULT_LISTED: Final = 1000
LIST_PARAMETERS: Final = ("state", "user", "ce", "since", "until", "limit", "cursor")
#: A page of GET /v1/jobs stops once its jobs' JSON passes this (past its first job), whatever
#: `limit` allows: each submission's jobs are bounded together (sched/budget.py), a page of many
#: submissions is bounded here, and its `next` goes on from the last job it holds.
JOBS_PAGE_BYTES: Final = 4 << 20
#: Listings waiting for their turn past the one under way (anonymous; as many again with a token)
LISTINGS_WAITING: Final = 4
#: An executor's report is a small JSON object.
MAX_REPORT_BYTES: Final = 4096
#: An end report's reason (a task that could not start says which path and why).
MAX_REASON_CHARS: Final = 1000


def _caller(request: web.Request) -> Caller:
    caller = caller_of(request)
    assert caller is not None  # the route's access requires a token
    return caller


def _by_slurm(request: web.Request) -> bool:
    """Whether Slurm runs the site's jobs (`[lrms] type = "slurm"`): the routes are slurmjobs'."""
    return request.app[SLURM].config.slurm


async def post_job(request: web.Request) -> web.Response:
    if _by_slurm(request):
        return await slurmjobs.post_job(request)
    caller = _caller(request)
    body = await read_body(request, request.app[AGGREGATOR].config.service)
    tokens = request.app[AGGREGATOR].tokens
    # the owner is the token's: only a token bound to no user (a portal's) or an admin's may name another
    jobs, warnings = await request.app[JOB_QUEUE].submit(
        body, request.headers.get("Content-Type", ""), owner=tokens.user_of(caller.key), submitter=caller.key[:16],
        admin=caller.role is Role.ADMIN, may_name_owner=tokens.bound_user(caller.key) is None)
    answer: dict[str, Any] = (job_json(jobs[0]) if len(jobs) == 1
                              else {"group": jobs[0].group, "jobs": [job_json(j) for j in jobs]})
    answer["warnings"] = warnings
    response = compact_json(answer, status=201)
    response.headers["Location"] = f"/v1/jobs/{jobs[0].id}"
    return response


async def get_jobs(request: web.Request) -> web.Response:
    """One page of the listing (infosvc/queue/accounting.py): the jobs not ended first, then the
    ended ones kept in the store, newest ended first; `next` is the path of the page after it."""
    query = request.query  # only LIST_PARAMETERS get here (routes.py, auth.py)
    for key in LIST_PARAMETERS:
        if len(query.getall(key, ())) > 1:  # `?state=Queued&state=Finished` is no one listing
            raise QueryError(key, "given more than once")
    listing = listing_of(query)
    # one listing at a time, a few waiting (and as many for callers with a token): each reads the
    # store in a worker thread and renders on the loop, and 24 anonymous ones at once took every
    # worker thread for 15 s; under Slurm each is a squeue of every job
    async with request.app[JOB_LISTINGS].taken(known=known(request, JOB_READERS)):
        if _by_slurm(request):
            return await slurmjobs.get_jobs(request, listing)
        page = await listing_page(request.app[JOB_QUEUE], listing, _job_text, JOBS_PAGE_BYTES)
    following = None
    if page.next is not None:
        kept = [(key, value) for key, value in query.items() if key != "cursor"]
        following = f"/v1/jobs?{urlencode([*kept, ('cursor', str(page.next))])}"
    tail = json.dumps({"total": page.total, "truncated": following is not None, "next": following},
                      separators=(",", ":"))
    return web.Response(text=f'{{"jobs":[{",".join(page.parts)}],{tail[1:]}', content_type="application/json")


def _job_text(job: JobRecord) -> str:
    return json.dumps(job_json(job), separators=(",", ":"))


def listing_of(query: Mapping[str, str]) -> Listing:
    """GET /v1/jobs's parameters as a Listing; a QueryError (400) names the one that is wrong."""
    state = query.get("state")
    states = {s.value.lower(): s for s in JobState}
    if state is not None and state.lower() not in states:
        raise QueryError("state", f"{excerpt(state)!r} is no job state: one of {', '.join(s.value for s in JobState)}")
    text = query.get("limit", str(DEFAULT_LISTED))
    # ASCII digits, and few: int() refuses (ValueError) digits of other scripts and past 4,300
    if not (text.isascii() and text.isdigit() and len(text) <= 6) or not 1 <= int(text) <= MAX_LISTED:
        raise QueryError("limit", f"a whole number from 1 to {MAX_LISTED}")
    since = parse_time(query["since"], "since") if "since" in query else None
    until = parse_time(query["until"], "until") if "until" in query else None
    if since is not None and until is not None and until < since:
        raise QueryError("until", "an instant not before `since`")
    cursor = Cursor()
    if "cursor" in query:
        parsed = Cursor.parse(query["cursor"])
        if parsed is None:
            raise QueryError("cursor", "the cursor a listing gave in its `next` path")
        cursor = parsed
    return Listing(None if state is None else states[state.lower()], query.get("user"), query.get("ce"), since,
                   until, int(text), cursor)


async def get_job(request: web.Request) -> web.Response:
    if _by_slurm(request):  # a process (squeue) a read: in the listings' turns
        async with request.app[JOB_LISTINGS].taken(known=known(request, JOB_READERS)):
            return await slurmjobs.get_job(request)
    queue = request.app[JOB_QUEUE]
    job = await queue.ended.find(request.match_info["id"])  # an ended one may be in the store only
    answer = job_json(job, detail=True)
    answer["ces"] = queue.ces_of(job)
    events = await asyncio.to_thread(queue.events_of, job, 200)
    answer["events"] = [event_json(event) for event in events]
    return compact_json(answer)


async def delete_job(request: web.Request) -> web.Response:
    if _by_slurm(request):
        return await slurmjobs.delete_job(request)
    job = await request.app[JOB_QUEUE].cancel(request.match_info["id"], actor_of(request))
    return compact_json(job_json(job))


def _executor_host(request: web.Request, caller: Caller) -> str | None:
    """The host an executor token acts for; None for an admin (any host)."""
    if caller.role is Role.ADMIN:
        return None
    return request.app[AGGREGATOR].tokens.executor_host(caller.key)


async def get_executor_tasks(request: web.Request) -> web.Response:
    caller = _caller(request)
    host = _executor_host(request, caller)
    if host is None:
        host = request.query.get("host")
        if not host:  # `?host=` is no host either
            raise Invalid("an admin names the host: ?host=NAME")
    tasks = request.app[JOB_QUEUE].tasks_on(host)
    return compact_json({"host": host, "tasks": [task_order_json(job, index) for job, index in tasks]})


async def post_task_event(request: web.Request) -> web.Response:
    caller = _caller(request)
    service = request.app[AGGREGATOR].config.service
    body = await read_body(request, service)
    if len(body) > MAX_REPORT_BYTES:
        raise Invalid(f"a task report is at most {MAX_REPORT_BYTES} bytes")
    try:
        report = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # "[" * 1000 is within the size
        raise Invalid("a task report is a JSON object: {\"event\": \"started\"} or "
                      "{\"event\": \"ended\", \"exit_code\": N}") from None
    if not isinstance(report, dict) or report.get("event") not in ("started", "ended"):
        raise Invalid("'event' must be \"started\" or \"ended\"")
    exit_code = report.get("exit_code")
    if report["event"] == "ended" and (not isinstance(exit_code, int) or isinstance(exit_code, bool)
                                       or not -2**31 <= exit_code < 2**32):
        raise Invalid("an end report gives 'exit_code', a whole number")
    if not isinstance(report.get("limit", False), bool):
        raise Invalid("'limit' is true when the executor stopped the task at its run time limit, else false")
    attempt = report.get("attempt")
    if attempt is not None and (not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1):
        raise Invalid("'attempt' is the task's attempt the report is about, a whole number from 1 (the task list's)")
    why = report.get("reason")
    if why is not None and (not isinstance(why, str) or not 0 < len(why) <= MAX_REASON_CHARS):
        raise Invalid(f"'reason' is the executor's reason for the end, a string of 1 to {MAX_REASON_CHARS} characters")
    try:
        task = int(request.match_info["task"])
    except ValueError:
        raise Invalid(f"task {excerpt(request.match_info['task'])!r} is not a task number") from None
    job = await request.app[JOB_QUEUE].task_report(
        request.match_info["id"], task, host=_executor_host(request, caller), began=report["event"] == "started",
        exit_code=exit_code, at_limit=bool(report.get("limit", False)), why=why, attempt=attempt)
    return compact_json(job_json(job))
