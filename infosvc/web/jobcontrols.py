"""A job's controls over HTTP (docs/api.md): POST /v1/jobs/{id}/hold, /release, /requeue (a submit
token its own jobs, an admin any) and /priority (an admin). Each answers the job as JSON once the
change is stored; what may be changed, and by whom, and how many times, is
infosvc/queue/jobcontrols.py's."""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import Any, Callable, Final

from aiohttp import web

from infosvc.errors import Invalid
from infosvc.hosts import Role
from infosvc.publish.jobs import job_json
from infosvc.queue import JobQueue, jobcontrols as controls
from infosvc.sched.jobs import JobRecord
from infosvc.web.auth import caller_of
from infosvc.web.bodies import read_body
from infosvc.web.pretty import compact_json
from infosvc.web import slurmjobs
from infosvc.web.keys import AGGREGATOR, JOB_QUEUE, SLURM

__all__ = ["actor_of", "post_hold", "post_priority", "post_release", "post_requeue"]

#: A control's body is a small JSON object.
MAX_CONTROL_BYTES: Final = 1024
#: A queue's controls are made one at a time, from the count of the job's controls to the change
#: stored: two at once would both count below the bound (the queue's lock is taken later, in alter).
_one_at_a_time: weakref.WeakKeyDictionary[JobQueue, asyncio.Lock] = weakref.WeakKeyDictionary()


def actor_of(request: web.Request) -> controls.Actor:
    """Who asks for a change of a job: the caller's token as queue/jobcontrols.py reads it."""
    caller = caller_of(request)
    assert caller is not None  # the route's access requires a token
    tokens = request.app[AGGREGATOR].tokens
    admin = caller.role is Role.ADMIN
    user = tokens.bound_user(caller.key)
    name = "an administrator" if admin else tokens.user_of(caller.key)
    return controls.Actor(admin, caller.key[:16], user, name)


async def _body(request: web.Request, example: str) -> dict[str, Any]:
    """The JSON object the control was sent ({} for an empty body)."""
    body = await read_body(request, request.app[AGGREGATOR].config.service)
    if len(body) > MAX_CONTROL_BYTES:
        raise Invalid(f"the body is at most {MAX_CONTROL_BYTES} bytes", example)
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except RecursionError:  # json.loads recurses once a level: `[` 1,000 times, under the cap, is past it
        raise Invalid("the body nests arrays and objects too deep to be read", example) from None
    except (ValueError, UnicodeDecodeError):
        raise Invalid("the body is not JSON", example) from None
    if not isinstance(data, dict):
        raise Invalid("the body is a JSON object", example)
    return data


async def _hold_named(request: web.Request) -> str:
    """The hold the body names: `{"hold": "User"}`; User when the body is empty."""
    data = await _body(request, '{"hold": "User"} or {"hold": "System"} (an admin)')
    unknown = sorted(set(data) - {"hold"})
    if unknown:
        raise Invalid(f"unknown field {unknown[0][:40]!r}", 'the body is {"hold": "User"}')
    value = data.get("hold", "User")
    if not isinstance(value, str):
        raise Invalid("'hold' is a string: User or System")
    return value


#: a control's decision: (the job, now) -> what to store, or None
Decide = Callable[[JobRecord, float], controls.Change | None]


async def _alter(request: web.Request, who: controls.Actor, decide: Decide, *, bounded: bool = True) -> web.Response:
    """Make the control `decide` gives of the job the path names, within the bound of a job's
    controls (`bounded`; a release is not: it only undoes a hold), and answer the job."""
    queue, job_id = request.app[JOB_QUEUE], request.match_info["id"]
    async with _one_at_a_time.setdefault(queue, asyncio.Lock()):
        made = 0 if who.admin or not bounded else await queue.ended.count_events(job_id, controls.CONTROL_EVENTS)

        def within(job: JobRecord, now: float) -> controls.Change | None:
            change = decide(job, now)
            if change is not None:  # what may not be done is refused as such; what changes nothing is not counted
                controls.within_bound(job, who, made)
            return change
        job = await queue.alter(job_id, within)
    return compact_json(job_json(job))


#: a hold's change of a job: (the job, the hold named, who asks, now) -> what to store, or None
HoldChange = Callable[[JobRecord, str, controls.Actor, float], controls.Change | None]


async def _change_hold(request: web.Request, verb: str, change: HoldChange) -> web.Response:
    """Hold or release: the hold named in the body, by Slurm where it runs the jobs, else by the queue."""
    who, name = actor_of(request), await _hold_named(request)
    if request.app[SLURM].config.slurm:
        return await slurmjobs.post_control(request, verb, name)
    return await _alter(request, who, lambda job, now: change(job, name, who, now), bounded=verb != "release")


async def post_hold(request: web.Request) -> web.Response:
    return await _change_hold(request, "hold", controls.hold)


async def post_release(request: web.Request) -> web.Response:
    return await _change_hold(request, "release", controls.release)


async def post_requeue(request: web.Request) -> web.Response:
    who = actor_of(request)
    if request.app[SLURM].config.slurm:
        return await slurmjobs.post_control(request, "requeue", "")
    data = await _body(request, "an empty body")
    if data:
        raise Invalid(f"unknown field {sorted(data)[0][:40]!r}", "requeue takes an empty body")
    return await _alter(request, who, lambda job, now: controls.requeue(job, who, now))


async def post_priority(request: web.Request) -> web.Response:
    who = actor_of(request)
    if request.app[SLURM].config.slurm:
        return await slurmjobs.post_control(request, "priority", "")
    data = await _body(request, '{"priority": "AboveNormal"} or {"priority": 3}')
    if set(data) != {"priority"}:
        raise Invalid("the body is {\"priority\": P}: a CCS priority (Lowest .. Highest) or its rank 0 to 4")
    value = data["priority"]
    return await _alter(request, who, lambda job, now: controls.priority(job, value, who, now))
