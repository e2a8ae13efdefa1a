"""Jobs submitted through the service with `[lrms] type = "slurm"` land in a real Slurm
(tests/support/slurm.py) with their options translated (compared with what squeue and scontrol
say of the job), run and pend there; GET /v1/jobs, why, cancel, hold and release act on Slurm's jobs
with the token rules of the service's own queue; a refused translation is a 400 that names the
field, and leaves nothing in Slurm."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from infosvc.config import LrmsConfig
from infosvc.lrms import slurm_jobs
from infosvc.lrms.reader import read_cluster
from infosvc.lrms.sbatch import Batch
from infosvc.lrms.slurm_commands import SlurmUnavailable
from support.server import Reply, Server, ServerFactory, wait_for
from support.slurm import SlurmCluster, readable
from support.accounts import local_account

FIXTURES = Path(__file__).parent.parent / "fixtures" / "jobs"
#: The pool account the server submits as (it runs as root here and on CI).
POOL = "nobody"


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    """The default cluster, its slurm.conf readable by the pool account that runs sbatch."""
    with readable("infosvc-slurm-submit-") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def server(slurm: SlurmCluster, module_serve: ServerFactory) -> Iterator[Server]:
    yield module_serve(config={"lrms": slurm.lrms(run_as=POOL, timeout_seconds=30.0)},
                       users={"alice": "alice", "bob": "bob"})


@pytest.fixture(autouse=True)
def no_jobs_left(slurm: SlurmCluster) -> Iterator[None]:
    yield
    slurm.cancel_all()


def post(server: Server, document: str | bytes, token: str = "alice") -> Reply:
    body = document.encode() if isinstance(document, str) else document
    kind = "application/json" if body.lstrip().startswith(b"{") else "application/xml"
    return server.request("POST", "/v1/jobs", body, token=server.tokens[token], headers={"Content-Type": kind})


def squeue(slurm: SlurmCluster, job_id: str) -> dict[str, Any]:
    jobs = json.loads(slurm.run("squeue", "--json", "--states=all"))["jobs"]
    found = [job for job in jobs if str(job["job_id"]) == job_id]
    assert found, f"Slurm has no job {job_id}"
    return dict(found[0])


def scontrol(slurm: SlurmCluster, job_id: str) -> dict[str, str]:
    fields = {}
    for word in slurm.run("scontrol", "show", "job", "-o", job_id).split():
        key, _, value = word.partition("=")
        fields[key] = value
    return fields


def job(server: Server, job_id: str) -> dict[str, Any]:
    reply = server.get(f"/v1/jobs/{job_id}", token=server.tokens["alice"])
    assert reply.status == 200, reply.body
    return dict(reply.json())


SLEEPER = """<Job><Id>s1</Id><Name>{name}</Name><Executable>/bin/sleep</Executable><Arguments>300</Arguments>
  <OutputFile>/dev/null</OutputFile><ErrorFile>/dev/null</ErrorFile>{extra}</Job>"""


def sleeper(name: str = "sleeper", extra: str = "") -> str:
    return SLEEPER.format(name=name, extra=extra)


# --- the three formats land with their options ---------------------------------------------------

def test_an_sss_job_lands_with_its_options_and_runs(server: Server, slurm: SlurmCluster) -> None:
    reply = post(server, sleeper("render", "<Processors>2</Processors><Memory>200</Memory><Feature>ib</Feature>"
                                           "<Requested><Duration>600</Duration><Queue>batch</Queue></Requested>"
                                           "<Project>animation</Project>"))
    assert reply.status == 201, reply.body
    answer = reply.json()
    job_id = answer["id"]
    assert job_id.isdigit() and reply.headers["location"] == f"/v1/jobs/{job_id}"
    record = squeue(slurm, job_id)
    assert (record["name"], record["cpus"], record["memory_per_node"], record["features"], record["time_limit"],
            record["partition"], record["account"], record["user_name"]) == (
        "render", 2, 200, "ib", 10, "batch", "animation", POOL)
    assert record["standard_output"] == "/dev/null" and record["standard_input"] == "/dev/null"
    running = wait_for(lambda: (view := job(server, job_id))["state"] == "Running" and view, timeout=30,
                       message="the job running in Slurm")
    assert running["hosts"] == squeue(slurm, job_id)["nodes"] and running["owner"] == "alice"
    assert running["slurm"]["state"] == "RUNNING" and running["processors"]["held"] == 2


def test_a_ccs_job_lands_as_two_steps(server: Server, slurm: SlurmCluster) -> None:
    document = (FIXTURES / "ccs-job.xml").read_text().replace('User="LAB\\alice" ', "")
    document = document.replace("build.exe /target:all", "/bin/sleep 300").replace("runtests.exe /all", "/bin/true")
    document = document.replace('WorkDirectory="\\\\head\\builds"', 'WorkDirectory="/tmp"')
    document = document.replace('Stdout="compile.out" Stderr="compile.err"', 'Stdout="/dev/null"')
    document = document.replace('Stdout="test.out"', 'Stdout="/dev/null"')
    reply = post(server, document)
    assert reply.status == 201, reply.body
    fields = scontrol(slurm, reply.json()["id"])
    assert (fields["JobName"], fields["NumTasks"], fields["CPUs/Task"], fields["TimeLimit"], fields["Account"]) == (
        "nightly", "2", "2", "00:45:00", "tools"), fields  # -o splits the name at its blank


def test_a_grid_job_lands(server: Server, slurm: SlurmCluster) -> None:
    grid = {"version": 2, "default_storage_base": "file:///dev/", "tasks": [
        {"id": "t1", "definition": {"version": 2, "executable": "/bin/sleep", "arguments": ["300"], "count": 3,
                                    "stdout": "null", "environment": {"MODEL": "a b"}}}]}
    reply = post(server, json.dumps(grid))
    assert reply.status == 201, reply.body
    record = squeue(slurm, reply.json()["id"])
    assert (record["tasks"], record["standard_output"]) == (3, "/dev/null")


def test_gpus_times_and_placement_land_as_asked(server: Server, slurm: SlurmCluster) -> None:
    begin, deadline = int(time.time()) + 3600, int(time.time()) + 7200
    reply = post(server, sleeper("gpu", f"<EligibleTime>{begin}</EligibleTime><Deadline>{deadline}</Deadline>"
                                        "<Priority>1</Priority><Requested><Resource name='GPU'>1</Resource>"
                                        "<Node op='NE'>c1</Node><Duration>60</Duration></Requested>"))
    assert reply.status == 201, reply.body
    record = squeue(slurm, reply.json()["id"])
    assert (record["tres_per_node"], record["excluded_nodes"], record["eligible_time"], record["deadline"],
            record["nice"], record["state_reason"]) == ("gres:gpu:1", "c1", begin, deadline, 100, "BeginTime")
    view = job(server, reply.json()["id"])
    assert (view["reason"], view["priority"], view["eligible_time"]) == (
        "BeginTime", "BelowNormal", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(begin)))


# --- pending, why, hold, release, cancel ---------------------------------------------------------

def test_a_held_job_pends_and_why_gives_slurms_reason(server: Server, slurm: SlurmCluster) -> None:
    answer = post(server, sleeper(extra="<Hold>User</Hold><Requested><Duration>120</Duration></Requested>"
                                        "<Processors>3</Processors>")).json()
    job_id = answer["id"]
    view = job(server, job_id)
    # the POST's answer, made from what sbatch accepted, says what Slurm says of the job
    for key in ("name", "state", "reason", "holds", "owner", "processors", "run_time_limit_seconds", "exclusive"):
        assert answer[key] == view[key], key
    assert {key: answer["slurm"][key] for key in ("job_id", "state", "user")} == {
        key: view["slurm"][key] for key in ("job_id", "state", "user")} == {
        "job_id": int(job_id), "state": "PENDING", "user": POOL}
    # it asked for no partition: the answer says none, Slurm then gives its default
    assert (answer["slurm"]["partition"], view["slurm"]["partition"]) == (None, "batch")
    assert (view["state"], view["reason"], view["holds"], view["sss_state"]) == (
        "Queued", "JobHeldUser", ["User"], "Hold")
    assert squeue(slurm, job_id)["state_reason"] == "JobHeldUser"
    released = server.request("POST", f"/v1/jobs/{job_id}/release", b"", token=server.tokens["alice"])
    assert released.status == 200, released.body
    wait_for(lambda: job(server, job_id)["state"] == "Running", timeout=30, message="the released job running")


def test_hold_and_release_follow_the_token_rules(server: Server, slurm: SlurmCluster) -> None:
    first = post(server, sleeper(extra="<Hold>User</Hold>")).json()["id"]
    job_id = post(server, sleeper(extra=f"<Dependency>{first}</Dependency>")).json()["id"]
    assert wait_for(lambda: job(server, job_id)["reason"], timeout=20) == "Dependency"
    assert squeue(slurm, job_id)["dependency"] == f"afterok:{first}(unfulfilled)"
    # bob's token may not touch alice's job; alice's may put her own hold on and take it off
    assert server.request("POST", f"/v1/jobs/{job_id}/hold", b"", token=server.tokens["bob"]).is_error(403)
    held = server.request("POST", f"/v1/jobs/{job_id}/hold", b"", token=server.tokens["alice"])
    assert held.status == 200 and held.json()["reason"] == "JobHeldUser" == squeue(slurm, job_id)["state_reason"]
    assert server.request("POST", f"/v1/jobs/{job_id}/release", b"", token=server.tokens["alice"]).status == 200
    # as with the own queue: no hold to release, or a job not pending, is a 409; requeue is Slurm's operators'
    assert server.request("POST", f"/v1/jobs/{job_id}/release", b"", token=server.tokens["alice"]).is_error(409)
    assert server.request("POST", f"/v1/jobs/{job_id}/requeue", b"", token=server.tokens["alice"]).is_error(400)
    # a System hold is an administrator's: alice can neither put one on nor take it off
    system = json.dumps({"hold": "System"}).encode()
    assert server.request("POST", f"/v1/jobs/{job_id}/hold", system, token=server.tokens["alice"],
                          headers={"Content-Type": "application/json"}).is_error(403)
    admin = server.request("POST", f"/v1/jobs/{job_id}/hold", system, token=server.tokens["admin"],
                           headers={"Content-Type": "application/json"})
    assert admin.status == 200 and admin.json()["holds"] == ["System"]
    assert squeue(slurm, job_id)["state_reason"] == "JobHeldAdmin"
    assert server.request("POST", f"/v1/jobs/{job_id}/release", b"", token=server.tokens["alice"]).is_error(403)
    assert server.request("POST", f"/v1/jobs/{job_id}/release", system, token=server.tokens["admin"],
                          headers={"Content-Type": "application/json"}).status == 200
    assert squeue(slurm, job_id)["state_reason"] not in ("JobHeldAdmin", "JobHeldUser")
    wait_for(lambda: squeue(slurm, job_id)["state_reason"] == "Dependency", timeout=20, message="Slurm's reason")


def test_a_system_hold_is_an_administrators_at_submission(server: Server, slurm: SlurmCluster) -> None:
    document = sleeper(extra="<Hold>System</Hold><User>alice</User>")
    assert post(server, document).is_error(403)
    assert post(server, document.replace("<User>alice</User>", ""), token="admin").json()["holds"] == ["System"]
    reply = post(server, document, token="admin")
    assert reply.status == 201 and reply.json()["owner"] == "alice"
    assert squeue(slurm, reply.json()["id"])["state_reason"] == "JobHeldAdmin"
    assert server.request("POST", f"/v1/jobs/{reply.json()['id']}/release", b"",
                          token=server.tokens["alice"]).is_error(403)
    # a review: alice's User hold on it ran `scontrol uhold` as root, which turned the administrator's
    # hold into hers, and her release then freed the job
    assert server.request("POST", f"/v1/jobs/{reply.json()['id']}/hold", b"",
                          token=server.tokens["alice"]).is_error(403)
    assert squeue(slurm, reply.json()["id"])["state_reason"] == "JobHeldAdmin"
    assert server.request("POST", f"/v1/jobs/{reply.json()['id']}/release", b"",
                          token=server.tokens["alice"]).is_error(403)


def test_cancel_is_scancel_for_its_owner_and_an_admin(server: Server, slurm: SlurmCluster) -> None:
    job_id = post(server, sleeper()).json()["id"]
    assert server.request("DELETE", f"/v1/jobs/{job_id}", token=server.tokens["bob"]).is_error(403)
    reply = server.request("DELETE", f"/v1/jobs/{job_id}", token=server.tokens["alice"])
    assert reply.status == 200 and reply.json()["state"] == "Canceled"
    assert squeue(slurm, job_id)["job_state"] == "CANCELLED"
    assert server.request("DELETE", f"/v1/jobs/{job_id}", token=server.tokens["alice"]).is_error(400)
    other = post(server, sleeper(), token="bob").json()["id"]
    assert server.request("DELETE", f"/v1/jobs/{other}", token=server.tokens["admin"]).status == 200


def test_the_listing_is_slurms_jobs_with_those_sbatch_submitted_directly(server: Server,
                                                                       slurm: SlurmCluster) -> None:
    ours = post(server, sleeper("ours")).json()["id"]
    direct = str(slurm.sbatch("--output=/dev/null", "--job-name=direct", "--wrap=sleep 300"))
    listing = server.get("/v1/jobs", token=server.tokens["alice"]).json()
    by_id = {view["id"]: view for view in listing["jobs"]}
    assert by_id[ours]["owner"] == "alice" and by_id[ours]["name"] == "ours"
    assert by_id[direct]["owner"] == "root" and by_id[direct]["name"] == "direct"
    # alice's token may not cancel a job it did not submit
    assert server.request("DELETE", f"/v1/jobs/{direct}", token=server.tokens["alice"]).is_error(403)
    only = server.get("/v1/jobs?user=alice", token=server.tokens["alice"]).json()["jobs"]
    assert [view["id"] for view in only if view["ended"] is None] == [ours]  # ended ones stay MinJobAge
    assert all(view["owner"] == "alice" for view in only)
    assert server.get("/v1/jobs/99999999", token=server.tokens["alice"]).is_error(404)
    in_batch = server.get("/v1/jobs?ce=batch", token=server.tokens["alice"]).json()
    assert {ours, direct} <= {view["id"] for view in in_batch["jobs"]} and in_batch["total"] == len(in_batch["jobs"])
    assert server.get("/v1/jobs?ce=short", token=server.tokens["alice"]).json()["jobs"] == []
    canceled = server.get("/v1/jobs?state=Canceled", token=server.tokens["alice"]).json()["jobs"]
    assert all(view["state"] == "Canceled" for view in canceled) and not {ours, direct} & {v["id"] for v in canceled}
    assert server.get("/v1/jobs?until=2000-01-01T00:00:00Z", token=server.tokens["alice"]).json()["jobs"] == []
    one = server.get("/v1/jobs?limit=1", token=server.tokens["alice"]).json()
    assert len(one["jobs"]) == 1 and one["truncated"] is True and one["total"] >= 2


def test_a_group_goes_in_with_its_dependency_on_slurms_id(server: Server, slurm: SlurmCluster) -> None:
    group = """<JobGroup><Id>g</Id>
      <Job><Id>second</Id><Executable>/bin/true</Executable><OutputFile>/dev/null</OutputFile>
        <Dependency condition="OnFailure">first</Dependency></Job>
      <Job><Id>first</Id><Executable>/bin/sleep</Executable><Arguments>300</Arguments>
        <OutputFile>/dev/null</OutputFile></Job></JobGroup>"""
    reply = post(server, group)
    assert reply.status == 201, reply.body
    second, first = (view["id"] for view in reply.json()["jobs"])
    assert int(first) < int(second)  # the one depended on went in first
    assert squeue(slurm, second)["dependency"].startswith(f"afternotok:{first}")


# --- refusals ------------------------------------------------------------------------------------

def test_a_refused_translation_is_a_400_naming_the_field_and_nothing_reaches_slurm(
        server: Server, slurm: SlurmCluster) -> None:
    before = slurm.run("squeue", "-h", "-o", "%i").split()
    reply = post(server, sleeper(extra="<Requested><OperatingSystem>Linux</OperatingSystem></Requested>"))
    assert reply.is_error(400)
    assert reply.json()["detail"][0]["element"] == "OperatingSystem"
    group = ("<JobGroup><Id>g</Id><Job><Id>a</Id><Executable>/bin/true</Executable></Job>"
             "<Job><Id>b</Id><Executable>/bin/true</Executable><Swap>10</Swap></Job></JobGroup>")
    assert post(server, group).json()["detail"][0]["element"] == "Swap"
    assert slurm.run("squeue", "-h", "-o", "%i").split() == before


def test_what_slurm_itself_refuses_is_a_400_in_its_words(server: Server) -> None:
    reply = post(server, sleeper(extra="<Requested><Queue>nosuch</Queue></Requested>"))
    assert reply.is_error(400) and "invalid partition" in reply.json()["error"].lower()
    reply = post(server, sleeper(extra="<Feature>nosuch</Feature>"))
    assert reply.is_error(400) and "invalid feature" in reply.json()["error"].lower(), reply.body


def test_a_token_bound_to_a_user_files_that_users_jobs_only(server: Server) -> None:
    assert post(server, sleeper(extra="<User>bob</User>")).is_error(403)


@pytest.mark.skipif(os.geteuid() != 0, reason="submitting as another account needs root")
def test_no_job_is_submitted_as_root(slurm: SlurmCluster, module_serve: ServerFactory, tmp_path: Path) -> None:
    """Not by the map, not as the owner's own account (root's uid is below min_uid), not without a rule."""
    accounts = tmp_path / "accounts"
    accounts.write_text("alice root\n")
    before = slurm.run("squeue", "-h", "-o", "%i").split()
    mapped = module_serve(config={"lrms": slurm.lrms(run_as_map=str(accounts), run_as_owner=True)},
                          users={"alice": "alice", "root": "root"})
    reply = post(mapped, sleeper(), token="alice")
    assert reply.is_error(403) and "never run as root" in reply.json()["error"], reply.body
    reply = post(mapped, sleeper(), token="root")
    assert reply.is_error(403) and "owner root has no account" in reply.json()["error"], reply.body
    assert slurm.run("squeue", "-h", "-o", "%i").split() == before


# --- jobs run to their end -----------------------------------------------------------------------

FLOW = """<Job><Id>flow</Id><TaskGroup><TaskCount>3</TaskCount>
  <Task><Id>a</Id><Executable>/bin/sleep</Executable><Arguments>1</Arguments><OutputFile>/dev/null</OutputFile></Task>
  <Task><Id>b</Id><Executable>/bin/sh</Executable><Arguments>-c "exit {code}"</Arguments><OutputFile>/dev/null</OutputFile>
    <Dependency>a</Dependency></Task>
  <Task><Id>c</Id><Executable>/bin/true</Executable><OutputFile>/dev/null</OutputFile></Task>
</TaskGroup></Job>"""


@pytest.mark.parametrize(("code", "state"), [(0, "Finished"), (3, "Failed")])
def test_a_job_of_several_tasks_runs_its_steps_to_the_end(server: Server, slurm: SlurmCluster, code: int,
                                                          state: str) -> None:
    reply = post(server, FLOW.format(code=code))
    assert reply.status == 201, reply.body
    job_id = reply.json()["id"]
    ended = wait_for(lambda: (view := job(server, job_id))["ended"] and view, timeout=60, interval=0.3,
                     message="the job ending in Slurm")
    assert (ended["state"], ended["exit_code"]) == (state, code), ended  # the failed task's own status
    assert ended["slurm"]["state"] == ("COMPLETED" if code == 0 else "FAILED")


def test_jobs_and_why_from_the_shell(server: Server, slurm: SlurmCluster, tmp_path: Path) -> None:
    token = tmp_path / "alice.token"
    token.write_text(server.tokens["alice"] + "\n")
    job_id = post(server, sleeper("shown", "<Hold>User</Hold>")).json()["id"]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "infosvc", args[0], "--server", server.url, "--token-file",
                               str(token), *args[1:]], capture_output=True, text=True, timeout=60)
    why = cli("why", job_id)
    assert why.returncode == 0, why.stderr
    assert why.stdout.splitlines()[0] == f"job {job_id} (shown) is Queued: JobHeldUser"
    listed = cli("jobs")
    assert listed.returncode == 0 and any(line.split()[:4] == [job_id, "shown", "alice", "Queued"]
                                          for line in listed.stdout.splitlines()), listed.stdout
    assert cli("release", job_id).returncode == 0
    assert cli("cancel", job_id).returncode == 0
    assert squeue(slurm, job_id)["job_state"] == "CANCELLED"


OWN_ACCOUNT = "infosvc-slurm-own"


@pytest.fixture
def own_account() -> Iterator[pwd.struct_passwd]:
    """A local account of a uid >= 1000, made with useradd and removed after (skipped, saying why,
    where it cannot be made)."""
    with local_account(OWN_ACCOUNT) as account:
        yield account


@pytest.mark.skipif(os.geteuid() != 0, reason="submitting as another account needs root")
def test_an_owner_submits_as_its_own_account_and_keeps_its_rights_after_a_restart(
        slurm: SlurmCluster, module_serve: ServerFactory, own_account: pwd.struct_passwd) -> None:
    site = module_serve(config={"lrms": slurm.lrms(run_as=POOL, run_as_owner=True, min_uid=1000)},
                        users={"own": OWN_ACCOUNT, "alice": "alice"})
    own = post(site, sleeper(), token="own").json()["id"]
    pooled = post(site, sleeper(), token="alice").json()["id"]
    assert (squeue(slurm, own)["user_name"], squeue(slurm, pooled)["user_name"]) == (OWN_ACCOUNT, POOL)
    site.restart()  # the server forgets which token submitted what
    assert site.request("DELETE", f"/v1/jobs/{own}", token=site.tokens["own"]).status == 200  # its own account
    # a pool account's job is no one user's: after the restart only an administrator acts on it
    assert site.request("DELETE", f"/v1/jobs/{pooled}", token=site.tokens["alice"]).is_error(403)
    assert site.request("DELETE", f"/v1/jobs/{pooled}", token=site.tokens["admin"]).status == 200


def test_slurm_out_of_reach_is_a_503_saying_why(slurm: SlurmCluster, module_serve: ServerFactory) -> None:
    site = module_serve(config={"lrms": slurm.lrms(run_as=POOL, timeout_seconds=5.0)}, users={"alice": "alice"})
    slurm.stop_controller()
    try:
        reply = post(site, sleeper(), token="alice")
        assert reply.is_error(503) and "Slurm cannot be reached" in reply.json()["error"], reply.body
        assert site.get("/v1/jobs", token=site.tokens["alice"]).is_error(503)
        assert site.get("/v1/jobs/1", token=site.tokens["alice"]).is_error(503)
    finally:
        slurm.start_controller()
    assert post(site, sleeper(), token="alice").status == 201


def test_a_job_waiting_for_resources_says_so(server: Server, slurm: SlurmCluster) -> None:
    """Every CPU of the cluster's up nodes taken (c4 is drained): the next job waits, Slurm's Reason
    Resources (or Priority, behind an earlier one), and the service says the same."""
    cpus = int(slurm.run("sinfo", "-h", "-p", "batch", "-o", "%C").split("/")[1])  # A/I/O/T: the idle ones
    big = post(server, sleeper("big", f"<Processors>{cpus}</Processors>")).json()["id"]
    wait_for(lambda: job(server, big)["state"] == "Running", timeout=30,
             message=f"the big job running ({cpus} CPUs): {job(server, big)}")
    small = post(server, sleeper("small")).json()["id"]
    reason = wait_for(lambda: job(server, small)["reason"], timeout=30, message="Slurm's reason")
    assert reason in ("Resources", "Priority") and reason == squeue(slurm, small)["state_reason"]


def test_a_job_s_own_fields_cannot_fake_the_hold_slurm_reports(server: Server, slurm: SlurmCluster) -> None:
    # `scontrol show job -o` prints StdOut (and WorkDir, StdErr, the name) unescaped, after Reason:
    # a path with " Reason=JobHeldUser" in it read as the job's reason let alice lift an admin's hold
    forged = ("<Job><Id>s1</Id><Name>x Reason=JobHeldUser UserId=bob(1) JobState=PENDING</Name>"
              "<Executable>/bin/sleep</Executable><Arguments>300</Arguments>"
              "<OutputFile>/tmp/out Reason=JobHeldUser</OutputFile><ErrorFile>/dev/null</ErrorFile>"
              "<Hold>User</Hold></Job>")
    reply = post(server, forged)
    assert reply.status == 201, reply.body
    job_id = reply.json()["id"]
    system = json.dumps({"hold": "System"}).encode()
    admin = server.request("POST", f"/v1/jobs/{job_id}/hold", system, token=server.tokens["admin"],
                           headers={"Content-Type": "application/json"})
    assert admin.status == 200 and squeue(slurm, job_id)["state_reason"] == "JobHeldAdmin"
    assert (job(server, job_id)["reason"], job(server, job_id)["holds"]) == ("JobHeldAdmin", ["System"])
    assert server.request("POST", f"/v1/jobs/{job_id}/release", b"", token=server.tokens["alice"]).is_error(403)
    assert squeue(slurm, job_id)["state_reason"] == "JobHeldAdmin"
    assert job(server, job_id)["owner"] == "alice"
    assert server.request("DELETE", f"/v1/jobs/{job_id}", token=server.tokens["admin"]).status == 200


def test_a_listing_reads_a_job_whose_constraint_and_name_hold_the_separator(server: Server,
                                                                            slurm: SlurmCluster) -> None:
    # `-C 'intel|gpu'` is Slurm's OR of features: read in the middle of squeue's line, it shifted
    # every field after it (its nice, its reason, its name) by one
    job_id = str(slurm.sbatch("-H", "--nice=7", "-C", "intel|gpu", "-J", "a|#|b c", "--wrap", "sleep 300"))
    listed = [each for each in server.get("/v1/jobs", token=server.tokens["admin"]).json()["jobs"]
              if each["id"] == job_id]
    assert len(listed) == 1, listed
    (view,) = listed
    assert (view["name"], view["reason"], view["holds"], view["slurm"]["features"]) == (
        "a|#|b c", "JobHeldUser", ["User"], "intel|gpu"), view
    one = job(server, job_id)  # read with `squeue -j` and scontrol: the listing says the same
    for key in ("name", "reason", "holds", "priority", "state", "owner"):
        assert view[key] == one[key], key
    assert one["slurm"]["features"] == "intel|gpu"


# --- a job's own texts, printed raw by squeue ----------------------------------------------------

#: a name whose newline wrote a listing line of its own: a job 424242 of root's, running on 64 CPUs
FORGING_NAME = ("innocent|#|(null)\n424242|RUNNING|root|root|64|UNLIMITED|2026-11-27T07:02:35|2026-11-27T07:02:37|"
                "N/A|c1|batch|(null)|0|None|root-maintenance")
#: a name whose second line did not read (NaN CPUs): every GET /v1/jobs a 503
BREAKING_NAME = "x|#|(null)\n424244|RUNNING|u|a|NaN|UNLIMITED|N/A|N/A|N/A||batch|(null)|0|None|y"
#: an account (Slurm writes it in lower case) completing the cluster read's line, then one of a job
#: running in batch: counted in the CE's RunningJobs
FORGING_ACCOUNT = "atlas|1|1|unlimited|||c1|none\n424243|batch|running|root|root"
#: scontrol's fields after the comment are read last: these were the job's CPUs, account, partition
FORGING_COMMENT = "x NumCPUs=64 Account=root Partition=root-only ExitCode=0:0"


def test_a_jobs_own_texts_forge_no_job_and_fail_no_read(server: Server, slurm: SlurmCluster) -> None:
    """What a user submitting to Slurm directly may choose (name, account, comment), newlines and
    separators in it, as the listing (anonymous GET /v1/jobs), one job's read and the cluster read
    (the published CEs) see it. The account `x|y` failed every read of the cluster: /healthz said
    "stale" and the published state stayed as it was."""
    asked = {"forging name": ("-J", FORGING_NAME), "breaking name": ("-J", BREAKING_NAME),
             "account with a separator": ("--account=x|y",), "forging account": (f"--account={FORGING_ACCOUNT}",),
             "forging comment": (f"--comment={FORGING_COMMENT}",)}
    ids = {what: str(slurm.sbatch("-H", "--output=/dev/null", *options, "--wrap", "sleep 300"))
           for what, options in asked.items()}
    listing = server.get("/v1/jobs")
    assert listing.status == 200, listing.body[:300]
    views = {view["id"]: view for view in listing.json()["jobs"]}
    assert not {"424242", "424243", "424244"} & set(views), sorted(views)
    assert set(ids.values()) <= set(views), sorted(views)
    assert views[ids["forging name"]]["name"] == FORGING_NAME and views[ids["breaking name"]]["name"] == BREAKING_NAME
    assert views[ids["account with a separator"]]["slurm"]["account"] == "x|y"
    assert views[ids["forging account"]]["slurm"]["account"] == FORGING_ACCOUNT
    assert all((views[job_id]["owner"], views[job_id]["state"]) == ("root", "Queued") for job_id in ids.values())
    one = job(server, ids["forging name"])
    assert (one["id"], one["name"], one["state"]) == (ids["forging name"], FORGING_NAME, "Queued")
    commented = job(server, ids["forging comment"])
    assert (commented["processors"]["min"], commented["slurm"]["account"], commented["slurm"]["partition"]) == (
        1, None, "batch"), commented
    read = {job.id: job for job in read_cluster(LrmsConfig(type="slurm", slurm_conf=str(slurm.conf),
                                                            bin_dir=slurm.bin_dir)).jobs}
    assert set(read) == set(ids.values()), sorted(read)
    assert {read[ids["account with a separator"]].account, read[ids["forging account"]].account} == {
        "x|y", FORGING_ACCOUNT}
    assert all(job.state == "PENDING" and job.cpus == 1 for job in read.values())


# --- an sbatch that goes unanswered --------------------------------------------------------------

def late_config(slurm: SlurmCluster, timeout: float) -> LrmsConfig:
    return LrmsConfig(type="slurm", slurm_conf=str(slurm.conf), bin_dir=slurm.bin_dir, timeout_seconds=timeout)


LATE = Batch(("--job-name=late", "--hold", "--output=/dev/null"), "#!/bin/sh\nsleep 300\n")


def named_late(slurm: SlurmCluster) -> dict[str, str]:
    """The jobs named `late` Slurm keeps, and their states."""
    lines = slurm.run("squeue", "-h", "--states=all", "--name=late", "-o", "%i %T").split("\n")
    return dict(line.split() for line in lines if line)


def test_a_job_slurm_takes_after_sbatch_timed_out_is_cancelled(slurm: SlurmCluster) -> None:
    """slurmctld stopped past the time limit: sbatch is ended, yet slurmctld, once it goes on, reads
    the request and makes the job: one the service said it had not submitted (a retry made a second),
    and that its owner could not cancel. Slurm asked again, the job is found by its mark, cancelled."""
    assert slurm.controller is not None
    before = set(named_late(slurm))  # another test's, still kept (MinJobAge)
    said: list[BaseException | str] = []

    def submit() -> None:
        try:
            said.append(slurm_jobs.submit(late_config(slurm, 3.0), LATE, None))
        except SlurmUnavailable as exc:
            said.append(exc)

    os.kill(slurm.controller.pid, signal.SIGSTOP)
    try:
        thread = threading.Thread(target=submit)
        thread.start()
        time.sleep(4.5)  # past sbatch's 3 s: the service is asking Slurm what came of it
    finally:
        os.kill(slurm.controller.pid, signal.SIGCONT)
    thread.join(60)
    (error,) = said
    assert isinstance(error, SlurmUnavailable) and "did not finish within 3 s" in str(error), error
    made = wait_for(lambda: {job_id: state for job_id, state in named_late(slurm).items() if job_id not in before},
                    timeout=20, message="the job slurmctld made of the request")
    assert list(made.values()) == ["CANCELLED"], made
    assert f"as job {next(iter(made))}, which was cancelled" in str(error), error


def test_a_submission_slurm_cannot_be_asked_about_says_it_may_be_in_slurm(slurm: SlurmCluster) -> None:
    """slurmctld stopped through the whole submission: what came of it cannot be told. The error says
    the job may have been submitted, with its mark, by which it is withdrawn once Slurm answers."""
    assert slurm.controller is not None
    before = set(named_late(slurm))  # another test's, still kept (MinJobAge)
    os.kill(slurm.controller.pid, signal.SIGSTOP)
    try:
        with pytest.raises(SlurmUnavailable) as caught:
            slurm_jobs.submit(late_config(slurm, 2.0), LATE, None)
    finally:
        os.kill(slurm.controller.pid, signal.SIGCONT)
    error = caught.value
    assert "may have been submitted" in str(error), error
    marker, user = getattr(error, "marker", None), getattr(error, "user", None)
    assert marker and str(marker).startswith("infosvc:") and user == "root", (marker, user)
    made = wait_for(lambda: {job_id: state for job_id, state in named_late(slurm).items() if job_id not in before},
                    timeout=20, message="the job slurmctld made of the request")
    assert set(made.values()) == {"PENDING"}, made
    withdrawn = slurm_jobs.withdraw(late_config(slurm, 30.0), str(marker), str(user))
    assert withdrawn == {job_id: "PENDING" for job_id in made}, withdrawn
    assert {named_late(slurm)[job_id] for job_id in made} == {"CANCELLED"}
    again = slurm_jobs.withdraw(late_config(slurm, 30.0), str(marker), str(user))  # nothing left to cancel
    assert again == {job_id: "CANCELLED" for job_id in made}, again
