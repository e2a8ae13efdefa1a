"""The LDIF against the real thing: Debian's slapd on a loopback port, configured as a BDII configures
its own (o=grid and o=glue, the vendored GLUE schemas; tests/support/slapd.py), the site's GLUE 1.3
and 2.0 LDIF loaded with ldapadd, the queries grid clients make answered by ldapsearch, and a
second run after hosts change applied as bdii-update applies it: a diff of the old and new entries
(infosvc.codec.ldif.changes) fed to ldapmodify, after which slapd holds exactly the new rendering
and the entries that stayed are the same entries (entryUUID), not a reload.

Without slapd and ldap-utils the tests skip locally; under CI (.ci/run installs both) they fail.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from infosvc.codec import ldif
from infosvc.codec.gridformat import GridOptions
from infosvc.publish.glue import Glue
from infosvc.site.cestate import CEFigures, CEQueues
from infosvc.site.rollup import Rollup, host_from_node
from support.documents import make_node
from support.gridsite import WHEN, site_config, site_rollup
from support.slapd import SUFFIXES, Slapd, by_suffix, find, normal

CE = "ce.example.org:2119/jobmanager-infosvc-all"
PRODUCTION_CES = "(&(objectClass=GlueCE)(GlueCEStateStatus=Production))"
BIG_MEMORY = "(&(objectClass=GLUE2ExecutionEnvironment)(GLUE2ExecutionEnvironmentMainMemorySize>=8192))"


def binary(name: str) -> str:
    path = find(name)
    if path is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{name} not found under CI: .ci/run installs the Debian packages slapd and ldap-utils")
        pytest.skip(f"{name} not installed (apt-get install slapd ldap-utils); CI is not set, so skipped")
    return path


@pytest.fixture
def slapd(tmp_path: Path) -> Iterator[Slapd]:
    tools = {name: binary(name) for name in ("ldapadd", "ldapmodify", "ldapsearch")}
    server = Slapd(tmp_path / "slapd", binary("slapd"), tools=tools).start()
    try:
        yield server
    finally:
        server.stop()


def site() -> Rollup:
    """The test site, with small hosts (4 GB) beside the big ones, and CE figures from a queue."""
    config = site_config()
    rollup = site_rollup(config)
    for i in range(50, 54):
        rollup.update(host_from_node(make_node(f"a{i:03d}", memory_mb=4096, model="Atom"), "Ready", config, WHEN))
    rollup.ce_queues = CEQueues(clock=lambda: 1000.0)
    rollup.ce_queues.figures = {CE: CEFigures(running_jobs=3, waiting_jobs=5, held_cpus=24, estimated_start=1600.0,
                                              worst_start=4600.0)}
    return rollup


def rendering(rollup: Rollup) -> str:
    return Glue(rollup).rendering("ldif", GridOptions(base=True, site="EXAMPLE-SITE")).tree().decode()


def everything(slapd: Slapd, *extra: str) -> dict[str, ldif.Attributes]:
    found: dict[str, ldif.Attributes] = {}
    for suffix in SUFFIXES:
        found.update(slapd.search(suffix, "(objectClass=*)", "*", *extra))
    return found


def test_the_site_loads_and_answers_the_grid_clients_queries(slapd: Slapd) -> None:
    rollup = site()
    text = rendering(rollup)
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
    assert sum(int(dict(a)["GLUE2ExecutionEnvironmentTotalInstances"]) for a in ees.values()) == 45


def test_a_second_run_is_applied_as_a_diff_not_a_reload(slapd: Slapd) -> None:
    rollup = site()
    first = rendering(rollup)
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
    rollup.ce_queues.figures = {CE: CEFigures(running_jobs=7, waiting_jobs=0, held_cpus=56, estimated_start=1000.0,
                                              worst_start=2000.0)}
    second = rendering(rollup)
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
