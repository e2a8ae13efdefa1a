"""Cluster and CE ids of a site config that differ only in case (or runs of spaces) are refused
(infosvc/config/table.py, unique_ids): GLUE 1.3 UniqueIDs are compared so by a directory
(caseIgnoreIA5Match), and a config with clusters `C` and `c` gave a GLUE 1.3 LDIF that ldapadd
refused four times ("Already exists (68)"), the second cluster and CE missing from the BDII."""

from __future__ import annotations

import tomllib

import pytest

from infosvc.config.site import parse_config
from infosvc.config.table import ConfigError, unique_ids


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
