"""Whose job it is (docs/security.md): the owner comes from the submit token, not the document.
A token bound to a USER files as that user only, and a document that names another user in any
of the formats' owner fields is refused with a 403 that says so; a token bound to no user (a
portal's) and an admin token may name the owner, and the audit log says which token did. On a
real server with real tokens files."""

from __future__ import annotations

import json
import pytest

from support.server import InProcessServer, Reply, ServerFactory, wait_for

CCS = "http://www.microsoft.com/ComputeCluster/"


def sss(name: str, *, user: str = "", group_user: str = "", task_user: str = "", requested: str = "") -> bytes:
    user_element = f"<User>{user}</User>" if user else ""
    group = (f"<TaskGroup><TaskCount>1</TaskCount>{f'<User>{group_user}</User>' if group_user else ''}<Task>"
             f"{f'<User>{task_user}</User>' if task_user else ''}<Executable>/bin/true</Executable></Task></TaskGroup>")
    return (f"<Job><Id>{name}</Id><Name>{name}</Name>{user_element}<Executable>/bin/true</Executable>"
            f"<Requested><Processors>1</Processors>{requested}</Requested>{group}</Job>").encode()


def ccs(*, user: str = "", submitted_by: str = "") -> bytes:
    attributes = (f' User="{user}"' if user else "") + (f' SubmittedBy="{submitted_by}"' if submitted_by else "")
    return (f'<Job xmlns="{CCS}" Name="c"{attributes}><Tasks><Task CommandLine="echo hi"/></Tasks></Job>').encode()


def post(site: InProcessServer, body: bytes, token: str, content_type: str = "application/xml") -> Reply:
    return site.request("POST", "/v1/jobs", body, token=site.tokens[token], headers={"Content-Type": content_type})


def owners(site: InProcessServer) -> list[str]:
    return [job["owner"] for job in site.get("/v1/jobs").json()["jobs"]]


@pytest.fixture
def site(serve_app: ServerFactory) -> InProcessServer:
    return serve_app(agents=0, users={"alice": "alice", "bob": "bob"})  # type: ignore[no-any-return]


# Every owner field of the three formats, naming alice, in a document bob's token sends.
FORGED = {
    "SSS Job User": sss("f1", user="alice"),
    "SSS TaskGroup User": sss("f2", group_user="alice"),
    "SSS Task User": sss("f3", task_user="alice"),
    "SSS Requested User": sss("f4", requested="<User>alice</User>"),
    "SSS JobDefaults User": (b"<JobGroup><Id>g</Id><JobDefaults><User>alice</User></JobDefaults>" + sss("f5")
                             + b"</JobGroup>"),
    "SSS TaskDefaults User": (b"<Job><Id>f9</Id><Executable>/bin/true</Executable><TaskGroup><TaskCount>1</TaskCount>"
                              b"<TaskDefaults><User>alice</User></TaskDefaults><Task><Name>t</Name></Task></TaskGroup>"
                              b"</Job>"),
    "SSS Requested User pattern": sss("f10", requested='<User op="Match">.*</User>'),
    "SSS JobGroup, second job": (b"<JobGroup><Id>g</Id>" + sss("f6", user="bob") + sss("f7", user="alice")
                                 + b"</JobGroup>"),
    "SSS User in another case": sss("f8", user="Bob"),
    "CCS User": ccs(user="alice"),
    "CCS SubmittedBy": ccs(user="bob", submitted_by="alice"),
    "CCS domain user": ccs(user="LAB\\alice"),
}


@pytest.mark.parametrize("what", sorted(FORGED))
def test_a_token_bound_to_a_user_cannot_file_as_another(site: InProcessServer, what: str) -> None:
    reply = post(site, FORGED[what], "bob")
    assert reply.is_error(403), (reply.status, reply.body)
    error = reply.json()
    assert "bob" in error["error"] and ("alice" in error["error"] or "Bob" in error["error"]
                                        or ".*" in error["error"]), error
    assert "bound to no user" in error["detail"] or "admin" in error["detail"], error
    assert site.get("/v1/jobs").json()["total"] == 0  # nothing was filed
    assert site.sql("SELECT count(*) FROM jobs") == [(0,)]


def test_a_grid_job_has_no_owner_field_and_files_as_the_token_s_user(site: InProcessServer) -> None:
    grid = {"version": 2, "tasks": [{"id": "t", "definition": {"version": 2, "executable": "/bin/true"}}]}
    forged = post(site, json.dumps({**grid, "owner": "alice"}).encode(), "bob", "application/json")
    assert forged.status == 400 and "owner" in forged.body.decode()  # the schema has no such field
    made = post(site, json.dumps(grid).encode(), "bob", "application/json")
    assert made.status == 201 and made.json()["owner"] == "bob"


def test_a_bound_token_files_as_its_user_whether_the_document_names_it_or_not(site: InProcessServer) -> None:
    for body in (sss("a"), sss("b", user="bob", group_user="bob", task_user="bob"), ccs(user="bob", submitted_by="bob"),
                 ccs()):
        reply = post(site, body, "bob")
        assert reply.status == 201 and reply.json()["owner"] == "bob", reply.body
    assert post(site, sss("c"), "alice").json()["owner"] == "alice"
    assert owners(site) == ["bob"] * 4 + ["alice"]
    assert "named by its document" not in site.log.read_text()  # no one filed on another's behalf


def _audit(site: InProcessServer) -> list[str]:
    return [line for line in site.log.read_text().splitlines() if "infosvc.audit" in line and "owner" in line]


def test_a_portal_token_and_an_admin_name_the_owner_and_the_audit_log_says_which_token(
        site: InProcessServer) -> None:
    portal = post(site, sss("p", user="alice"), "submit")  # the `submit` token is bound to no user
    assert portal.status == 201 and portal.json()["owner"] == "alice"
    admin = post(site, ccs(user="carol"), "admin")
    assert admin.status == 201 and admin.json()["owner"] == "carol"
    unnamed = post(site, sss("q"), "submit")
    assert unnamed.json()["owner"].startswith("token-")  # the token's own default owner
    assert owners(site) == ["alice", "carol", unnamed.json()["owner"]]
    lines = _audit(site)
    assert len(lines) == 2, lines  # the unnamed one filed as the token's own owner: nothing to say
    assert "owner 'alice'" in lines[0] and "submit token" in lines[0] and "bound to no user" in lines[0]
    assert "job 1" in lines[0]
    assert "owner 'carol'" in lines[1] and "admin token" in lines[1] and "job 2" in lines[1]
    text = site.log.read_text()
    assert all(site.tokens[name] not in text for name in ("submit", "admin", "alice", "bob"))


def test_the_owner_is_kept_across_a_restart(site: InProcessServer) -> None:
    assert post(site, sss("p", user="alice"), "submit").status == 201
    assert post(site, sss("b"), "bob").status == 201
    site.stop()
    site.start()
    assert owners(site) == ["alice", "bob"]
    assert [j["owner"] for j in site.get("/v1/jobs?user=bob").json()["jobs"]] == ["bob"]


# --- dependencies between users' jobs --------------------------------------------------------

def named(name: str, depends: str = "", designator: str = "JobName") -> bytes:
    dependency = f'<Dependency designator="{designator}">{depends}</Dependency>' if depends else ""
    return (f"<Job><Id>{name}</Id><Name>{name}</Name>{dependency}<Executable>/bin/true</Executable>"
            f"<Requested><Processors>1</Processors></Requested></Job>").encode()


def job_of(site: InProcessServer, job_id: str) -> dict[str, object]:
    reply = site.get(f"/v1/jobs/{job_id}")
    assert reply.status == 200, reply.body
    return reply.json()  # type: ignore[no-any-return]


def end(site: InProcessServer, job_id: str, code: int) -> None:
    host = wait_for(lambda: job_of(site, job_id)["hosts"], message=f"job {job_id} placed")
    reply = site.request("POST", f"/v1/jobs/{job_id}/tasks/0/events",
                         json.dumps({"event": "ended", "exit_code": code}).encode(), token=site.tokens[f"exec-{host}"])
    assert reply.status == 200, reply.body


@pytest.fixture
def busy(serve_app: ServerFactory) -> InProcessServer:
    server = serve_app(agents=2, users={"alice": "alice", "bob": "bob"}, executors={"exec-n0": "n0", "exec-n1": "n1"})
    for host in ("n0", "n1"):
        server.report(host, server.agent_token(), processors=4)
    return server  # type: ignore[no-any-return]


def test_a_name_resolves_within_the_owner_s_own_jobs(busy: InProcessServer) -> None:
    """bob's job named like alice's neither holds hers nor, failing, cancels it."""
    assert post(busy, named("prep"), "alice").json()["id"] == "1"
    assert post(busy, named("prep"), "bob").json()["id"] == "2"  # the newest "prep" is bob's
    main = post(busy, named("main", "prep"), "alice").json()
    assert main["id"] == "3"
    wait_for(lambda: job_of(busy, "3")["reason"], message="job 3's reason")
    assert job_of(busy, "3")["reason"] == "held: dependency prep not completed (job 1)"
    end(busy, "2", 1)  # bob's prep fails
    wait_for(lambda: job_of(busy, "2")["state"] == "Failed", message="bob's job failed")
    tick = post(busy, named("tick"), "bob").json()  # it starts on bob's freed host: a pass ran after the failure
    wait_for(lambda: job_of(busy, tick["id"])["state"] == "Running", message="a pass after bob's failure")
    assert job_of(busy, "3")["state"] == "Queued"  # alice's job is still held on her own prep
    assert job_of(busy, "3")["reason"] == "held: dependency prep not completed (job 1)"
    end(busy, "1", 0)
    wait_for(lambda: job_of(busy, "3")["state"] == "Running", message="alice's main released by her prep")
    # the portal files for alice: her names, not the portal's nor bob's
    portal = post(busy, named("after", "main").replace(b"<Name>", b"<User>alice</User><Name>"), "submit").json()
    wait_for(lambda: job_of(busy, portal["id"])["reason"], message="the portal's job's reason")
    assert job_of(busy, portal["id"])["reason"] == "held: dependency main not completed (job 3)"


def test_another_user_s_name_is_no_job_of_yours_but_an_id_is(busy: InProcessServer) -> None:
    assert post(busy, named("only-alice"), "alice").status == 201  # job 1
    for designator in ("JobName", "JobId"):
        refused = post(busy, named("b", "only-alice", designator), "bob")
        assert refused.is_error(400) and "only-alice" in refused.json()["error"], refused.body
    # a JobName is a name, never an id: "1" names no job of bob's
    assert post(busy, named("b", "1", "JobName"), "bob").is_error(400)
    # an id names any job bob may read, alice's included
    by_id = post(busy, named("b", "1", "JobId"), "bob").json()
    wait_for(lambda: job_of(busy, by_id["id"])["reason"], message="bob's job's reason")
    assert job_of(busy, by_id["id"])["reason"] == "held: dependency 1 not completed (job 1)"
    assert busy.sql("SELECT count(*) FROM jobs") == [(2,)]


def test_names_stay_the_owner_s_across_a_restart(busy: InProcessServer) -> None:
    assert post(busy, named("prep"), "alice").status == 201
    assert post(busy, named("prep"), "bob").status == 201
    busy.stop()
    busy.start()
    made = post(busy, named("main", "prep"), "alice").json()
    wait_for(lambda: job_of(busy, made["id"])["reason"], message="the reason")
    assert job_of(busy, made["id"])["reason"] == "held: dependency prep not completed (job 1)"
