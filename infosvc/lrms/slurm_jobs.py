"""Slurm's jobs as the service hands them over and shows them: an sbatch run as the job owner's
account, squeue's records read as the job JSON of GET /v1/jobs (the same fields as the service's
own queue, infosvc/publish/jobs.py, and Slurm's own words in `slurm`), and scancel and scontrol's
holds.

Blocking (each runs one Slurm command): the web layer runs them in threads. Which account submits
is infosvc_agents.accounts' policy, the one an executor host applies: the site's map, the owner's
own account from a least uid, a pool account; never root. A service not running as root submits as
itself. sbatch runs without a shell, through setpriv (`as_account`), its script on stdin, with
`--export=NONE`.
"""

from __future__ import annotations

import errno
import os
import pwd
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Final, Mapping

from infosvc.config import LrmsConfig
from infosvc.errors import DocumentError, NotFound, excerpt
from infosvc.lrms.sbatch import Batch
from infosvc.lrms.slurm_commands import SlurmUnavailable, environment, key_values, program, run
from infosvc.lrms.slurm_parse import instant_of, minutes_of
from infosvc.model.snapshot import iso
from infosvc.sched.request import PRIORITIES, JobRequest
from infosvc_agents.accounts import Account

__all__ = ["SLURM_DOWN", "Submitted", "accepted", "as_account", "cancel", "hold", "job_view", "listing_records",
           "one_job", "read_jobs", "record_of", "release", "submit"]

#: What sbatch and scontrol say when the cluster, not the job, is the trouble (a 503, not a 400).
SLURM_DOWN: Final = ("Unable to contact slurm controller", "Socket timed out", "Munge", "munge",
                     "Zero Bytes were transmitted", "Communication connection failure", "did not finish within",
                     "not found", "cannot run")
#: Slurm job states as the service's (CCS) states.
_STATES: Final = {
    "PENDING": "Queued", "REQUEUED": "Queued", "REQUEUE_HOLD": "Queued", "REQUEUE_FED": "Queued",
    "RESV_DEL_HOLD": "Queued", "RUNNING": "Running", "CONFIGURING": "Running", "COMPLETING": "Running",
    "SUSPENDED": "Running", "STOPPED": "Running", "SIGNALING": "Running", "RESIZING": "Running",
    "STAGE_OUT": "Running", "COMPLETED": "Finished", "CANCELLED": "Canceled", "PREEMPTED": "Canceled",
    "REVOKED": "Canceled", "SPECIAL_EXIT": "Failed",
}
_GLUE: Final = {"Queued": "WAITING", "Running": "RUNNING", "Finished": "DONE", "Failed": "ABORTED",
                "Canceled": "CLEARED"}
#: Slurm's reasons for a job on hold: whose hold it is.
HELD_BY: Final = {"JobHeldUser": "User", "JobHeldAdmin": "System"}
#: squeue gives an unset number as this (NO_VAL and INFINITE of a 32-bit field).
_UNSET: Final = frozenset({4294967294, 4294967295})


@dataclass(frozen=True, slots=True)
class Submitted:
    """A job this service submitted: whose it is and which token filed it (for the same token
    rules as the service's own queue: infosvc/queue/jobcontrols.py)."""

    owner: str
    submitter: str


def _down(message: str) -> bool:
    return any(mark in message for mark in SLURM_DOWN)


def as_account(account: Account | None, argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """`argv` run as `account`: through util-linux's setpriv (real, effective and, at its exec,
    saved ids the account's, its groups by initgroups, no capability left), which a server's
    Python starts with vfork; where setpriv is missing, Python's own setuid in the child (a full
    fork of the server: a submission took twice as long so). None: as this process."""
    if account is None:
        return argv, {}
    setpriv = shutil.which("setpriv", path="/usr/bin:/bin")
    if setpriv is not None:
        return [setpriv, f"--reuid={account.uid}", f"--regid={account.gid}", "--init-groups", "--", *argv], {}
    return argv, {"user": account.uid, "group": account.gid,
                  "extra_groups": os.getgrouplist(account.name, account.gid)}


def submit(config: LrmsConfig, batch: Batch, account: Account | None) -> str:
    """The Slurm job id of `batch` submitted as `account` (None: as this process). DocumentError
    (400) where Slurm refuses the job itself (an unknown partition, a node configuration no node
    has), SlurmUnavailable (503) where the cluster cannot be reached."""
    argv = [program(config, "sbatch"), "--parsable", "--export=NONE", *batch.options]
    for argument in argv:
        if "\0" in argument or not argument.isprintable():
            raise DocumentError(f"an sbatch option holds control characters: {excerpt(argument)!r}")
    env = environment(config)
    argv, extra = as_account(account, argv)
    if account is not None:
        env |= {"HOME": account.home, "USER": account.name, "LOGNAME": account.name}
    try:
        done = subprocess.run(argv, input=batch.script, capture_output=True, text=True, env=env, cwd="/",
                              timeout=config.timeout_seconds, errors="replace", **extra)
    except subprocess.TimeoutExpired:
        raise SlurmUnavailable(f"sbatch did not finish within {config.timeout_seconds:g} s") from None
    except OSError as exc:
        if exc.errno == errno.E2BIG:  # past infosvc.lrms.sbatch's bounds, on a system with a smaller ARG_MAX
            raise DocumentError("the job's sbatch options are too long for one command line here "
                                f"({sum(map(len, batch.options))} characters); ask for fewer nodes or "
                                "features") from None
        raise SlurmUnavailable(f"sbatch: cannot run: {exc.strerror}") from None
    said = " ".join(done.stderr.split())[-1000:]
    if done.returncode != 0:
        if _down(said):
            raise SlurmUnavailable(f"sbatch failed: {said}")
        raise DocumentError(f"Slurm refused the job: {said or 'sbatch exit ' + str(done.returncode)}")
    job_id: str = done.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise SlurmUnavailable(f"sbatch gave no job id: {excerpt(done.stdout)!r}")
    return job_id


#: squeue's line for the fields of one job a control decides by: Slurm's own words, the name last
DECISION_FORMAT: Final = "%i|%T|%u|%r|%N|%S|%e|%j"
#: squeue's one line a job for the listing, the fields job_view reads: Slurm's own words first,
#: split at "|"; then the job's name and its features, the two texts a
#: submitter chooses, apart at the line's last NAME_END: a constraint ORs features with "|" but
#: holds no "#" (no feature's name can: slurm.conf starts a comment with it), a name may hold
#: anything. Either may fool only the other: the fields Slurm's own words say come first.
NAME_END: Final = "|#|"
LISTING_FORMAT: Final = f"%i|%T|%u|%a|%C|%l|%V|%S|%e|%N|%P|%E|%y|%r|%j{NAME_END}%f"
_LISTING_FIELDS: Final = LISTING_FORMAT.partition("%j")[0].count("|") + 1


def read_jobs(config: LrmsConfig) -> list[dict[str, Any]]:
    """Every job Slurm still keeps, under squeue --json's names (what job_view reads), from
    squeue's one-line form in UTC: --json takes ten times as long at 10,000 jobs, and 22.05's
    lists every job whatever the filter (one job is read with scontrol, `one_job`)."""
    return listing_records(run(config, "squeue", "-h", "-r", "--states=all", "-o", LISTING_FORMAT,
                               env={"TZ": "UTC"}).stdout)


def listing_records(text: str) -> list[dict[str, Any]]:
    """The lines of `squeue -o LISTING_FORMAT` (in UTC) as records under squeue --json's names."""
    records = []
    for line in text.splitlines():
        fields = line.split("|", _LISTING_FIELDS - 1)
        if len(fields) != _LISTING_FIELDS or not fields[0].isdigit():
            continue  # an array's pending remainder (`12_[3-9]`) is no one job
        (ident, state, user, account, cpus, limit, submit, start, end, nodes, partition, dependency, nice, reason,
         texts) = fields
        name, apart, features = texts.rpartition(NAME_END)
        try:
            if not apart:
                raise ValueError(f"no {NAME_END!r} before its features")
            records.append({
                "job_id": int(ident), "job_state": state, "user_name": user, "account": _said(account),
                "cpus": int(cpus), "time_limit": minutes_of(limit), "submit_time": int(instant_of(submit)),
                "start_time": int(instant_of(start)), "end_time": int(instant_of(end)), "nodes": nodes,
                "partition": partition, "dependency": _said(dependency), "features": _said(features),
                "nice": int(nice) if nice.lstrip("-").isdigit() else None, "state_reason": reason, "name": name})
        except ValueError as exc:
            raise SlurmUnavailable(f"squeue gave a line that does not read ({exc}): {line[:80]!r}") from None
    return records


def one_job(config: LrmsConfig, job_id: str) -> dict[str, Any]:
    """Slurm job `job_id` as squeue's JSON record names its fields, read with `squeue -j` and
    `scontrol show job -o` (one job, whatever the queue's length); NotFound when Slurm no longer
    knows it."""
    if not (job_id.isascii() and job_id.isdigit() and len(job_id) <= 10):
        raise NotFound(f"job {excerpt(job_id)!r} is no Slurm job id", "jobs run by Slurm are named by its ids")
    # scontrol prints the job's own text (its name, StdOut, WorkDir) unescaped among its fields, so
    # " Reason=JobHeldUser" in a path reads as a field: what a decision rests on (which job, whose,
    # its state, its hold, where it runs) is read from squeue, whose fields here are Slurm's own
    # words, the name last; first, so that scontrol's (its exit code) are no older than its state
    said = _of_known_job(config, "squeue", "-h", "-j", job_id, "--states=all", "-o", DECISION_FORMAT)
    found = [fields for line in said.splitlines()
             if len(fields := line.split("|", DECISION_FORMAT.count("|"))) == DECISION_FORMAT.count("|") + 1
             and fields[0] == job_id]
    text = _of_known_job(config, "scontrol", "show", "job", "-o", job_id)
    lines = [line for line in text.splitlines() if line.startswith(f"JobId={job_id} ")]
    if not lines or not found:
        raise NotFound(f"Slurm knows no job {job_id}",
                       "Slurm keeps an ended job for MinJobAge (slurm.conf) after its end")
    _, state, user, reason, nodes, start, end, name = found[0]
    return record_of(key_values(lines[0])) | {
        "job_id": int(job_id), "job_state": state, "user_name": user, "state_reason": _said(reason) or "None",
        "nodes": _said(nodes), "start_time": _epoch(start), "end_time": _epoch(end), "name": name}


def _of_known_job(config: LrmsConfig, *argv: str) -> str:
    """What a Slurm command says of one job, in UTC; "" when Slurm knows no such job (any longer)."""
    try:
        return run(config, *argv, env={"TZ": "UTC"}).stdout
    except SlurmUnavailable as exc:
        if "Invalid job id" not in str(exc):
            raise
        return ""


def _said(value: str | None) -> str:
    return "" if value is None or value in ("(null)", "None", "N/A", "Unknown") else value


def _epoch(value: str | None) -> int:
    """scontrol's time, run in UTC (2026-11-27T06:45:00), as seconds since the epoch; 0 for none."""
    text = _said(value)
    return int(instant_of(text)) if text else 0


def record_of(fields: dict[str, str]) -> dict[str, Any]:
    """`scontrol show job -o`'s fields under squeue --json's names (what job_view reads)."""
    code, _, signal = fields.get("ExitCode", "0:0").partition(":")
    user = fields.get("UserId", "")
    return {
        "job_id": int(fields["JobId"]), "name": fields.get("JobName", ""), "job_state": fields.get("JobState", ""),
        "state_reason": _said(fields.get("Reason")) or "None", "cpus": int(fields.get("NumCPUs", "0") or 0),
        "time_limit": minutes_of(fields.get("TimeLimit", "")), "submit_time": _epoch(fields.get("SubmitTime")),
        "start_time": _epoch(fields.get("StartTime")), "end_time": _epoch(fields.get("EndTime")),
        "eligible_time": _epoch(fields.get("EligibleTime")), "deadline": _epoch(fields.get("Deadline")),
        "user_name": user.partition("(")[0], "partition": _said(fields.get("Partition")),
        "account": _said(fields.get("Account")), "nodes": _said(fields.get("NodeList")),
        "dependency": _said(fields.get("Dependency")), "features": _said(fields.get("Features")),
        "nice": int(fields["Nice"]) if fields.get("Nice", "").lstrip("-").isdigit() else None,
        "exit_code": (int(code) << 8 | int(signal or 0)) if code.isdigit() else None,
        "shared": "none" if fields.get("OverSubscribe") == "NO" else None,
    }


def accepted(job_id: str, batch: Batch, request: JobRequest, account: Account | None) -> dict[str, Any]:
    """The record of a job sbatch has just accepted, from what it was asked: PENDING (held when
    asked so), without a second Slurm command per submission."""
    options = dict(option.removeprefix("--").partition("=")[::2] for option in batch.options)
    limit = options.get("time")
    return {
        "job_id": int(job_id), "name": options.get("job-name", ""), "job_state": "PENDING",
        "state_reason": "JobHeldUser" if "hold" in options else "None",
        "cpus": int(options.get("ntasks", "1")) * int(options.get("cpus-per-task", "1")),
        "time_limit": minutes_of(limit) if limit else None, "submit_time": int(time.time()),
        "eligible_time": int(request.eligible or 0), "deadline": int(request.deadline or 0),
        "user_name": account.name if account is not None else pwd.getpwuid(os.geteuid()).pw_name,
        "partition": options.get("partition", ""), "account": options.get("account", ""),
        "dependency": options.get("dependency", ""), "features": options.get("constraint", ""),
        "nice": int(options["nice"]) if "nice" in options else None,
        "shared": "none" if "exclusive" in options else None,
    }


def _control(config: LrmsConfig, name: str, *arguments: str) -> None:
    try:
        run(config, name, *arguments)
    except SlurmUnavailable as exc:
        if _down(str(exc)):
            raise
        raise DocumentError(f"Slurm refused: {exc}") from None


def cancel(config: LrmsConfig, job_id: str) -> None:
    _control(config, "scancel", job_id)


def hold(config: LrmsConfig, job_id: str, name: str) -> None:
    """A User hold (scontrol uhold: its owner may release it) or a System one (scontrol hold)."""
    _control(config, "scontrol", "uhold" if name == "User" else "hold", job_id)


def release(config: LrmsConfig, job_id: str) -> None:
    _control(config, "scontrol", "release", job_id)


# --- the job JSON --------------------------------------------------------------------------------

def _number(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value in _UNSET:
        return None
    return value


def _instant(value: Any) -> str | None:
    number = _number(value)
    return iso(float(number)) if number else None


def state_of(record: Mapping[str, Any]) -> str:
    """The service's state of a Slurm job (FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, DEADLINE,
    BOOT_FAIL: Failed)."""
    return _STATES.get(str(record.get("job_state", "")), "Failed")


def job_view(record: Mapping[str, Any], known: Submitted | None) -> dict[str, Any]:
    """A squeue record as the job JSON of GET /v1/jobs (docs/api.md, "Jobs run by Slurm")."""
    state = state_of(record)
    reason = str(record.get("state_reason") or "")
    holds = [HELD_BY[reason]] if state == "Queued" and reason in HELD_BY else []
    cpus = _number(record.get("cpus")) or 0
    limit = _number(record.get("time_limit"))
    exit_code = _number(record.get("exit_code"))
    nice = _number(record.get("nice"))
    ended = state in ("Finished", "Failed", "Canceled")
    running = state == "Running"
    sss = "Completed" if ended else "Running" if running else "Hold" if holds or reason == "Dependency" else "Idle"
    return {
        "id": str(record.get("job_id")),
        "name": record.get("name") or None,
        "state": state,
        "sss_state": "Suspended" if record.get("job_state") == "SUSPENDED" else sss,
        "glue_status": _GLUE[state],
        "owner": known.owner if known is not None else str(record.get("user_name") or record.get("user_id")),
        "priority": PRIORITIES[2 - min(2, (nice or 0) // 100)] if nice and nice > 0 else PRIORITIES[2],
        "group": None,
        "submitted": _instant(record.get("submit_time")),
        "started": _instant(record.get("start_time")) if running or ended else None,
        "ended": _instant(record.get("end_time")) if ended else None,
        "exit_code": (exit_code >> 8 if exit_code > 255 else exit_code) if ended and exit_code is not None else None,
        "processors": {"min": cpus, "max": cpus, "held": cpus if running else 0, "beyond_asked": None},
        "gpus_per_host": 0,
        "run_time_limit_seconds": None if limit is None else limit * 60,
        "predicted_run_seconds": None,
        "exclusive": record.get("shared") == "none",
        "read_as_requested": [],
        "holds": holds,
        "eligible_time": _instant(record.get("eligible_time")) if state == "Queued" else None,
        "deadline": _instant(record.get("deadline")),
        "hosts": record.get("nodes") or None if running or ended else None,
        "reason": None if reason in ("", "None") else reason,
        "tasks": {},
        "phase": "started" if running else None,
        "slurm": {"job_id": _number(record.get("job_id")), "state": record.get("job_state"),
                  "reason": reason or None, "partition": record.get("partition") or None,
                  "account": record.get("account") or None, "user": record.get("user_name") or None,
                  "dependency": record.get("dependency") or None, "features": record.get("features") or None},
    }

