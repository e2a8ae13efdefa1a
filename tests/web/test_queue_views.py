"""What the queue shows of itself, on a real server on loopback: a job no host can run (warned or
refused at submission, counted waiting on a CE in every rendering), the scheduler's processors
(POST /v1/match and GET /v1/processors agree with what a submission finds; `infosvc status`),
a placed task no executor has begun, and exclusive use by the site's default."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from infosvc.config.site import ConfigError, parse_config
from support.gridcheck import GLUE13, GLUE20, check_ldif
from support.server import InProcessServer, ServerFactory, wait_for

CES = """
[[clusters]]
id = "a"
nodes = "n0"

[[clusters]]
id = "b"
nodes = "n1"

[[computing_elements]]
id = "ce-short"
queue = "short"
clusters = ["a"]

[[computing_elements]]
id = "ce-long"
queue = "long"
clusters = ["b"]
"""

BIGMEM = "no host known now can run it: n[0-1] (Feature: asked BigMem, host has no features)"


def sss(name: str, procs: int = 1, more: str = "", outside: str = "") -> bytes:
    return (f"<Job><Id>{name}</Id><Name>{name}</Name>{outside}<Executable>/bin/true</Executable>"
            f"<Requested><Processors>{procs}</Processors>{more}</Requested></Job>").encode()


def post(server: InProcessServer, body: bytes, content_type: str = "application/xml") -> Any:
    return server.request("POST", "/v1/jobs", body, token=server.tokens["submit"],
                          headers={"Content-Type": content_type})


def job(server: InProcessServer, job_id: str) -> Any:
    reply = server.get(f"/v1/jobs/{job_id}")
    assert reply.status == 200, reply.body
    return reply.json()


def cli(server: InProcessServer, *args: str) -> subprocess.CompletedProcess[str]:
    token = server.directory / "submit.token"
    token.write_text(server.tokens["submit"] + "\n")
    return subprocess.run([sys.executable, "-m", "infosvc", *args[:1], "--server", server.url, "--token-file",
                           str(token), *args[1:]], capture_output=True, text=True, timeout=60)


def two_ces(serve_app: ServerFactory, scheduler: str = "") -> InProcessServer:
    server = serve_app(start=False, agents=2, executors={"exec0": "n0", "exec1": "n1"})
    server.config_file.write_text(CES + (f"\n[scheduler]\n{scheduler}\n" if scheduler else ""))
    server.start()
    for number in range(2):
        server.report(f"n{number}", server.agent_token(), processors=4)
    return server  # type: ignore[return-value]


def waiting_on(server: InProcessServer) -> dict[str, int]:
    """Each CE's WaitingJobs in GLUE JSON, GLUE 1.3 LDIF and GLUE 2 LDIF, which must agree."""
    found = {ce: server.get(f"/v1/glue/computing-elements/{ce}").json()["state"]["waiting_jobs"]
             for ce in ("ce-short", "ce-long")}
    g13 = check_ldif(server.get("/v1/glue?format=ldif&schema=1.3").body.decode(), GLUE13)
    old = {dict(attrs)["GlueCEUniqueID"]: int(dict(attrs)["GlueCEStateWaitingJobs"]) for attrs in g13.values()
           if ("objectClass", "GlueCEState") in attrs}
    assert old == found, (old, found)
    g2 = check_ldif(server.get("/v1/glue?format=ldif&schema=2.0").body.decode(), GLUE20)
    shares = [dict(attrs) for attrs in g2.values() if ("objectClass", "GLUE2ComputingShare") in attrs]
    assert sorted(int(share["GLUE2ComputingShareWaitingJobs"]) for share in shares) == sorted(found.values())
    return found


# --- a job no host can run -----------------------------------------------------------------------

def test_a_job_no_host_can_run_is_warned_of_and_counted_on_a_ce(serve_app: ServerFactory) -> None:
    site = two_ces(serve_app)
    bigmem = post(site, sss("bigmem", more="<Feature>BigMem</Feature>"))
    assert bigmem.status == 201 and bigmem.json()["warnings"] == [BIGMEM]  # each clause once
    # the same clause at the job's level and at each of its tasks': still said once
    tasks = post(site, b"<Job><Id>t</Id><Requested><Feature>BigMem</Feature></Requested><TaskGroup>"
                       b"<TaskCount>2</TaskCount><Task><Requested><Feature>BigMem</Feature></Requested></Task>"
                       b"<Task><Requested><Feature>BigMem</Feature><Feature>Other</Feature></Requested></Task>"
                       b"</TaskGroup></Job>")
    assert tasks.status == 201 and tasks.json()["warnings"] == [BIGMEM]
    named = post(site, sss("named", more="<Feature>BigMem</Feature><Queue>long</Queue>"))
    assert named.json()["warnings"] == ["no host known now can run it: n0 (Queue: asked EQ long, host has short; "
                                        "Feature: asked BigMem, host has no features), n1 (Feature: asked BigMem, "
                                        "host has no features)"]
    wide = post(site, sss("wide", 64))
    assert wide.json()["warnings"] == ["no host known now can run it: it asks 64 processors; the site's hosts "
                                       "have 8"]
    memory = post(site, sss("memory", more='<Memory units="GB">64</Memory>'))
    assert memory.json()["warnings"] == ["no host known now can run it: it asks 65536 MB of memory per host; the "
                                         "site's hosts have at most 8192 MB"]
    fits = post(site, sss("fits"))
    assert fits.status == 201 and fits.json()["warnings"] == []
    ids = {name: reply.json()["id"] for name, reply in
           (("bigmem", bigmem), ("tasks", tasks), ("named", named), ("wide", wide), ("memory", memory), ("fits", fits))}
    wait_for(lambda: job(site, ids["fits"])["state"] == "Running" and job(site, ids["bigmem"])["reason"])
    wait_for(lambda: waiting_on(site) == {"ce-short": 4, "ce-long": 5}, message="the CEs count every waiting job")
    # a job no CE's host fits: every CE, or the one of the queue it names; the others where they fit
    assert job(site, ids["bigmem"])["ces"] == job(site, ids["tasks"])["ces"] == ["ce-long", "ce-short"]
    assert job(site, ids["named"])["ces"] == ["ce-long"]
    assert job(site, ids["wide"])["ces"] == job(site, ids["memory"])["ces"] == ["ce-long", "ce-short"]
    listed = site.get("/v1/jobs?ce=ce-long&state=Queued").json()
    assert sorted(j["id"] for j in listed["jobs"]) == sorted(ids[n] for n in ("bigmem", "tasks", "named", "wide",
                                                                             "memory"))
    short = site.get("/v1/glue/computing-elements/ce-short").json()
    assert sorted(j["local_id"] for j in short["jobs"] if j["status"] == "WAITING") == sorted(
        ids[n] for n in ("bigmem", "tasks", "wide", "memory"))
    # the reason says it once too, as the warning did
    assert job(site, ids["bigmem"])["reason"].count("BigMem") == 1
    # `infosvc submit` says the warning, and submits
    path = site.directory / "gpu.xml"
    path.write_bytes(sss("gpu", more="<Feature>GPU</Feature>"))
    done = cli(site, "submit", str(path))
    assert done.returncode == 0 and done.stdout.startswith("job ") and "(Queued)" in done.stdout
    assert done.stderr == ("infosvc submit: warning: no host known now can run it: n[0-1] (Feature: asked GPU, "
                           "host has no features)\n")


def test_refuse_unrunnable_makes_it_a_400_and_stores_nothing(serve_app: ServerFactory) -> None:
    site = two_ces(serve_app, "refuse_unrunnable = true")
    refused = post(site, sss("bigmem", more="<Feature>BigMem</Feature>"))
    assert refused.is_error(400) and refused.json()["error"] == BIGMEM
    assert "Requested node configuration is not available" in refused.json()["detail"]
    group = b"<JobGroup><Id>g</Id>" + sss("ok") + sss("gpu", more="<Feature>GPU</Feature>") + b"</JobGroup>"
    refused = post(site, group)
    assert refused.is_error(400) and refused.json()["error"].startswith("job 'gpu': no host known now can run it: ")
    assert post(site, sss("wide", 9)).is_error(400)
    assert site.get("/v1/jobs").json()["total"] == 0  # nothing of a refused submission is kept
    assert post(site, sss("eight", 8)).status == 201  # both hosts together: it can run
    path = site.directory / "gpu.xml"
    path.write_bytes(sss("gpu", more="<Feature>GPU</Feature>"))
    done = cli(site, "submit", str(path))
    assert done.returncode == 1 and ": 400 " in done.stderr and "no host known now can run it" in done.stderr


def test_a_site_that_knows_no_host_yet_warns_of_nothing(serve_app: ServerFactory) -> None:
    """Just set up, its agents not reported: a job is taken as it is, whatever it asks."""
    site = serve_app({"scheduler": {"refuse_unrunnable": True}})
    taken = post(site, sss("bigmem", more="<Feature>BigMem</Feature>"))
    assert taken.status == 201 and taken.json()["warnings"] == []


def test_the_two_keys_are_booleans() -> None:
    config = parse_config({})
    assert (config.scheduler.refuse_unrunnable, config.scheduler.exclusive_default) == (False, True)
    config = parse_config({"scheduler": {"refuse_unrunnable": True, "exclusive_default": False}})
    assert (config.scheduler.refuse_unrunnable, config.scheduler.exclusive_default) == (True, False)
    for key in ("refuse_unrunnable", "exclusive_default"):
        with pytest.raises(ConfigError, match=f"scheduler.{key}"):
            parse_config({"scheduler": {key: "yes"}})


# --- the scheduler's processors ------------------------------------------------------------------

def test_the_dry_run_answers_what_a_submission_finds(serve_app: ServerFactory) -> None:
    """Loaded hosts (0 free by their load) with nothing allocated: the dry run says 4 idle on each,
    and the job it was asked about starts at once; after, its host has 0 idle."""
    site = serve_app(agents=3, executors={"exec0": "n0", "exec1": "n1"})
    for number in range(2):
        site.report(f"n{number}", site.agent_token(), processors=4, free_processors=0)
    site.report("n2", site.agent_token(), processors=4)  # no executor: the scheduler places nothing there
    asked = b'<Job><Id>m</Id><Requested><Processors op="GE">4</Processors></Requested></Job>'
    answer = site.request("POST", "/v1/match", asked, headers={"Content-Type": "application/xml"}).json()
    assert answer["processors_from"] == "scheduler"
    assert [(m["host"], m["free_cpus"], m["processors"], m["load_free_cpus"]) for m in answer["matches"]] == [
        ("n0", 4, {"allocated": 0, "idle": 4, "other": 0, "total": 4}, 0),
        ("n1", 4, {"allocated": 0, "idle": 4, "other": 0, "total": 4}, 0)]
    [no_executor] = answer["rejected"]
    assert no_executor["hosts"] == "n2" and no_executor["reasons"] == ["Processors: asked GE 4 available, host has 0"]
    made = post(site, sss("four", 4)).json()
    wait_for(lambda: job(site, made["id"])["state"] == "Running", message="the job the dry run found room for")
    held = job(site, made["id"])["hosts"]
    split = site.get("/v1/processors").json()
    assert split["schedules"] is True
    assert split["total"] == {"allocated": 4, "idle": 4, "other": 4, "total": 12}
    assert split["hosts"][held] == {"allocated": 4, "idle": 0, "other": 0, "total": 4}
    assert split["hosts"]["n2"] == {"allocated": 0, "idle": 0, "other": 4, "total": 4}
    again = site.request("POST", "/v1/match", asked, headers={"Content-Type": "application/xml"}).json()
    assert [m["host"] for m in again["matches"]] == [h for h in ("n0", "n1") if h != held]
    assert by_hosts(again)[held] == ["Processors: asked GE 4 available, host has 0"]
    assert site.admin("n0" if held == "n1" else "n1", "pause").status == 200
    paused = site.get("/v1/processors").json()
    assert paused["total"] == {"allocated": 4, "idle": 0, "other": 8, "total": 12}
    # `infosvc status` prints the split beside the load's free processors
    done = cli(site, "status", "-N")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[1:4]}
    assert rows[held][2:4] == ["0/4", "4/0/0/4"] and rows["n2"][2:4] == ["4/4", "0/0/4/4"]
    data = json.loads(cli(site, "status", "--json").stdout)
    assert {h["host"]: (h["cpus_allocated"], h["cpus_idle"], h["cpus_other"]) for h in data["hosts"]}[held] == (4, 0, 0)


def by_hosts(answer: dict[str, Any]) -> dict[str, list[str]]:
    from infosvc.model.nodeset import expand_names

    return {name: group["reasons"] for group in answer["rejected"] for name in expand_names(group["hosts"])}


def test_processors_needs_a_read_token_where_reads_do(serve_app: ServerFactory) -> None:
    site = serve_app({"service": {"read_token_required": True}})
    assert site.get("/v1/processors").is_error(401)
    answer = site.get("/v1/processors", token=site.tokens["admin"]).json()
    assert answer == {"schedules": False, "total": {"allocated": 0, "idle": 0, "other": 0, "total": 0}, "hosts": {}}


# --- placed, not yet begun -------------------------------------------------------------------------

def test_a_placed_task_is_shown_placed_until_its_executor_says_it_began(serve_app: ServerFactory) -> None:
    site = serve_app(agents=1, executors={"exec0": "n0"})
    site.report("n0", site.agent_token(), processors=4)
    two = (b"<Job><Id>two</Id><Name>two</Name><TaskGroup><TaskCount>2</TaskCount>"
           b"<Task><Executable>/bin/true</Executable></Task><Task><Executable>/bin/true</Executable></Task>"
           b"</TaskGroup></Job>")
    made = post(site, two).json()
    wait_for(lambda: job(site, made["id"])["state"] == "Running")
    placed = job(site, made["id"])
    assert placed["phase"] == "placed" and placed["sss_state"] == "Running" and placed["glue_status"] == "RUNNING"
    assert [t["phase"] for t in placed["tasks"]] == ["placed", "placed"]
    why = cli(site, "why", made["id"]).stdout.splitlines()[0]
    assert why.startswith(f"job {made['id']} (two) is Running: placed on n0 at {placed['started']}, its executor has "
                          "not started it (")
    listed = cli(site, "jobs").stdout.splitlines()[1].split()
    assert listed[3] == "Placed"
    events = f"/v1/jobs/{made['id']}/tasks/0/events"
    began = site.request("POST", events, b'{"event": "started"}', token=site.tokens["exec0"]).json()
    assert began["phase"] == "started"
    assert [t["phase"] for t in job(site, made["id"])["tasks"]] == ["started", "placed"]
    assert cli(site, "jobs").stdout.splitlines()[1].split()[3] == "Running"
    assert cli(site, "why", made["id"]).stdout.startswith(f"job {made['id']} (two) is Running on n0 since ")
    for task in (0, 1):
        site.request("POST", f"/v1/jobs/{made['id']}/tasks/{task}/events", b'{"event": "ended", "exit_code": 0}',
                     token=site.tokens["exec0"])
    assert job(site, made["id"])["phase"] is None  # ended: no phase


# --- exclusive use -------------------------------------------------------------------------------

CCS = (b'<Job xmlns="http://www.microsoft.com/ComputeCluster/" Name="c" MinimumNumberOfProcessors="1" '
       b'MaximumNumberOfProcessors="1"><Tasks><Task CommandLine="echo hi"/></Tasks></Job>')
GRID = json.dumps({"version": 2, "tasks": [{"id": "t", "definition": {"version": 2, "executable": "/bin/true"}}]})


def test_exclusive_default_false_shares_hosts_and_ccs_keeps_its_own(serve_app: ServerFactory) -> None:
    site = serve_app({"scheduler": {"exclusive_default": False}}, agents=2, executors={"exec0": "n0", "exec1": "n1"})
    for number in range(2):
        site.report(f"n{number}", site.agent_token(), processors=4)
    shared = [post(site, sss(f"s{n}")).json() for n in range(5)]
    grid = post(site, GRID.encode(), "application/json").json()
    wait_for(lambda: all(job(site, j["id"])["state"] == "Running" for j in [*shared, grid]),
             message="six 1-processor jobs on two hosts of 4")
    one = job(site, shared[0]["id"])
    assert (one["exclusive"], one["processors"]["held"], one["processors"]["beyond_asked"]) == (False, 1, None)
    assert job(site, grid["id"])["exclusive"] is False
    # a CCS job says exclusive unless it says otherwise: CCS's own default, whatever the site's
    ccs = post(site, CCS).json()
    assert ccs["exclusive"] is True
    said = post(site, sss("own", outside='<Extension name="IsExclusive">true</Extension>')).json()
    assert said["exclusive"] is True
    wait_for(lambda: job(site, ccs["id"])["reason"] and job(site, said["id"])["reason"])
    # no host is free of the shared jobs: the exclusive ones wait for a whole host
    assert "0 free on idle hosts" in job(site, ccs["id"])["reason"]


def test_exclusive_by_default_says_why_a_job_holds_more(serve_app: ServerFactory) -> None:
    site = serve_app(agents=1, executors={"exec0": "n0"})
    site.report("n0", site.agent_token(), processors=4)
    made = post(site, sss("one")).json()
    assert made["exclusive"] is True
    wait_for(lambda: job(site, made["id"])["state"] == "Running")
    held = job(site, made["id"])["processors"]
    assert held["held"] == 4 and held["beyond_asked"] == (
        "holds 4 processors for the 1 it asked: it has its hosts to itself (exclusive use: the site's default for "
        "jobs that do not say)")
    assert cli(site, "jobs").stdout.splitlines()[1].split()[7] == "4(asked:1,excl)"
    site.request("DELETE", f"/v1/jobs/{made['id']}", token=site.tokens["submit"])
    ccs = post(site, CCS).json()
    wait_for(lambda: job(site, ccs["id"])["state"] == "Running")
    assert "its own IsExclusive" in job(site, ccs["id"])["processors"]["beyond_asked"]

