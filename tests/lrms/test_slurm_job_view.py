"""Slurm's records of a job as the service's job JSON (infosvc/lrms/slurm_jobs.py): states,
reasons and holds, exit codes, priorities from nice, squeue's records of one job and of the listing
under squeue --json's names, and the answer made from what sbatch accepted; the ids and groups sbatch runs with. No Slurm needed."""

from __future__ import annotations

import os
import pwd
import subprocess

import pytest

from infosvc.lrms.sbatch import Batch
from infosvc.lrms import slurm_jobs
from infosvc.lrms.slurm_commands import SlurmUnavailable
from infosvc.lrms.slurm_jobs import LISTING, ONE_JOB, Submitted, accepted, as_account, job_records, job_view
from infosvc.sched.request import JobRequest
from infosvc_agents.accounts import Account

#: Slurm 22.05's `squeue -h -j 9 --states=all` in ONE_JOB's format (TZ=UTC), its token `t`: a job
#: that failed with exit code 3 (the wait status 768), nice 200, exclusive, its name of two words,
#: the comment the service's submission gave it last
ONE = ("9<t>FAILED<t>root<t>2<t>1-00:30:00<t>2026-11-28T03:36:47<t>2026-11-28T03:36:48<t>2026-11-28T03:36:48<t>c1"
       "<t>batch<t>200<t>NonZeroExitCode<t>2026-11-28T03:36:47<t>N/A<t>768<t>NO<t>tools<t>(null)<t>(null)<t>"
       "nightly build<t>infosvc:9a</t>\n")


def test_one_jobs_record_reads_as_squeues_json() -> None:
    (record,) = job_records(ONE, ONE_JOB.with_token("t"))
    view = job_view(record, None)
    assert (view["id"], view["name"], view["state"], view["exit_code"], view["owner"], view["priority"],
            view["hosts"], view["run_time_limit_seconds"], view["exclusive"], view["reason"], view["glue_status"]) == (
        "9", "nightly build", "Failed", 3, "root", "Lowest", "c1", 88200, True, "NonZeroExitCode", "ABORTED")
    assert view["ended"] == "2026-11-28T03:36:48Z"  # squeue is run in UTC
    assert view["slurm"]["account"] == "tools" and view["slurm"]["dependency"] is None and view["deadline"] is None


@pytest.mark.parametrize(("state", "reason", "ours", "sss", "holds"), [
    ("PENDING", "Priority", "Queued", "Idle", []),
    ("PENDING", "Dependency", "Queued", "Hold", []),
    ("PENDING", "JobHeldUser", "Queued", "Hold", ["User"]),
    ("PENDING", "JobHeldAdmin", "Queued", "Hold", ["System"]),
    ("RUNNING", "None", "Running", "Running", []),
    ("SUSPENDED", "None", "Running", "Suspended", []),
    ("COMPLETED", "None", "Finished", "Completed", []),
    ("CANCELLED", "None", "Canceled", "Completed", []),
    ("TIMEOUT", "TimeLimit", "Failed", "Completed", []),
    ("OUT_OF_MEMORY", "OutOfMemory", "Failed", "Completed", []),
])
def test_states_reasons_and_holds(state: str, reason: str, ours: str, sss: str, holds: list[str]) -> None:
    view = job_view({"job_id": 7, "job_state": state, "state_reason": reason, "user_name": "nobody"},
                    Submitted("alice", "abc"))
    assert (view["state"], view["sss_state"], view["holds"], view["owner"]) == (ours, sss, holds, "alice")
    assert view["reason"] == (None if reason == "None" else reason)


def test_unset_numbers_are_none() -> None:
    view = job_view({"job_id": 7, "job_state": "PENDING", "time_limit": 4294967294, "submit_time": 0}, None)
    assert view["run_time_limit_seconds"] is None and view["submitted"] is None


def test_the_answer_to_a_submission_says_what_was_asked() -> None:
    batch = Batch(("--job-name=x", "--ntasks=2", "--cpus-per-task=3", "--time=0-01:00:00", "--hold",
                   "--partition=short", "--nice=100", "--exclusive", "--dependency=afterok:5"), "")
    view = job_view(accepted("12", batch, JobRequest("x", "alice"), None), Submitted("alice", "abc"))
    assert (view["id"], view["state"], view["reason"], view["holds"], view["processors"]["min"],
            view["run_time_limit_seconds"], view["priority"], view["exclusive"]) == (
        "12", "Queued", "JobHeldUser", ["User"], 6, 3600, "BelowNormal", True)
    assert (view["slurm"]["partition"], view["slurm"]["dependency"]) == ("short", "afterok:5")


@pytest.mark.skipif(os.geteuid() != 0, reason="switching accounts needs root")
@pytest.mark.parametrize("setpriv", [True, False], ids=["setpriv", "python-setuid"])
def test_sbatch_runs_with_the_accounts_ids_and_groups_and_no_privilege(setpriv: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Either way sbatch is run: every uid and gid the account's, its groups alone, no capability."""
    entry = pwd.getpwnam("nobody")
    account = Account.of(entry)
    if not setpriv:
        monkeypatch.setattr(slurm_jobs.shutil, "which", lambda *args, **kwargs: None)
    argv, extra = as_account(account, ["/bin/cat", "/proc/self/status"])
    assert (argv[0].endswith("setpriv") if setpriv else argv[0] == "/bin/cat")
    status = dict(line.split(":", 1) for line in
                  subprocess.run(argv, capture_output=True, text=True, check=True, **extra).stdout.splitlines())
    assert status["Uid"].split() == [str(entry.pw_uid)] * 4 and status["Gid"].split() == [str(entry.pw_gid)] * 4
    assert set(status["Groups"].split()) <= {str(g) for g in os.getgrouplist("nobody", entry.pw_gid)}
    assert int(status["CapPrm"], 16) == int(status["CapEff"], 16) == int(status["CapAmb"], 16) == 0


def test_the_listing_reads_squeues_records() -> None:
    """Records a real Slurm 22.05 wrote (`squeue -h -r --states=all` in LISTING's format, TZ=UTC, its
    token `t`): a record ends at its token, not at a newline; a name, an account, a constraint may
    hold a newline and any separator (the account's line was a job of root's, running)."""
    text = ("8<t>CANCELLED<t>root<t>1<t>UNLIMITED<t>2026-11-28T03:33:01<t>2026-11-28T03:36:47<t>2026-11-28T03:36:47"
            "<t><t>batch<t>0<t>JobHeldUser<t>atlas|1|1\n424243|batch|running|root|root<t>(null)<t>wrap<t>(null)<t></t>\n"
            "9<t>FAILED<t>root<t>2<t>1-00:30:00<t>2026-11-28T03:36:47<t>2026-11-28T03:36:48<t>2026-11-28T03:36:48<t>c1"
            "<t>batch<t>200<t>NonZeroExitCode<t>tools<t>(null)<t>nightly build<t>(null)<t>infosvc:9a</t>\n"
            "10<t>PENDING<t>root<t>1<t>UNLIMITED<t>2026-11-28T03:36:47<t>N/A<t>N/A<t><t>batch<t>100<t>JobHeldUser<t>"
            "(null)<t>afterok:9(unfulfilled)<t>a|#|b\nc<t>intel|ib<t>x</t>\n"
            "12_[3-9]<t>PENDING<t>root<t>1<t>UNLIMITED<t>2026-11-28T03:36:47<t>N/A<t>N/A<t><t>batch<t>0<t>None<t>"
            "(null)<t>(null)<t>arr<t>(null)<t></t>\n")
    canceled, failed, held, rest = (job_view(record, None) for record in job_records(text, LISTING.with_token("t")))
    assert (canceled["id"], canceled["state"], canceled["slurm"]["account"]) == (
        "8", "Canceled", "atlas|1|1\n424243|batch|running|root|root")
    assert (failed["id"], failed["state"], failed["ended"], failed["hosts"], failed["reason"],
            failed["slurm"]["features"]) == ("9", "Failed", "2026-11-28T03:36:48Z", "c1", "NonZeroExitCode", None)
    assert (held["id"], held["name"], held["holds"], held["priority"], held["run_time_limit_seconds"],
            held["slurm"]["features"], held["slurm"]["dependency"], held["started"]) == (
        "10", "a|#|b\nc", ["User"], "BelowNormal", None, "intel|ib", "afterok:9(unfulfilled)", None)
    # an array's pending remainder, where squeue writes one: one entry under its own id
    assert (rest["id"], rest["name"], rest["state"], rest["slurm"]["job_id"]) == ("12_[3-9]", "arr", "Queued", None)
    with pytest.raises(SlurmUnavailable, match="none of its 1 records reads"):  # another read's token
        job_records(text, LISTING.with_token("u"))


def test_the_server_forgets_the_oldest_submitters_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from infosvc.config import LrmsConfig
    from infosvc.web import slurmside

    monkeypatch.setattr(slurmside, "MAX_KNOWN", 2)
    side = slurmside.SlurmSide.of(LrmsConfig(type="slurm"))
    for job_id in ("1", "2", "3"):
        side.remember(job_id, Submitted("alice", job_id), None, 0.0)
    assert list(side.known) == ["2", "3"]


def test_a_server_not_root_says_at_start_that_jobs_go_as_itself(monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """run_as, run_as_owner and run_as_map need a root server (docs/slurm.md); one that is not
    submitted every owner's job as its own user without a word. It still starts (single-user sites
    and the tests run so), with a warning; a server without those keys says nothing."""
    import logging

    from infosvc.config import LrmsConfig
    from infosvc.web import slurmside

    me = pwd.getpwuid(os.geteuid()).pw_name
    monkeypatch.setattr(os, "geteuid", lambda: 4321)
    with caplog.at_level(logging.WARNING, logger="infosvc.web.slurmjobs"):
        side = slurmside.SlurmSide.of(LrmsConfig(type="slurm", run_as=me, run_as_owner=True))
    assert side.policy.resolve("alice") is None  # as the server's own user
    (record,) = [r for r in caplog.records if r.name == "infosvc.web.slurmjobs"]
    assert record.levelno == logging.WARNING and "not root" in record.getMessage(), record.getMessage()
    assert "run_as, run_as_owner" in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="infosvc.web.slurmjobs"):
        slurmside.SlurmSide.of(LrmsConfig(type="slurm"))
        slurmside.SlurmSide.of(LrmsConfig(type="", run_as=me))
    assert not caplog.records
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with caplog.at_level(logging.WARNING, logger="infosvc.web.slurmjobs"):
        slurmside.SlurmSide.of(LrmsConfig(type="slurm", run_as=me))
    assert not caplog.records
