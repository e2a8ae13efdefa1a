"""`infosvc submit`, `infosvc jobs`, `infosvc cancel` and `infosvc why`: the job queue from a
shell, as sbatch, squeue, scancel and `squeue --start` give a batch system's.

Each is one or two requests to the aggregator's /v1/jobs (docs/api.md) with the command line's
client; what they print is made from the JSON answers by pure functions (tested without a server).
Exit status: 0 done, 1 refused or unreachable (the reason on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import getpass
import json
import re
import sys
import time
import urllib.parse
from typing import Any, Iterable

from infosvc.controls import visible, visible_lines
from infosvc.cli.tables import table
from infosvc.cli.client import Client, ClientError, checked, epoch_of

__all__ = ["add_commands", "clock", "content_type_of", "job_of", "jobs_table", "next_page", "read_document", "run",
           "submitted", "why"]

#: What `infosvc jobs` lists by default: the jobs not yet ended, as squeue does.
LIVE_STATES = ("Running", "Queued")
#: How many jobs `infosvc jobs` asks the server for in one page, and reads at most unless --max says.
PAGE_JOBS = 1000
MAX_LISTED = 10_000
#: The most of a file `infosvc submit` sends (the server's own bound is the service's body limit).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
#: The most pages `infosvc jobs` reads of one listing: 100 times what 10,000 jobs take at PAGE_JOBS a
#: page (a page also ends at 4 MiB of jobs), whatever a server's `next` says.
MAX_PAGES = 1000
#: A page's `next`, as the server writes it: a path of /v1/jobs with its query, printable ASCII.
_NEXT = re.compile(r"/v1/jobs\?[!-~]{0,8000}").fullmatch


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """The four commands, each with `common`'s --server, --token-file and --ca-file."""
    submit = commands.add_parser("submit", parents=[common], help="submit a job (SSS Job or JobGroup XML, CCS job "
                                 "XML, or a grid job as JSON); '-' reads stdin")
    submit.add_argument("file", metavar="FILE")
    submit.add_argument("--json", action="store_true", help="print the server's answer as JSON")
    listing = commands.add_parser("jobs", parents=[common], help="the queue as a table (running and queued jobs)")
    listing.add_argument("--state", metavar="S", help="only jobs in state S (Queued, Running, Finished, Failed, "
                         "Canceled)")
    whose = listing.add_mutually_exclusive_group()
    whose.add_argument("--user", metavar="U", help="only the jobs of user U")
    whose.add_argument("--me", action="store_true",
                         help="only my jobs: those of the user running the command (as squeue --me)")
    listing.add_argument("--ce", metavar="CE", help="only the jobs of computing element CE (running there, or counted "
                         "waiting there)")
    listing.add_argument("--all", action="store_true", help="ended jobs too (kept [scheduler] keep_ended_days), newest "
                         "ended after the jobs not ended, as sacct")
    listing.add_argument("--since", metavar="TIME", help="only jobs ended at TIME or later (ISO 8601, 2026-11-01 or "
                         "2026-11-01T08:00:00Z, or seconds since the epoch); ended jobs too, as --all")
    listing.add_argument("--until", metavar="TIME", help="only jobs ended at TIME or before (and those not ended "
                         "submitted by then); ended jobs too, as --all")
    listing.add_argument("--max", type=int, default=MAX_LISTED, metavar="N",
                         help=f"read at most N jobs, page after page (default {MAX_LISTED})")
    listing.add_argument("--json", action="store_true", help="print one JSON object instead")
    cancel = commands.add_parser("cancel", parents=[common], help="cancel jobs (a submit token: its own jobs)")
    cancel.add_argument("ids", nargs="+", metavar="JOB")
    why = commands.add_parser("why", parents=[common], help="why a job waits, where it runs, or how it ended")
    why.add_argument("id", metavar="JOB")
    why.add_argument("--json", action="store_true", help="print the job as the server has it")


def run(args: argparse.Namespace) -> int:
    try:
        client = Client.of(args.server, token_file=args.token_file, ca_file=args.ca_file)
        if args.command == "submit":
            return _submit(client, args.file, args.json)
        if args.command == "jobs":
            return _jobs(client, args)
        if args.command == "cancel":
            return _cancel(client, args.ids)
        path = f"/v1/jobs/{_quoted(args.id)}"
        answer = job_of(client.call("GET", path), client.server + path)
        print(json.dumps(answer) if args.json else why(answer, time.time()))
        return 0
    except ClientError as exc:
        print(f"infosvc {args.command}: {visible(str(exc))}", file=sys.stderr)
        return 1


def _quoted(job_id: str) -> str:
    return urllib.parse.quote(job_id, safe="")


def read_document(name: str) -> bytes:
    """A job document from a file, or stdin for '-'; ClientError when unreadable, empty or too large."""
    try:
        if name == "-":
            document = sys.stdin.buffer.read(MAX_DOCUMENT_BYTES + 1)
        else:
            with open(name, "rb") as handle:
                document = handle.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise ClientError(f"{name}: cannot read: {exc.strerror}") from None
    if len(document) > MAX_DOCUMENT_BYTES:
        raise ClientError(f"{name}: larger than {MAX_DOCUMENT_BYTES // 2**20} MB")
    if not document.strip():
        raise ClientError(f"{name}: empty")
    return document


def _submit(client: Client, name: str, as_json: bool) -> int:
    document = read_document(name)
    answer = client.call("POST", "/v1/jobs", document, content_type_of(document))
    for warning in answer.get("warnings") or ():
        print(f"infosvc submit: warning: {visible(str(warning))}", file=sys.stderr)
    print(json.dumps(answer) if as_json else submitted(answer))
    return 0


def content_type_of(document: bytes) -> str:
    """JSON for a grid job (it starts with '{'), else XML (SSS and CCS jobs)."""
    start = document.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    return "application/json" if start == b"{" else "application/xml"


def submitted(answer: dict[str, Any]) -> str:
    """`job 7 submitted (Queued)`, or for a group `job group 7 submitted: jobs 7-9`."""
    if "jobs" in answer:
        ids = [job["id"] for job in answer["jobs"]]
        return visible(f"job group {answer['group']} submitted: jobs {ids[0]}-{ids[-1]}")
    return visible(f"job {answer['id']} submitted ({answer['state']})")


def _jobs(client: Client, args: argparse.Namespace) -> int:
    if args.max < 1:
        raise ClientError("--max must be 1 or more")
    user = getpass.getuser() if args.me else args.user
    filters = {key: value for key, value in (("user", user), ("ce", args.ce), ("since", args.since),
                                             ("until", args.until)) if value}
    accounting = bool(args.state or args.all or args.since or args.until)
    states: Iterable[str | None] = [args.state] if accounting else LIVE_STATES
    found: list[dict[str, Any]] = []
    truncated = False
    for state in states:
        jobs, more = listing(client, {**filters, **({"state": state} if state else {})}, args.max - len(found))
        found += jobs
        truncated |= more
    if not accounting:  # the jobs not ended, as squeue: in id order
        found.sort(key=lambda job: _number(job["id"]))
    if args.json:
        print(json.dumps({"jobs": found, "truncated": truncated}))
    else:
        print(jobs_table(found, time.time()))
        if truncated:
            print(f"(more jobs than --max {args.max}: raise it, or narrow with --state, --user, --ce, --since or "
                  "--until)", file=sys.stderr)
    return 0


def listing(client: Client, filters: dict[str, str], most: int) -> tuple[list[dict[str, Any]], bool]:
    """The jobs of GET /v1/jobs with `filters`, page after page (each `next`), at most `most`; and
    whether there were more. A `next` is followed only as a path of /v1/jobs on the server given
    (next_page), only while each page adds jobs, never to a page already read, and for at most
    MAX_PAGES pages: a server that says there is always more cannot keep the command for ever."""
    found: list[dict[str, Any]] = []
    path: str | None = "/v1/jobs?" + urllib.parse.urlencode({**filters, "limit": str(min(PAGE_JOBS, max(1, most)))})
    read: set[str] = set()
    while path is not None and len(found) < most:
        if len(read) == MAX_PAGES:
            raise ClientError(f"{client.server}/v1/jobs: more than {MAX_PAGES} pages; stopped: lower --max, or "
                              "narrow the listing with --state, --user, --ce, --since or --until")
        read.add(path)
        where = client.server + path
        answer = client.call("GET", path)
        jobs = answer.get("jobs")
        if not isinstance(jobs, list):
            raise ClientError(f"{where}: the answer is not a page of jobs: its 'jobs' is not an array")
        jobs = [job_of(job, where) for job in jobs]
        following = next_page(answer.get("next"), where)
        if following is not None and not jobs:
            raise ClientError(f"{where}: a page with no job says there is a next page; stopped")
        if following in read:
            raise ClientError(f"{where}: the next page is one already read; stopped")
        found += jobs
        path = following
    return found[:most], path is not None or len(found) > most


def next_page(value: Any, where: str) -> str | None:
    """A page's `next`: None, or a path of /v1/jobs (`/v1/jobs?...`) that the client puts after the
    server given. Anything else is a ClientError, not a request: a scheme or `//host` would be another
    server, and SERVER + `:8088/x` or `.evil.net/x` another port or host, each sent the token."""
    if value is None:
        return None
    if not isinstance(value, str) or not _NEXT(value):
        shown = repr(value)[:100] if isinstance(value, str) else f"not a string but {type(value).__name__}"
        raise ClientError(f"{where}: the answer's next page is not a path of /v1/jobs on this server; not followed "
                          f"({shown})")
    return value


#: The fields of a job that `jobs`, `why` and `show` print, and their JSON types (docs/api.md).
_JOB_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str, "state": str, "name": str, "owner": str, "priority": str, "hosts": str, "reason": str,
    "phase": str, "submitted": str, "started": str, "ended": str, "processors": dict,
    "run_time_limit_seconds": (int, float), "predicted_run_seconds": (int, float), "reserved": dict,
    "events": list, "holds": list, "depends_on": list, "rejected_hosts": list, "tasks": (dict, list),
    "tasks_not_shown": int,
}


def job_of(value: Any, where: str) -> dict[str, Any]:
    """`value` if it is a job as docs/api.md gives one, in each field that `jobs`, `why` and `show`
    print; else a ClientError saying which field is not (at `where`)."""
    what = "a job"
    job = checked(value, where, what, _JOB_FIELDS, ("id", "state", "processors"))
    checked(job["processors"], where, f"{what} (its processors)", {"min": int, "max": int, "held": (int, float)},
            ("min", "max"))
    if job.get("reserved") is not None:
        checked(job["reserved"], where, f"{what} (its reservation)", {"at": str, "hosts": str}, ("at", "hosts"))
    for key in ("events", "tasks"):
        items = job.get(key)
        if isinstance(items, list) and not all(isinstance(item, dict) for item in items):
            raise ClientError(f"{where}: the answer is not {what}: its {key!r} are not all objects")
    for key in ("holds", "depends_on", "rejected_hosts"):
        if not all(isinstance(item, str) for item in job.get(key) or ()):
            raise ClientError(f"{where}: the answer is not {what}: its {key!r} are not all strings")
    return job


def _number(job_id: str) -> tuple[int, str]:
    # isdigit() alone takes '²', and 5,000 digits: int() refuses both
    return (int(job_id), "") if job_id.isascii() and job_id.isdigit() and len(job_id) < 19 else (sys.maxsize, job_id)


def _cancel(client: Client, ids: list[str]) -> int:
    failed = 0
    for job_id in ids:
        try:
            answer = client.call("DELETE", f"/v1/jobs/{_quoted(job_id)}")
        except ClientError as exc:
            failed += 1
            print(f"infosvc cancel: {visible(str(exc))}", file=sys.stderr)
        else:
            print(visible(f"job {answer['id']} {answer['state'].lower()}"))
    return 1 if failed else 0


def clock(seconds: float | None) -> str:
    """A duration as squeue prints one: M:SS, H:MM:SS, D-HH:MM:SS."""
    if seconds is None:
        return "-"
    whole = max(0, int(seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def _processors(job: dict[str, Any]) -> str:
    """What it holds (and what it asked, when it holds more: whole hosts of exclusive use), else asks."""
    held = job["processors"].get("held") or 0
    if held and job["processors"].get("beyond_asked"):
        return f"{held}(asked:{job['processors']['max']},excl)"  # one word: the columns split on blanks
    if held:
        return str(held)
    low, high = job["processors"]["min"], job["processors"]["max"]
    return str(low) if low == high else f"{low}-{high}"


def _time_of(job: dict[str, Any], now: float) -> str:
    """Running: how long it has run; ended: how long it ran; queued: 0:00, as squeue."""
    started = epoch_of(job.get("started"))
    if started is None:
        return clock(0)
    ended = epoch_of(job.get("ended"))
    return clock((ended if ended is not None else now) - started)


def jobs_table(jobs: list[dict[str, Any]], now: float) -> str:
    """JOBID NAME USER STATE PRIO TIME LIMIT PROCS HOSTS(REASON), one line a job: STATE Placed for a
    Running job no executor has begun (squeue's CF), PROCS what it holds, with what it asked when
    exclusive use holds more."""
    header = ["JOBID", "NAME", "USER", "STATE", "PRIORITY", "TIME", "LIMIT", "PROCS", "HOSTS(REASON)"]
    rows = []
    for job in jobs:
        limit = job.get("run_time_limit_seconds")
        where = job.get("hosts") if job["state"] == "Running" else (f"({job['reason']})" if job.get("reason") else "")
        state = "Placed" if job.get("phase") == "placed" else job["state"]  # no executor has begun it
        rows.append([job["id"], (job.get("name") or "-")[:24], job.get("owner") or "-", state,
                     job.get("priority") or "-", _time_of(job, now), "UNLIMITED" if limit is None else clock(limit),
                     _processors(job), where or ""])
    if not rows:
        return "(no jobs)"
    return "\n".join(table(header, rows))


def why(job: dict[str, Any], now: float) -> str:
    """The job's state in a sentence, then what it waits for, where it runs or how it ended, and
    the hosts its requirements rule out; each line made visible, as a table's cells are."""
    name = f" ({job['name']})" if job.get("name") else ""
    head = f"job {job['id']}{name} is {job['state']}"
    lines = []
    if job["state"] == "Queued":
        lines.append(f"{head}: {job.get('reason') or 'waiting for the next scheduling pass'}")
        reserved = job.get("reserved")
        if reserved:
            lines.append(f"  reserved to start at {reserved['at']} on {reserved['hosts']}")
        submitted = epoch_of(job.get("submitted"))
        if submitted is not None:
            lines.append(f"  waiting {clock(now - submitted)} since {job['submitted']}")
        # why it is back, when it is: a lost host, or a host whose executor did not start it (drained)
        back = [e for e in job.get("events") or [] if e.get("task") is None and e.get("state") == "Queued"
                and e.get("detail") != "submitted"]
        if back:
            last = max(back, key=lambda e: str(e.get("at")))
            lines.append(f"  back in the queue since {last.get('at')}: {last.get('detail')}")
    elif job["state"] == "Running" and job.get("phase") == "placed":
        lines.append(f"{head}: placed on {job.get('hosts')} at {job.get('started')}, its executor has not started "
                     f"it ({_time_of(job, now)} ago)")
    elif job["state"] == "Running":
        lines.append(f"{head} on {job.get('hosts')} since {job.get('started')} ({_time_of(job, now)})")
        limit = job.get("run_time_limit_seconds")
        started = epoch_of(job.get("started"))
        if limit is not None and started is not None:
            lines.append(f"  its run time limit ({clock(limit)}) ends it at "
                         f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(started + limit))}")
    else:
        code = job.get("exit_code")
        lines.append(f"{head} since {job.get('ended')}" + (f", exit code {code}" if code is not None else "")
                     + (f": {job['reason']}" if job.get("reason") else ""))
    processors = job["processors"]
    wanted = processors["min"] if processors["min"] == processors["max"] else f"{processors['min']} to {processors['max']}"
    limit = job.get("run_time_limit_seconds")
    lines.append(f"  asks {wanted} processor(s), {'exclusive' if job.get('exclusive') else 'shared'} hosts, "
                 f"run time limit {'none' if limit is None else clock(limit)}, priority {job.get('priority')}")
    beyond = processors.get("beyond_asked")
    if beyond:
        lines.append(f"  {beyond}")
    predicted = job.get("predicted_run_seconds")
    if predicted is not None:
        lines.append(f"  planned to run {clock(predicted)} (predicted from its owner's last jobs; the limit still "
                     "ends it)")
    holds = job.get("holds") or []
    if holds:  # the SSS Job's own controls
        lines.append(f"  holds: {', '.join(holds)} (`infosvc release {job['id']}` takes a User hold off)")
    if job.get("eligible_time"):
        lines.append(f"  starts no earlier than {job['eligible_time']} (its EligibleTime)")
    if job.get("deadline"):
        lines.append(f"  is ended at {job['deadline']} at the latest (its Deadline)")
    depends = job.get("depends_on") or []
    if depends:
        lines.append("  depends on: " + ", ".join(depends))
    rejected = job.get("rejected_hosts") or []
    if rejected:
        lines.append("  hosts its requirements rule out:")
        lines += [f"    {line}" for line in rejected]
    return visible_lines(lines)
