"""The compact form the server keeps its hosts in at a clean stop (infosvc/codec/node_compact.py):
every Node reads back equal, and what it did not write is refused, never half read."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.documents import make_node
from infosvc.codec.node_compact import FORM, node_from_compact, node_to_compact
from infosvc.codec.node_xml import parse_node
from infosvc.errors import DocumentError
from infosvc.model.node import Consumable, Extension, Node, Properties
from infosvc_agents.agent import HostAgent


def test_this_machines_agent_node_reads_back_equal() -> None:
    node = parse_node(HostAgent.for_host().document())
    assert node_from_compact(node_to_compact(node)) == node


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
maybe = st.none() | texts
numbers = st.integers(min_value=0, max_value=2**53) | st.floats(allow_nan=False, allow_infinity=False)
items = st.builds(Consumable, kind=st.sampled_from(["Processors", "Memory", "Disk", "Swap", "Network", "Resource"]),
                  value=numbers, units=maybe, metric=maybe, wall_duration=maybe,
                  consumption_rate=st.none() | st.floats(allow_nan=False, allow_infinity=False), name=maybe, type=maybe)
nodes = st.builds(Node, id=texts, name=maybe, features=st.lists(texts, max_size=3), opsys=maybe, arch=maybe,
                  description=maybe, state=maybe, extensions=st.lists(st.builds(Extension, texts, texts, maybe), max_size=5),
                  configured=st.builds(Properties, st.lists(items, max_size=4)),
                  available=st.builds(Properties, st.lists(items, max_size=4)),
                  utilized=st.builds(Properties, st.lists(items, max_size=4)))


@settings(max_examples=200)
@given(nodes)
def test_any_node_reads_back_equal_ints_and_floats_kept_apart(node: Node) -> None:
    back = node_from_compact(node_to_compact(node))
    assert back == node
    assert [type(i.value) for i in back.available] == [type(i.value) for i in node.available]


@pytest.mark.parametrize("data", [
    b"", b"not json", b"{}", b"[]", json.dumps([FORM + 1, "h"]).encode(),
    json.dumps([FORM, "h", None, [], None, None, None, None, [["only a name"]], [], [], []]).encode(),
    json.dumps([FORM, "h", None, [], None, None, None, None, [], [["Memory"]], [], []]).encode(),
    node_to_compact(make_node("h.example.org"))[:-5],
])
def test_what_it_did_not_write_is_refused(data: bytes) -> None:
    with pytest.raises(DocumentError):
        node_from_compact(data)
