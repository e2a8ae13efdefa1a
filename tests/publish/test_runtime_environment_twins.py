"""A runtime environment that reaches one subcluster twice is published once, in the spelling
first seen: from two entries of the site's config, a Slurm node's features beside the config's
list, or a site's document a top level reads. A directory compares GLUE 1.3's
GlueHostApplicationSoftwareRunTimeEnvironment ignoring case and runs of spaces, so `MPI` and
`mpi` are one value there, and slapd refuses an entry holding one value twice: the subcluster
gone from a BDII. GLUE 2.0's ApplicationEnvironment held its execution environment twice (a
foreign key repeated in LDAP, an association in XML and JSON). Each rendering is loaded into
slapd (tests/support/slapd.py) or checked against its schema.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

from infosvc.codec import ldif
from infosvc.codec.glue_read import read_glue
from infosvc.codec.gridformat import GridOptions
from infosvc.config.site import parse_config
from infosvc.federation.tree import SiteTree
from infosvc.hosts.rollup import Rollup, host_from_node
from infosvc.hosts.slurm_hosts import host_from_slurm
from infosvc.lrms.slurm_parse import nodes_of
from infosvc.model.glue import GlueTree
from infosvc.publish.glue import Glue
from support import FIXTURES
from support.documents import make_node
from support.gridcheck import NS, glue2_validator, xml_valid
from support.gridsite import CONFIG, SITE, WHEN
from support.slapd import running

SOFTWARE = [{"nodes": "a[001-100]", "runtime_environment": ["MPI", "LCG-2", "R 4.3"]},
            # the same names again in other spellings, a directory's twins of the first
            {"nodes": "a[001-020]", "runtime_environment": ["mpi", "R  4.3", "lcg-2", "CUDA"]},
            # another subcluster's own spelling: a GLUE 2.0 id of its own (caseExactMatch)
            {"nodes": "b[01-10]", "runtime_environment": ["mpi"]}]


def rollup_of(software: list[dict[str, Any]]) -> Rollup:
    raw = json.loads(json.dumps(CONFIG))
    raw["software"] = software
    config = parse_config(raw)
    rollup = Rollup(config)
    for name, memory in (("a001", 16000), ("a030", 16000), ("b01", 256000)):
        rollup.update(host_from_node(make_node(name, processors=8, memory_mb=memory), "Ready", config, WHEN))
    return rollup


def render(tree: GlueTree, fmt: str) -> bytes:
    return Glue(tree).rendering(fmt, GridOptions(site=SITE, base=True)).tree()


def loaded(tree: GlueTree, directory: Path) -> dict[str, list[str]]:
    """Each subcluster's runtime environments as slapd holds them once given the LDIF (GLUE 1.3
    and 2.0 both; ldapadd fails on an entry it refuses), by GlueSubClusterUniqueID."""
    with running(directory) as slapd:
        slapd.add(render(tree, "ldif").decode())
        held = slapd.search("mds-vo-name=resource,o=grid", "(objectClass=GlueSubCluster)", "GlueSubClusterUniqueID",
                            "GlueHostApplicationSoftwareRunTimeEnvironment")
    return {dict(attrs)["GlueSubClusterUniqueID"]: [v for n, v in attrs
                                                    if n == "GlueHostApplicationSoftwareRunTimeEnvironment"]
            for attrs in held.values()}


def glue2_checked(tree: GlueTree) -> dict[str, Any]:
    """The GLUE 2.0 JSON, valid and with each id once; its XML valid with each association once."""
    document = json.loads(render(tree, "glue2-json"))
    assert not list(glue2_validator().iter_errors(document))
    ids = [e["ID"] for kind in document.values() if isinstance(kind, list) for e in kind if "ID" in e]
    assert [i for i, n in collections.Counter(ids).items() if n > 1] == []
    root = xml_valid(render(tree, "glue2-xml"))
    for ee in root.iter(f"{NS}ExecutionEnvironment"):
        apps = [a.text for a in ee.iter(f"{NS}ApplicationEnvironmentID")]
        assert len(apps) == len(set(apps)), apps
    for entry in ldif.parse(render(tree, "ldif-2.0").decode()).values():
        assert len(entry) == len(set(entry)), entry  # a value twice is refused by ldapadd
    return document


def test_a_subcluster_publishes_a_runtime_environment_once(tmp_path: Path) -> None:
    rollup = rollup_of(SOFTWARE)
    sub_of = {h: s.unique_id for h in ("a001", "a030", "b01") if (s := rollup.subcluster_of(h))}
    held = loaded(rollup, tmp_path / "slapd")
    # first-seen order and spelling; the twins of a later entry add nothing, a new name is kept
    assert held[sub_of["a001"]] == ["MPI", "LCG-2", "R 4.3", "CUDA"]
    assert held[sub_of["a030"]] == ["MPI", "LCG-2", "R 4.3"]
    assert held[sub_of["b01"]] == ["mpi"]
    document = glue2_checked(rollup)
    assert sorted(a["AppName"] for a in document["ApplicationEnvironment"]) == ["CUDA", "LCG-2", "MPI", "R 4.3",
                                                                               "mpi"]


def test_a_slurm_node_s_feature_twin_of_the_config_s_name_is_one(tmp_path: Path) -> None:
    # g1 of the fixture has the feature `gpu`; the config names it `GPU` for it
    nodes = {n.name: n for n in nodes_of(json.loads((FIXTURES / "slurm" / "sinfo.json").read_text())["nodes"])}
    config = parse_config({"clusters": [{"id": "gpu", "nodes": "g[1-9]"}],
                           "software": [{"nodes": "g1", "runtime_environment": ["GPU", "CUDA-12"]}]})
    host = host_from_slurm(nodes["g1"], "g1", config, WHEN)
    assert host.application_software is not None
    assert host.application_software.runtime_environment == ("GPU", "CUDA-12")
    rollup = Rollup(config)
    rollup.update(host)
    assert list(loaded(rollup, tmp_path / "slapd").values()) == [["GPU", "CUDA-12"]]
    glue2_checked(rollup)


def test_a_top_level_publishes_a_site_s_repeated_runtime_environment_once(tmp_path: Path) -> None:
    # what an older infosvc (or any site) published: one name twice, and twins, in a subcluster
    data = json.loads(Glue(rollup_of([{"nodes": "a[001-100]", "runtime_environment": ["MPI"]}])).json.tree())
    for sub in data["subclusters"]:
        if "application_software" in sub:
            sub["application_software"]["runtime_environment"] = ["MPI", "MPI", "mpi ", "LCG-2"]
    tree = SiteTree.of_document(read_glue(json.dumps(data).encode()))
    held = loaded(tree, tmp_path / "slapd")
    assert sorted(held.values()) == [[], ["MPI", "LCG-2"], ["MPI", "LCG-2"]]  # a001's and a030's; b01's none
    document = glue2_checked(tree)
    assert sorted(a["AppName"] for a in document["ApplicationEnvironment"]) == ["LCG-2", "MPI"]
    for app in document["ApplicationEnvironment"]:  # each execution environment once
        owners = app["Associations"]["ExecutionEnvironmentID"]
        assert len(owners) == len(set(owners)) == 2
