"""The matcher against the licenses and consumables the site config gives hosts: a CCS job's
SoftwareLicense and an SSS job's Requested Resource take the same path (infosvc/matching/checks.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from support.documents import make_node
from infosvc.codec.job_xml import parse_job
from infosvc.codec.submission import parse_submission
from infosvc.matching import compile_requirements, evaluate, match
from infosvc.model.job import Job, resolve
from infosvc.model.node import Consumable, Node
from infosvc.config.site import parse_config
from infosvc.hosts.rollup import Rollup, host_from_node

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ccs" / "licenses.xml"
SITE = parse_config(tomllib.loads("""
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
licenses = { matlab = 1, fluent = 1 }
consumables = { gpu = 2, scratch_gb = 500 }
"""))
HOSTS = ("big1", "big2", "small1", "small2", "other")


def site() -> tuple[Rollup, dict[str, Node]]:
    rollup = Rollup(SITE)
    nodes = {name: make_node(name) for name in HOSTS}
    for node in nodes.values():
        rollup.update(host_from_node(node, "Ready", SITE, "2026-01-01T00:00:00Z"))
    return rollup, nodes


def matched(job: Job) -> tuple[list[str], dict[str, tuple[str, ...]]]:
    rollup, nodes = site()
    result = match(compile_requirements(resolve(job)[0]), rollup, nodes.get)
    return [m.host.unique_id for m in result.matches], dict(result.rejected)


def sss(requested: str) -> Job:
    return parse_job(f"<Job><Id>j</Id><Requested>{requested}</Requested></Job>").job  # type: ignore[return-value]


def test_a_ccs_job_asking_two_licenses_matches_where_a_pool_has_them() -> None:
    job, _ = parse_submission(FIXTURE.read_bytes(), "application/xml")
    assert isinstance(job, Job)
    fits, why = matched(job)
    assert fits == ["big1", "big2"]  # the pool of 4 matlab, 1 fluent; not where 1 or none are
    assert why == {"small1": ("License matlab: asked GE 2 available, host has 1",),
                   "small2": ("License matlab: asked GE 2 available, host has none",
                              "License fluent: asked GE 1 available, host has none"),
                   "other": ("License matlab: asked GE 2 available, host has none",
                             "License fluent: asked GE 1 available, host has none")}


def test_more_than_a_pool_holds_fits_nowhere() -> None:
    fits, why = matched(sss('<Resource name="License" type="matlab">5</Resource>'))
    assert fits == [] and why["big1"] == ("License matlab: asked GE 5 available, host has 4",)


def test_an_sss_job_asks_for_licenses_and_consumables_the_same_way() -> None:
    assert matched(sss('<Resource name="License" type="matlab">1</Resource>'))[0] == ["big1", "big2", "small1"]
    assert matched(sss('<Resource name="License" type="matlab" context="Configured" op="GE">4</Resource>'
                       ))[0] == ["big1", "big2"]
    fits, why = matched(sss('<Resource name="gpu">2</Resource><Resource name="scratch_gb" op="GE">100</Resource>'))
    assert fits == ["small1"] and why["big1"] == ("gpu: asked GE 2 available, host has none",
                                                  "scratch_gb: asked GE 100 available, host has none")
    assert matched(sss('<Resource name="gpu">3</Resource>'))[1]["small1"] == ("gpu: asked GE 3 available, host has 2",)
    # a consumable of the config is untyped: a term naming a type asks for something else
    assert matched(sss('<Resource name="gpu" type="a100">1</Resource>'))[0] == []
    # NE bounds the job only; a license the host lacks refused by NE EQ in context Configured
    assert matched(sss('<Resource name="License" type="matlab" op="NE" context="Configured">4</Resource>'
                       ))[0] == ["small1"]


def test_what_the_agent_reports_still_counts() -> None:
    node = make_node("other")
    node.available.add(Consumable("Resource", 3, name="License", type="matlab"))
    host = host_from_node(node, "Ready", SITE, "2026-01-01T00:00:00Z")
    requirements = compile_requirements(resolve(sss('<Resource name="License" type="matlab">3</Resource>'))[0])
    assert evaluate(requirements, node, host).ok
