"""`infosvc hold`, `release`, `requeue`, `priority` and `show`: a job's controls from a shell, as
`scontrol hold | release | requeue | update priority= | show job` give Slurm's.

Each is a request per job to the aggregator (docs/api.md: POST /v1/jobs/{id}/hold, ...); `show`
prints one job whole, a `Key=Value` block as `scontrol show job` does, then its events. The
printing is a pure function of the JSON answer (tested without a server). Exit status: 0 done, 1
any job refused or the server unreachable (each reason on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from typing import Any

from infosvc.cli.client import Client, ClientError
from infosvc.cli.jobs import job_of
from infosvc.controls import visible, visible_lines

__all__ = ["COMMANDS", "add_commands", "run", "shown"]

COMMANDS = ("hold", "release", "requeue", "priority", "show")


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """The five commands, each with `common`'s --server, --token-file and --ca-file."""
    for name, verb in (("hold", "hold queued jobs: they do not start until released"),
                       ("release", "take a hold off jobs")):
        command = commands.add_parser(name, parents=[common], help=f"{verb} (a submit token: its own jobs)")
        command.add_argument("ids", nargs="+", metavar="JOB")
        command.add_argument("--system", action="store_true", help="the System hold (an admin token) instead of User")
    requeue = commands.add_parser("requeue", parents=[common], help="send running jobs back to the queue "
                                  "(their executors stop their tasks; they run again when the job next starts)")
    requeue.add_argument("ids", nargs="+", metavar="JOB")
    priority = commands.add_parser("priority", parents=[common], help="set a job's priority (an admin token)")
    priority.add_argument("id", metavar="JOB")
    priority.add_argument("priority", metavar="PRIORITY", help="Lowest, BelowNormal, Normal, AboveNormal, Highest, "
                          "or 0 to 4")
    show = commands.add_parser("show", parents=[common], help="one job whole, with its events")
    show.add_argument("id", metavar="JOB")
    show.add_argument("--json", action="store_true", help="print the job as the server has it")


def _path(job_id: str, action: str = "") -> str:
    return f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}" + (f"/{action}" if action else "")


def run(args: argparse.Namespace) -> int:
    try:
        client = Client.of(args.server, token_file=args.token_file, ca_file=args.ca_file)
        if args.command == "show":
            answer = job_of(client.call("GET", _path(args.id)), client.server + _path(args.id))
            print(json.dumps(answer) if args.json else shown(answer))
            return 0
        if args.command == "priority":
            value: int | str = int(args.priority) if args.priority.isdigit() else args.priority
            answer = client.call("POST", _path(args.id, "priority"), json.dumps({"priority": value}).encode(),
                                 "application/json")
            print(visible(f"job {answer['id']} priority {answer['priority']}"))
            return 0
    except ClientError as exc:
        print(f"infosvc {args.command}: {visible(str(exc))}", file=sys.stderr)
        return 1
    body = b"" if args.command == "requeue" else json.dumps({"hold": "System" if args.system else "User"}).encode()
    failed = 0
    for job_id in args.ids:
        try:
            answer = client.call("POST", _path(job_id, args.command), body, "application/json")
        except ClientError as exc:
            failed += 1
            print(f"infosvc {args.command}: {visible(str(exc))}", file=sys.stderr)
            continue
        holds = ", ".join(answer.get("holds") or []) or "none"
        print(visible(f"job {answer['id']} {answer['state'].lower()}, holds: {holds}"))
    return 1 if failed else 0


def _value(value: Any) -> str:
    if value is None or value == [] or value == {}:
        return "(null)"
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    if isinstance(value, dict):
        return ",".join(f"{key}:{item}" for key, item in value.items())
    return str(value)


#: `show`'s lines of Key=Value pairs: (key printed, the answer's field), as scontrol groups them.
_LINES: tuple[tuple[tuple[str, str], ...], ...] = (
    (("JobId", "id"), ("JobName", "name")),
    (("UserId", "owner"), ("Group", "group")),
    (("Priority", "priority"), ("Holds", "holds"), ("Exclusive", "exclusive")),
    (("JobState", "state"), ("SSSState", "sss_state"), ("GlueStatus", "glue_status"), ("Reason", "reason")),
    (("ExitCode", "exit_code"),),
    (("TimeLimit", "run_time_limit_seconds"), ("PredictedRunTime", "predicted_run_seconds")),
    (("SubmitTime", "submitted"), ("EligibleTime", "eligible_time"), ("Deadline", "deadline")),
    (("StartTime", "started"), ("EndTime", "ended")),
    (("NodeList", "hosts"), ("CEs", "ces")),
    (("ReadAsRequested", "read_as_requested"), ("DependsOn", "depends_on")),
)


def shown(job: dict[str, Any]) -> str:
    """One job as `scontrol show job` prints one: Key=Value lines, then its tasks and its events."""
    lines = [" ".join(f"{key}={_value(job.get(field))}" for key, field in line) for line in _LINES]
    processors = job.get("processors") or {}
    lines.insert(6, f"NumCPUs={processors.get('min')}-{processors.get('max')} HeldCPUs={processors.get('held')}")
    reserved = job.get("reserved")
    if reserved:
        lines.append(f"ReservedAt={reserved.get('at')} ReservedNodes={reserved.get('hosts')}")
    tasks = job.get("tasks")
    if isinstance(tasks, list):
        for task in tasks:
            lines.append(f"Task={task.get('index')} Name={_value(task.get('name'))} State={task.get('state')} "
                         f"Node={_value(task.get('host'))} Attempts={task.get('attempts')} "
                         f"ExitCode={_value(task.get('exit_code'))}")
        if job.get("tasks_not_shown"):
            lines.append(f"(and {job['tasks_not_shown']} more tasks)")
    rejected = job.get("rejected_hosts") or []
    if rejected:
        lines.append("RejectedHosts:")
        lines += [f"  {line}" for line in rejected]
    events = job.get("events") or []
    if events:
        lines.append("Events:")
        for event in events:
            task = "" if event.get("task") is None else f" task {event['task']}"
            lines.append(f"  {event.get('at')}{task} {event.get('state')}: {event.get('detail')}")
    return visible_lines(lines)
