"""Whose job it is (docs/security.md): the owner comes from the submit token, not the document.
A token bound to a USER files as that user only, and a document that names another user in any
of the formats' owner fields is refused with a 403 that says so; a token bound to no user (a
portal's) and an admin token may name the owner, and the audit log says which token did. On a
real server with real tokens files."""

from __future__ import annotations

import json
import pytest

from support.server import InProcessServer, Reply, ServerFactory

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
