"""The grid's renderings of a site against the public schemas vendored in schemas/glue1.3 and
schemas/glue2: GLUE 2.0 XML against OGF's glue2.xsd (lxml, through safexml's schema loader), GLUE
2.0 JSON against OGF's Glue2.json as patched (jsonschema, draft 4, every referenced file from the
vendored directory), GLUE 1.3 and 2.0 LDIF against the OpenLDAP schema files (every object class
and attribute defined, every MUST present, every GLUE 1.3 value IA5). The CE figures are the same
numbers in every rendering, under one snapshot id and time. The LDIF writer and the diff are
checked on their own. slapd itself: tests/publish/test_slapd.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema.exceptions import UnknownType

from infosvc.codec import ldif, safexml
from infosvc.codec.gridformat import GridOptions
from infosvc.model.snapshot import FrozenTree, SnapshotView, take
from infosvc.publish.glue import GRID_FORMATS, Glue, Rendering
from infosvc.queue.cestate import CEFigures, CEQueues
from infosvc.hosts.rollup import Rollup
from support import ROOT
from support.gridcheck import GLUE13, GLUE20, NS, vendored_json_schemas, check_ldif, glue2_validator, xml_valid
from support.gridsite import site_config, site_rollup
CE = "ce.example.org:2119/jobmanager-infosvc-all"


@pytest.fixture
def rollup() -> Rollup:
    r = site_rollup()
    r.read_queue(CEQueues(clock=lambda: 1000.0, figures={
        CE: CEFigures(running_jobs=3, waiting_jobs=5, held_cpus=24, estimated_start=1600.0,
                                         worst_start=4600.0)}))
    return r


def render(rollup: Rollup, fmt: str, **options: Any) -> bytes:
    return Glue(rollup).rendering(fmt, GridOptions(**options)).tree()


# --- GLUE 2.0 XML and JSON against OGF's schemas -------------------------------------------------

def test_glue2_xml_is_valid_against_ogf_xsd(rollup: Rollup) -> None:
    root = xml_valid(render(rollup, "glue2-xml"))
    kinds = [e.tag.replace(NS, "") for e in root if isinstance(e.tag, str)]
    assert kinds[:4] == ["AdminDomain", "ComputingService", "ComputingEndpoint", "ComputingShare"]
    assert kinds.count("ExecutionEnvironment") == len(rollup.subclusters)
    assert kinds.count("ComputingShare") == 3 and "Benchmark" in kinds and "ApplicationEnvironment" in kinds
    ee_mem = sorted(int(e.findtext(f"{NS}MainMemorySize")) for e in root.iter(f"{NS}ExecutionEnvironment"))
    assert ee_mem[-1] == 256000


def test_a_broken_glue2_xml_is_refused(rollup: Rollup) -> None:
    document = render(rollup, "glue2-xml")
    with pytest.raises(Exception):
        xml_valid(document.replace(b"<OSFamily>", b"<OSFamilyX>", 1).replace(b"</OSFamily>", b"</OSFamilyX>", 1))
    with pytest.raises(Exception):
        xml_valid(document.replace(b"<ServingState>production", b"<ServingState>open", 1))


def test_glue2_json_is_valid_against_ogf_json_schema(rollup: Rollup) -> None:
    document = json.loads(render(rollup, "glue2-json"))
    glue2_validator().validate(document)
    assert [len(document[k]) for k in ("AdminDomain", "ComputingService", "ComputingEndpoint",
                                       "ComputingManager")] == [1, 1, 1, 1]
    broken = json.loads(json.dumps(document))
    broken["ExecutionEnvironment"][0]["MainMemorySize"] = "16 GB"
    assert not glue2_validator().is_valid(broken)
    del document["Benchmark"][0]["Associations"]
    assert not glue2_validator().is_valid(document)


def test_ogf_json_schema_needs_its_patch(rollup: Rollup) -> None:
    """As published, ExecutionEnvironment types two properties "float", which is no JSON Schema type."""
    schemas = vendored_json_schemas()
    ee = next(s for s in schemas if s["id"].endswith("/ExecutionEnvironment.json"))
    assert ee["properties"]["CPUTimeScalingFactor"]["type"] == "number"
    assert "float" in (ROOT / "schemas/glue2/README.md").read_text()
    ee["properties"]["CPUTimeScalingFactor"]["type"] = "float"
    document = json.loads(render(rollup, "glue2-json"))
    document["ExecutionEnvironment"][0]["CPUTimeScalingFactor"] = 1.5
    glue2_validator().validate(document)
    with pytest.raises(UnknownType):
        glue2_validator(schemas).validate(document)


# --- LDIF against the LDAP schemas ---------------------------------------------------------

def test_glue13_ldif_fits_the_schema(rollup: Rollup) -> None:
    text = render(rollup, "ldif-1.3", base=True).decode()
    assert text.isascii()  # GLUE 1.3 types every string IA5
    entries = check_ldif(text, GLUE13)
    assert list(entries)[:2] == ["o=grid", "mds-vo-name=resource,o=grid"]
    dns = list(entries)
    assert sum(dn.startswith("GlueCEUniqueID=") for dn in dns) == 3
    assert sum(dn.startswith("GlueSubClusterUniqueID=") for dn in dns) == len(rollup.subclusters)
    assert "GlueClusterUniqueID=beta\\=2,mds-vo-name=resource,o=grid" in entries
    assert all(dn.endswith("mds-vo-name=resource,o=grid") for dn in dns[1:])
    sub = next(a for dn, a in entries.items() if dn.startswith("GlueSubClusterUniqueID=alpha"))
    assert ("GlueHostApplicationSoftwareRunTimeEnvironment", "R 4.3 <beta>, \\xe9t\\xe9") in sub
    assert not any(n.lower() == "gluecesebindgroupceuniqueid" for a in entries.values() for n, _ in a)


def test_glue2_ldif_fits_the_schema(rollup: Rollup) -> None:
    entries = check_ldif(render(rollup, "ldif-2.0", base=True).decode(), GLUE20)
    dns = list(entries)
    assert dns[:2] == ["o=glue", "GLUE2GroupID=resource,o=glue"]
    assert all(dn.endswith("GLUE2GroupID=resource,o=glue") for dn in dns[1:])
    assert not any("GLUE2Domain" in dn for dn in dns)  # the site BDII's
    kinds = [v for a in entries.values() for n, v in a if n == "objectClass"]
    for kind in ("GLUE2ComputingService", "GLUE2ComputingEndpoint", "GLUE2ComputingShare", "GLUE2ComputingManager",
                 "GLUE2ExecutionEnvironment", "GLUE2Benchmark", "GLUE2ApplicationEnvironment"):
        assert kind in kinds
    assert b"\ndn: GLUE2GroupID=resource,o=glue\n" not in render(rollup, "ldif-2.0")  # base entries on request


def test_without_schema_both_come_in_one_snapshot(rollup: Rollup) -> None:
    both = render(rollup, "ldif").decode()
    entries = ldif.parse(both)
    assert any(dn.endswith(",o=grid") for dn in entries) and any(dn.endswith(",o=glue") for dn in entries)
    ids = set(re.findall(r"snapshot ([0-9a-f]{12})", both))
    assert len(ids) == 1


# --- one snapshot, the same numbers ---------------------------------------------------------

def figures_of_every_rendering(glue: Glue) -> dict[str, tuple[object, ...]]:
    """(snapshot id, time, free CPUs, running, waiting, estimated response) of the first CE, per format:
    the grid's four and GLUE 1.1's XML and JSON (the latter as the CE's own document)."""
    out: dict[str, tuple[object, ...]] = {}
    g13 = ldif.parse(glue.rendering("ldif-1.3").tree().decode())
    ce = dict((n, v) for n, v in g13[f"GlueCEUniqueID={CE},mds-vo-name=resource,o=grid"]
              if n != "GlueCECapability")
    caps = dict(v.split("=", 1) for n, v in g13[f"GlueCEUniqueID={CE},mds-vo-name=resource,o=grid"]
                if n == "GlueCECapability")
    out["ldif-1.3"] = (caps["InfosvcSnapshot"], caps["InfosvcSnapshotTime"], int(ce["GlueCEStateFreeCPUs"]),
                       int(ce["GlueCEStateRunningJobs"]), int(ce["GlueCEStateWaitingJobs"]),
                       int(ce["GlueCEStateEstimatedResponseTime"]))
    g2 = ldif.parse(glue.rendering("ldif-2.0").tree().decode())
    share = dict(next(a for dn, a in g2.items() if dn.startswith("GLUE2ShareID=") and ("GLUE2EntityName", "All") in a))
    out["ldif-2.0"] = (share["GLUE2EntityOtherInfo"].split("=")[1], share["GLUE2EntityCreationTime"],
                       int(share["GLUE2ComputingShareFreeSlots"]), int(share["GLUE2ComputingShareRunningJobs"]),
                       int(share["GLUE2ComputingShareWaitingJobs"]),
                       int(share["GLUE2ComputingShareEstimatedAverageWaitingTime"]))
    x = xml_valid(glue.rendering("glue2-xml").tree())
    s = next(e for e in x.iter(f"{NS}ComputingShare") if e.findtext(f"{NS}Name") == "All")
    out["glue2-xml"] = (s.findtext(f"{NS}OtherInfo").split("=")[1], s.get("CreationTime"),
                        *(int(s.findtext(f"{NS}{k}")) for k in ("FreeSlots", "RunningJobs", "WaitingJobs",
                                                                "EstimatedAverageWaitingTime")))
    j = json.loads(glue.rendering("glue2-json").tree())
    js = next(e for e in j["ComputingShare"] if e["Name"] == "All")
    out["glue2-json"] = (js["OtherInfo"][0].split("=")[1], js["CreationTime"], js["FreeSlots"], js["RunningJobs"],
                         js["WaitingJobs"], js["EstimatedAverageWaitingTime"])
    x11 = safexml.parse(glue.xml.tree(), max_bytes=1 << 28)
    safexml.validate(x11, safexml.schema("glue-ce-1.1.xsd"))
    ns = "{urn:infosvc:glue:ce:1.1}"
    state = next(c for c in x11.iter(f"{ns}ComputingElement") if c.findtext(f"{ns}UniqueID") == CE).find(f"{ns}State")
    out["xml-1.1"] = (state.findtext(f"{ns}Snapshot"), state.findtext(f"{ns}SnapshotTime"),
                      *(int(state.findtext(f"{ns}{k}")) for k in ("FreeCPUs", "RunningJobs", "WaitingJobs",
                                                                  "EstimatedResponseTime")))
    j11 = json.loads(glue.json.entity("computing-elements", CE) or b"")["state"]
    out["json-1.1"] = (j11["snapshot"], j11["snapshot_time"], j11["free_cpus"], j11["running_jobs"],
                       j11["waiting_jobs"], j11["estimated_response_time"])
    return out


def test_ce_figures_are_one_snapshot_in_every_rendering(rollup: Rollup) -> None:
    glue = Glue(rollup)
    figures = figures_of_every_rendering(glue)
    assert len(set(figures.values())) == 1, figures
    snapshot_id, _, free, running, waiting, estimated = figures["ldif-1.3"]
    assert (running, waiting, estimated) == (3, 5, 600)
    ce = rollup.computing_element(CE)
    assert ce is not None and free == ce.state.free_cpus
    # the figures move: a new snapshot, in every rendering alike
    rollup.read_queue(CEQueues(clock=lambda: 1000.0, figures={
        CE: CEFigures(running_jobs=4, waiting_jobs=1, held_cpus=24, estimated_start=1000.0,
                                              worst_start=1000.0)}))
    moved = figures_of_every_rendering(glue)
    assert len(set(moved.values())) == 1, moved
    assert moved["glue2-json"][0] != snapshot_id and moved["glue2-json"][3:5] == (4, 1)


def test_a_snapshot_keeps_its_id_and_time_while_figures_stand(rollup: Rollup) -> None:
    first = take(rollup, now=100.0)
    again = take(rollup, first, now=200.0)
    assert again is first
    other = take(site_rollup(site_config()), None, now=300.0)  # another tree, the figures of its own
    assert other.id != first.id and other.time.endswith("00:05:00Z")
    view = SnapshotView(rollup, first)
    assert view.computing_elements() is first.computing_elements and view.hosts is rollup.hosts


def test_a_snapshot_publishes_the_ces_as_they_are_when_only_what_its_id_omits_changed() -> None:
    # a review: the id digests the CEs' figures, not their policy, rules or clusters; a snapshot of
    # unchanged figures was handed back whole, its old CE objects with it (a Slurm partition's new
    # MaxTime, a CE's new access rule, never published while its figures stood)
    from dataclasses import replace as changed

    class Tree:
        def __init__(self, ces: list[Any]) -> None:
            self.ces = ces

        def computing_elements(self) -> list[Any]:
            return self.ces

    (ce,) = site_rollup(site_config()).computing_elements()[:1]
    first = take(Tree([ce]), now=100.0)  # type: ignore[arg-type]
    longer = changed(ce, policy=changed(ce.policy, max_wall_clock_time=99999), access_control_rules=("VO:cms",))
    again = take(Tree([longer]), first, now=200.0)  # type: ignore[arg-type]
    assert (again.id, again.time) == (first.id, first.time)  # the same figures: the same snapshot id and time
    assert again.computing_elements == (longer,)
    assert take(Tree([longer]), again, now=300.0) is again


def test_a_frozen_copy_renders_as_the_live_tree_and_stays_put(rollup: Rollup) -> None:
    """What GET /v1/glue renders in a worker thread (infosvc/web/gridquery.py): a copy taken on the loop."""
    glue = Glue(rollup)
    snapshot = glue.snapshot()
    frozen = FrozenTree(rollup)
    for fmt in GRID_FORMATS:
        live = Rendering(rollup, GRID_FORMATS[fmt](GridOptions()), lambda: snapshot).tree()
        assert Rendering(frozen, GRID_FORMATS[fmt](GridOptions()), lambda: snapshot).tree() == live, fmt
    before = Rendering(frozen, GRID_FORMATS["ldif-1.3"](GridOptions()), lambda: snapshot).tree()
    for host in [h for h in rollup.hosts if h.startswith("a0")][:10]:
        rollup.remove(host)  # the live tree moves on; the copy does not
    assert Rendering(frozen, GRID_FORMATS["ldif-1.3"](GridOptions()), lambda: snapshot).tree() == before
    assert Rendering(rollup, GRID_FORMATS["ldif-1.3"](GridOptions()), lambda: snapshot).tree() != before


def test_a_frozen_copy_matches_the_live_tree_exactly_when_a_copy_of_it_would_equal_it(rollup: Rollup) -> None:
    """A read answered from what is kept compares the kept copy with the live tree, no copy made."""
    glue = Glue(rollup)
    snapshot = glue.snapshot()
    frozen = FrozenTree(rollup, snapshot)
    assert frozen.matches(rollup, snapshot) and frozen == FrozenTree(rollup, snapshot)
    host = next(h for h in rollup.hosts if h.startswith("a0"))
    rollup.remove(host)  # a subcluster's totals move
    later = glue.snapshot()
    assert not frozen.matches(rollup, later) and frozen != FrozenTree(rollup, later)
    assert not frozen.matches(rollup, snapshot) and frozen != FrozenTree(rollup, snapshot)  # the same CE figures, not trees
    moved = FrozenTree(rollup, later)
    assert moved.matches(rollup, later)
    assert not moved.matches(rollup, None)  # another snapshot (none), another document


def test_a_frozen_copy_of_a_tree_that_has_not_changed_matches_without_a_comparison(
        rollup: Rollup, monkeypatch: pytest.MonkeyPatch) -> None:
    """A grid document's read (O(1) where the roll-up counted no change since the copy: a
    comparison was 9 ms at 10,000 subclusters); a change is compared, as before."""
    glue = Glue(rollup)
    snapshot = glue.snapshot()
    frozen = FrozenTree(rollup, snapshot)

    def compared(*_: Any) -> Any:
        raise AssertionError("compared")

    with monkeypatch.context() as patch:
        patch.setattr(rollup, "subclusters_of", compared)
        assert frozen.matches(rollup, snapshot)
        rollup.generation += 1  # a change, as the roll-up counts one
        with pytest.raises(AssertionError, match="compared"):
            frozen.matches(rollup, snapshot)
    assert frozen.matches(rollup, snapshot)  # a change that left the tree equal: equal, as before


def test_a_frozen_copy_with_its_hosts_renders_the_whole_json_and_xml_as_the_live_tree(rollup: Rollup) -> None:
    """What GET /v1/glue in JSON and XML assembles in a worker thread (web.gridquery.WholeTrees):
    the copy's parts are the live rendering's cached fragments, and the copy stays put."""
    import dataclasses

    glue = Glue(rollup)
    snapshot = glue.snapshot()
    frozen = FrozenTree(rollup, snapshot, hosts=True)
    assert frozen.matches(rollup, snapshot) and frozen == FrozenTree(rollup, snapshot, hosts=True)
    assert frozen != FrozenTree(rollup, snapshot)  # the same tree, without its hosts: another copy
    for fmt in ("json", "xml"):
        rendering = glue.formats[fmt]
        assert b"".join(rendering.parts_of(frozen)) == b"".join(rendering.tree_parts()), fmt
    host = rollup.hosts[next(h for h in rollup.hosts if h.startswith("a0"))]
    fragment = glue.xml.fragment(host, rollup.subcluster_of(host.unique_id).unique_id)  # type: ignore[union-attr]
    assert any(part is fragment for part in glue.xml.parts_of(frozen)), "a host's fragment copied, not referred to"
    before = b"".join(glue.json.parts_of(frozen))
    rollup.update(dataclasses.replace(host, last_report="2031-01-01T00:00:00Z"))  # a report: a new Host, same place
    assert not frozen.matches(rollup, snapshot)  # whatever the subclusters' totals say
    assert b"".join(glue.json.parts_of(frozen)) == before  # the copy did not move
    assert b"".join(glue.json.parts_of(FrozenTree(rollup, snapshot, hosts=True))) != before
    rollup.remove(host.unique_id)  # gone: its fragment is dropped at the loop's next prune
    glue.json.parts_of(FrozenTree(rollup, snapshot, hosts=True))
    assert host.unique_id in glue.json._cache
    glue.json.prune()
    assert host.unique_id not in glue.json._cache


def test_a_clusters_xml_from_a_frozen_copy_refers_to_its_hosts_fragments(rollup: Rollup) -> None:
    glue = Glue(rollup)
    frozen = FrozenTree(rollup, glue.snapshot(), hosts=True)
    sub = next(iter(rollup.subclusters.values()))
    for kind, ident in (("clusters", sub.cluster), ("subclusters", sub.unique_id)):
        parts = glue.xml.entity_parts_of(frozen, kind, ident)
        assert parts is not None and b"".join(parts) == glue.xml.entity(kind, ident)
        host = next(iter(rollup.hosts_of(sub.unique_id)))
        assert any(part is glue.xml.fragment(host, sub.unique_id) for part in parts)
        json_parts = glue.json.entity_parts_of(frozen, kind, ident)
        assert json_parts is not None and b"".join(json_parts) == glue.json.entity(kind, ident)
    assert glue.xml.entity_parts_of(frozen, "clusters", "no-such-cluster") is None
    assert glue.xml.entity_parts_of(frozen, "subclusters", "no-such-subcluster") is None


# --- the LDIF writer and the diff -----------------------------------------------------------

def test_unsafe_values_are_base64_and_long_lines_folded() -> None:
    text = ldif.entry("cn=x,o=grid", [("a", " leading"), ("b", "trailing "), ("c", ":colon"), ("d", "<lt"),
                                      ("e", "line\nbreak"), ("f", "\u00e9t\u00e9"), ("g", "x" * 200), ("h", "")])
    lines = text.split("\n")
    assert all(len(x) <= ldif.WIDTH for x in lines)
    for name in "abcdef":
        assert any(x.startswith(f"{name}:: ") for x in lines), name
    assert not any(x.startswith("h:") for x in lines)  # empty values are left out
    assert ldif.parse(text)["cn=x,o=grid"][-1] == ("g", "x" * 200)


@settings(max_examples=200)
@given(st.text(min_size=1, max_size=300).filter(lambda v: "\r" not in v),
       st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2fff), min_size=1, max_size=120))
def test_ldif_round_trips(value: str, rdn: str) -> None:
    dn = f"cn={ldif.dn_value(rdn)},o=grid"
    assert ldif.parse(ldif.entry(dn, [("description", value)])) == {dn: [("description", value)]}


def test_no_control_character_is_written_as_it_is() -> None:
    # RFC 2849 lets ESC and the like through raw; `infosvc ldif` prints the LDIF to a terminal, and
    # an upstream's id `ce\x1b[2Jx` reached it as an escape sequence
    for value in ("ce\x1b[2Jx", "a\x01b", "del\x7f", "tab\there", "\x9bcsi"):
        text = ldif.entry("cn=x,o=grid", [("description", value)])
        assert all(ch == "\n" or " " <= ch <= "~" for ch in text), repr(text)
        assert ldif.parse(text)["cn=x,o=grid"] == [("description", value)]


def _rfc4514_value(escaped: str) -> str:
    """An RFC 4514 attribute value read back as an LDAP server compares it: escapes undone, an
    unescaped leading or trailing space dropped."""
    out, kept, i = [], [], 0
    while i < len(escaped):
        if escaped[i] == "\\":
            pair = escaped[i + 1:i + 3]
            if len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair):
                out.append(chr(int(pair, 16)))
                i += 3
            else:
                out.append(escaped[i + 1])
                i += 2
            kept.append(True)
        else:
            out.append(escaped[i])
            kept.append(False)
            i += 1
    while out and out[0] == " " and not kept[0]:
        out.pop(0)
        kept.pop(0)
    while out and out[-1] == " " and not kept[-1]:
        out.pop()
        kept.pop()
    return "".join(out)


@settings(max_examples=500)
@given(st.text(alphabet=st.sampled_from(" \\#,+=;<>\"ax\u00e9"), min_size=1, max_size=8))
def test_a_dn_value_reads_back_as_written(value: str) -> None:
    # "x\\ " (a backslash, then a space) was written x\\\\ with its space unescaped: slapd dropped
    # the space, and the CEs `x\\` and `x\\ ` had one DN
    assert _rfc4514_value(ldif.dn_value(value)) == value


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from("x\\\u00e9\u20ac9e"), max_size=6), st.text(alphabet=st.sampled_from("x\\\u00e9\u20ac9e"), max_size=6))
def test_ia5_keeps_distinct_texts_distinct(one: str, other: str) -> None:
    assert ldif.ia5(one).isascii()
    assert (ldif.ia5(one) == ldif.ia5(other)) is (one == other)
    assert ldif.ia5("x\u00e9") != ldif.ia5("x\\xe9") and ldif.ia5("plain") == "plain"


def test_changes_are_deletes_adds_and_modifies() -> None:
    old = {"o=grid": [("o", "grid")], "cn=a,o=grid": [("n", "1"), ("m", "x")], "cn=b,o=grid": [("n", "1")],
           "cn=c,cn=b,o=grid": [("n", "1")]}
    new = {"o=grid": [("o", "grid")], "cn=a,o=grid": [("n", "2")], "cn=d,o=grid": [("n", "1")],
           "cn=e,cn=d,o=grid": [("n", "1")]}
    text = ldif.changes(old, new)
    records = text.strip().split("\n\n")
    heads = [r.split("\n")[:2] for r in records]
    assert heads == [["dn: cn=c,cn=b,o=grid", "changetype: delete"], ["dn: cn=b,o=grid", "changetype: delete"],
                     ["dn: cn=d,o=grid", "changetype: add"], ["dn: cn=e,cn=d,o=grid", "changetype: add"],
                     ["dn: cn=a,o=grid", "changetype: modify"]]
    assert records[-1].split("\n")[2:] == ["replace: n", "n: 2", "-", "delete: m", "-"]
    assert ldif.changes(new, new) == ""


def test_ldif_of_a_site_changes_by_a_diff(rollup: Rollup) -> None:
    before = ldif.parse(render(rollup, "ldif-1.3").decode())
    for host in [h for h in rollup.hosts if h.startswith("b")]:
        rollup.remove(host)  # beta's one subcluster goes; the CEs' figures move
    after = ldif.parse(render(rollup, "ldif-1.3").decode())
    text = ldif.changes(before, after)
    assert "changetype: delete" in text and "changetype: modify" in text and "changetype: add" not in text
    assert "GlueCEStateFreeCPUs" in text


# --- what glue-validator names mandatory, and what real providers publish ------------------------

def _values_of(entries: dict[str, ldif.Attributes], dn_start: str) -> dict[str, list[str]]:
    [attrs] = [attrs for dn, attrs in entries.items() if dn.startswith(dn_start)]
    found: dict[str, list[str]] = {}
    for name, value in attrs:
        found.setdefault(name, []).append(value)
    return found


def _sized_site() -> Rollup:
    """Two subclusters of hosts that report sockets and swap, one benchmarked faster than the other."""
    from infosvc.hosts import host_from_node
    from infosvc.model.node import Consumable, Extension
    from support.documents import make_node
    from support.gridsite import WHEN

    config = site_config()
    rollup = Rollup(config)
    for name, cpus, ram, sockets, swap in [(f"a{i:03d}", 16, 16000, 2, 4000) for i in (1, 2, 3)] + [
            ("b01", 64, 256000, 1, 0), ("b02", 64, 256000, 1, 0)]:
        node = make_node(name, processors=cpus, memory_mb=ram, model="Xeon" if name[0] == "a" else "EPYC",
                         extra=(Extension("Sockets", str(sockets), "Processor"),))
        node.configured.add(Consumable("Swap", float(swap), units="MB"))
        rollup.update(host_from_node(node, "Ready", config, WHEN))
    rollup.read_queue(CEQueues(clock=lambda: 1000.0, figures={
        CE: CEFigures(running_jobs=3, waiting_jobs=5, held_cpus=24, estimated_start=1600.0, worst_start=4600.0)}))
    return rollup


def test_glue13_publishes_the_mandatory_and_the_providers_attributes() -> None:
    entries = ldif.parse(render(_sized_site(), "ldif-1.3").decode())
    ce = _values_of(entries, "GlueCEUniqueID=" + ldif.dn_value(CE))
    from infosvc import __version__
    assert ce["GlueCEImplementationVersion"] == [__version__]
    assert ce["GlueCEInfoContactString"] == ["https://glue.example.org:8443/v1/jobs"]
    assert ce["GlueCEInfoJobManager"] == ["infosvc"]
    assert "CPUScalingReferenceSI00=1500" in ce["GlueCECapability"]  # a001-a020 are benchmarked at 1500
    xeon = _values_of(entries, "GlueSubClusterUniqueID=alpha-")
    assert xeon["GlueSubClusterPhysicalCPUs"] == ["6"] and xeon["GlueSubClusterLogicalCPUs"] == ["48"]
    assert xeon["GlueHostMainMemoryVirtualSize"] == ["20000"]  # RAM and swap
    views = {dn.split(",")[0]: dict(attrs) for dn, attrs in entries.items() if dn.startswith("GlueVOViewLocalID=")}
    assert set(views) == {"GlueVOViewLocalID=atlas", "GlueVOViewLocalID=dteam"}
    atlas = views["GlueVOViewLocalID=atlas"]
    assert atlas["GlueCEAccessControlBaseRule"] == "VO:atlas" and atlas["GlueChunkKey"] == f"GlueCEUniqueID={CE}"
    assert (atlas["GlueCEStateRunningJobs"], atlas["GlueCEStateWaitingJobs"]) == ("3", "5")  # the CE's: no per-VO
    assert views["GlueVOViewLocalID=dteam"]["GlueCEAccessControlBaseRule"] == "VOMS:/dteam/Role=x"
    assert not any("GlueVOViewLocalID" in dn and "ce-beta" in dn for dn in entries)  # no rules, no views


def test_glue2_publishes_the_egi_profile_s_mandatory_attributes() -> None:
    entries = ldif.parse(render(_sized_site(), "ldif-2.0").decode())
    from infosvc import __version__
    endpoint = _values_of(entries, "GLUE2EndpointID=")
    assert endpoint["GLUE2EndpointImplementationVersion"] == [__version__]
    assert endpoint["GLUE2EndpointURL"] == ["https://glue.example.org:8443/v1/jobs"]
    manager = _values_of(entries, "GLUE2ManagerID=")
    assert manager["GLUE2ComputingManagerTotalPhysicalCPUs"] == ["8"]  # 3 x 2 + 2 x 1
    xeon = _values_of(entries, "GLUE2ResourceID=urn:infosvc:glue.example.org:ee:alpha-")
    assert xeon["GLUE2ExecutionEnvironmentPhysicalCPUs"] == ["2"]
    assert xeon["GLUE2ExecutionEnvironmentCPUMultiplicity"] == ["multicpu-multicore"]
    assert xeon["GLUE2ExecutionEnvironmentVirtualMemorySize"] == ["20000"]
    # the reference is the slowest benchmarked subcluster's: its factor is 1
    assert xeon["GLUE2ExecutionEnvironmentCPUTimeScalingFactor"] == xeon["GLUE2ExecutionEnvironmentWallTimeScalingFactor"]
    share = _values_of(entries, "GLUE2ShareID=urn:infosvc:glue.example.org:share:ce.example.org")
    assert share["GLUE2ComputingShareDefaultWallTime"] == share["GLUE2ComputingShareMaxWallTime"] == [str(2880 * 60)]
    assert share["GLUE2ComputingShareDefaultCPUTime"] == [str(1440 * 60)]
    assert share["GLUE2ComputingShareMaxMainMemory"] == ["256000"]
    assert share["GLUE2ComputingShareGuaranteedMainMemory"] == ["16000"]
    assert share["GLUE2ComputingShareMaxVirtualMemory"] == ["256000"]
    assert share["GLUE2ComputingShareGuaranteedVirtualMemory"] == ["20000"]
    assert share["GLUE2ComputingShareMaxSlotsPerJob"] == ["176"]
    free = int(share["GLUE2ComputingShareFreeSlots"][0])
    assert share["GLUE2ComputingShareUsedSlots"] == [str(176 - free)]
    # the joins DIRAC and ginfo follow, beside the generic keys
    assert share["GLUE2ComputingShareComputingServiceForeignKey"] == share["GLUE2ShareServiceForeignKey"]
    assert share["GLUE2ComputingShareComputingEndpointForeignKey"] == share["GLUE2ShareEndpointForeignKey"]
    assert share["GLUE2ComputingShareExecutionEnvironmentForeignKey"] == share["GLUE2ShareResourceForeignKey"]
    assert xeon["GLUE2ExecutionEnvironmentComputingManagerForeignKey"] == xeon["GLUE2ResourceManagerForeignKey"]


def test_the_ldif_says_what_a_grid_client_would_miss() -> None:
    """A site without the service's address or any CE's VOs says so in comments a BDII ignores."""
    from infosvc.codec.gridformat import WARNING_PREFIX
    from infosvc.config import SiteConfig

    bare = Rollup(SiteConfig())
    for fmt in ("ldif-1.3", "ldif-2.0"):
        text = render(bare, fmt).decode()
        warnings = [line for line in text.splitlines() if line.startswith(WARNING_PREFIX)]
        assert len(warnings) == 2 and "information_service_url" in warnings[0] and "access_control" in warnings[1]
        assert text.startswith("# GLUE") and ldif.parse(text) is not None
    assert WARNING_PREFIX not in render(site_rollup(), "ldif").decode()  # a grid site's: none
