"""Array tasks (`1234_5`) and heterogeneous jobs' components (`1234+0`) as Slurm names them: the id
a route takes checked before any Slurm command runs (squeue reads `1_2_3` as `1_2` and `2_[2-5]` as
`2_0`), their squeue records read, and none of them taken for a job the service submitted because
its array's or het job's number is one. No Slurm needed: the texts are a real Slurm 22.05's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from infosvc.config import LrmsConfig
from infosvc.errors import Forbidden, NotFound
from infosvc.lrms import slurm_jobs
from infosvc.lrms.slurm_commands import SlurmUnavailable
from infosvc.lrms.slurm_jobs import LISTING, ONE_JOB, Submitted, checked_id, id_order, job_records, job_view
from infosvc.lrms.slurm_settings import SlurmSettings
from infosvc.web.slurmjobs import _may_ask, _rights, _shown, _Who
from infosvc.web.slurmside import SlurmSide
from support.server import ServerFactory

#: `squeue -h -r --states=all` in LISTING's format (TZ=UTC, its token `t`): array 1 (`--array=0-3%2
#: --hold`, task 1 released and running) and het job 2 (`-n1 : -n2 --hold`)
LISTED = (
    "1_0<t>PENDING<t>root<t>1<t>UNLIMITED<t>2026-11-28T05:50:41<t>N/A<t>N/A<t><t>batch<t>0<t>JobHeldUser<t>(null)"
    "<t>(null)<t>sweep<t>(null)<t>(null)</t>\n"
    "1_2<t>PENDING<t>root<t>1<t>UNLIMITED<t>2026-11-28T05:50:41<t>N/A<t>N/A<t><t>batch<t>0<t>JobHeldUser<t>(null)"
    "<t>(null)<t>sweep<t>(null)<t>(null)</t>\n"
    "1_3<t>PENDING<t>root<t>1<t>UNLIMITED<t>2026-11-28T05:50:41<t>N/A<t>N/A<t><t>batch<t>0<t>JobHeldUser<t>(null)"
    "<t>(null)<t>sweep<t>(null)<t>(null)</t>\n"
    "2+1<t>PENDING<t>root<t>2<t>UNLIMITED<t>2026-11-28T05:50:41<t>N/A<t>N/A<t><t>batch<t>0<t>JobHeldUser<t>(null)"
    "<t>(null)<t>het<t>(null)<t>(null)</t>\n"
    "2+0<t>PENDING<t>root<t>1<t>UNLIMITED<t>2026-11-28T05:50:41<t>N/A<t>N/A<t><t>batch<t>0<t>JobHeldUser<t>(null)"
    "<t>(null)<t>het<t>(null)<t>(null)</t>\n"
    "1_1<t>RUNNING<t>root<t>1<t>UNLIMITED<t>2026-11-28T05:50:41<t>2026-11-28T05:50:44<t>NONE<t>g1<t>batch<t>0<t>None"
    "<t>(null)<t>(null)<t>sweep<t>(null)<t>(null)</t>\n")
#: the same array without -r: its pending tasks as one record, the remainder
REMAINDER = ("1_[0,2-3%2]<t>PENDING<t>root<t>1<t>UNLIMITED<t>2026-11-28T05:50:41<t>N/A<t>N/A<t><t>batch<t>0<t>"
             "JobHeldUser<t>(null)<t>(null)<t>sweep<t>(null)<t>(null)</t>\n")
#: `squeue -h -j 2+1 --states=all` in ONE_JOB's format: every component of the het job
ONE_COMPONENT = (
    "2+1<t>PENDING<t>root<t>2<t>UNLIMITED<t>2026-11-28T05:50:41<t>N/A<t>N/A<t><t>batch<t>0<t>JobHeldUser<t>N/A<t>N/A"
    "<t>0<t>OK<t>(null)<t>(null)<t>(null)<t>het<t>(null)</t>\n"
    "2+0<t>PENDING<t>root<t>1<t>UNLIMITED<t>2026-11-28T05:50:41<t>N/A<t>N/A<t><t>batch<t>0<t>JobHeldUser<t>N/A<t>N/A"
    "<t>0<t>OK<t>(null)<t>(null)<t>(null)<t>het<t>(null)</t>\n")

GOOD = ["7", "1234_5", "1234+0", "4294967294_3999999", "0_0"]
BAD = ["", "1_", "_1", "1__2", "1_2_3", "1+", "+1", "1+_2", "1_+2", "1+2+3", "1_[0-2]", "1_[6-9%2]", "4" * 40,
       "12345678901", "1_12345678901", "\u0661\u0662", "\uff11\uff12", "1_\u0662", "\u00b2", "12\n", "1_2\n", " 12",
       "1 2", "-1", "1.5", "0x1", "1_2;rm", "1,2", "1\x002"]


@pytest.mark.parametrize("job_id", GOOD)
def test_slurm_ids_of_jobs_tasks_and_components_are_taken(job_id: str) -> None:
    assert checked_id(job_id) == job_id


@pytest.mark.parametrize("job_id", BAD)
def test_anything_else_is_no_slurm_job_id(job_id: str) -> None:
    with pytest.raises(NotFound, match="is no Slurm job id"):
        checked_id(job_id)


def test_an_arrays_remainder_is_refused_with_a_hint() -> None:
    with pytest.raises(NotFound) as caught:
        checked_id("1234_[6-9]")
    assert "1234_6" in (caught.value.detail or "") or "its own id" in (caught.value.detail or ""), caught.value.detail


def stand_in(tmp_path: Path) -> tuple[LrmsConfig, Path]:
    """A bin_dir whose every Slurm command writes its argv to a log and fails."""
    tmp_path.mkdir(exist_ok=True)
    log = tmp_path / "ran.log"
    script = (f"#!{sys.executable}\nimport json, sys\nopen({str(log)!r}, 'a').write(json.dumps(sys.argv) + '\\n')\n"
              "sys.exit('slurm_load_jobs error: Unable to contact slurm controller')\n")
    for name in ("squeue", "scontrol", "scancel", "sinfo", "sbatch"):
        (tmp_path / name).write_text(script)
        (tmp_path / name).chmod(0o755)
    return LrmsConfig(type="slurm", bin_dir=str(tmp_path), timeout_seconds=5.0), log


def ran(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("job_id", BAD)
def test_a_malformed_id_runs_no_slurm_command(job_id: str, tmp_path: Path) -> None:
    config, log = stand_in(tmp_path)
    for call in (lambda: slurm_jobs.one_job(config, job_id), lambda: slurm_jobs.cancel(config, job_id),
                 lambda: slurm_jobs.hold(config, job_id, "User"), lambda: slurm_jobs.release(config, job_id)):
        with pytest.raises(NotFound, match="is no Slurm job id"):
            call()
    assert ran(log) == []
    with pytest.raises(SlurmUnavailable):  # the stand-in is run for an id that is one
        slurm_jobs.one_job(config, "1234_5")
    assert ran(log)[0][1:] == ["-h", "-j", "1234_5", "--states=all"]  # Slurm's id, one argv entry


def test_tasks_components_and_a_remainder_are_listed_under_slurms_ids() -> None:
    records = job_records(LISTED + REMAINDER, LISTING.with_token("t"))
    views = {view["id"]: view for view in (job_view(record, None) for record in records)}
    assert sorted(views, key=id_order) == ["1_0", "1_1", "1_2", "1_3", "1_[0,2-3%2]", "2+0", "2+1"]
    assert (views["1_0"]["state"], views["1_0"]["holds"], views["1_0"]["name"], views["1_0"]["owner"]) == (
        "Queued", ["User"], "sweep", "root")
    assert (views["1_1"]["state"], views["1_1"]["hosts"], views["1_1"]["started"]) == (
        "Running", "g1", "2026-11-28T05:50:44Z")
    assert (views["2+1"]["processors"]["min"], views["2+1"]["slurm"]["partition"]) == (2, "batch")
    # the number a task's id starts with is its array's, not the task's own job id
    assert all(view["slurm"]["job_id"] is None for view in views.values())
    assert views["1_[0,2-3%2]"]["state"] == "Queued"


def test_ids_slurm_never_writes_are_left_out_of_the_listing() -> None:
    forged = LISTED.split("</t>\n")[0] + "</t>\n"
    odd = "".join(forged.replace("1_0", job_id, 1) for job_id in ("1_2_3", "x", "1__2", "\u0661_1", "1_[a]"))
    assert [record["job_id"] for record in job_records(forged + odd, LISTING.with_token("t"))] == ["1_0"]


def test_one_component_is_read_from_squeue_j() -> None:
    records = {record["job_id"]: record for record in job_records(ONE_COMPONENT, ONE_JOB.with_token("t"))}
    assert sorted(records) == ["2+0", "2+1"]
    view = job_view(records["2+1"], None)
    assert (view["id"], view["state"], view["holds"], view["processors"]["min"], view["exit_code"]) == (
        "2+1", "Queued", ["User"], 2, None)


def test_the_listings_order_keeps_tasks_after_their_array_and_before_the_next_job() -> None:
    ids = ["10", "9_10", "9_2", "9+1", "9", "9_[3-4]", "100", "9+0"]
    assert sorted(ids, key=id_order) == ["9", "9+0", "9+1", "9_2", "9_10", "9_[3-4]", "10", "100"]


# --- whose a task is -----------------------------------------------------------------------------

AT = 1_795_762_960.0


def side() -> SlurmSide:
    """The service submitted job 5 as alice's (through a portal's token), as `nobody`, its mark
    `infosvc:5a`; a Slurm that gave the number again made it an array and a het job."""
    found = SlurmSide.of(LrmsConfig(type="slurm"))
    found.remember("5", Submitted("alice", "token-portal"), "nobody", AT, "infosvc:5a")
    return found


#: tasks of the same account and the same comment as the job the service submitted as 5
TASKS = [{"job_id": job_id, "user_name": "nobody", "submit_time": int(AT), "comment": "infosvc:5a",
          "job_state": "PENDING"} for job_id in ("5_0", "5+1", "5_[1-3]")]


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task["job_id"])
def test_a_task_is_never_the_job_its_arrays_number_was(task: dict[str, object]) -> None:
    known = side()
    assert known.submitted_of({**task, "job_id": 5}) == Submitted("alice", "token-portal")  # the job itself
    assert known.submitted_of(task) is None
    assert job_view(task, known.submitted_of(task))["owner"] == "nobody"
    for who in (_Who(False, "token-portal", None), _Who(False, "token-alice", "alice")):
        assert not _rights(known, task, who, None)
    assert _rights(known, task, _Who(True, "token-admin", None), None)


def test_a_portals_token_is_refused_a_task_before_slurm_is_asked() -> None:
    known = side()
    _may_ask(known, "5", _Who(False, "token-portal", None), "cancel")  # the job it submitted
    for job_id in ("5_0", "5+0"):
        with pytest.raises(Forbidden):
            _may_ask(known, job_id, _Who(False, "token-portal", None), "cancel")
    _may_ask(known, "5_0", _Who(True, "token-admin", None), "cancel")


def test_private_data_hides_tasks_as_it_hides_jobs() -> None:
    known = side()
    private, open_ = SlurmSettings(private=frozenset({"jobs"})), SlurmSettings()
    portal, alice, admin = (_Who(False, "token-portal", None), _Who(False, "token-alice", "alice"),
                            _Who(True, "token-admin", None))
    for task in TASKS:
        assert all(_shown(known, open_, who)(task) for who in (None, portal, alice, admin))
        assert not any(_shown(known, private, who)(task) for who in (None, portal, alice))
        assert _shown(known, private, admin)(task)


def test_the_routes_refuse_a_malformed_id_before_slurm_is_run(tmp_path: Path, serve: ServerFactory) -> None:
    """GET, DELETE, hold and release of an id that is none: a 404 saying so, and no command run for it
    (not even `scontrol show config`, read at the first route that needs Slurm's settings)."""
    config, log = stand_in(tmp_path / "bin")
    site = serve(config={"lrms": {"type": "slurm", "bin_dir": config.bin_dir, "timeout_seconds": 5.0,
                                  "interval_seconds": 3600.0}}, users={"alice": "alice"})
    for job_id in BAD[1:]:
        path = f"/v1/jobs/{quote(job_id, safe='')}"
        for method, suffix, token in (("GET", "", None), ("GET", "", "admin"), ("DELETE", "", "admin"),
                                      ("POST", "/hold", "admin"), ("POST", "/release", "alice")):
            reply = site.request(method, path + suffix, b"" if method == "POST" else None,
                                 token=site.tokens[token] if token else None)
            assert reply.is_error(404) and "is no Slurm job id" in reply.json()["error"], (job_id, method, reply.body)
    # the cluster's own reads (sinfo, scontrol show partition, squeue -r) may run, nothing for a job
    for_a_job = [argv for argv in ran(log) if Path(argv[0]).name == "scancel" or "-j" in argv
                 or {"config", "hold", "uhold", "release"} & set(argv)]
    assert for_a_job == [], for_a_job
