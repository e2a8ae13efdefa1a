"""POST /v1/match against a real server: the hosts that fit a job, best first, and why the rest do not."""

from __future__ import annotations

import pytest

from conftest import Server, ServerFactory

JOB = b"""<Job><Id>m1</Id><Requested>
  <Processors op="GE">4</Processors>
  <Memory op="GE" units="GB">4</Memory>
</Requested></Job>"""


def post_match(server: Server, body: bytes, content_type: str = "application/xml", token: str | None = None,
               ) -> tuple[int, dict[str, object]]:
    reply = server.request("POST", "/v1/match", body, token=token, headers={"Content-Type": content_type})
    return reply.status, reply.json()


@pytest.fixture
def site(serve: ServerFactory) -> Server:
    server = serve()
    server.report("big.example", server.agent_token(), processors=8, memory_mb=32768, free_memory_mb=16384)
    server.report("mid.example", server.agent_token(), processors=8, memory_mb=16384, free_memory_mb=8192)
    server.report("small.example", server.agent_token(), processors=2, memory_mb=4096, free_memory_mb=2048)
    server.report("paused.example", server.agent_token(), processors=8, memory_mb=65536)
    assert server.admin("paused.example", "pause").status == 200
    return server


def test_matches_best_first_and_rejections_with_reasons(site: Server) -> None:
    status, body = post_match(site, JOB)
    assert status == 200, body
    matches = body["matches"]
    assert isinstance(matches, list)
    assert [m["host"] for m in matches] == ["big.example", "mid.example"]
    first = matches[0]
    assert first["computing_element"] == "default" and first["subcluster"] and first["score"] == 0
    glue = site.get("/v1/glue/hosts?format=json").json()
    assert glue  # the subcluster named is one the GLUE tree has
    assert site.get(f"/v1/glue/subclusters/{first['subcluster']}").status == 200
    rejected = {r["host"]: r["reasons"] for r in body["rejected"]}  # type: ignore[attr-defined]
    assert rejected == {
        "small.example": ["Processors: asked GE 4 available, host has 2",
                          "Memory: asked GE 4 GB (4096 MB) available, host has 2048 MB"],
        "paused.example": ["host is Paused"],
    }
    assert body["job"] == "m1" and body["warnings"] == []


def test_text_xml_and_warnings(site: Server) -> None:
    doc = (b'<Job><Id>m2</Id><Gpu awarenessPolicy="Warn">1</Gpu><Requested><User>amy</User>'
           b'<Feature preference="-1">gpu</Feature></Requested></Job>')
    status, body = post_match(site, doc, "text/xml; charset=utf-8")
    assert status == 200, body
    assert len(body["matches"]) == 3  # type: ignore[arg-type]
    warnings = body["warnings"]
    assert isinstance(warnings, list) and len(warnings) == 2
    assert "Gpu" in warnings[0]
    assert warnings[1] == "Requested User is not a property of a host: not used to match hosts"


@pytest.mark.parametrize("body", [
    b"<Job><Requested/></Job>",  # no Id
    b"<Job><Id>x</Id>",  # not well-formed
    b'<Job><Id>x</Id><Requested><Node aggregation="Pattern">(a+)+$</Node></Requested></Job>',
    b'<Job><Id>x</Id><Requested><Architecture op="GT">x</Architecture></Requested></Job>',
])
def test_bad_jobs_are_400(site: Server, body: bytes) -> None:
    reply = site.request("POST", "/v1/match", body, headers={"Content-Type": "application/xml"})
    assert reply.is_error(400), reply.body


def test_pathological_pattern_detail(site: Server) -> None:
    status, body = post_match(site, b'<Job><Id>x</Id><Requested><Feature op="Match">(a*)*b</Feature>'
                                    b'</Requested></Job>')
    assert status == 400
    assert "nests a repeat" in str(body["detail"])


def test_read_token_when_configured(serve: ServerFactory) -> None:
    server = serve({"service": {"read_token_required": True}})
    reply = server.request("POST", "/v1/match", JOB, headers={"Content-Type": "application/xml"})
    assert reply.is_error(401)
    status, body = post_match(server, JOB, token=server.tokens["submit"])
    assert status == 200 and body["matches"] == [] and body["rejected"] == []


def test_grid_json_job_over_http(site: Server) -> None:
    """A grid job (JSON v2): count 4 asks for 4 processors; its lrms names a system the default CE
    (LRMS 'infosvc') does not run, so every host is refused for that, in words."""
    job = (b'{"version": 2, "tasks": [{"id": "t1", "definition": {"version": 2, "executable": "/bin/hostname",'
           b' "count": 4}}]}')
    status, body = post_match(site, job, "application/json")
    assert status == 200, body
    assert [m["host"] for m in body["matches"]] == ["big.example", "mid.example"]  # type: ignore[union-attr]
    refused = (b'{"version": 2, "requirements": {"lrms": "PBS"}, "tasks": [{"id": "t1", "definition":'
               b' {"version": 2, "executable": "/bin/hostname"}}]}')
    status, body = post_match(site, refused, "application/json")
    assert status == 200, body
    assert body["matches"] == []
    reasons = {r["host"]: r["reasons"] for r in body["rejected"]}  # type: ignore[union-attr]
    assert any("PBS" in reason for reason in reasons["big.example"]), reasons


def test_grid_json_unknown_attribute_is_a_400_naming_it(site: Server) -> None:
    job = (b'{"version": 2, "tasks": [{"id": "t1", "definition": {"version": 2, "executable": "x",'
           b' "ouput_files": {}}}]}')
    reply = site.request("POST", "/v1/match", job, headers={"Content-Type": "application/json"})
    assert reply.is_error(400) and "ouput_files" in reply.body.decode(), reply.body


def test_ccs_job_xml_over_http(site: Server) -> None:
    """A CCS job: MinimumNumberOfProcessors 4 is asked of each host."""
    job = (b'<Job xmlns="https://www.microsoft.com/ComputeCluster/" Name="fold" MinimumNumberOfProcessors="4" '
           b'MaximumNumberOfProcessors="8"><Tasks><Task CommandLine="fold.exe"/></Tasks></Job>')
    status, body = post_match(site, job)
    assert status == 200, body
    assert [m["host"] for m in body["matches"]] == ["big.example", "mid.example"]  # type: ignore[union-attr]
    rejected = {r["host"] for r in body["rejected"]}  # type: ignore[union-attr]
    assert rejected == {"small.example", "paused.example"}
