"""docs/glue-mapping.md held against the renderings: every GLUE 1.3 attribute its tables name, and
every GLUE 2.0 attribute of the execution environment, share, endpoint and manager, is in the LDIF
of a site that has the data (hosts reporting everything the agent reports, CEs with policies and
VO rules, jobs running and waiting), so the table cannot promise what is not published."""

from __future__ import annotations

import re
from pathlib import Path

from infosvc.codec import ldif
from infosvc.codec.gridformat import GridOptions
from infosvc.config import parse_config
from infosvc.hosts import Rollup, host_from_node
from infosvc.model.node import Consumable, Extension
from infosvc.publish.glue import Glue
from infosvc.queue.cestate import CEFigures, CEQueues
from support import ROOT
from support.documents import make_node
from support.gridsite import CONFIG, WHEN

DOC = ROOT / "docs" / "glue-mapping.md"
GLUE20_SCHEMA = ROOT / "schemas" / "glue2" / "GLUE20.schema"
#: the table of each section, and the GLUE 2.0 classes its 2.0 column names attributes of (bare words)
SECTIONS = {"Computing element": ("ComputingShare", "Share"), "Cluster": (), "Subcluster": ("ExecutionEnvironment",
            "Resource"), "The service, its endpoint and manager (2.0 only)": ()}
_NAME = re.compile(r"\b(Glue[A-Z][A-Za-z0-9]*|GLUE2[A-Z][A-Za-z0-9]*)\b")
_WORD = re.compile(r"\b([A-Z][A-Za-z0-9]*)\b")
#: what a table names but the LDIF has under another form: object classes and DN components
NOT_ATTRIBUTES = {"GlueCEAccessControlBase", "GlueCE", "GlueVOView", "GlueCluster", "GlueSubCluster"}


def tables() -> dict[str, list[list[str]]]:
    """Each section's table rows, as cells."""
    found: dict[str, list[list[str]]] = {}
    section = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("### "):
            section = line[4:].strip()
        elif section in SECTIONS and line.startswith("|") and not line.startswith("| ---"):
            found.setdefault(section, []).append([cell.strip() for cell in line.strip("|").split("|")])
    return found


def _outside(cell: str) -> str:
    """The cell without its asides (parentheses) and values (`code`): what it says is published."""
    cell = re.sub(r"`[^`]*`", "", cell)
    while "(" in cell and ")" in cell:
        cell = re.sub(r"\([^()]*\)", "", cell)
    return cell


def glue13_attributes() -> set[str]:
    return {name for path in (ROOT / "schemas" / "glue1.3").glob("*.schema")
            for name in re.findall(r"NAME\s+'(Glue\w+)'", path.read_text(encoding="utf-8"))}


def names_in(cell: str, known: set[str] | None = None) -> set[str]:
    """The GLUE names a cell says are published, a bare word after a full name standing for the
    known attribute it ends (`GlueHostProcessorVendor, Model` names GlueHostProcessorModel too,
    `GlueHostProcessorCacheL1, CacheL1I` GlueHostProcessorCacheL1I)."""
    known = glue13_attributes() if known is None else known
    names: set[str] = set()
    full = None
    for piece in re.split(r"[,;]| and ", _outside(cell)):
        piece = piece.strip()
        match = _NAME.match(piece)
        if match:
            full = match.group(1)
            names.add(full)
        elif full and (word := _WORD.fullmatch(piece.split(" ")[0] if piece else "")):
            cuts = [m.start() for m in re.finditer(r"[A-Z]", full)]
            names |= next(({full[:cut] + word.group(1)} for cut in reversed(cuts)
                           if full[:cut] + word.group(1) in known), set())
    return {n for n in names if n not in NOT_ATTRIBUTES}


def site_ldif() -> tuple[dict[str, ldif.Attributes], dict[str, ldif.Attributes]]:
    config = parse_config(CONFIG)
    rollup = Rollup(config)
    for name, model, cpus, ram in [(f"a{i:03d}", "Xeon", 16, 16000) for i in range(1, 25)] + [
            (f"b{i:02d}", "EPYC", 64, 256000) for i in range(1, 4)]:
        extra = (Extension("Vendor", "GenuineIntel" if model == "Xeon" else "AuthenticAMD", "Processor"),
                 Extension("Version", "6/85/4", "Processor"), Extension("CacheL1", "64", "Processor"),
                 Extension("CacheL1I", "32", "Processor"), Extension("CacheL1D", "32", "Processor"),
                 Extension("CacheL2", "1024", "Processor"), Extension("Sockets", "2", "Processor"),
                 Extension("Version", "bookworm", "OperatingSystem"))
        node = make_node(name, processors=cpus, memory_mb=ram, model=model, os_name="Debian GNU/Linux",
                         os_release="12", extra=extra)
        node.configured.add(Consumable("Swap", 2048.0, units="MB"))
        rollup.update(host_from_node(node, "Ready", config, WHEN))
    rollup.read_queue(CEQueues(clock=lambda: 1000.0, figures={
        ce.unique_id: CEFigures(running_jobs=2, waiting_jobs=3, held_cpus=16, estimated_start=1600.0,
                                worst_start=4600.0) for ce in rollup.computing_elements()}))
    glue = Glue(rollup)
    return tuple(ldif.parse(glue.rendering(fmt, GridOptions()).tree().decode())  # type: ignore[return-value]
                 for fmt in ("ldif-1.3", "ldif-2.0"))


def attribute_names(entries: dict[str, ldif.Attributes]) -> set[str]:
    return {name for attrs in entries.values() for name, _ in attrs} | {
        part.split("=")[0] for dn in entries for part in dn.split(",")}


def glue2_attributes() -> set[str]:
    return set(re.findall(r"NAME '(GLUE2\w+)'", GLUE20_SCHEMA.read_text(encoding="utf-8")))


def test_every_glue13_attribute_the_tables_name_is_published() -> None:
    glue13, _ = site_ldif()
    published = attribute_names(glue13)
    named = {name for rows in tables().values() for row in rows[1:] if len(row) >= 2
             for name in names_in(row[1]) if name.startswith("Glue")}
    assert len(named) > 50, sorted(named)  # the tables are read: a parser that finds nothing fails here
    assert not named - published, sorted(named - published)


def test_every_glue20_attribute_the_tables_name_is_published() -> None:
    _, glue20 = site_ldif()
    published = attribute_names(glue20)
    schema = glue2_attributes()
    named: set[str] = set()
    for section, rows in tables().items():
        classes = SECTIONS[section]
        for row in rows[1:]:
            cell = row[-1]
            named |= {name for name in names_in(cell, schema) if name.startswith("GLUE2")}
            for word in _WORD.findall(_outside(cell)):
                named |= {f"GLUE2{cls}{word}" for cls in classes if f"GLUE2{cls}{word}" in schema}
    assert len(named) > 30, sorted(named)
    assert named <= schema, sorted(named - schema)  # the table names real attributes
    assert not named - published, sorted(named - published)


def test_the_parser_reads_the_table_s_shorthand() -> None:
    assert names_in("GlueHostProcessorVendor, Model, Version, ClockSpeed (Vendor and Version while shared)") == {
        "GlueHostProcessorVendor", "GlueHostProcessorModel", "GlueHostProcessorVersion", "GlueHostProcessorClockSpeed"}
    assert names_in("— (the endpoint is infosvc's job API, not GRAM)") == set()
    assert Path(DOC).exists()
