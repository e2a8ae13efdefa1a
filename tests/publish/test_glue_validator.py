"""The GLUE LDIF judged by EGI's glue-validator, the tool BDII operators and EGI's monitoring run
(vendored in tests/peers/glue_validator; tests/support/gluevalidator.py runs it and reads its
findings), in file mode on the LDIF of a realistic site: three clusters of four kinds of host, three
CEs with VO access rules, benchmarks, software, jobs running and waiting.

By GLUE 1.3's general rules, GLUE 2.0's (OGF's) and EGI's profile: no error, and the warnings are
exactly those docs/grid.md lists with the reason they stay ("glue-validator: what it still warns
about, and why"): a warning not listed fails, and so does a row that no longer occurs, so when a
codec starts publishing what was missing, the table is what to update.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from infosvc.codec import ldif
from infosvc.codec.gridformat import GridOptions
from infosvc.config.site import parse_config
from infosvc.hosts.rollup import Rollup, host_from_node
from infosvc.model.glue import CEJob
from infosvc.publish.glue import Glue
from infosvc.queue.cestate import CEFigures, CEQueues
from support import ROOT
from infosvc.model.node import Consumable, Extension
from support.documents import make_node
from support.gluevalidator import SUITES, Report, parse, run

WHEN = "2024-05-01T12:00:00Z"
LONG = "ce01.example.org:2119/jobmanager-infosvc-long"
SHORT = "ce01.example.org:2119/jobmanager-infosvc-short"
GPU = "ce02.example.org:2119/jobmanager-infosvc-gpu"
CONFIG: dict[str, Any] = {
    "service": {"information_service_url": "https://infosvc.example.org:8443/v1/glue"},
    "clusters": [{"id": "compute", "name": "Compute farm", "nodes": "wn[001-060]"},
                 {"id": "gpu", "name": "GPU nodes", "nodes": "gpu[01-08]"},
                 {"id": "bigmem", "name": "Large-memory nodes", "nodes": "bm[01-04]"}],
    "computing_elements": [
        {"id": LONG, "name": "long", "queue": "long", "clusters": ["compute", "bigmem"], "lrms_version": "0.1.0",
         "host_name": "ce01.example.org", "gatekeeper_port": 2119,
         "access_control": ["VO:atlas", "VO:cms", "VOMS:/cms/Role=production", "VO:lhcb"],
         "policy": {"max_wall_clock_time": 4320, "max_cpu_time": 4320, "max_total_jobs": 4000,
                    "max_running_jobs": 2000}},
        {"id": SHORT, "name": "short", "queue": "short", "clusters": ["compute"], "lrms_version": "0.1.0",
         "host_name": "ce01.example.org", "gatekeeper_port": 2119,
         "access_control": ["VO:ops", "VO:dteam", "VOMS:/atlas/Role=pilot"],
         "policy": {"max_wall_clock_time": 120, "max_cpu_time": 60, "max_total_jobs": 500, "max_running_jobs": 200,
                    "priority": 10}},
        {"id": GPU, "name": "gpu", "queue": "gpu", "clusters": ["gpu"], "lrms_version": "0.1.0",
         "host_name": "ce02.example.org", "gatekeeper_port": 2119,
         "access_control": ["VOMS:/atlas/Role=production", "VOMS:/cms/Role=lcgadmin"],
         "policy": {"max_wall_clock_time": 1440, "max_cpu_time": 1440, "max_total_jobs": 100,
                    "max_running_jobs": 32}},
    ],
    "benchmarks": [{"nodes": "wn[001-040]", "si00": 2800, "sf00": 2600},
                   {"nodes": "wn[041-060]", "si00": 3400, "sf00": 3300},
                   {"nodes": "gpu[01-08]", "si00": 3600, "sf00": 3500},
                   {"nodes": "bm[01-04]", "si00": 3000, "sf00": 2900}],
    "software": [{"nodes": "wn[001-060],bm[01-04]",
                  "runtime_environment": ["VO-atlas-production", "VO-cms-CMSSW_13_0_0", "MPI-START"]},
                 {"nodes": "gpu[01-08]", "runtime_environment": ["VO-atlas-production", "CUDA-12.2"]}],
}
#: (host names, what make_node is given): four kinds of host, so four subclusters
KINDS: tuple[tuple[list[str], dict[str, Any]], ...] = (
    ([f"wn{i:03d}" for i in range(1, 41)], dict(processors=32, free_processors=8, memory_mb=131072,
                                                 model="Xeon Gold 6130")),
    ([f"wn{i:03d}" for i in range(41, 61)], dict(processors=64, free_processors=0, memory_mb=262144,
                                                  model="EPYC 7302")),
    ([f"gpu{i:02d}" for i in range(1, 9)], dict(processors=48, free_processors=16, memory_mb=524288,
                                                 model="Xeon Platinum 8358", os_name="AlmaLinux")),
    ([f"bm{i:02d}" for i in range(1, 5)], dict(processors=128, free_processors=64, memory_mb=2097152,
                                                model="EPYC 7763")),
)
#: a few hosts down, as on any real site
STATES = {"wn013": "Paused", "wn057": "Unreachable", "gpu08": "Pending"}
PILOT = "/DC=ch/DC=cern/OU=Organic Units/OU=Users/CN=atlpilo1"


def realistic_site() -> Rollup:
    config = parse_config(CONFIG)
    rollup = Rollup(config)
    for names, kind in KINDS:
        for name in names:
            # as the agent reports them: sockets (PhysicalCPUs) and swap (virtual memory)
            node = make_node(name, **kind, extra=(Extension("Sockets", "1" if "EPYC 7302" in kind["model"] else "2",
                                                            "Processor"),))
            node.configured.add(Consumable("Swap", 8192.0, units="MB"))
            rollup.update(host_from_node(node, STATES.get(name, "Ready"), config, WHEN))
    long_jobs = (CEJob("1001", "RUNNING", "atlas001", PILOT, "https://ce01.example.org:8443/jobs/1001"),
                 CEJob("1002", "RUNNING", "cmsprd", "/DC=ch/DC=cern/OU=computers/CN=cmsprod"),
                 CEJob("1003", "WAITING", "lhcb003"))
    gpu_jobs = (CEJob("2001", "RUNNING", "atlasprd", PILOT), CEJob("2002", "WAITING", "cmssgm"),
                CEJob("2003", "WAITING", "cmssgm"))
    rollup.read_queue(CEQueues(clock=lambda: 1000.0, figures={
        LONG: CEFigures(running_jobs=2, waiting_jobs=1, held_cpus=96, estimated_start=1600.0, worst_start=4600.0,
                        jobs=long_jobs),
        SHORT: CEFigures(running_jobs=0, waiting_jobs=0, held_cpus=0, estimated_start=1000.0, worst_start=1000.0),
        GPU: CEFigures(running_jobs=1, waiting_jobs=2, held_cpus=32, estimated_start=2000.0, worst_start=8000.0,
                       jobs=gpu_jobs)}))
    return rollup


def render(rollup: Rollup, version: str) -> str:
    return Glue(rollup).rendering(f"ldif-{version}", GridOptions(site="EXAMPLE-SITE")).tree().decode()


#: each suite and the LDIF it judges
VERSION = {"glue1": "1.3", "glue2": "2.0", "egi": "2.0"}


@pytest.fixture(scope="module")
def site_ldif(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    rollup = realistic_site()
    directory = tmp_path_factory.mktemp("glue-validator")
    files = {}
    for version in ("1.3", "2.0"):
        files[version] = directory / f"site-{version}.ldif"
        files[version].write_text(render(rollup, version))
    return files


@pytest.fixture(scope="module")
def reports(site_ldif: dict[str, Path]) -> dict[str, Report]:
    return {suite: run(suite, site_ldif[VERSION[suite]]) for suite in SUITES}


# --- the table in docs/grid.md ---------------------------------------------------------------

HEADING = "glue-validator: what it still warns about, and why"
#: the table's Suite column -> the suite
SUITE_NAMES = {"GLUE 1.3": "glue1", "GLUE 2.0 OGF": "glue2", "GLUE 2.0 EGI": "egi"}


def documented_warnings() -> set[tuple[str, str, str]]:
    """The (suite, code, attribute) rows of docs/grid.md's table under HEADING."""
    text = (ROOT / "docs" / "grid.md").read_text()
    start = text.index(HEADING)
    rows: set[tuple[str, str, str]] = set()
    in_table = False
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|"):
            if in_table:
                break
            continue
        in_table = True
        cells = [c.strip().strip("`").strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "Suite" or set(cells[0]) <= set("-: "):
            continue
        suites = [SUITE_NAMES[name.strip()] for name in cells[0].split(",")]
        rows.update((suite, cells[1], cells[2]) for suite in suites)
    assert rows, f"no table under {HEADING!r} in docs/grid.md"
    return rows


def warnings_of(report: Report, suite: str) -> Counter[tuple[str, str, str]]:
    return Counter((suite, f.code, f.attribute or "") for f in report.of("W"))


# --- the tests -------------------------------------------------------------------------------

def test_the_site_is_a_realistic_one(site_ldif: dict[str, Path]) -> None:
    """What the validator is given has what a real site has: or the rest proves little."""
    glue1 = ldif.parse(site_ldif["1.3"].read_text())
    glue2 = ldif.parse(site_ldif["2.0"].read_text())

    def of(entries: dict[str, ldif.Attributes], cls: str) -> list[dict[str, list[str]]]:
        found = []
        for attributes in entries.values():
            if ("objectClass", cls) in attributes:
                values: dict[str, list[str]] = {}
                for name, value in attributes:
                    values.setdefault(name, []).append(value)
                found.append(values)
        return found

    assert len(of(glue1, "GlueCluster")) == 3 and len(of(glue1, "GlueSubCluster")) == 4
    ces = of(glue1, "GlueCE")
    assert len(ces) == 3 and all(ce["GlueCEAccessControlBaseRule"] for ce in ces)
    assert {r for ce in ces for r in ce["GlueCEAccessControlBaseRule"]} >= {"VO:atlas", "VOMS:/cms/Role=production"}
    assert sum(int(ce["GlueCEStateRunningJobs"][0]) for ce in ces) == 3
    assert sum(int(ce["GlueCEStateWaitingJobs"][0]) for ce in ces) == 3
    assert len(of(glue2, "GLUE2ExecutionEnvironment")) == 4 and len(of(glue2, "GLUE2MappingPolicy")) == 3
    assert len(of(glue2, "GLUE2Benchmark")) >= 4 and of(glue2, "GLUE2ApplicationEnvironment")
    shares = of(glue2, "GLUE2ComputingShare")
    assert sorted((s["GLUE2ComputingShareRunningJobs"][0], s["GLUE2ComputingShareWaitingJobs"][0])
                  for s in shares) == [("0", "0"), ("1", "2"), ("2", "1")]


@pytest.mark.parametrize("suite", SUITES)
def test_no_errors(reports: dict[str, Report], suite: str) -> None:
    assert reports[suite].of("E") == []


@pytest.mark.parametrize("suite", SUITES)
def test_every_warning_is_one_docs_grid_md_explains(reports: dict[str, Report], suite: str) -> None:
    found = warnings_of(reports[suite], suite)
    unexplained = sorted(set(found) - documented_warnings())
    examples = {key: next(f.dn for f in reports[suite].of("W") if (suite, f.code, f.attribute or "") == key)
                for key in unexplained}
    assert not unexplained, (f"glue-validator warns of what docs/grid.md's table ({HEADING!r}) does not list: "
                             f"fix it, or add a row saying why it stays: {examples}")


@pytest.mark.parametrize("suite", SUITES)
def test_every_row_of_the_table_still_occurs(reports: dict[str, Report], suite: str) -> None:
    found = warnings_of(reports[suite], suite)
    gone = sorted(row for row in documented_warnings() if row[0] == suite and row not in found)
    assert not gone, f"glue-validator no longer warns of these: take their rows out of docs/grid.md's table: {gone}"


def test_the_table_names_only_real_suites_and_codes() -> None:
    rows = documented_warnings()
    assert all(suite in SUITES and re.fullmatch(r"W\d{3}", code) and attribute for suite, code, attribute in rows)


# --- the reading of the validator's output cannot pass vacuously --------------------------------

def test_planted_faults_are_found(site_ldif: dict[str, Path], reports: dict[str, Report], tmp_path: Path) -> None:
    """A GlueCE without its mandatory StateTotalJobs, an object class GLUE does not know, under a DN whose
    value holds a comma (the validator prints the DN split at every comma): a warning and an error,
    each on that DN, through the real validator."""
    entries = ldif.parse(site_ldif["1.3"].read_text())
    dn = next(dn for dn, a in entries.items() if ("objectClass", "GlueCE") in a)
    planted_dn = dn.replace(LONG, ldif.dn_value(LONG + ",planted"), 1)
    attributes = [(k, v) for k, v in entries.pop(dn) if k != "GlueCEStateTotalJobs"]
    attributes.insert(0, ("objectClass", "GlueNoSuchClass"))
    entries[planted_dn] = attributes
    planted = tmp_path / "planted.ldif"
    planted.write_text("".join(ldif.entry(d, a) for d, a in entries.items()))
    report = run("glue1", planted)
    errors = [(f.code, f.attribute, f.value, f.dn) for f in report.of("E")]
    assert errors == [("E021", "NA", "GlueNoSuchClass", planted_dn)]
    assert ("W", "W034", "GlueCEStateTotalJobs", planted_dn) in {(f.level, f.code, f.attribute, f.dn)
                                                               for f in report.findings}
    baseline = reports["glue1"].counts
    assert report.counts == {"E": 1, "W": baseline["W"] + 1, "I": baseline["I"]}


OUTPUT = """CRITICAL - errors 1, warnings 2, info 0 | errors=1;warnings=2;info=0
AssertionError: False is not true : ERROR START:
E021 Description: The object class is not valid
E021 Affected DN: GlueCEUniqueID=a\\
                  b
                  o=grid
E021 Published value: Nope

AssertionError: False is not true : WARNING START:
W034 Description: Mandatory attribute not present
W034 Affected DN: GlueSubClusterUniqueID=x
                  o=grid
W034 Affected attribute: GlueSubClusterPhysicalCPUs
W034 Published value: NA

WARNING START:
W037 Description: Wrong type
W037 Affected DN: GLUE2ServiceID=s
W037 Affected attribute: GLUE2ServiceType
W037 Published value: ['org.infosvc']
W037 Additional information: Expected type is ServiceType_t
"""


def test_the_parser_reads_every_shape_of_block() -> None:
    report = parse(OUTPUT)
    assert report.counts == {"E": 1, "W": 2, "I": 0}
    assert [(f.level, f.code, f.attribute, f.dn) for f in report.findings] == [
        ("E", "E021", None, "GlueCEUniqueID=a\\,b,o=grid"),  # no attribute line; an escaped comma
        ("W", "W034", "GlueSubClusterPhysicalCPUs", "GlueSubClusterUniqueID=x,o=grid"),
        ("W", "W037", "GLUE2ServiceType", "GLUE2ServiceID=s")]
    assert report.findings[2].value == "['org.infosvc']"


@pytest.mark.parametrize("broken", [
    OUTPUT.replace("warnings 2", "warnings 3"),  # a block it counted is not read
    OUTPUT.split("\n", 1)[1],  # no summary line
    OUTPUT.replace("W037 Description", "E037 Description").replace("W037 Affected", "E037 Affected"),
])
def test_the_parser_refuses_what_does_not_add_up(broken: str) -> None:
    with pytest.raises(ValueError):
        parse(broken)
