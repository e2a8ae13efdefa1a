"""The LDIF against the real thing: Debian's slapd on a loopback port, configured as a BDII configures
its own (o=grid and o=glue, the vendored GLUE schemas; tests/support/slapd.py), the site's GLUE 1.3
and 2.0 LDIF loaded with ldapadd, the queries grid clients make answered by ldapsearch, and a
second run after hosts change applied as bdii-update applies it: a diff of the old and new entries
(infosvc.codec.ldif.changes) fed to ldapmodify, after which slapd holds exactly the new rendering
and the entries that stayed are the same entries (entryUUID), not a reload. The VO discovery a grid
client makes in GLUE 2.0 (the MappingPolicy whose rule names the VO, then its share) is answered,
and still is after the CEs' access rules change and the change is applied as a diff.

Without slapd and ldap-utils the tests skip locally; under CI (.ci/run installs both) they fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from infosvc.codec import ldif
from infosvc.codec.glue2 import local
from infosvc.queue.cestate import CEFigures, CEQueues
from infosvc.hosts.rollup import host_from_node
from support.documents import make_node
from support.gridsite import CE_ALL as CE, SITE, WHEN, config_with_rules, queue_site, resource_ldif, site_config
from support.slapd import SUFFIXES, Slapd, by_suffix, normal, normal_dn, running

PRODUCTION_CES = "(&(objectClass=GlueCE)(GlueCEStateStatus=Production))"
BIG_MEMORY = "(&(objectClass=GLUE2ExecutionEnvironment)(GLUE2ExecutionEnvironmentMainMemorySize>=8192))"
GLUE2 = "GLUE2GroupID=resource,o=glue"
SITE_URN = f"urn:infosvc:{SITE}"


def vo_policies(vo: str) -> str:
    """What ginfo (`--ce --vo`) and DIRAC ask a BDII for a VO's shares, before asking for the shares."""
    return f"(&(objectClass=GLUE2MappingPolicy)(GLUE2PolicyRule=VO:{vo}))"


@pytest.fixture
def slapd(tmp_path: Path) -> Iterator[Slapd]:
    with running(tmp_path / "slapd") as server:
        yield server


def everything(slapd: Slapd, *extra: str) -> dict[str, ldif.Attributes]:
    found: dict[str, ldif.Attributes] = {}
    for suffix in SUFFIXES:
        found.update(slapd.search(suffix, "(objectClass=*)", "*", *extra))
    return found


def test_the_site_loads_and_answers_the_grid_clients_queries(slapd: Slapd) -> None:
    rollup = queue_site()
    text = resource_ldif(rollup)
    slapd.add(text)
    assert normal(everything(slapd)) == normal(ldif.parse(text))  # what was written is what is held
    ces = slapd.search("mds-vo-name=resource,o=grid", PRODUCTION_CES, "GlueCEUniqueID", "GlueCEStateFreeCPUs",
                       "GlueCEStateWaitingJobs")
    assert [dict(a)["GlueCEUniqueID"] for a in ces.values()] == [CE]  # not ce-beta (Draining) nor ce-none (Closed)
    assert dict(next(iter(ces.values())))["GlueCEStateWaitingJobs"] == "5"
    ees = slapd.search("GLUE2GroupID=resource,o=glue", BIG_MEMORY, "GLUE2ExecutionEnvironmentMainMemorySize",
                       "GLUE2ExecutionEnvironmentTotalInstances")
    memory = sorted(int(dict(a)["GLUE2ExecutionEnvironmentMainMemorySize"]) for a in ees.values())
    every = [s.main_memory.ram_size or 0 for s in rollup.subclusters.values()]
    assert memory == sorted(m for m in every if m >= 8192) and min(every) < 8192  # the 4 GB hosts are left out
    assert sum(int(dict(a)["GLUE2ExecutionEnvironmentTotalInstances"]) for a in ees.values()) == 47


def test_a_second_run_is_applied_as_a_diff_not_a_reload(slapd: Slapd) -> None:
    rollup = queue_site()
    first = resource_ldif(rollup)
    slapd.add(first)
    before = everything(slapd, "entryUUID")
    # hosts change: beta's big hosts go (its subcluster and execution environment with them), a new
    # kind of host comes, the queue moves
    config = site_config()
    for host in [h for h in rollup.hosts if h.startswith("b")]:
        rollup.remove(host)
    for i in range(60, 63):
        rollup.update(host_from_node(make_node(f"a{i:03d}", memory_mb=65536, processors=32, model="Xeon Max"),
                                     "Ready", config, WHEN))
    rollup.read_queue(CEQueues(clock=lambda: 1000.0, figures={
        CE: CEFigures(running_jobs=7, waiting_jobs=0, held_cpus=56, estimated_start=1000.0,
                                              worst_start=2000.0)}))
    second = resource_ldif(rollup)
    old, new = by_suffix(ldif.parse(first)), by_suffix(ldif.parse(second))
    kinds = set()
    for suffix in SUFFIXES:
        changes = ldif.changes(ldif.parse(old[suffix]), ldif.parse(new[suffix]))
        kinds.update(line for line in changes.split("\n") if line.startswith("changetype:"))
        slapd.modify(suffix, changes)
    assert kinds == {"changetype: delete", "changetype: add", "changetype: modify"}
    after = everything(slapd, "entryUUID")
    held = {dn: {k: v for k, v in a.items() if k != "entryuuid"} for dn, a in normal(after).items()}
    assert held == normal(ldif.parse(second))
    kept = normal(before).keys() & normal(after).keys()
    assert kept and all(normal(before)[dn]["entryuuid"] == normal(after)[dn]["entryuuid"] for dn in kept)
    assert all("entryuuid" in a for a in normal(after).values())
    ce = slapd.search("mds-vo-name=resource,o=grid", PRODUCTION_CES, "GlueCEStateRunningJobs")
    assert [dict(a)["GlueCEStateRunningJobs"] for a in ce.values()] == ["7"]
    ees = slapd.search("GLUE2GroupID=resource,o=glue", BIG_MEMORY, "GLUE2ExecutionEnvironmentMainMemorySize")
    assert sorted(int(dict(a)["GLUE2ExecutionEnvironmentMainMemorySize"]) for a in ees.values()) == [16384, 16384,
                                                                                                      65536]
    # and a run that changes nothing changes nothing
    assert all(ldif.changes(ldif.parse(new[s]), ldif.parse(new[s])) == "" for s in SUFFIXES)


def shares_for(slapd: Slapd, vo: str) -> list[str]:
    """A VO's shares as a client finds them: the policies naming the VO, then each policy's share."""
    names = []
    for dn, attrs in slapd.search(GLUE2, vo_policies(vo), "GLUE2MappingPolicyShareForeignKey").items():
        (key,) = [v for n, v in attrs if n == "GLUE2MappingPolicyShareForeignKey"]
        assert normal_dn(dn).endswith(normal_dn(f"GLUE2ShareID={key},GLUE2ServiceID={SITE_URN}:service,{GLUE2}"))
        (found,) = slapd.search(GLUE2, f"(&(objectClass=GLUE2ComputingShare)(GLUE2ShareID={key}))",
                                "GLUE2ComputingShareMappingQueue").values()
        names.append(dict(found)["GLUE2ComputingShareMappingQueue"])
    return sorted(names)


def test_a_client_finds_a_vos_shares_by_their_mapping_policy(slapd: Slapd) -> None:
    # the test site: CE "all" admits VO:atlas and VOMS:/dteam/Role=x, the others none
    slapd.add(resource_ldif(queue_site()))
    assert shares_for(slapd, "atlas") == ["all"]
    assert shares_for(slapd, "cms") == []
    policies = slapd.search(GLUE2, "(objectClass=GLUE2MappingPolicy)", "GLUE2MappingPolicyShareForeignKey",
                            "GLUE2PolicyRule", "GLUE2PolicyUserDomainForeignKey")
    (only,) = policies.values()  # ce-beta and ce-none have no rules, so no policy
    assert sorted(v for n, v in only if n == "GLUE2PolicyRule") == ["VO:atlas", "VOMS:/dteam/Role=x"]
    assert sorted(v for n, v in only if n == "GLUE2PolicyUserDomainForeignKey") == ["atlas", "dteam"]
    # the endpoint's access policy, what `ginfo --service --vo` reads
    access = slapd.search(GLUE2, "(&(objectClass=GLUE2AccessPolicy)(GLUE2PolicyRule=VO:atlas))",
                          "GLUE2AccessPolicyEndpointForeignKey")
    assert [dict(a)["GLUE2AccessPolicyEndpointForeignKey"] for a in access.values()] == [f"{SITE_URN}:endpoint.infosvc"]


def test_changed_rules_are_applied_as_a_diff(slapd: Slapd) -> None:
    before_rules = {CE: ["VO:atlas"], "ce-none": ["VO:ops"]}
    after_rules = {CE: ["VO:atlas", "VO:cms"], "ce-beta": ["VO:cms", "VOMS:/cms/Role=production"]}
    first, second = (resource_ldif(queue_site(config_with_rules(r))) for r in (before_rules, after_rules))
    slapd.add(first)
    assert (shares_for(slapd, "ops"), shares_for(slapd, "cms")) == (["ce-none"], [])
    atlas_policy = normal_dn(f"GLUE2PolicyID={SITE_URN}:mappingpolicy:{local(CE)},GLUE2ShareID={SITE_URN}:share:"
                             f"{local(CE)},GLUE2ServiceID={SITE_URN}:service,{GLUE2}")
    before = normal(slapd.search(GLUE2, "(objectClass=GLUE2Policy)", "entryUUID"))
    assert atlas_policy in before
    old, new = (ldif.parse(by_suffix(ldif.parse(text))["o=glue"]) for text in (first, second))
    changes = ldif.changes(old, new)
    # ce-none's policy goes, ce-beta's comes, the atlas CE's and the endpoint's change in place
    unfolded = changes.replace("\n ", "")
    records = [r.split("\n")[:2] for r in unfolded.strip().split("\n\n") if r.startswith("dn: GLUE2PolicyID=")]
    assert sorted(kind for _, kind in records) == ["changetype: add", "changetype: delete", "changetype: modify",
                                                   "changetype: modify"]
    slapd.modify("o=glue", changes)
    held = {dn: {k: v for k, v in a.items() if k != "entryuuid"} for dn, a in normal(
        slapd.search("o=glue", "(objectClass=*)", "*", "entryUUID")).items()}
    assert held == normal(new)
    assert shares_for(slapd, "ops") == [] and shares_for(slapd, "cms") == ["all", "ce-beta"]
    assert shares_for(slapd, "atlas") == ["all"]
    after = normal(slapd.search(GLUE2, "(objectClass=GLUE2Policy)", "entryUUID"))
    assert after[atlas_policy]["entryuuid"] == before[atlas_policy]["entryuuid"]  # the same entry, modified
    access = slapd.search(GLUE2, "(objectClass=GLUE2AccessPolicy)", "GLUE2PolicyRule")
    assert [sorted(v for n, v in a if n == "GLUE2PolicyRule") for a in access.values()] == [
        ["VO:atlas", "VO:cms", "VOMS:/cms/Role=production"]]

