"""GPU amounts decided over the site's columns (infosvc.matching.hostcolumns: each row's GPUs of a
model, and those its agent reports free) give what the per-host GPU check gives: the same hosts,
order, reasons and counts, on random sites of GPU and CPU hosts and random asks, and on a site whose
hosts report new GPU figures between two matches (the columns patched, not rebuilt)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.documents import GPUs, make_node
from test_matching import general_and_columns, host_of, requirements, site
from infosvc.matching import HostQuestion
from infosvc.matching.hostcolumns import HostColumns
from infosvc.model.node import Consumable, Node


def gpu_host(name: str, cpus: int, free: int, first: tuple[str, int, int] | None,
             second: tuple[str, int] | None = None) -> Node:
    """A host of `cpus` (`free` of them free) with `first` (model, count, busy) GPUs, and `second`
    (model, count; all free) of another model beside them."""
    node = make_node(name, processors=cpus, free_processors=free,
                     gpus=GPUs(model=first[0], count=first[1], busy=first[2]) if first else None)
    if second is not None:
        model, count = second
        node.configured.add(Consumable("Resource", float(count), name="GPU", type=model))
        node.available.add(Consumable("Resource", float(count), name="GPU", type=model))
    return node


def decided_by_columns(requested: str) -> bool:
    question = HostQuestion.of(requirements(requested))
    return question.thresholds is not None and bool(question.gpus)


GPU_ASKS = (
    '<Resource name="GPU">1</Resource>', '<Resource name="GPU">2</Resource>', '<Resource name="GPU">0</Resource>',
    '<Resource name="GPU" op="GE">1.5</Resource>', '<Resource name="GPU" op="GT">2</Resource>',
    '<Resource name="GPU" type="A100">2</Resource>', '<Resource name="GPU" type="H100">1</Resource>',
    '<Resource name="GPU" type="none such">1</Resource>',
    '<Resource name="GPU" context="Configured" op="GE">4</Resource>',
    '<Resource name="GPU" context="Configured">8</Resource>',
    '<Resource name="GPU" context="Configured" op="NE">4</Resource>',
    '<Resource name="GPU" context="Configured" op="LT">2</Resource>',
    '<Resource name="GPU" context="Configured" op="LE" type="A100">2</Resource>',
    '<Resource name="GPU" context="Configured" op="GT" type="H100">3</Resource>',
)
OTHER_TERMS = ('<Processors op="GE">2</Processors>', '<Memory op="GE">1024</Memory>',
               "<Architecture>x86_64</Architecture>", '<Feature preference="-1">ib</Feature>')

HOSTS = st.lists(st.tuples(
    st.sampled_from((1, 4, 8)),  # processors
    st.integers(0, 8),  # free processors (at most the processors)
    st.one_of(st.none(), st.tuples(st.sampled_from(("A100", "H100")), st.integers(1, 8), st.integers(0, 8))),
    st.one_of(st.none(), st.tuples(st.just("A100"), st.integers(1, 4))),  # a second model
    st.sampled_from(("Ready", "Ready", "Paused")),
), min_size=1, max_size=24)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hosts=HOSTS, asks=st.lists(st.sampled_from(GPU_ASKS), min_size=1, max_size=3),
       others=st.lists(st.sampled_from(OTHER_TERMS), max_size=2))
def test_gpu_asks_over_columns_are_the_per_host_check(hosts: list[tuple[Any, ...]], asks: list[str],
                                                     others: list[str]) -> None:
    nodes, states = [], {}
    for i, (cpus, free, first, second, state) in enumerate(hosts):
        if first is not None:
            first = (first[0], first[1], min(first[2], first[1]))
        node = gpu_host(f"g{(i * 7) % 31:02d}-{i}", cpus, min(free, cpus), first,
                        second if first is None or second is None or second[0] != first[0] else None)
        nodes.append(node)
        states[node.id] = state
    rollup, by_id = site(nodes, states)
    requested = "".join(asks + others)
    assert decided_by_columns(requested)
    columns = HostColumns()
    slow, fast = general_and_columns(requested, rollup, by_id, columns)
    assert fast == slow
    assert columns.last_sync[0] == "rebuilt"  # the columns' way was taken


@pytest.mark.parametrize("requested,fitting", [
    ('<Resource name="GPU">2</Resource>', {"free2", "free4", "mixed"}),
    ('<Resource name="GPU">3</Resource>', {"free4", "mixed"}),
    ('<Resource name="GPU" type="A100">3</Resource>', {"free4"}),  # mixed has 2 A100, all free
    ('<Resource name="GPU" type="A100">2</Resource>', {"free2", "free4", "mixed"}),
    ('<Resource name="GPU" context="Configured" op="GE">6</Resource>', {"mixed"}),
    ('<Resource name="GPU" context="Configured" op="EQ">4</Resource>', {"free2", "free4", "busy"}),
    ('<Resource name="GPU" context="Configured" op="LT">1</Resource>', {"cpu"}),
])
def test_gpu_asks_at_their_edges(requested: str, fitting: set[str]) -> None:
    nodes = [gpu_host("cpu", 8, 8, None), gpu_host("busy", 8, 8, ("A100", 4, 4)),
             gpu_host("free2", 8, 8, ("A100", 4, 2)), gpu_host("free4", 8, 8, ("A100", 4, 0)),
             gpu_host("mixed", 8, 8, ("H100", 4, 3), ("A100", 2))]
    rollup, by_id = site(nodes)
    assert decided_by_columns(requested)
    slow, fast = general_and_columns(requested, rollup, by_id)
    assert fast == slow
    assert {host for host, *_ in slow[0]} == fitting
    rejected = dict(slow[1])
    if requested == '<Resource name="GPU">2</Resource>':
        assert rejected["busy"] == ("GPU: asked GE 2 available, host has 0 free of 4",)


def test_gpu_columns_follow_reports() -> None:
    """A host's GPUs taken or freed between matches patch its row, the model's column with it."""
    nodes = [gpu_host(f"n{i}", 8, 8, ("A100", 4, i % 5)) for i in range(8)]
    rollup, by_id = site(nodes)
    columns = HostColumns()
    asked = '<Resource name="GPU" type="A100">2</Resource>'
    slow, fast = general_and_columns(asked, rollup, by_id, columns)
    assert fast == slow and columns.last_sync[0] == "rebuilt"
    for name, busy in (("n0", 4), ("n4", 0), ("n2", 1)):
        by_id[name] = gpu_host(name, 8, 8, ("A100", 4, busy))
        rollup.update(host_of(by_id[name], "Ready"))
        slow, fast = general_and_columns(asked, rollup, by_id, columns)
        assert fast == slow and columns.last_sync == ("patched", 1)
    assert {host for host, *_ in slow[0]} == {"n1", "n2", "n4", "n5", "n6", "n7"}


def test_a_gpu_ask_beside_other_dynamic_terms_takes_the_per_host_way() -> None:
    requested = '<Resource name="GPU">1</Resource><Feature>ib</Feature>'
    assert HostQuestion.of(requirements(requested)).thresholds is None
    rollup, by_id = site([gpu_host("a", 8, 8, ("A100", 4, 0))])
    columns = HostColumns()
    slow, fast = general_and_columns(requested, rollup, by_id, columns)
    assert fast == slow and columns.last_sync == ("none", 0)


def test_gpu_counts_past_any_real_host_are_none_and_both_ways_agree() -> None:
    # no agent has 10^30 GPUs, and the schema bounds no count: such a row would have rounded in
    # float64 (the per-host way took it), and a count past int64 failed every submission and match
    # (found in review); the roll-up now takes a count of 2^31 or more as none (hosts/glue_host.py)
    giant = make_node("giant")
    giant.configured.add(Consumable("Resource", 1e30, name="GPU", type="A100"))
    giant.available.add(Consumable("Resource", 1e30, name="GPU", type="A100"))
    rollup, by_id = site([giant, gpu_host("plain", 8, 8, ("A100", 4, 0))])
    assert rollup.hosts["giant"].total_accelerators == 0
    for asked in (f'<Resource name="GPU" op="GE">{int(1e30) + 1}</Resource>', '<Resource name="GPU">2</Resource>'):
        columns = HostColumns()
        slow, fast = general_and_columns(asked, rollup, by_id, columns)
        assert fast == slow and columns.last_sync[0] == "rebuilt"
    assert {host for host, *_ in slow[0]} == {"plain"}
