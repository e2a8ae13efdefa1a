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
import re
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Final, Mapping

from infosvc.config import LrmsConfig
from infosvc.errors import DocumentError, NotFound, excerpt
from infosvc.lrms.sbatch import Batch
from infosvc.lrms.slurm_commands import SlurmUnavailable, environment, program, run
from infosvc.lrms.slurm_parse import Marked, each_record, instant_of, minutes_of
from infosvc.model.snapshot import iso
from infosvc.sched.request import PRIORITIES, JobRequest
from infosvc_agents.accounts import Account

__all__ = ["LISTING", "MARK", "ONE_JOB", "SLURM_DOWN", "SubmissionUnknown", "Submitted", "accepted", "as_account",
           "cancel", "checked_id", "hold", "id_order", "job_records", "job_view", "one_job", "plain_id", "read_jobs",
           "release", "submit", "withdraw"]

#: What sbatch and scontrol say when the cluster, not the job, is the trouble (a 503, not a 400).
SLURM_DOWN: Final = ("Unable to contact slurm controller", "Socket timed out", "Munge", "munge",
                     "Zero Bytes were transmitted", "Communication connection failure", "did not finish within",
                     "not found", "cannot run")
#: What sbatch says when it sent the job but its answer was lost: Slurm may have taken the job.
_ANSWER_LOST: Final = ("Socket timed out", "Zero Bytes were transmitted")
#: The comment of every job the service submits: this, then a token drawn for that submission, by
#: which a submission whose sbatch went unanswered is found again in Slurm (`withdraw`).
MARK: Final = "infosvc:"
#: A look-up of a submission's mark that found nothing looks once more after this: slurmctld serves
#: requests in threads, so one that read the sbatch's request before the look-up's may answer after.
SETTLE_SECONDS: Final = 1.0
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
#: A job (`1234`), an array's task (`1234_5`) or a heterogeneous job's component (`1234+0`), as Slurm
#: writes them: nothing else is given to a Slurm command, as squeue reads `1_2_3` as `1_2` and
#: `2_[2-5]` as `2_0` (another job than the one named), and int() takes digits of any script
_JOB_ID: Final = re.compile(r"[0-9]{1,10}(?:[_+][0-9]{1,10})?", re.ASCII)
#: An array's pending tasks as squeue writes them without -r (`1234_[0,2-9%2]`): listed, never read by id
_REMAINDER: Final = re.compile(r"[0-9]{1,10}_\[[0-9,%:-]{1,1000}\]", re.ASCII)


@dataclass(frozen=True, slots=True)
class Submitted:
    """A job this service submitted: whose it is and which token filed it (for the same token
    rules as the service's own queue: infosvc/queue/jobcontrols.py)."""

    owner: str
    submitter: str


class SubmissionUnknown(SlurmUnavailable):
    """sbatch went unanswered (past the time limit, or its answer lost) and Slurm could not be asked
    afterwards what became of it: the job may be in Slurm, or come to be once slurmctld reads the
    request, its comment `marker`, submitted as `user`. `withdraw(config, marker, user)` cancels it
    once Slurm answers."""

    def __init__(self, message: str, marker: str, user: str) -> None:
        super().__init__(message)
        self.marker = marker
        self.user = user


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


def new_marker() -> str:
    """A submission's mark (the job's comment): MARK and a token of its own."""
    return f"{MARK}{secrets.token_hex(16)}"


def submit(config: LrmsConfig, batch: Batch, account: Account | None, marker: str | None = None) -> str:
    """The Slurm job id of `batch` submitted as `account` (None: as this process). DocumentError
    (400) where Slurm refuses the job itself (an unknown partition, a node configuration no node
    has), SlurmUnavailable (503) where the cluster cannot be reached and no job was made of it
    (or the one made was cancelled), SubmissionUnknown (a SlurmUnavailable) where one may have been
    made and still be there (`_unanswered`)."""
    argv = [program(config, "sbatch"), "--parsable", "--export=NONE", *batch.options]
    for argument in argv:
        if "\0" in argument or not argument.isprintable():
            raise DocumentError(f"an sbatch option holds control characters: {excerpt(argument)!r}")
    env = environment(config)
    argv, extra = as_account(account, argv)
    if account is not None:
        env |= {"HOME": account.home, "USER": account.name, "LOGNAME": account.name}
    user = account.name if account is not None else pwd.getpwuid(os.geteuid()).pw_name
    marker = marker or new_marker()
    try:
        done = subprocess.run(argv, input=_marked(batch.script, marker), capture_output=True, text=True, env=env,
                              cwd="/", timeout=config.timeout_seconds, errors="replace", **extra)
    except subprocess.TimeoutExpired:
        # ended, sbatch may have sent the job already: slurmctld makes it whenever it reads the request
        raise _unanswered(config, f"sbatch did not finish within {config.timeout_seconds:g} s", marker,
                          user) from None
    except OSError as exc:
        if exc.errno == errno.E2BIG:  # past infosvc.lrms.sbatch's bounds, on a system with a smaller ARG_MAX
            raise DocumentError("the job's sbatch options are too long for one command line here "
                                f"({sum(map(len, batch.options))} characters); ask for fewer nodes or "
                                "features") from None
        raise SlurmUnavailable(f"sbatch: cannot run: {exc.strerror}") from None
    said = " ".join(done.stderr.split())[-1000:]
    if done.returncode != 0:
        if any(words in said for words in _ANSWER_LOST):
            raise _unanswered(config, f"sbatch failed: {said}", marker, user)
        if _down(said):
            raise SlurmUnavailable(f"sbatch failed: {said}")
        raise DocumentError(f"Slurm refused the job: {said or 'sbatch exit ' + str(done.returncode)}")
    job_id: str = done.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise _unanswered(config, f"sbatch gave no job id ({excerpt(done.stdout)!r})", marker, user)
    return job_id


def _marked(script: str, marker: str) -> str:
    """The script with the job's comment `marker` as its first directive: in the script on sbatch's
    stdin, not on its command line, which any local user may read (and copy) while it runs."""
    first, _, rest = script.partition("\n")
    return f"{first}\n#SBATCH --comment={marker}\n{rest}"


def _unanswered(config: LrmsConfig, why: str, marker: str, user: str) -> SlurmUnavailable:
    """The error of a submission whose sbatch went unanswered (`why`): Slurm asked for the jobs
    `marker` marks, those found cancelled (the service said it submitted none; a retry made a
    second). SubmissionUnknown where Slurm cannot be asked, or a job of it has run to its end."""
    deadline = time.monotonic() + config.timeout_seconds  # the look-up's own time, at most
    try:
        found = withdraw(config, marker, user, deadline)
        if not found:
            time.sleep(SETTLE_SECONDS)
            found = withdraw(config, marker, user, deadline)
    except SlurmUnavailable as exc:
        return SubmissionUnknown(f"{why}; Slurm could not be asked afterwards whether it took the job ({exc}), so "
                                 f"the job may have been submitted (its comment {marker})", marker, user)
    if not found:
        return SlurmUnavailable(f"{why}; Slurm holds no job of it")
    ran = [job_id for job_id, state in found.items() if state_of({"job_state": state}) in ("Finished", "Failed")]
    if ran:
        return SubmissionUnknown(f"{why}; yet Slurm took the job, as job {', '.join(ran)}, which has ended: the job "
                                 "may have been submitted and run", marker, user)
    return SlurmUnavailable(f"{why}; Slurm took the job late, as job {', '.join(found)}, which was cancelled")


#: squeue's record of a job by its mark (the comment `submit` gave it): id, state, user; the comment last
BY_MARK: Final = Marked(own=(("%i", "job_id"), ("%T", "job_state"), ("%u", "user_name")), chosen=(("%k", "comment"),))


def withdraw(config: LrmsConfig, marker: str, user: str, deadline: float | None = None) -> dict[str, str]:
    """Every job of `user` Slurm keeps whose comment is `marker` (a submission's: `submit`), each
    with its state as found; those not ended are cancelled. SlurmUnavailable where Slurm does not
    answer (try again later). `deadline` (time.monotonic): when both commands must have ended."""
    def left() -> float:
        return config.timeout_seconds if deadline is None else max(1.0, deadline - time.monotonic())

    marked = BY_MARK.drawn()
    said = run(config, "squeue", "-h", "--states=all", f"--user={user}", env=marked.environment(), timeout=left())
    found = {fields["job_id"]: fields["job_state"]
             for fields in each_record(marked, said.stdout, "squeue (a submission's mark)", lambda fields: fields)
             if fields["comment"] == marker and fields["user_name"] == user and fields["job_id"].isdigit()}
    live = [job_id for job_id, state in found.items() if state_of({"job_state": state}) in ("Queued", "Running")]
    if live:
        try:
            run(config, "scancel", *live, timeout=left())
        except SlurmUnavailable as exc:
            if _down(str(exc)):
                raise
            # else what scancel says of a job that ended since squeue listed it: nothing is left to cancel
    return found


#: squeue's record of a job for the listing (-h -r --states=all), under squeue --json's names, what
#: job_view reads: Slurm's own words, then the texts a submitter chooses (`Marked`)
LISTING: Final = Marked(
    own=(("%i", "job_id"), ("%T", "job_state"), ("%u", "user_name"), ("%C", "cpus"), ("%l", "time_limit"),
         ("%V", "submit_time"), ("%S", "start_time"), ("%e", "end_time"), ("%N", "nodes"), ("%P", "partition"),
         ("%y", "nice"), ("%r", "state_reason")),
    chosen=(("%a", "account"), ("%E", "dependency"), ("%j", "name"), ("%f", "features"), ("%k", "comment")))
#: squeue's record of one job: the listing's, and what -o has no letter for (its exit code, its
#: eligible time and deadline, whether it shares its nodes), so in -O's names
ONE_JOB: Final = Marked(
    own=(("JobArrayID", "job_id"), ("State", "job_state"), ("UserName", "user_name"), ("NumCPUs", "cpus"),
         ("TimeLimit", "time_limit"), ("SubmitTime", "submit_time"), ("StartTime", "start_time"),
         ("EndTime", "end_time"), ("NodeList", "nodes"), ("Partition", "partition"), ("Nice", "nice"),
         ("Reason", "state_reason"), ("EligibleTime", "eligible_time"), ("Deadline", "deadline"),
         ("exit_code", "exit_code"), ("OverSubscribe", "shared")),
    chosen=(("Account", "account"), ("Dependency", "dependency"), ("Feature", "features"), ("Name", "name"),
            ("Comment", "comment")),
    long=True)


def read_jobs(config: LrmsConfig) -> list[dict[str, Any]]:
    """Every job Slurm still keeps, under squeue --json's names (what job_view reads), from
    squeue's records in UTC: --json takes ten times as long at 10,000 jobs, and 22.05's lists
    every job whatever the filter (one job is read by its id, `one_job`)."""
    marked = LISTING.drawn()
    return job_records(run(config, "squeue", "-h", "-r", "--states=all", env=marked.environment()).stdout, marked)


def job_records(text: str, marked: Marked, what: str = "squeue (the job listing)") -> list[dict[str, Any]]:
    """squeue's records in `marked` (LISTING or ONE_JOB, with its token, in UTC) under squeue
    --json's names: a job's id a number, an array task's (`12_3`), a het job component's (`12+0`)
    or an array's pending remainder's (`12_[3-9]`) Slurm's text; a record of any other id is none."""
    return each_record(marked, text, what, _record)


def checked_id(job_id: str) -> str:
    """`job_id` where it is a job's, an array task's or a het job component's id as Slurm writes
    it, else NotFound: checked before any Slurm command is given it."""
    if _JOB_ID.fullmatch(job_id):
        return job_id
    if _REMAINDER.fullmatch(job_id):
        raise NotFound(f"job {excerpt(job_id)!r} is no Slurm job id",
                       "an array's pending tasks are read and changed each by its own id (1234_6), not together")
    raise NotFound(f"job {excerpt(job_id)!r} is no Slurm job id", "jobs run by Slurm are named by its ids: 1234, an "
                   "array's task 1234_5, a heterogeneous job's component 1234+0")


def plain_id(job_id: object) -> bool:
    """Whether a record's id is a job's own number: a task's or component's never is."""
    return isinstance(job_id, int) and not isinstance(job_id, bool) or (
        isinstance(job_id, str) and job_id.isascii() and job_id.isdigit())


def id_order(job_id: str) -> tuple[int, int]:
    """Where a job lists: by its number, a het job's components and an array's tasks by theirs
    after it, the array's pending remainder last."""
    number, _, index = job_id.replace("+", "_").partition("_")
    if not number.isascii() or not number.isdigit():
        return (1 << 64, 0)
    return (int(number), -1 if not index else int(index) if index.isascii() and index.isdigit() else 1 << 64)


def _record(fields: dict[str, str]) -> dict[str, Any] | None:
    job_id = fields["job_id"]
    if not (_JOB_ID.fullmatch(job_id) or _REMAINDER.fullmatch(job_id)):
        return None
    nice = fields["nice"]
    record: dict[str, Any] = {
        "job_id": int(job_id) if job_id.isdigit() else job_id, "job_state": fields["job_state"],
        "user_name": fields["user_name"],
        "cpus": int(fields["cpus"]), "time_limit": minutes_of(fields["time_limit"]),
        "submit_time": _epoch(fields["submit_time"]), "start_time": _epoch(fields["start_time"]),
        "end_time": _epoch(fields["end_time"]), "nodes": _said(fields["nodes"]), "partition": fields["partition"],
        "nice": int(nice) if nice.lstrip("-").isdigit() else None,
        "state_reason": _said(fields["state_reason"]) or "None", "account": _said(fields["account"]),
        "dependency": _said(fields["dependency"]), "name": fields["name"], "features": _said(fields["features"])}
    if "exit_code" in fields:  # one job's (ONE_JOB): -O's exit_code is the wait status, code << 8 | signal
        code = fields["exit_code"]
        record |= {"eligible_time": _epoch(fields["eligible_time"]), "deadline": _epoch(fields["deadline"]),
                   "exit_code": int(code) if code.isdigit() else None,
                   "shared": "none" if fields["shared"] == "NO" else None}
    return record


def one_job(config: LrmsConfig, job_id: str) -> dict[str, Any]:
    """Slurm job (array task, het job component) `job_id` as squeue's JSON record names its fields,
    read with `squeue -j` (one job, whatever the queue's length); NotFound when Slurm no longer
    knows it, or `job_id` is no Slurm id (`checked_id`: then before squeue runs). Not `scontrol show job`:
    it prints the job's own texts (its name, comment, work dir, output paths) raw among its fields,
    so a comment ` NumCPUs=64 Account=root` read as the job's fields, and a newline in a name hid
    every field after it."""
    checked_id(job_id)
    marked = ONE_JOB.drawn()
    try:
        said = run(config, "squeue", "-h", "-j", job_id, "--states=all", env=marked.environment()).stdout
    except SlurmUnavailable as exc:
        if "Invalid job id" not in str(exc):
            raise
        said = ""
    found = [record for record in job_records(said, marked, "squeue (one job)") if str(record["job_id"]) == job_id]
    if not found:
        raise NotFound(f"Slurm knows no job {job_id}", "Slurm keeps an ended job for MinJobAge (slurm.conf) after "
                       "its end; an array's tasks and a heterogeneous job's components are each read by its own "
                       "id (1234_5, 1234+0)")
    return found[0]


def _said(value: str | None) -> str:
    return "" if value is None or value in ("(null)", "None", "N/A", "Unknown") else value


def _epoch(value: str | None) -> int:
    """squeue's time, run in UTC (2026-11-27T06:45:00), as seconds since the epoch; 0 for none."""
    text = _said(value)
    return int(instant_of(text)) if text else 0


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
    checked_id(arguments[-1])  # the job's id, last
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

