"""Cluster and CE ids of a site config that differ only in case (or runs of spaces) are refused
(infosvc/config/table.py, unique_ids): GLUE 1.3 UniqueIDs are compared so by a directory
(caseIgnoreIA5Match), and a config with clusters `C` and `c` gave a GLUE 1.3 LDIF that ldapadd
refused four times ("Already exists (68)"), the second cluster and CE missing from the BDII.
A configured cluster whose id is `default` in another case is the cluster of the hosts no
cluster takes, as `default` itself is: beside the implicit `default` it was such a twin (loaded
into slapd here, tests/support/slapd.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from infosvc.codec.gridformat import GridOptions
from infosvc.config.site import SiteConfig, parse_config
from infosvc.config.table import ConfigError, unique_ids
from infosvc.hosts.rollup import Rollup, host_from_node
from infosvc.publish.glue import Glue
from support.documents import make_node
from support.slapd import running

WHEN = "2024-05-01T12:00:00Z"


def _error(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(tomllib.loads(text))
    return str(info.value)


def test_clusters_differing_only_in_case_are_refused() -> None:
    message = _error('[[clusters]]\nid = "C"\nnodes = "a[1-2]"\n[[clusters]]\nid = "c"\n')
    assert message.startswith("clusters: ids 'C' and 'c' differ only in case or spaces"), message
    assert "directory" in message


def test_computing_elements_differing_only_in_case_are_refused() -> None:
    message = _error('[[clusters]]\nid = "C"\n[[computing_elements]]\nid = "CE1"\nclusters = ["C"]\n'
                     '[[computing_elements]]\nid = "ce1"\n')
    assert message.startswith("computing_elements: ids 'CE1' and 'ce1' differ only in case or spaces"), message


def test_ids_differing_only_in_runs_of_spaces_are_refused() -> None:
    message = _error('[[clusters]]\nid = "batch one"\n[[clusters]]\nid = "batch   one"\n')
    assert message.startswith("clusters: ids 'batch one' and 'batch   one' differ only in case or spaces"), message


def test_an_id_used_twice_is_said_so_as_before() -> None:
    with pytest.raises(ConfigError, match="^clusters: id 'a' is used twice$"):
        unique_ids("clusters", ["a", "b", "a"])


def test_ids_that_differ_otherwise_are_accepted() -> None:
    unique_ids("clusters", ["gpu", "gpu-1", "GPU2", "batch one", "batchone"])
    config = parse_config(tomllib.loads('[[clusters]]\nid = "Gpu"\n[[clusters]]\nid = "cpu"\n'))
    assert [c.id for c in config.clusters] == ["Gpu", "cpu"]  # published as written


def test_an_id_longer_than_a_top_level_takes_is_refused() -> None:
    message = _error(f'[[clusters]]\nid = "{"c" * 201}"\n')
    assert message.startswith("clusters: id 'cccc") and "201 characters long, more than the 200" in message
    parse_config(tomllib.loads(f'[[clusters]]\nid = "{"c" * 200}"\n'))
    message = _error(f'[[clusters]]\nid = "c"\n[[computing_elements]]\nid = "{"e" * 201}"\nclusters = ["c"]\n')
    assert message.startswith("computing_elements: id 'eeee"), message


# --- the implicit cluster `default` ----------------------------------------------------------

def _default_site(spelled: str) -> tuple[SiteConfig, Rollup]:
    """A site whose first cluster's id is `spelled`, with hosts of it and of `gpu`, and x1, which
    no configured cluster's `nodes` name."""
    config = parse_config({"clusters": [{"id": spelled, "name": "Main", "nodes": "a[1-2]"},
                                        {"id": "gpu", "nodes": "g[1-2]"}],
                           "computing_elements": [{"id": "ce1", "clusters": [spelled.strip(), "gpu"]}]})
    rollup = Rollup(config)
    for name in ("a1", "g1", "x1"):
        rollup.update(host_from_node(make_node(name), "Ready", config, WHEN))
    return config, rollup


@pytest.mark.parametrize("spelled", ["Default", "DEFAULT", " default ", "default"])
def test_a_configured_twin_of_default_is_the_cluster_of_hosts_no_cluster_takes(spelled: str,
                                                                               tmp_path: Path) -> None:
    # x1 went to the implicit `default` beside the configured `Default`: one GlueClusterUniqueID
    # to a directory, and ldapadd refused the second ("Already exists (68)")
    config, rollup = _default_site(spelled)
    configured = spelled.strip()
    text = Glue(rollup).rendering("ldif", GridOptions(base=True, site="SITE")).tree().decode()
    with running(tmp_path / "slapd") as slapd:
        slapd.add(text)
        held = slapd.search("mds-vo-name=resource,o=grid", "(objectClass=GlueCluster)", "GlueClusterUniqueID",
                            "GlueClusterName")
    assert sorted((dict(a)["GlueClusterUniqueID"], dict(a)["GlueClusterName"]) for a in held.values()) == [
        (configured, "Main"), ("gpu", "gpu")]
    assert config.cluster_of("x1").id == configured and rollup.hosts["x1"].cluster == configured
    assert [c.unique_id for c in rollup.clusters()] == [configured, "gpu"]
    (ce,) = rollup.computing_elements()
    assert ce.info.total_cpus == 3 * rollup.hosts["a1"].total_cpus  # a1, x1 and g1, each once


def test_a_ce_naming_default_beside_a_configured_twin_is_refused() -> None:
    # `default` names no cluster there: the configured `Default` is the cluster of the hosts no
    # cluster takes, and a CE naming `default` published a second cluster, its twin
    message = _error('[[clusters]]\nid = "Default"\nnodes = "a[1-2]"\n[[computing_elements]]\nid = "ce1"\n'
                     'clusters = ["default"]\n')
    assert "no cluster 'default' is configured" in message and "'Default'" in message, message


def test_the_implicit_ce_is_never_beside_a_configured_twin() -> None:
    # the CE `default` is made only when the config names none: a configured `Default` replaces it
    config, rollup = _default_site("gpu2")
    assert [ce.unique_id for ce in rollup.computing_elements()] == ["ce1"]
    config = parse_config(tomllib.loads('[[computing_elements]]\nid = "Default"\n'))
    assert [ce.id for ce in config.computing_elements] == ["Default"]
    assert [ce.unique_id for ce in Rollup(config).computing_elements()] == ["Default"]
