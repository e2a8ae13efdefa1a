"""Appendix A units, wallDuration values, and node references with aggregation (spec 4.4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infosvc.model.durations import format_seconds, seconds
from infosvc.model.node import Consumable
from infosvc.model.noderef import Aggregation, NodeRef, NodeRefError
from infosvc.model.folding import fold
from infosvc.model.units import UNITS, UnitError, convert, exponent


def test_appendix_a_table() -> None:
    # byte, then each unit 2^10 times the one before, up to Doggabyte (2^100)
    assert list(UNITS.values()) == list(range(0, 101, 10))
    assert convert(1, "byte", "byte") == 1
    assert convert(1, "Kilobyte", "byte") == 1024
    assert convert(1, "Yottabyte", "byte") == 2**80
    assert convert(1, "Doggabyte", "byte") == 2**100


@pytest.mark.parametrize("alias,exp", [("B", 0), ("KB", 10), ("mb", 20), ("GiB", 30), ("TB", 40), ("PB", 50),
                                       ("EB", 60), ("ZB", 70), ("Zettabyte", 70), ("Aettabyte", 70), ("YB", 80),
                                       ("megabyte", 20), (" MB ", 20)])
def test_unit_names(alias: str, exp: int) -> None:
    assert exponent(alias) == exp


def test_conversions_are_exact() -> None:
    assert convert(512, "MB", "GB") == 0.5
    assert convert(483, "GB", "MB") == 483 * 1024
    assert convert(1, "Yottabyte", "Kilobyte") == 2**70
    assert convert(3, "byte", "Terabyte") * 2**40 == 3


def test_unknown_unit() -> None:
    with pytest.raises(UnitError, match="furlong"):
        convert(1, "furlong", "MB")


def test_default_units_are_mb_for_memory_swap_disk() -> None:
    for kind in ("Memory", "Swap", "Disk"):
        assert Consumable(kind, 2048.0).amount("GB") == 2.0
    assert Consumable("Memory", 2.0, units="GB").amount("MB") == 2048.0
    with pytest.raises(ValueError, match="no units"):
        Consumable("Resource", 1.0, name="License").amount("MB")


def test_durations() -> None:
    assert seconds("3576") == 3576.0
    assert seconds("PT1H2M3.5S") == 3723.5
    assert seconds("P1DT1S") == 86401.0
    assert seconds("P1Y2M") == 365 * 86400 + 60 * 86400
    assert seconds("-PT5S") == -5.0
    assert seconds(format_seconds(90.5)) == 90.5
    for bad in ("P", "PT", "soon", "1H", ""):
        with pytest.raises(ValueError):
            seconds(bad)


def test_plain_reference() -> None:
    assert NodeRef("node1").names() == ["node1"]


def test_list_with_default_and_own_delimiter() -> None:
    assert NodeRef("n1,n2, n3,n2", Aggregation.LIST).names() == ["n1", "n2", "n3"]
    assert NodeRef("n1:n2", Aggregation.LIST, delimiter=":").names() == ["n1", "n2"]


def test_range_expands_with_nodeset() -> None:
    names = NodeRef("node[5-23,77]", Aggregation.RANGE).names()
    assert names[0] == "node5" and names[-1] == "node77" and len(names) == 20
    assert NodeRef("cn[001-003]", Aggregation.RANGE).names() == ["cn001", "cn002", "cn003"]
    assert fold(["node5", "node6", "node7", "node77"]) == "node[5-7,77]"
    with pytest.raises(NodeRefError, match="bad Range"):
        NodeRef("node[5-", Aggregation.RANGE).names()


def test_fold_joins_unpadded_numbers_of_the_padded_width() -> None:
    assert fold(["cn01", "cn02", "cn03", "cn15", "cn12", "cn11"]) == "cn[01-03,11-12,15]"
    assert fold(["cn5", "cn01", "cn100"]) == "cn[5,100],cn01"  # not of the width: apart


@given(st.lists(st.tuples(st.sampled_from(["cn", "gpu", "r1n"]), st.integers(0, 150), st.sampled_from([0, 2, 3])),
                max_size=40))
def test_fold_names_exactly_its_names(parts: list[tuple[str, int, int]]) -> None:
    """What fold writes, ClusterShell reads back as the same names, each once."""
    from ClusterShell.NodeSet import NodeSet

    names = {f"{prefix}{number:0{width}d}" for prefix, number, width in parts}
    folded = fold(names)
    assert set(NodeSet(folded)) == names if names else folded == ""


def test_pattern_matches_whole_names_of_the_universe() -> None:
    universe = ["node1", "node5", "node6", "node10", "xnode1"]
    assert NodeRef("node[1-5]", Aggregation.PATTERN).names(universe) == ["node1", "node5"]
    assert NodeRef(r"node\d+", Aggregation.PATTERN).names(universe) == ["node1", "node5", "node6", "node10"]
    with pytest.raises(NodeRefError, match="known node names"):
        NodeRef("node.*", Aggregation.PATTERN).names()
    with pytest.raises(NodeRefError, match="bad Pattern"):
        NodeRef("node[", Aggregation.PATTERN).names(universe)


@pytest.mark.parametrize("expression,names", [
    ("n[1-3]", ["n1", "n2", "n3"]),
    ("a[1-2]b[1-2],c1", ["a1b1", "a1b2", "a2b1", "a2b2", "c1"]),
    ("n[1-3],n2,m1", ["n1", "n2", "n3", "m1"]),  # each once, in term order
    ("n[1-5]!n[2-3]", ["n1", "n4", "n5"]),  # other operators: ClusterShell's whole set
])
def test_ranges_expand_term_by_term(expression: str, names: list[str]) -> None:
    from infosvc.model.nodeset import expand_names, names_upper_bound

    assert expand_names(expression) == names
    assert names_upper_bound(expression) >= len(names)


def test_names_upper_bound_multiplies_brackets_and_adds_terms() -> None:
    from infosvc.model.nodeset import UNCOUNTABLE, names_upper_bound

    assert names_upper_bound("a[1-300]b[1-300],a[301-600]b[1-200]") == 90000 + 60000
    assert names_upper_bound("n[001-128]") == 128
    assert names_upper_bound("n[1-10/2]") == 5
    assert names_upper_bound("node1") == 1
    assert names_upper_bound("n[0-" + "9" * 30 + "]") == UNCOUNTABLE
