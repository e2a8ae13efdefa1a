"""Licenses and consumables of the site config on the real server: published in GLUE JSON, matched
against a CCS job's SoftwareLicense by POST /v1/match, and drawn by running jobs in the queue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.server import Server, ServerFactory, wait_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ccs" / "licenses.xml"

SITE = """
[[clusters]]
id = "big"
nodes = "big[1-2]"

[[clusters]]
id = "small"
nodes = "small[1-2]"

[[resources]]
clusters = ["big"]
licenses = { matlab = 4, fluent = 1 }

[[resources]]
nodes = "small1"
licenses = { matlab = 1 }
consumables = { gpu = 2 }
"""


def start(factory: ServerFactory, **kwargs: Any) -> Server:
    hosts = ("big1", "big2", "small1", "small2", "other")
    server = factory(start=False, executors={f"exec-{host}": host for host in hosts}, **kwargs)
    server.config_file.write_text(SITE)
    server.start()
    for host in hosts:
        assert server.report(host, server.agent_token(), processors=4).status == 200
    return server


@pytest.fixture(scope="module")
def site(module_serve_app: ServerFactory) -> Server:
    return start(module_serve_app, agents=5)


def test_glue_json_publishes_the_pools_and_consumables(site: Server) -> None:
    big1 = site.get("/v1/glue/hosts/big1?format=json").json()
    assert big1["licenses"] == {"matlab": 4, "fluent": 1} and "consumables" not in big1
    small1 = site.get("/v1/glue/hosts/small1?format=json").json()
    assert small1["licenses"] == {"matlab": 1} and small1["consumables"] == {"gpu": 2}
    assert "licenses" not in site.get("/v1/glue/hosts/other?format=json").json()
    assert site.get("/v1/glue/clusters/big?format=json").json()["licenses"] == {"matlab": 4, "fluent": 1}
    assert "licenses" not in site.get("/v1/glue/clusters/small?format=json").json()
    subcluster = site.get(f"/v1/glue/subclusters/{small1['subcluster']}?format=json").json()
    assert subcluster["consumables"] == {"gpu": 2} and subcluster["hosts"] == ["small1"]
    # GLUE 1.1 has no element for them: the XML is as before (and valid: the server renders it)
    assert b"matlab" not in site.get("/v1/glue/hosts/big1?format=xml").body


def test_a_ccs_job_with_software_licenses_matches_where_the_pool_has_them(site: Server) -> None:
    reply = site.request("POST", "/v1/match", FIXTURE.read_bytes(), headers={"Content-Type": "application/xml"})
    assert reply.status == 200, reply.body
    answer = reply.json()
    assert [m["host"] for m in answer["matches"]] == ["big1", "big2"]
    reasons = {group["hosts"]: group["reasons"] for group in answer["rejected"]}
    assert reasons == {"small1": ["License matlab: asked GE 2 available, host has 1",
                                  "License fluent: asked GE 1 available, host has none"],
                       "other,small2": ["License matlab: asked GE 2 available, host has none",
                                        "License fluent: asked GE 1 available, host has none"]}


def test_an_sss_job_asks_for_a_consumable(site: Server) -> None:
    body = b'<Job><Id>g</Id><Requested><Resource name="gpu">2</Resource></Requested></Job>'
    answer = site.request("POST", "/v1/match", body, headers={"Content-Type": "application/xml"}).json()
    assert [m["host"] for m in answer["matches"]] == ["small1"]


def ccs(licenses: str) -> bytes:
    return (f'<Job xmlns="http://www.microsoft.com/ComputeCluster/" Name="m" IsExclusive="false" '
            f'SoftwareLicense="{licenses}"><Tasks><Task CommandLine="matlab.exe"/></Tasks></Job>').encode()


def test_running_jobs_draw_from_the_pool_and_the_next_one_waits(serve_app: ServerFactory) -> None:
    server = start(serve_app, agents=5)

    def submit(body: bytes) -> str:
        reply = server.request("POST", "/v1/jobs", body, token=server.tokens["submit"],
                               headers={"Content-Type": "application/xml"})
        assert reply.status == 201, reply.body
        return str(reply.json()["id"])

    def job(job_id: str) -> Any:
        return server.get(f"/v1/jobs/{job_id}").json()

    first, second = submit(ccs("matlab:3")), submit(ccs("matlab:3"))
    wait_for(lambda: job(first)["state"] == "Running" and job(second)["reason"], message="first runs, second waits")
    assert job(first)["hosts"] in ("big1", "big2")
    assert job(second)["state"] == "Queued"
    assert "waiting for licenses: matlab (3 asked, 1 of 4 free)" in job(second)["reason"]
    # one more fits beside the first: the pool has 1 left
    third = submit(ccs("matlab:1"))
    wait_for(lambda: job(third)["state"] == "Running", message="the last license is drawn")
    assert server.request("DELETE", f"/v1/jobs/{first}", token=server.tokens["submit"]).status == 200
    wait_for(lambda: job(second)["state"] == "Running", message="the second job starts once the first's are back")
