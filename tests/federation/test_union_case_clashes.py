"""Ids of two sites that differ only in case (or in runs of spaces) at a top level
(infosvc/federation/tree.py): a directory compares GLUE UniqueIDs so (caseIgnoreIA5Match), so
`CE1` of one site and `ce1` of another are one entry to a BDII, and the second is refused
("Already exists"), or the first replaced by the top's diff. The union renames them as it renames
two sites' equal ids: each as SITE/ID, the references to it too; checked against a real slapd."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from infosvc.codec import ldif
from infosvc.codec.glue_read import read_glue
from infosvc.codec.gridformat import GridOptions
from infosvc.federation.tree import SiteTree, UnionTree
from infosvc.publish.glue import Glue
from support.sitedocs import body, site_document
from support.slapd import running


def _site(ce: str, cluster: str, host: str) -> SiteTree:
    config = (f'[[clusters]]\nid = "{cluster}"\nnodes = "{host}"\n'
              f'[[computing_elements]]\nid = "{ce}"\nclusters = ["{cluster}"]\naccess_control = ["VO:atlas"]\n')
    return SiteTree.of_document(read_glue(body(site_document(config, (host,)))))


def _folded(ids: Iterable[str]) -> list[str]:
    return sorted(" ".join(i.split()).casefold() for i in ids)


def _no_two_alike(union: UnionTree) -> None:
    for kind, ids in union.ids().items():
        folded = _folded(ids)
        assert len(folded) == len(set(folded)), (kind, sorted(ids))


def test_ids_differing_only_in_case_are_each_published_under_their_site() -> None:
    s1, s2 = _site("CE1", "Batch", "n1.example.org"), _site("ce1", "batch", "n2.example.org")
    for order in ([("s1", s1), ("s2", s2)], [("s2", s2), ("s1", s1)]):
        union = UnionTree(order)
        assert {ce.unique_id for ce in union.computing_elements()} == {"s1/CE1", "s2/ce1"}
        assert {c.unique_id for c in union.clusters()} == {"s1/Batch", "s2/batch"}
        # the references follow: CE -> cluster, subcluster -> cluster, host -> cluster
        ces = {ce.unique_id: ce.clusters for ce in union.computing_elements()}
        assert ces == {"s1/CE1": ("s1/Batch",), "s2/ce1": ("s2/batch",)}
        assert union.hosts["n1.example.org"].cluster == "s1/Batch" and union.hosts["n2.example.org"].cluster == "s2/batch"
        assert [s.cluster for s in union.subclusters_of("s1/Batch")] == ["s1/Batch"]
        assert all(sub.unique_id.startswith(("s1/Batch-", "s2/batch-")) for sub in union.subclusters.values())
        assert union.site_of["computing-elements"] == {"s1/CE1": "s1", "s2/ce1": "s2"}
        # hosts that differ (not in case) keep their ids; the clash is logged under the ids as published
        assert set(union.hosts) == {"n1.example.org", "n2.example.org"}
        assert ("computing-elements", "CE1") in union.clashes and ("computing-elements", "ce1") in union.clashes
        _no_two_alike(union)


def test_ids_differing_only_in_runs_of_spaces_are_renamed_too() -> None:
    s1, s2 = _site("ce one", "batch", "n1.example.org"), _site("ce  one", "other", "n2.example.org")
    union = UnionTree([("s1", s1), ("s2", s2)])
    assert {ce.unique_id for ce in union.computing_elements()} == {"s1/ce one", "s2/ce  one"}
    assert union.cluster("batch") is not None and union.cluster("other") is not None  # no clash: kept
    _no_two_alike(union)


def test_an_id_that_is_another_s_renamed_id_but_for_case_is_renamed_in_turn() -> None:
    s1, s2 = _site("CE1", "b1", "n1.example.org"), _site("ce1", "b2", "n2.example.org")
    evil = _site("S1/ce1", "b3", "n3.example.org")  # s1's CE, once renamed, ignoring case
    for order in ([("s1", s1), ("s2", s2), ("evil", evil)], [("evil", evil), ("s2", s2), ("s1", s1)]):
        union = UnionTree(order)
        assert {ce.unique_id for ce in union.computing_elements()} == {"s1/CE1", "s2/ce1", "evil/S1/ce1"}
        assert union.site_of["computing-elements"]["s1/CE1"] == "s1"
        _no_two_alike(union)


def test_a_renamed_site_keeps_its_renamed_tree_while_nothing_changed() -> None:
    s1, s2 = _site("CE1", "Batch", "n1.example.org"), _site("ce1", "batch", "n2.example.org")
    first = UnionTree([("s1", s1), ("s2", s2)])
    again = UnionTree([("s1", s1), ("s2", s2)], renamed_before=first.renamed_trees)
    assert again.hosts["n1.example.org"] is first.hosts["n1.example.org"]


def test_the_union_of_sites_differing_only_in_case_loads_into_slapd(tmp_path: Path) -> None:
    s1, s2 = _site("CE1", "Batch", "n1.example.org"), _site("ce1", "batch", "n2.example.org")
    union = UnionTree([("s1", s1), ("s2", s2)])
    text = Glue(union).rendering("ldif", GridOptions(base=True, site="TOP")).tree().decode()
    entries = ldif.parse(text)
    with running(tmp_path / "slapd") as slapd:
        slapd.add(text)  # ldapadd stops at the first refusal: "Already exists (68)" before
        held = slapd.search("mds-vo-name=resource,o=grid", "(|(objectClass=GlueCE)(objectClass=GlueCluster))",
                            "GlueCEUniqueID", "GlueClusterUniqueID")
    assert len(held) == 4 == sum(1 for dn in entries if dn.startswith(("GlueCEUniqueID=", "GlueClusterUniqueID=")))
