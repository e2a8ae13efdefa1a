"""Slurm's records of a job as the service's job JSON (infosvc/lrms/slurm_jobs.py): states,
reasons and holds, exit codes, priorities from nice, scontrol's fields under squeue's names, and
the answer made from what sbatch accepted; the ids and groups sbatch runs with. No Slurm needed."""

from __future__ import annotations

import os
import pwd
import subprocess

import pytest

from infosvc.lrms.sbatch import Batch
from infosvc.lrms import slurm_jobs
from infosvc.lrms.slurm_commands import SlurmUnavailable
from infosvc.lrms.slurm_jobs import Submitted, accepted, as_account, job_view, listing_records, record_of
from infosvc.sched.request import JobRequest
from infosvc_agents.accounts import Account

SCONTROL = ("JobId=42 JobName=nightly build UserId=nobody(65534) GroupId=nogroup(65534) Priority=1 Nice=200 "
            "Account=tools QOS=(null) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) ExitCode=3:0 "
            "TimeLimit=1-00:30:00 SubmitTime=2026-11-27T06:45:00 EligibleTime=2026-11-27T06:45:00 "
            "StartTime=2026-11-27T06:46:00 EndTime=2026-11-27T06:47:00 Deadline=N/A Partition=batch NodeList=c[1-2] "
            "NumCPUs=4 Features=(null) OverSubscribe=NO")


def test_scontrols_fields_read_as_squeues() -> None:
    record = record_of(dict(word.partition("=")[::2] for word in SCONTROL.replace("nightly build", "nightly").split()))
    view = job_view(record, None)
    assert (view["id"], view["state"], view["exit_code"], view["owner"], view["priority"], view["hosts"],
            view["run_time_limit_seconds"], view["exclusive"], view["reason"], view["glue_status"]) == (
        "42", "Failed", 3, "nobody", "Lowest", "c[1-2]", 88200, True, "NonZeroExitCode", "ABORTED")
    assert view["ended"] == "2026-11-27T06:47:00Z"  # scontrol is run in UTC
    assert view["slurm"]["account"] == "tools" and view["slurm"]["dependency"] is None


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


def test_the_listing_reads_squeues_lines() -> None:
    """Lines a real Slurm 22.05 wrote (`squeue -h -r --states=all -o LISTING_FORMAT`, TZ=UTC); a
    name may hold anything, a constraint the separator (Slurm's OR)."""
    text = ("3|FAILED|root|(null)|1|365-00:00:00|2026-11-27T07:11:28|2026-11-27T07:11:29|2026-11-27T07:11:29|g1|batch|"
            "(null)|0|NonZeroExitCode|fail|#|(null)\n"
            "1|PENDING|root|(null)|1|UNLIMITED|2026-11-27T07:11:28|N/A|N/A||batch|(null)|100|JobHeldUser|a|#|b c|#|"
            "intel|gpu\n"
            "12_[3-9]|PENDING|root|(null)|1|UNLIMITED|2026-11-27T07:11:28|N/A|N/A||batch|(null)|0|None|arr|#|(null)\n")
    failed, held = (job_view(record, None) for record in listing_records(text))
    assert (failed["id"], failed["state"], failed["ended"], failed["hosts"], failed["reason"],
            failed["slurm"]["features"]) == ("3", "Failed", "2026-11-27T07:11:29Z", "g1", "NonZeroExitCode", None)
    assert (held["id"], held["name"], held["holds"], held["priority"], held["run_time_limit_seconds"],
            held["slurm"]["features"], held["started"]) == ("1", "a|#|b c", ["User"], "BelowNormal", None,
                                                             "intel|gpu", None)
    with pytest.raises(SlurmUnavailable):  # a line without NAME_END is not one this format wrote
        listing_records(text.replace("fail|#|(null)", "fail"))


def test_the_server_forgets_the_oldest_submitters_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from infosvc.config import LrmsConfig
    from infosvc.web import slurmjobs

    monkeypatch.setattr(slurmjobs, "MAX_KNOWN", 2)
    side = slurmjobs.SlurmSide.of(LrmsConfig(type="slurm"))
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
    from infosvc.web import slurmjobs

    me = pwd.getpwuid(os.geteuid()).pw_name
    monkeypatch.setattr(os, "geteuid", lambda: 4321)
    with caplog.at_level(logging.WARNING, logger="infosvc.web.slurmjobs"):
        side = slurmjobs.SlurmSide.of(LrmsConfig(type="slurm", run_as=me, run_as_owner=True))
    assert side.policy.resolve("alice") is None  # as the server's own user
    (record,) = [r for r in caplog.records if r.name == "infosvc.web.slurmjobs"]
    assert record.levelno == logging.WARNING and "not root" in record.getMessage(), record.getMessage()
    assert "run_as, run_as_owner" in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="infosvc.web.slurmjobs"):
        slurmjobs.SlurmSide.of(LrmsConfig(type="slurm"))
        slurmjobs.SlurmSide.of(LrmsConfig(type="", run_as=me))
    assert not caplog.records
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with caplog.at_level(logging.WARNING, logger="infosvc.web.slurmjobs"):
        slurmjobs.SlurmSide.of(LrmsConfig(type="slurm", run_as=me))
    assert not caplog.records
