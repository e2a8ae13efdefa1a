"""A CE's GLUE 1.3 VOViews are one per VO as a directory tells VOs apart (infosvc/codec/glue13_ldif.py):
GlueVOViewLocalID compares ignoring case, so rules `VO:atlas` and `VOMS:/ATLAS/Role=production`
(which the site config accepts: they are different rules) name one VO, and two views of it
(`atlas`, `ATLAS`) were one entry twice to slapd, the second refused ("Already exists (68)")."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from infosvc.codec import ldif
from infosvc.codec.glue13_ldif import vo_view_entries
from infosvc.model.glue import ComputingElement, VOFigures
from support.gridsite import CE_ALL, config_with_rules, queue_site, resource_ldif
from support.slapd import running

RULES = ["VO:atlas", "VOMS:/ATLAS/Role=production", "VOMS:/Atlas/Role=lcgadmin", "VO:cms", "VOMS:/dteam/Role=x"]


def _ce() -> ComputingElement:
    rollup = queue_site(config_with_rules({CE_ALL: RULES}))
    return next(ce for ce in rollup.computing_elements() if ce.unique_id == CE_ALL)


def _views(text: str) -> dict[str, dict[str, str]]:
    return {dn.split(",")[0]: dict(attrs) for dn, attrs in ldif.parse(text).items()}


def test_one_view_per_vo_ignoring_case_under_the_first_rule_s_spelling() -> None:
    views = _views(vo_view_entries(_ce()))
    assert list(views) == ["GlueVOViewLocalID=atlas", "GlueVOViewLocalID=cms", "GlueVOViewLocalID=dteam"]
    assert views["GlueVOViewLocalID=atlas"]["GlueCEAccessControlBaseRule"] == "VO:atlas"


def test_a_view_counts_the_jobs_of_its_vo_whatever_the_case_of_their_project() -> None:
    ce = dataclasses.replace(_ce(), by_vo=(VOFigures("ATLAS", 1, 2), VOFigures("atlas", 3, 4), VOFigures("cms", 5, 0)))
    views = _views(vo_view_entries(ce))
    atlas, cms = views["GlueVOViewLocalID=atlas"], views["GlueVOViewLocalID=cms"]
    assert (atlas["GlueCEStateRunningJobs"], atlas["GlueCEStateWaitingJobs"]) == ("4", "6")
    assert (cms["GlueCEStateRunningJobs"], cms["GlueCEStateWaitingJobs"]) == ("5", "0")
    assert views["GlueVOViewLocalID=dteam"]["GlueCEStateRunningJobs"] == "0"


def test_the_site_with_such_rules_loads_into_slapd(tmp_path: Path) -> None:
    text = resource_ldif(queue_site(config_with_rules({CE_ALL: RULES})))
    with running(tmp_path / "slapd") as slapd:
        slapd.add(text)  # stops at the first refusal
        held = slapd.search("mds-vo-name=resource,o=grid", "(objectClass=GlueVOView)", "GlueVOViewLocalID")
    assert sorted(dict(a)["GlueVOViewLocalID"] for a in held.values()) == ["atlas", "cms", "dteam"]
