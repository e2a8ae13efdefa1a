"""Arrays and heterogeneous jobs submitted with sbatch directly, in a real Slurm
(tests/support/slurm.py), as GET /v1/jobs lists them and the job routes read and act on them: each
task (`1234_5`) and component (`1234+0`) under Slurm's id, with the rules of any job the service
did not submit; an id that is none of Slurm's is a 404 before Slurm is asked. The parsing alone:
tests/lrms/test_slurm_task_ids.py."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
from typing import Any, Iterator
from urllib.parse import quote

import pytest

from support.accounts import local_account
from support.server import Reply, Server, ServerFactory
from support.slurm import SlurmCluster, binary, readable

#: The pool account the server submits as (it runs as root here and on CI).
POOL = "nobody"
SYSTEM = json.dumps({"hold": "System"}).encode()


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    with readable("infosvc-slurm-arrays-") as cluster:  # its slurm.conf read by the pool account
        yield cluster


@pytest.fixture(scope="module")
def server(slurm: SlurmCluster, module_serve: ServerFactory) -> Iterator[Server]:
    yield module_serve(config={"lrms": slurm.lrms(run_as=POOL, timeout_seconds=30.0)},
                       users={"alice": "alice"})


@pytest.fixture(autouse=True)
def no_jobs_left(slurm: SlurmCluster) -> Iterator[None]:
    yield
    slurm.cancel_all()


def array(slurm: SlurmCluster, *options: str) -> int:
    return int(slurm.sbatch("--array=0-2", "--hold", "-J", "sweep", "--output=/dev/null", *options, "--wrap=sleep 300"))


def het(slurm: SlurmCluster) -> int:
    """A heterogeneous job of two components, held."""
    said = slurm.run("sbatch", "--parsable", "--hold", "-J", "het", "--output=/dev/null", "-n1", ":", "-n1",
                     "--wrap=sleep 300")
    return int(said.strip().split(";")[0])


def path(job_id: str, action: str = "") -> str:
    return f"/v1/jobs/{quote(job_id, safe='')}" + (f"/{action}" if action else "")


def act(server: Server, method: str, job_id: str, action: str = "", token: str | None = None,
        body: bytes | None = None) -> Reply:
    headers = {"Content-Type": "application/json"} if body else None
    return server.request(method, path(job_id, action), body if body is not None else (b"" if action else None),
                          token=server.tokens[token] if token else None, headers=headers)


def squeue_state(slurm: SlurmCluster, job_id: str) -> tuple[str, str] | None:
    """Slurm's own state and reason of one task or component; None where Slurm keeps no record of it."""
    lines = slurm.run("squeue", "-h", "-r", "--states=all", "-o", "%i %T %r").splitlines()
    found = {line.split()[0]: (line.split()[1], line.split()[2]) for line in lines if line.strip()}
    return found.get(job_id)


def listed(server: Server, query: str = "", token: str | None = None) -> list[dict[str, Any]]:
    reply = server.get(f"/v1/jobs{query}", token=server.tokens[token] if token else None)
    assert reply.status == 200, reply.body[:300]
    return list(reply.json()["jobs"])


def test_the_listing_holds_each_task_and_component_under_its_id(server: Server, slurm: SlurmCluster) -> None:
    first, other = array(slurm), het(slurm)
    tasks, parts = [f"{first}_{n}" for n in range(3)], [f"{other}+0", f"{other}+1"]
    views = listed(server)
    ids = [view["id"] for view in views]
    assert set(tasks + parts) <= set(ids), ids
    assert str(first) not in ids and str(other) not in ids  # `-r`: the tasks, not the array
    assert [job_id for job_id in ids if job_id in tasks] == tasks  # in the array's order
    by_id = {view["id"]: view for view in views}
    for job_id in tasks + parts:
        view = by_id[job_id]
        assert (view["owner"], view["state"], view["holds"], view["reason"], view["slurm"]["partition"]) == (
            "root", "Queued", ["User"], "JobHeldUser", "batch"), view
    assert by_id[tasks[0]]["name"] == "sweep" and by_id[parts[1]]["name"] == "het"
    # the listing's filters take them as any job
    for query in ("?user=root", "?ce=batch", "?state=Queued"):
        assert set(tasks + parts) <= {view["id"] for view in listed(server, query)}, query
    for query in ("?user=alice", "?ce=short", "?state=Running"):
        assert not set(tasks + parts) & {view["id"] for view in listed(server, query)}, query
    two = server.get("/v1/jobs?limit=2").json()
    assert len(two["jobs"]) == 2 and two["truncated"] is True and two["total"] >= 5


def test_one_task_and_one_component_are_read_by_their_ids(server: Server, slurm: SlurmCluster) -> None:
    first, other = array(slurm), het(slurm)
    task = server.get(path(f"{first}_1"))
    assert task.status == 200, task.body
    view = task.json()
    assert (view["id"], view["name"], view["state"], view["reason"], view["holds"], view["owner"]) == (
        f"{first}_1", "sweep", "Queued", "JobHeldUser", ["User"], "root")
    same = {each["id"]: each for each in listed(server)}[f"{first}_1"]
    for key in ("name", "state", "reason", "holds", "owner", "processors", "slurm"):
        assert same[key] == view[key], key
    for spelled in (f"/v1/jobs/{other}+1", f"/v1/jobs/{other}%2B1"):  # `+` as written, and escaped
        component = server.get(spelled)
        assert component.status == 200 and component.json()["id"] == f"{other}+1", (spelled, component.body)
    gone = server.get(path(f"{first}_7"))
    assert gone.is_error(404) and "Slurm knows no job" in gone.json()["error"], gone.body
    # the array's and the het job's own numbers are no one job (squeue -j answers with their tasks)
    for number in (first, other):
        assert server.get(path(str(number))).is_error(404)


@pytest.mark.parametrize("spelled", ["{a}_", "{a}__1", "{a}_1_2", "{a}+", "{a}_[0-2]", "{a}_1+0", "4" * 40,
                                     "\u0661\u0662", "{a}_\uff11", "{a}_1 ", "+{a}"])
def test_a_malformed_id_is_a_404_that_says_so(server: Server, slurm: SlurmCluster, spelled: str) -> None:
    # squeue reads `A_1_2` as `A_1` and `A_[0-2]` as `A_0`: given to it, these read a real task
    first = array(slurm)
    job_id = spelled.format(a=first)
    for token in (None, "alice", "admin"):
        reply = server.get(path(job_id), token=server.tokens[token] if token else None)
        assert reply.is_error(404) and "is no Slurm job id" in reply.json()["error"], (job_id, reply.body)
    assert act(server, "DELETE", job_id, token="admin").is_error(404)
    assert act(server, "POST", job_id, "release", token="admin").is_error(404)
    assert squeue_state(slurm, f"{first}_0") == ("PENDING", "JobHeldUser")


def test_a_foreign_token_may_not_act_on_a_task_and_an_admin_may(server: Server, slurm: SlurmCluster) -> None:
    first, other = array(slurm), het(slurm)
    task, part = f"{first}_0", f"{other}+1"
    for job_id in (task, part):
        for method, action in (("DELETE", ""), ("POST", "hold"), ("POST", "release")):
            assert act(server, method, job_id, action).is_error(401), (job_id, action)  # no token
            for token in ("alice", "submit"):  # bound to a user; a portal's
                reply = act(server, method, job_id, action, token=token)
                assert reply.is_error(403), (job_id, action, token, reply.body)
        assert act(server, "POST", job_id, "requeue", token="admin").is_error(400)  # Slurm's operators'
    assert squeue_state(slurm, task) == squeue_state(slurm, part) == ("PENDING", "JobHeldUser")
    # an administrator acts on any job: a System hold on one task, the array's other tasks unchanged
    held = act(server, "POST", task, "hold", token="admin", body=SYSTEM)
    assert held.status == 200 and held.json()["holds"] == ["System"], held.body
    assert squeue_state(slurm, task) == ("PENDING", "JobHeldAdmin")
    assert squeue_state(slurm, f"{first}_1") == ("PENDING", "JobHeldUser")
    # a task still among its array's pending ones: Slurm keeps no record of it once cancelled
    canceled = act(server, "DELETE", f"{first}_2", token="admin")
    assert canceled.status == 200 and canceled.json()["state"] == "Canceled", canceled.body
    assert squeue_state(slurm, f"{first}_2") is None and squeue_state(slurm, f"{first}_1") == (
        "PENDING", "JobHeldUser")
    # one held apart from them (the System hold above) is kept, CANCELLED
    assert act(server, "DELETE", task, token="admin").json()["state"] == "Canceled"
    assert squeue_state(slurm, task) == ("CANCELLED", "JobHeldAdmin")
    # a System hold put on and taken off (the task may then run)
    assert act(server, "POST", f"{first}_1", "hold", token="admin", body=SYSTEM).json()["holds"] == ["System"]
    released = act(server, "POST", f"{first}_1", "release", token="admin", body=SYSTEM)
    assert released.status == 200 and released.json()["holds"] == [], released.body
    # a component's User hold released, the other's kept: a het job starts whole, so neither runs
    assert act(server, "POST", part, "release", token="admin").status == 200
    assert squeue_state(slurm, part) != ("PENDING", "JobHeldUser") == squeue_state(slurm, f"{other}+0")
    # Slurm cancels a heterogeneous job whole: refused for a component, all of it by its first (+0)
    refused = act(server, "DELETE", part, token="admin")
    assert refused.is_error(400) and "heterogeneous" in refused.json()["error"], refused.body
    whole = act(server, "DELETE", f"{other}+0", token="admin")
    assert whole.status == 200 and whole.json()["state"] == "Canceled", whole.body
    assert (squeue_state(slurm, part) or ("",))[0] == (squeue_state(slurm, f"{other}+0") or ("",))[0] == "CANCELLED"


# --- a task whose array's number is a job the service submitted ----------------------------------

@pytest.fixture
def fresh_slurm() -> Iterator[SlurmCluster]:
    """A cluster of its own, with PrivateData=jobs: this test starts its controller again without
    its saved state, so that Slurm gives its job ids again from 1."""
    with readable("infosvc-slurm-arrays-") as cluster:
        with cluster.conf.open("a") as conf:
            conf.write("PrivateData=jobs\n")
        cluster.run("scontrol", "reconfigure")
        yield cluster


def as_pool(slurm: SlurmCluster, *options: str, account: str = POOL) -> int:
    """An sbatch run as the pool account (or `account`) directly, as any user of the cluster may."""
    entry = pwd.getpwnam(account)
    done = subprocess.run([shutil.which("setpriv") or "setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                           "--init-groups", binary("sbatch"), "--parsable", *options], env=slurm.env,
                          cwd=slurm.directory, capture_output=True, text=True, timeout=60, check=True)
    return int(done.stdout.strip().split(";")[0])


def test_a_task_of_a_number_the_service_submitted_is_not_that_jobs(fresh_slurm: SlurmCluster,
                                                                    module_serve: ServerFactory) -> None:
    """Slurm gives a job id again once its controller starts without its saved state: an array of the
    pool account, with the comment (mark) of the job the service submitted under that number, is
    still no job of the service's, whose submitter and owner have no rights over its tasks; and
    under PrivateData=jobs they are not shown them."""
    slurm = fresh_slurm
    site = module_serve(config={"lrms": slurm.lrms(run_as=POOL, timeout_seconds=30.0)}, users={"alice": "alice"})
    submitted = site.request("POST", "/v1/jobs", b"<Job><Id>a</Id><Executable>/bin/sleep</Executable><Arguments>300"
                             b"</Arguments><OutputFile>/dev/null</OutputFile><User>alice</User><Hold>User</Hold></Job>",
                             token=site.tokens["submit"], headers={"Content-Type": "application/xml"})
    assert submitted.status == 201, submitted.body
    number = submitted.json()["id"]
    mark = slurm.run("squeue", "-h", "-j", number, "-o", "%k").strip()
    assert mark.startswith("infosvc:"), mark
    assert act(site, "GET", number, token="alice").json()["owner"] == "alice"
    slurm.cancel_all()
    slurm.stop_controller()
    for kept in (slurm.directory / "state").iterdir():  # the controller's saved jobs, and its next id
        shutil.rmtree(kept) if kept.is_dir() else kept.unlink()
    slurm.start_controller()
    again = as_pool(slurm, "--array=0-1", "--hold", f"--comment={mark}", "--output=/dev/null", "--wrap=sleep 300")
    assert str(again) == number, (again, number)  # the same number, the same account, the same mark
    tasks = [f"{again}_0", f"{again}_1"]
    for job_id in tasks:
        for token in ("alice", "submit"):
            for method, action in (("DELETE", ""), ("POST", "hold"), ("POST", "release")):
                reply = act(site, method, job_id, action, token=token)
                assert reply.is_error(403), (job_id, token, action, reply.body)
            assert act(site, "GET", job_id, token=token).is_error(404)
        assert squeue_state(slurm, job_id) == ("PENDING", "JobHeldUser")
    for reader in (None, "alice", "submit"):  # PrivateData=jobs: a token is shown the jobs it may change
        assert not set(tasks) & {view["id"] for view in listed(site, token=reader)}, reader
    admin = {view["id"]: view for view in listed(site, token="admin")}
    assert set(tasks) <= set(admin) and all(admin[job_id]["owner"] == POOL for job_id in tasks)
    assert act(site, "GET", tasks[0], token="admin").json()["owner"] == POOL
    assert act(site, "DELETE", tasks[0], token="admin").status == 200


#: an account of an owner's own (uid >= 1000), made for the test below and removed after
TASK_OWNER = "infosvc-slurm-tasks"


@pytest.mark.skipif(os.geteuid() != 0, reason="submitting as another account needs root")
def test_a_token_bound_to_a_user_acts_on_the_tasks_its_own_account_runs_and_no_others(
        slurm: SlurmCluster, module_serve: ServerFactory) -> None:
    with local_account(TASK_OWNER):
        site = module_serve(config={"lrms": slurm.lrms(run_as=POOL, run_as_owner=True, min_uid=1000, timeout_seconds=30.0)},
                            users={"owner": TASK_OWNER, "alice": "alice"})
        mine = as_pool(slurm, "--array=0-1", "--hold", "-J", "mine", "--output=/dev/null", "--wrap=sleep 300",
                       account=TASK_OWNER)
        pooled = array(slurm)  # the pool's: no one user's
        try:
            read = act(site, "GET", f"{mine}_0", token="owner")
            assert read.status == 200 and read.json()["owner"] == TASK_OWNER, read.body
            assert act(site, "DELETE", f"{mine}_0", token="alice").is_error(403)  # another user's
            assert act(site, "DELETE", f"{pooled}_0", token="owner").is_error(403)  # the pool's
            canceled = act(site, "DELETE", f"{mine}_0", token="owner")
            assert canceled.status == 200 and canceled.json()["state"] == "Canceled", canceled.body
            assert squeue_state(slurm, f"{mine}_1") == ("PENDING", "JobHeldUser")  # its other task untouched
        finally:
            slurm.run("scancel", str(mine), str(pooled))
