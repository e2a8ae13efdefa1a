"""History: a host's stored reports over a period (GET /v1/nodes/{id}/history) and the site as it
was published at a past time (GET /v1/glue?at=), removed hosts and admin decisions included; on
an in-process server with a real SQLite file, the GLUE answers validated by the schemas."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from jsonschema import Draft202012Validator
from lxml import etree

from support.server import InProcessServer, ServerFactory

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def instant() -> float:
    """A time strictly between what was stored before and what is stored after."""
    time.sleep(0.02)
    now = time.time()
    time.sleep(0.02)
    return now


def iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch % 1 * 1e6):06d}Z"


def glue_at(server: InProcessServer, at: float, fmt: str = "json") -> Any:
    reply = server.get(f"/v1/glue?at={quote(iso(at))}&format={fmt}")
    assert reply.status == 200, reply.body
    if fmt == "xml":
        return reply.body
    tree = reply.json()
    Draft202012Validator(json.loads((SCHEMAS / "glue.schema.json").read_text())).validate(tree)
    return tree


def hosts_of(tree: Any) -> dict[str, Any]:
    return {h["unique_id"]: h for h in tree["hosts"]}


@pytest.fixture
def site(serve_app: ServerFactory) -> InProcessServer:
    return serve_app({"lifecycle": {"heartbeat_seconds": 60, "missed_heartbeats": 3}}, agents=3)  # type: ignore[return-value]


def test_a_hosts_history_over_a_period(site: InProcessServer) -> None:
    token = site.agent_token()
    site.report("cn01", token, processors=4)
    between = instant()
    site.report("cn01", token, processors=8)
    reply = site.get("/v1/nodes/cn01/history")
    assert reply.status == 200
    body = reply.json()
    assert body["host"] == "cn01"
    cpus = [next(c["value"] for c in r["node"]["configured"] if c["kind"] == "Processors") for r in body["reports"]]
    assert cpus == [4, 8]  # oldest first
    assert all(r["reported_at"].endswith("Z") for r in body["reports"])
    assert len(site.get(f"/v1/nodes/cn01/history?since={between}").json()["reports"]) == 1
    assert len(site.get(f"/v1/nodes/cn01/history?until={quote(iso(between))}").json()["reports"]) == 1
    newest = site.get("/v1/nodes/cn01/history?limit=1").json()["reports"]
    assert [next(c["value"] for c in r["node"]["configured"] if c["kind"] == "Processors") for r in newest] == [8]
    assert site.get(f"/v1/nodes/cn01/history?since={time.time() + 60}").json()["reports"] == []
    assert site.get("/v1/nodes/cn01/history?since=yesterday").is_error(400)
    assert site.get("/v1/nodes/cn01/history?since=nan").is_error(400)
    assert site.get("/v1/nodes/cn01/history?limit=0").is_error(400)
    assert site.get("/v1/nodes/cn01/history?limit=1001").is_error(400)
    assert site.get("/v1/nodes/cn01/history?color=red").is_error(400)
    assert site.get("/v1/nodes/nobody/history").is_error(404)


def cpus_of(page: Any) -> list[int]:
    return [next(c["value"] for c in r["node"]["configured"] if c["kind"] == "Processors") for r in page["reports"]]


def test_a_history_is_read_in_pages_newest_first(site: InProcessServer) -> None:
    """`limit` reports a page, oldest first within it; `next` is the page before it, until none is
    left: every report once, none twice. The period and the limit hold across pages."""
    token = site.agent_token()
    site.report("cn01", token, processors=1)
    between = instant()
    for cpus in range(2, 9):
        site.report("cn01", token, processors=cpus)
    whole = site.get("/v1/nodes/cn01/history").json()
    assert cpus_of(whole) == list(range(1, 9)) and whole["next"] is None
    pages = []
    page = site.get("/v1/nodes/cn01/history?limit=3").json()
    while True:
        pages.append(cpus_of(page))
        if page["next"] is None:
            break
        assert page["next"].startswith("/v1/nodes/cn01/history?") and "limit=3" in page["next"]
        page = site.get(page["next"]).json()
    assert pages == [[6, 7, 8], [3, 4, 5], [1, 2]]
    # the period is kept from page to page
    first = site.get(f"/v1/nodes/cn01/history?limit=4&since={between}").json()
    assert cpus_of(first) == [5, 6, 7, 8]
    assert cpus_of(site.get(first["next"]).json()) == [2, 3, 4]
    assert site.get(first["next"]).json()["next"] is None
    # a limit exactly the size of what is left says there is no next page
    assert site.get("/v1/nodes/cn01/history?limit=8").json()["next"] is None
    for cursor in ("abc", "0", "-1", "1.5", str(1 << 63), "", "9" * 5000, "%C2%B2", "%D9%A3"):
        assert site.get(f"/v1/nodes/cn01/history?before={cursor}").is_error(400), cursor
    for limit in ("9" * 5000, "%C2%B2", "%D9%A3"):  # past int()'s 4,300 digits, a superscript 2, an Arabic-Indic 3
        assert site.get(f"/v1/nodes/cn01/history?limit={limit}").is_error(400), limit
    assert site.get("/v1/nodes/nobody/history?before=5").is_error(404)


def test_the_site_as_published_at_a_past_time(site: InProcessServer) -> None:
    before_all = instant()
    first, second = site.agent_token(), site.agent_token()
    site.report("cn01", first, processors=4)
    one_host = instant()
    site.report("cn02", second, processors=2)
    site.report("cn01", first, processors=8)
    two_hosts = instant()
    admin = site.tokens["admin"]
    assert site.request("POST", "/v1/admin/hosts/cn01/pause?reason=fan", b"", token=admin).status == 200
    paused = instant()
    assert site.request("POST", "/v1/admin/hosts/cn02/remove", b"", token=admin).status == 200
    removed = instant()

    assert glue_at(site, before_all)["hosts"] == []
    then = hosts_of(glue_at(site, one_host))
    assert list(then) == ["cn01"] and then["cn01"]["total_cpus"] == 4 and then["cn01"]["state"] == "Ready"
    then = hosts_of(glue_at(site, two_hosts))
    assert sorted(then) == ["cn01", "cn02"] and then["cn01"]["total_cpus"] == 8
    assert "paused" not in then["cn01"]
    then = hosts_of(glue_at(site, paused))
    assert (then["cn01"]["state"], then["cn01"]["paused"], then["cn01"]["reason"]) == ("Paused", True, "fan")
    assert "cn02" in then  # removed later: still there then
    now = glue_at(site, removed)
    assert list(hosts_of(now)) == ["cn01"]
    assert sum(sub["host_count"] for sub in now["subclusters"]) == 1
    # an hour on, nothing has reported: every host Unreachable (and still paused)
    later = hosts_of(glue_at(site, time.time() + 3600))
    assert (later["cn01"]["state"], later["cn01"]["paused"]) == ("Unreachable", True)
    # XML too, valid against the schema
    xml = glue_at(site, two_hosts, "xml")
    schema = etree.XMLSchema(etree.parse(str(SCHEMAS / "glue-ce-1.1.xsd")))
    document = etree.fromstring(xml)
    assert schema.validate(document), schema.error_log
    assert len(document.findall(".//{*}Host")) == 2
    # the removed host's history is kept, and answers
    assert len(site.get("/v1/nodes/cn02/history").json()["reports"]) == 1
    assert site.get("/v1/glue?at=soon").is_error(400)


def test_approval_then_and_now(serve_app: ServerFactory) -> None:
    site = serve_app({"lifecycle": {"require_approval": True}}, agents=1)
    site.report("cn09", site.agent_token(), processors=4)
    pending = instant()
    assert site.request("POST", "/v1/admin/hosts/cn09/approve", b"", token=site.tokens["admin"]).status == 200
    approved = instant()
    assert hosts_of(glue_at(site, pending))["cn09"]["state"] == "Pending"  # type: ignore[arg-type]
    assert hosts_of(glue_at(site, approved))["cn09"]["state"] == "Ready"  # type: ignore[arg-type]


def test_a_past_view_past_its_bound_is_refused_not_cut_short(serve_app: ServerFactory,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A past view holds at most max(2 x the hosts now, PAST_VIEW_MIN_HOSTS) hosts: hosts removed
    since do not push the hosts published then out of it, and an instant with more hosts
    published than that is a 413 naming the bound, not a 200 with some of them."""
    from infosvc.hosts import aggregator

    monkeypatch.setattr(aggregator, "PAST_VIEW_MIN_HOSTS", 1)
    site = serve_app({}, agents=4)
    site.report("zz-real", site.agent_token(), processors=4)  # the last of them by Id
    for name in ("a1", "a2", "a3"):
        site.report(name, site.agent_token(), processors=2)
    all_four = instant()
    admin = site.tokens["admin"]
    for name in ("a1", "a2", "a3"):
        assert site.request("POST", f"/v1/admin/hosts/{name}/remove", b"", token=admin).status == 200
    removed = instant()
    # one host now: a bound of 2; the three removed hosts are not in the view after their removal
    assert list(hosts_of(glue_at(site, removed))) == ["zz-real"]
    assert list(hosts_of(glue_at(site, time.time()))) == ["zz-real"]
    refused = site.get(f"/v1/glue?at={quote(iso(all_four))}")
    assert refused.is_error(413), (refused.status, refused.body)
    assert "4 hosts" in refused.json()["error"] and "2" in refused.json()["error"]


def test_a_site_that_shrank_sets_its_past_views_bound(serve_app: ServerFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """`[store] past_view_max_hosts`: a site that had more than twice the hosts it has now reads its
    past views up to the bound it sets (the default's 413 would keep it from them)."""
    from infosvc.hosts import aggregator

    monkeypatch.setattr(aggregator, "PAST_VIEW_MIN_HOSTS", 1)
    site = serve_app({"store": {"past_view_max_hosts": 4}}, agents=5)
    site.report("zz-real", site.agent_token(), processors=4)
    for name in ("a1", "a2", "a3"):
        site.report(name, site.agent_token(), processors=2)
    all_four = instant()
    site.report("a4", site.agent_token(), processors=2)
    five = instant()
    for name in ("a1", "a2", "a3", "a4"):
        assert site.request("POST", f"/v1/admin/hosts/{name}/remove", b"", token=site.tokens["admin"]).status == 200
    # one host now: the default bound would be 2
    assert sorted(hosts_of(glue_at(site, all_four))) == ["a1", "a2", "a3", "zz-real"]  # 4: at the bound
    refused = site.get(f"/v1/glue?at={quote(iso(five))}")  # past it: refused still, naming it
    assert refused.is_error(413), (refused.status, refused.body)
    assert "5 hosts" in refused.json()["error"] and "past_view_max_hosts" in refused.json()["error"]
