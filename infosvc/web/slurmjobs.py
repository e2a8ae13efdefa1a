"""The job routes when Slurm runs the site's jobs (`[lrms] type = "slurm"`, docs/slurm.md,
"Submitting through Slurm"): POST /v1/jobs is an sbatch as the owner's account, GET /v1/jobs and
/v1/jobs/{id} read squeue, DELETE is scancel, hold and release are scontrol's. The same tokens may
do the same as with the service's own queue (infosvc/queue/jobcontrols.py): an administrator any
job; a submit token the jobs it submitted, and a token bound to a user that user's jobs.

Every Slurm command runs in a thread; submissions take one of a few slots, so a burst of POSTs
waits rather than starting hundreds of sbatch processes. A job's id is Slurm's job id; an array
task's or a het job component's Slurm's spelling (1234_5, 1234+0), never a job the service submitted.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Final, Mapping, TypeVar

from aiohttp import web

from infosvc.config import LrmsConfig
from infosvc.errors import Conflict, DocumentError, Forbidden, Invalid, NotFound, Unavailable, excerpt
from infosvc.hosts import Role
from infosvc.lrms import slurm_jobs
from infosvc.lrms.sbatch import translate
from infosvc.lrms.slurm_settings import SlurmSettings, slurm_settings
from infosvc.lrms.slurm_commands import SlurmUnavailable
from infosvc.lrms.slurm_jobs import HELD_BY, SubmissionUnknown, Submitted, job_view
from infosvc.queue import MAX_GROUP_JOBS, Filer, Listing, Prepared, check_group, owner_of, read_document
from infosvc.sched.holds import hold_name
from infosvc.sched.request import read_request
from infosvc.web.auth import caller_of
from infosvc.web.bodies import read_body
from infosvc.web.pretty import compact_json
from infosvc.web.keys import AGGREGATOR, CONFIG, SLURM
from infosvc.web.slurmside import SLURM_THREADS, SlurmSide
from infosvc_agents.accounts import Account, AccountError

__all__ = ["SlurmSide", "delete_job", "get_job", "get_jobs", "post_control", "post_job"]

#: Where a job runs that names no directory, when its account's home is not a directory.
FALLBACK_DIRECTORY: Final = "/tmp"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Who:
    admin: bool
    submitter: str
    user: str | None


async def _slurm(call: Callable[..., T], *args: Any) -> T:
    """A blocking Slurm call in a thread; the cluster out of reach is a 503 saying why."""
    try:
        return await asyncio.get_running_loop().run_in_executor(SLURM_THREADS, functools.partial(call, *args))
    except SubmissionUnknown:
        raise  # the submission's to answer (`_submitted`): the job may be in Slurm
    except SlurmUnavailable as exc:
        raise Unavailable(f"Slurm cannot be reached: {exc}", "the job was not changed; try again") from None


def _who(request: web.Request) -> _Who:
    caller = _reader(request)
    assert caller is not None  # the route's access requires a token
    return caller


def _reader(request: web.Request) -> _Who | None:
    """Who reads: None for a reader without a token (reads may be open to anyone)."""
    caller = caller_of(request)
    if caller is None:
        return None
    return _Who(caller.role is Role.ADMIN, caller.key[:16], request.app[AGGREGATOR].tokens.bound_user(caller.key))


async def _settings(side: SlurmSide) -> SlurmSettings:
    """Slurm's settings, read at the first route that needs them; the account policy then never
    answers SlurmUser or SlurmdUser, by name or uid (Slurm takes a job of SlurmUser's for an
    operator's), whichever route asks it first (a submission, or `_own_account` for a control)."""
    if side.settings is None:
        side.settings = await _slurm(slurm_settings, side.config)
        side.policy.never, side.policy.never_uids = side.settings.daemons, side.settings.daemon_uids
    return side.settings


def _shown(side: SlurmSide, settings: SlurmSettings, who: _Who | None) -> Callable[[Mapping[str, Any]], bool]:
    """Which jobs a reader is shown: every one, unless Slurm keeps jobs private (PrivateData=jobs),
    and then those the reader may change (`_rights`), as squeue shows a user its own alone; the
    server reads Slurm as root, which Slurm's privacy does not filter. A reader without a token
    is then shown none."""
    if not settings.private_jobs or (who is not None and who.admin):
        return lambda record: True
    if who is None:
        return lambda record: False
    own = _own_account(side, who.user) if who.user is not None else None
    return lambda record: _rights(side, record, who, own)


def _directory(account: Account | None) -> str:
    home = account.home if account is not None else os.path.expanduser("~")
    return home if os.path.isdir(home) else FALLBACK_DIRECTORY


def _account(side: SlurmSide, owner: str) -> Account | None:
    try:
        return side.policy.resolve(owner)
    except AccountError as exc:
        raise Forbidden(f"no account submits {excerpt(owner)!r}'s jobs to Slurm here: {exc}",
                        "the site maps owners to accounts: [lrms] run_as, run_as_owner, run_as_map") from None


def _prepare(body: bytes, content_type: str, filer: Filer, exclusive_default: bool) -> tuple[list[Prepared], Any]:
    document = read_document(body, content_type, MAX_GROUP_JOBS,
                             lambda n: DocumentError(f"the job group has {n} jobs; at most {MAX_GROUP_JOBS}"))
    owners = [owner_of(job, filer) for job in document.written]
    budget = document.budget()
    prepared = [Prepared(read_request(needs, owner, exclusive_default, budget), None, needs.job.id)
                for needs, owner in zip(document.needs, owners)]
    check_group(document.parsed, prepared)
    return prepared, document


def _order(prepared: list[Prepared]) -> list[int]:
    """The jobs of a group in an order that submits each after the jobs of the group it depends on
    (check_group found no cycle)."""
    names: dict[str, int] = {}
    for number, item in enumerate(prepared):
        names.setdefault(item.name, number)
        if item.request.name:
            names.setdefault(item.request.name, number)
    wanted = [{names[after.job] for after in item.request.after if after.job in names} for item in prepared]
    done: list[int] = []
    placed: set[int] = set()
    while len(done) < len(prepared):  # each pass places at least one job: at most len(prepared) passes
        for number in range(len(prepared)):
            if number not in placed and wanted[number] <= placed:
                done.append(number)
                placed.add(number)
    return done


def _ids(prepared: list[Prepared], submitted: dict[int, str]) -> dict[str, str]:
    ids: dict[str, str] = {}
    for number, slurm_id in submitted.items():
        ids.setdefault(prepared[number].name, slurm_id)
        if prepared[number].request.name:
            ids.setdefault(prepared[number].request.name, slurm_id)
    return ids


async def _submitted(side: SlurmSide, batch: Any, account: Account | None, marker: str) -> str:
    """`slurm_jobs.submit` in Slurm's threads. An sbatch left unanswered whose job Slurm could not
    be asked about afterwards may yet be in Slurm, or come to be: it is withdrawn once Slurm
    answers, and the reader is told it may have been submitted (a retry made a second job)."""
    try:
        return await _slurm(slurm_jobs.submit, side.config, batch, account, marker)
    except SubmissionUnknown as exc:
        later = ("the service cancels it once Slurm answers" if side.withdraw_later(exc.marker, exc.user)
                 else f"too many are being withdrawn: cancel the job whose comment is {exc.marker} should it appear")
        raise Unavailable(f"Slurm cannot be reached: {exc}", f"the job may have been submitted: {later}; see GET "
                          "/v1/jobs before submitting again") from None


async def post_job(request: web.Request) -> web.Response:
    side, who = request.app[SLURM], _who(request)
    tokens = request.app[AGGREGATOR].tokens
    caller = caller_of(request)
    assert caller is not None
    body = await read_body(request, request.app[CONFIG].service)
    filer = Filer(tokens.user_of(caller.key), may_name_owner=who.user is None)
    prepared, document = await asyncio.to_thread(_prepare, body, request.headers.get("Content-Type", ""), filer,
                                                 request.app[CONFIG].scheduler.exclusive_default)
    if not who.admin and any("System" in item.request.holds for item in prepared):
        raise Forbidden("a System hold is an administrator's to put on", "submit it with an admin token")
    await _settings(side)  # the policy then knows Slurm's daemons' accounts: no job runs as one
    accounts = [_account(side, item.request.owner) for item in prepared]
    order = _order(prepared)
    # every job translated before any is submitted (a refusal leaves nothing in Slurm), off the loop
    vo_accounts = _vo_accounts(side.config)
    directories = await asyncio.to_thread(_translate_all, document, prepared, accounts, vo_accounts)
    submitted: dict[int, str] = {}
    records: dict[int, dict[str, Any]] = {}
    async with side.slot(len(prepared)):
        try:
            for number in order:
                # again with the Slurm ids of the jobs it depends on, now that they are known
                batch = await asyncio.to_thread(translate, document.needs[number], prepared[number].request,
                                                slurm_ids=_ids(prepared, submitted), directory=directories[number],
                                                vo_accounts=vo_accounts)
                at, marker = time.time(), slurm_jobs.new_marker()
                submitted[number] = await _submitted(side, batch, accounts[number], marker)
                account = accounts[number]
                side.remember(submitted[number], Submitted(prepared[number].request.owner, who.submitter),
                              account.name if account is not None else None, at, marker)
                records[number] = slurm_jobs.accepted(submitted[number], batch, prepared[number].request,
                                                      accounts[number])
                if "System" in prepared[number].request.holds:  # submitted held; now the administrator's hold
                    await _slurm(slurm_jobs.hold, side.config, submitted[number], "System")
                    records[number]["state_reason"] = "JobHeldAdmin"
        except BaseException:
            for slurm_id in submitted.values():  # a group goes in whole or not at all
                await asyncio.to_thread(_quietly_cancel, side.config, slurm_id)
            raise
    ids = [submitted[number] for number in range(len(prepared))]
    views = [job_view(records[number], side.submitted_of(records[number])) for number in range(len(prepared))]
    answer: dict[str, Any] = views[0] if len(views) == 1 else {"group": ids[0], "jobs": views}
    answer["warnings"] = document.warnings
    response = compact_json(answer, status=201)
    response.headers["Location"] = f"/v1/jobs/{ids[0]}"
    return response


def _translate_all(document: Any, prepared: list[Prepared], accounts: list[Account | None],
                   vo_accounts: dict[str, str]) -> list[str]:
    """Each job translated with stand-in ids for its group's jobs: a DocumentError names what is
    refused. The directory each job runs in where it names none (blocking: each account's home is
    looked at)."""
    placeholder = _ids(prepared, {number: str(number + 1) for number in range(len(prepared))})
    directories = [_directory(account) for account in accounts]
    for number, item in enumerate(prepared):
        translate(document.needs[number], item.request, slurm_ids=placeholder, directory=directories[number],
                  vo_accounts=vo_accounts)
    return directories


def _quietly_cancel(config: LrmsConfig, slurm_id: str) -> None:
    try:
        slurm_jobs.cancel(config, slurm_id)
    except (SlurmUnavailable, DocumentError):
        pass  # the job the group could not go in without stays; the error answered says why


def _vo_accounts(config: LrmsConfig) -> dict[str, str]:
    """VO -> the Slurm account the site maps to it (the first, where several are)."""
    found: dict[str, str] = {}
    for account, vo in config.accounts.items():
        found.setdefault(vo, account)
    return found


async def get_jobs(request: web.Request, listing: Listing) -> web.Response:
    """Every job Slurm keeps, not ended first, filtered as GET /v1/jobs's parameters say: a state,
    an owner, a CE (the partition), ended in [since, until] (not ended: submitted by until)."""
    side = request.app[SLURM]
    shown = _shown(side, await _settings(side), _reader(request))

    def listed() -> dict[str, Any]:
        # in Slurm's threads: 100,000 jobs' views made and sorted on the loop held it ~1 s a listing
        views = []
        for record in slurm_jobs.read_jobs(side.config):
            if not shown(record):
                continue
            view = job_view(record, side.submitted_of(record))
            ended = view["ended"] is not None
            at = float(record.get("end_time" if ended else "submit_time") or 0)
            if ((listing.state is None or view["state"] == listing.state.value)
                    and (listing.user is None or view["owner"] == listing.user)
                    and (listing.ce is None or view["slurm"]["partition"] == listing.ce)
                    and (listing.until is None or at <= listing.until)
                    and (listing.since is None or not ended or at >= listing.since)):
                views.append(view)
        views.sort(key=lambda view: (view["ended"] is not None, slurm_jobs.id_order(view["id"])))
        limit = listing.limit
        return {"jobs": views[:limit], "total": len(views), "truncated": len(views) > limit, "next": None}

    return compact_json(await _slurm(listed))


async def get_job(request: web.Request) -> web.Response:
    side = request.app[SLURM]
    slurm_jobs.checked_id(request.match_info["id"])  # before any Slurm command, `_settings`' included
    shown = _shown(side, await _settings(side), _reader(request))
    record = await _slurm(slurm_jobs.one_job, side.config, request.match_info["id"])
    if not shown(record):  # as Slurm answers a user asking of another's job under PrivateData=jobs
        raise NotFound(f"no job {excerpt(request.match_info['id'])!r} that this reader may see",
                       "Slurm keeps jobs private here (PrivateData=jobs): a token shows its own")
    view = job_view(record, side.submitted_of(record))
    view |= {"events": [], "ces": [view["slurm"]["partition"]] if view["slurm"]["partition"] else [],
             "depends_on": [view["slurm"]["dependency"]] if view["slurm"]["dependency"] else []}
    return compact_json(view)


def _may(side: SlurmSide, record: dict[str, Any], who: _Who, what: str) -> None:
    if not _rights(side, record, who, _own_account(side, who.user) if who.user is not None else None):
        raise Forbidden(f"job {record.get('job_id')} is not this token's: it may not {what} it",
                        "an admin token may change any job")


def _rights(side: SlurmSide, record: Mapping[str, Any], who: _Who, own: str | None) -> bool:
    """An administrator any job; the token that submitted it, or one bound to its owner; a token
    bound to a user whose own account (`own`: not a pool's) runs the job, after a restart forgot who."""
    known = side.submitted_of(record)
    if who.admin:
        return True
    if known is not None and (known.submitter == who.submitter or who.user == known.owner):
        return True
    return known is None and own is not None and own == record.get("user_name")


def _own_account(side: SlurmSide, user: str) -> str | None:
    """The account of the user's own name its jobs run as here, if they do (a pool's, or one a map
    shares between owners, is no one user's)."""
    try:
        account = side.policy.resolve(user)
    except AccountError:
        return None
    return account.name if account is not None and account.name == user else None


def _may_ask(side: SlurmSide, job_id: str, who: _Who, what: str) -> None:
    """Refused before Slurm is asked (each question a process, up to `timeout_seconds`): a token
    bound to no user has rights only to the jobs it submitted."""
    found = side.known.get(job_id)
    if not who.admin and who.user is None and (found is None or found[0].submitter != who.submitter):
        raise Forbidden(f"job {excerpt(job_id)} is not this token's: it may not {what} it",
                        "an admin token may change any job")


async def delete_job(request: web.Request) -> web.Response:
    side, who = request.app[SLURM], _who(request)
    slurm_jobs.checked_id(request.match_info["id"])
    _may_ask(side, request.match_info["id"], who, "cancel")
    await _settings(side)  # the daemons' accounts are no one's own (`_may`)
    record = await _slurm(slurm_jobs.one_job, side.config, request.match_info["id"])
    _may(side, record, who, "cancel")
    if slurm_jobs.state_of(record) in ("Finished", "Failed", "Canceled"):
        raise Invalid(f"job {record.get('job_id')} has already ended ({record.get('job_state')})")
    await _slurm(slurm_jobs.cancel, side.config, str(record["job_id"]))
    try:
        return await _answer(side, str(record["job_id"]))
    except NotFound:  # a pending array task cancelled leaves no record: the array's pending tasks are one
        return compact_json(job_view({**record, "job_state": "CANCELLED"}, side.submitted_of(record)))


async def _answer(side: SlurmSide, job_id: str) -> web.Response:
    record = await _slurm(slurm_jobs.one_job, side.config, job_id)
    return compact_json(job_view(record, side.submitted_of(record)))


async def post_control(request: web.Request, action: str, hold: str) -> web.Response:
    """hold / release with the hold named (User, System); requeue and priority are Slurm's operators'."""
    side, who = request.app[SLURM], _who(request)
    if action not in ("hold", "release"):
        raise Invalid(f"{action} is not offered for jobs run by Slurm", "scontrol requeue and scontrol update "
                      "priority are the Slurm operators'")
    name = hold_name(hold)
    if name is None:
        raise Invalid(f"{hold[:40]!r} is no hold", "one of User, System")
    if name == "System" and not who.admin:
        raise Forbidden("a System hold is an administrator's to put on and take off", "ask with an admin token")
    slurm_jobs.checked_id(request.match_info["id"])
    _may_ask(side, request.match_info["id"], who, action)
    await _settings(side)  # the daemons' accounts are no one's own (`_may`)
    record = await _slurm(slurm_jobs.one_job, side.config, request.match_info["id"])
    _may(side, record, who, action)
    job_id = str(record["job_id"])
    if slurm_jobs.state_of(record) != "Queued":
        raise Conflict(f"job {job_id} is {record.get('job_state')}: only a pending job is held or released")
    held = HELD_BY.get(str(record.get("state_reason")))
    if action == "hold":
        if held == "System" and not who.admin:
            # `scontrol uhold` as root turns an administrator's hold into a user's, which the owner
            # could then release: the job is held already, and not the owner's to hold again
            raise Forbidden(f"job {job_id} is held by an administrator (System)", "a System hold is an administrator's")
        if held != name:
            await _slurm(slurm_jobs.hold, side.config, job_id, name)
    elif held is None:
        raise Conflict(f"job {job_id} has no hold to release")
    elif held != name:
        raise Forbidden(f"job {job_id} is held by {held}, not {name}", "a System hold is an administrator's")
    else:
        await _slurm(slurm_jobs.release, side.config, job_id)
    return await _answer(side, job_id)

