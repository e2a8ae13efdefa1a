"""GLUE 2.0's ids (infosvc/codec/glue2.py `local`): every text the site's entities are named by
(a CE's or subcluster's id, a runtime environment, an access rule) in GLUE's LocalID_t characters,
one id per text and one text per id, whatever a site or an upstream site wrote; an id already
in those characters is kept as it is. A top level renders what other sites published, so the
texts here are ones no config of ours admits: a lone surrogate, an id that reads like another's
escaped one. The site with such ids is loaded into slapd (tests/support/slapd.py), which refuses a
second entry of one DN ("Already exists") where XML and JSON would merely repeat an ID.
"""

from __future__ import annotations

import collections
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import pytest
from hypothesis import given, settings, strategies as st

from infosvc.codec.glue2 import id_part, local
from infosvc.codec.gridformat import GridOptions
from infosvc.federation.tree import SiteTree
from infosvc.model.glue import Accelerator, ApplicationSoftware
from infosvc.publish.glue import Glue
from support.gridcheck import NS, glue2_validator, xml_valid
from support.gridsite import CE_ALL, SITE, site_rollup
from support.slapd import running

LOCAL_ID = re.compile(r"[A-Za-z0-9_.:\-]*")
_ESCAPE = re.compile(r"_x([0-9A-F]{6}|[0-9A-F]{4})_")
#: what an id kept as it is may not hold: what reads as an escape, in either case
_LIKE_ESCAPE = re.compile(r"_[xX](?:[0-9A-Fa-f]{6}|[0-9A-Fa-f]{4})_")


def unlocal(ident: str) -> str:
    """The text an id was made of: the proof that `local` is one-to-one (an id with no escape is its text)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), ident)


def site_tree(subs: Sequence[str] = (), rtes: Sequence[Sequence[str]] = (),
              ces: Sequence[tuple[str, Sequence[str]]] = ()) -> SiteTree:
    """The grid test site as a top level holds another site: its first subclusters named `subs`
    with the runtime environments `rtes`, and CEs (id, rules) like its CE that serves every cluster
    in place of its own; texts no config of ours would admit."""
    base = SiteTree.of_tree(site_rollup())
    pairs = []
    for i, sub in enumerate(s for c in base.clusters() for s in base.subclusters_of(c.unique_id)):
        hosts = list(base.hosts_of(sub.unique_id))
        if i < len(subs):
            software = ApplicationSoftware(tuple(rtes[i])) if i < len(rtes) else sub.application_software
            sub = replace(sub, unique_id=subs[i], application_software=software)
        pairs.append((sub, hosts))
    every = base.computing_elements()
    template = next(ce for ce in every if ce.unique_id == CE_ALL)
    own = [replace(template, unique_id=ident, access_control_rules=tuple(rules)) for ident, rules in ces]
    return SiteTree(base.clusters(), pairs, own or every, base.information_service_url)


def rendered(tree: SiteTree, fmt: str) -> bytes:
    return Glue(tree).rendering(fmt, GridOptions(site=SITE, base=True)).tree()


def json_ids(document: dict[str, Any]) -> list[str]:
    return [e["ID"] for kind in document.values() if isinstance(kind, list) for e in kind
            if isinstance(e, dict) and "ID" in e]


def repeated(ids: Iterable[str]) -> list[str]:
    return [i for i, n in collections.Counter(ids).items() if n > 1]


# --- the mapping ----------------------------------------------------------------------------

@pytest.mark.parametrize("ident", ["ce-beta", "alpha-978f972c64", "LCG-2", "MPI", "urn:x:y", "cluster_x86_64",
                                   "x_y.b5fba5", "a_x12_b", "_x0041", "x0041_", ""])
def test_an_id_in_localid_characters_is_kept(ident: str) -> None:
    assert local(ident) == ident


def test_a_lone_surrogate_makes_an_id() -> None:
    # an upstream's JSON may carry one (`"\ud800"` is valid JSON); hashing its UTF-8 raised, and a
    # top level answered 500 for GLUE 2.0 in every syntax
    ids = [local(text) for text in ("x\ud800y", "x\udfffy", "\ud800", "x\U0001f600y")]
    assert all(LOCAL_ID.fullmatch(i) for i in ids) and len(set(ids)) == 4
    assert [unlocal(i) for i in ids] == ["x\ud800y", "x\udfffy", "\ud800", "x\U0001f600y"]


def test_an_id_that_reads_like_another_s_escaped_one_stays_apart() -> None:
    # `x_y.b5fba5` is what `x y` was once published as: two sites' subclusters had one id
    for text, other in [("x y", "x_y.b5fba5"), ("x y", "x_x0020_y"), ("a\u00e9", "a_x00e9_"), ("_", "_x005F_")]:
        assert local(text) != local(other), (text, other)
        assert unlocal(local(text)) == text and unlocal(local(other)) == other


def test_texts_alike_but_for_their_odd_characters_stay_apart() -> None:
    # a digest of 24 bits told them apart: among 20,000 such ids some had one id, and an upstream
    # could find another site's in seconds
    texts = [f"ce{chr(c)}x" for c in range(0x100, 0x100 + 20_000)]
    assert len({local(t) for t in texts}) == len(texts)


@settings(max_examples=1000)
@given(st.text(alphabet=st.sampled_from("_xX0aF5.: /\u00e9\ud800\U0001f600"), max_size=12))
def test_every_text_has_its_own_id_in_localid_characters(text: str) -> None:
    ident = local(text)
    assert LOCAL_ID.fullmatch(ident), ident
    assert unlocal(ident) == text  # one text per id: no two texts share one
    assert (ident == text) is (LOCAL_ID.fullmatch(text) is not None and _LIKE_ESCAPE.search(text) is None)


# --- the renderings -------------------------------------------------------------------------

def test_glue2_renders_a_ce_whose_id_and_rules_hold_a_lone_surrogate() -> None:
    ces = ["ce\ud800x", "ce\udfffx"]
    tree = site_tree(ces=[(ces[0], ["VO:atlas", "DN:/CN=\ud800"]), (ces[1], ["VO:cms"])])
    document = json.loads(rendered(tree, "glue2-json"))
    shares = {f"urn:infosvc:{SITE}:share:{local(ce)}" for ce in ces}
    assert not list(glue2_validator().iter_errors(document))
    assert {s["ID"] for s in document["ComputingShare"]} == shares
    root = xml_valid(rendered(tree, "glue2-xml"))
    assert {e.findtext(f"{NS}ID") for e in root.iter(f"{NS}ComputingShare")} == shares
    text = rendered(tree, "ldif-2.0").decode()
    assert all(f"GLUE2ShareID={s}," in text for s in shares)


def test_no_two_entities_share_an_id(tmp_path: Path) -> None:
    # each text is the other's id as once published (`local` of 24-bit digests)
    tree = site_tree(subs=["x y", "x_y.b5fba5"], rtes=[["R 4.3"], ["R_4.3.2f8a67"]],
                     ces=[("ce a", ["VO:atlas"]), ("ce_a.5984bd", ["VO:atlas"])])
    document = json.loads(rendered(tree, "glue2-json"))
    assert repeated(json_ids(document)) == []
    assert len(document["ExecutionEnvironment"]) == 4 and len(document["ComputingShare"]) == 2
    assert sorted(a["AppName"] for a in document["ApplicationEnvironment"]) == ["MPI", "R 4.3", "R_4.3.2f8a67"]
    root = xml_valid(rendered(tree, "glue2-xml"))
    assert repeated(e.text or "" for e in root.iter(f"{NS}ID")) == []
    with running(tmp_path / "slapd") as slapd:
        slapd.add(rendered(tree, "ldif-2.0").decode())  # "Already exists" for the second of one DN
        held = slapd.search("GLUE2GroupID=resource,o=glue", "(objectClass=GLUE2ExecutionEnvironment)",
                            "GLUE2ResourceID")
        assert sorted(v for a in held.values() for n, v in a if n == "GLUE2ResourceID") == sorted(
            e["ID"] for e in document["ExecutionEnvironment"])


# --- GLUE 2.1's accelerator entities: ids of two texts each ------------------------------------

def gpu_tree(subs: Sequence[tuple[str, str, str]], ces: Sequence[str]) -> SiteTree:
    """The grid test site as a top level holds another site: its first subclusters named, each
    with one accelerator, by `subs` (subcluster id, accelerator type, model), and CEs `ces` like
    its CE that serves every cluster."""
    base = site_tree(subs=[ident for ident, _, _ in subs], ces=[(ce, []) for ce in ces])
    pairs = []
    for i, sub in enumerate(s for c in base.clusters() for s in base.subclusters_of(c.unique_id)):
        hosts = list(base.hosts_of(sub.unique_id))
        if i < len(subs):
            _, kind, model = subs[i]
            sub = replace(sub, accelerators=(Accelerator(kind, model, 2),), total_accelerators=4 * max(1, len(hosts)))
        else:
            sub = replace(sub, accelerators=())
        pairs.append((sub, hosts))
    return SiteTree(base.clusters(), pairs, base.computing_elements(), base.information_service_url)


def test_no_two_accelerator_entities_share_an_id() -> None:
    # each id was its parts joined by ':', which LocalID_t admits in a part too: subcluster `x:y`
    # with model `z` and subcluster `x` with model `y:z` were one AcceleratorEnvironment id, and
    # CE `a` with accelerators of type `b:c` and CE `a:b` with type `c` one share's
    tree = gpu_tree([("x:y", "c", "z"), ("x", "b:c", "y:z")], ces=["a", "a:b"])
    document = json.loads(rendered(tree, "glue2-json"))
    assert not list(glue2_validator().iter_errors(document))
    assert len(document["AcceleratorEnvironment"]) == 2
    assert len(document["ComputingShareAcceleratorInfo"]) == 4  # two CEs, each over both types
    assert repeated(json_ids(document)) == []
    assert all(LOCAL_ID.fullmatch(i) for i in json_ids(document))


def test_an_accelerator_id_names_its_parts_as_they_were() -> None:
    # the ids read back: every ':' an id holds past its kind separates two parts, each `local`'s
    # escaping with ':' escaped too
    tree = gpu_tree([("x:y", "c", "z_x0041_"), ("x", "b:c", "y:z")], ces=["a", "a:b"])
    document = json.loads(rendered(tree, "glue2-json"))
    prefix = f"urn:infosvc:{SITE}:"
    environments = {tuple(unlocal(p) for p in e["ID"].removeprefix(f"{prefix}accenv:").split(":"))
                    for e in document["AcceleratorEnvironment"]}
    assert environments == {("x:y", "z_x0041_"), ("x", "y:z")}
    shares = {tuple(unlocal(p) for p in e["ID"].removeprefix(f"{prefix}shareaccinfo:").split(":"))
              for e in document["ComputingShareAcceleratorInfo"]}
    assert shares == {(ce, kind) for ce in ("a", "a:b") for kind in ("c", "b:c")}


@settings(max_examples=1000)
@given(st.text(alphabet=st.sampled_from("_xX0aF5.: /\u00e9"), max_size=8),
       st.text(alphabet=st.sampled_from("_xX0aF5.: /\u00e9"), max_size=8))
def test_every_pair_of_texts_has_its_own_part_id(first: str, second: str) -> None:
    ident = f"{id_part(first)}:{id_part(second)}"
    assert LOCAL_ID.fullmatch(ident), ident
    assert [unlocal(p) for p in ident.split(":")] == [first, second]
    # a part with no ':' and no odd character is its own id, as `local` keeps it
    if ":" not in first:
        assert id_part(first) == local(first)


def test_a_benchmark_id_is_no_execution_environment_s() -> None:
    # a Benchmark's id was its EE's and `:specint2000`: the EE of an upstream subcluster named
    # `X:specint2000` had the id of subcluster X's benchmark
    base = site_tree()
    benched = next(s for c in base.clusters() for s in base.subclusters_of(c.unique_id) if s.benchmark is not None)
    assert benched.benchmark is not None and benched.benchmark.si00 > 0
    twin = f"{benched.unique_id}:specint2000"
    names = [s.unique_id for c in base.clusters() for s in base.subclusters_of(c.unique_id)]
    at = names.index(benched.unique_id)
    tree = site_tree(subs=[*names[:at + 1], twin])  # the subcluster after it renamed so
    document = json.loads(rendered(tree, "glue2-json"))
    assert repeated(json_ids(document)) == []
    assert {e["ID"] for e in document["ExecutionEnvironment"]}.isdisjoint(e["ID"] for e in document["Benchmark"])
    root = xml_valid(rendered(tree, "glue2-xml"))
    assert repeated(e.text or "" for e in root.iter(f"{NS}ID")) == []
