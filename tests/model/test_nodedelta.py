"""Delta reports in the model: what a sender can say as a delta of a whole sample, and what the
receiver makes of it (infosvc/model/nodedelta.py). The samples are this machine's own agent's
and synthetic hosts'; each delta also goes through the XML codec, as it travels."""

from __future__ import annotations

import copy
import time
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.documents import make_node
from infosvc.codec.node_xml import node_to_xml, parse_node
from infosvc.errors import DocumentError
from infosvc.model.node import Consumable, Extension, Node
from infosvc.model.nodedelta import apply_delta, base_sample, delta_of
from infosvc_agents.agent import HostAgent


def sampled(host: str = "h1.example.org", sample: str = "run-1", **kwargs: object) -> Node:
    node = make_node(host, **kwargs)  # type: ignore[arg-type]
    node.extensions[:0] = [Extension("SampleTime", "2026-11-27T00:00:00Z", "Agent"),
                           Extension("SampleId", sample, "Agent")]
    node.utilized.add(Consumable("Resource", 0.5, metric="Average", name="Load", type="1min"))
    node.utilized.add(Consumable("Resource", 1000.0, units="byte", metric="Total", name="NetworkBytesIn", type="eth0"))
    return node


def travelled(node: Node) -> Node:
    """The node as the receiver reads it: written, schema-checked and parsed."""
    return parse_node(node_to_xml(node))


def set_value(items: list[Consumable], index: int, value: float) -> None:
    items[index] = replace(items[index], value=value)  # the parts are frozen (and may be shared)


def set_extension(node: Node, index: int, value: str) -> None:
    node.extensions[index] = replace(node.extensions[index], value=value)


def later(base: Node, sample: str = "run-2") -> Node:
    node = copy.deepcopy(base)
    set_extension(node, 1, sample)
    set_extension(node, 0, "2026-11-27T00:01:00Z")
    set_value(node.available.items, 1, 1234.5)  # free memory
    set_value(node.utilized.items, 1, 0.75)  # load
    set_value(node.utilized.items, 2, 98765.0)  # a counter
    return node


def test_a_real_agent_sample_round_trips_through_a_delta() -> None:
    agent = HostAgent.for_host()
    base = agent.node()
    time.sleep(0.05)
    node = agent.node()
    delta = delta_of(base, node)
    assert delta is not None
    document = node_to_xml(delta)
    assert len(document) < len(node_to_xml(node)) / 3  # it says far less
    received = parse_node(document)  # valid against the SSS Node schema
    assert base_sample(received) == base.extension("SampleId", "Agent")
    assert apply_delta(travelled(base), received) == travelled(node)


def test_a_delta_carries_only_what_changed() -> None:
    base = sampled()
    delta = delta_of(base, later(base))
    assert delta is not None
    assert [(e.name, e.value) for e in delta.extensions] == [
        ("SampleTime", "2026-11-27T00:01:00Z"), ("SampleId", "run-2"), ("BaseSample", "run-1")]
    assert delta.state is None  # the same as the base's
    assert [(i.kind, i.value) for i in delta.available] == [("Memory", 1234.5)]
    assert [(i.name, i.value) for i in delta.utilized] == [("Load", 0.75), ("NetworkBytesIn", 98765.0)]
    assert (delta.name, delta.features, delta.opsys, delta.configured.items) == (None, [], None, [])


def test_a_changed_state_is_said() -> None:
    base = sampled()
    node = later(base)
    node.state = "Busy"
    delta = delta_of(base, node)
    assert delta is not None and delta.state == "Busy"
    assert apply_delta(base, travelled(delta)).state == "Busy"


@pytest.mark.parametrize("change", ["name", "feature", "os", "configured", "extension", "new item", "gone item",
                                    "collector failed", "state taken away", "no base sample", "another host"])
def test_what_a_delta_cannot_say_goes_whole(change: str) -> None:
    base = sampled()
    node = later(base)
    if change == "name":
        node.name = "renamed"
    elif change == "feature":
        node.features.append("gpu")
    elif change == "os":
        set_extension(node, 2, "Debian")
    elif change == "configured":
        set_value(node.configured.items, 1, 16384.0)
    elif change == "extension":
        node.extensions.append(Extension("Model", "another", "Processor"))
    elif change == "new item":
        node.available.add(Consumable("Resource", 10.0, units="MB", name="FileSystem", type="/scratch"))
    elif change == "gone item":
        node.utilized.items.pop()
    elif change == "collector failed":
        node.extensions.append(Extension("CollectorFailed", "network: gone", "Agent"))
    elif change == "state taken away":
        node.state = None
    elif change == "no base sample":
        base.extensions.pop(1)
    elif change == "another host":
        node.id = "h2.example.org"
    assert delta_of(base, node) is None


def test_a_base_naming_an_item_twice_gives_no_delta() -> None:
    base = sampled()
    base.utilized.add(Consumable("Resource", 0.5, metric="Average", name="Load", type="1min"))
    assert delta_of(base, later(base)) is None


def test_the_merged_node_shares_the_base_and_changes_neither() -> None:
    base = travelled(sampled())
    before = copy.deepcopy(base)
    delta = travelled(delta_of(base, later(base)))  # type: ignore[arg-type]
    merged = apply_delta(base, delta)
    assert base == before
    assert merged.configured is base.configured and merged.features is base.features
    assert merged.available is not base.available and merged.utilized is not base.utilized
    assert merged.extension("BaseSample", "Agent") is None  # how it came is not a fact of the host
    assert merged.extension("SampleId", "Agent") == "run-2"


@pytest.mark.parametrize("element,change", [
    ("Name", lambda d: setattr(d, "name", "x")),
    ("Feature", lambda d: d.features.append("gpu")),
    ("Opsys", lambda d: setattr(d, "opsys", "Windows")),
    ("Arch", lambda d: setattr(d, "arch", "arm64")),
    ("Description", lambda d: setattr(d, "description", "x")),
    ("Configured", lambda d: d.configured.add(Consumable("Processors", 64))),
    ("Extension", lambda d: d.extensions.append(Extension("Model", "x", "Processor"))),
    ("Extension", lambda d: d.extensions.append(Extension("AgentVersion", "9", "Agent"))),
    ("Utilized", lambda d: d.utilized.add(Consumable("Resource", 1.0, name="Load", type="2min", metric="Average"))),
    ("Available", lambda d: d.available.add(Consumable("Swap", 1.0, units="MB"))),
])
def test_a_delta_that_says_more_than_it_may_is_refused(element: str, change) -> None:  # type: ignore[no-untyped-def]
    base = travelled(sampled())
    delta = delta_of(base, later(base))
    assert delta is not None
    change(delta)
    with pytest.raises(DocumentError) as refused:
        apply_delta(base, travelled(delta))
    assert refused.value.element == element
    assert "send the whole document" in str(refused.value)


def test_a_delta_must_name_its_own_sample() -> None:
    base = sampled()
    delta = delta_of(base, later(base))
    assert delta is not None
    delta.extensions = [e for e in delta.extensions if e.name != "SampleId"]
    with pytest.raises(DocumentError, match="SampleId"):
        apply_delta(base, travelled(delta))


def test_an_item_the_base_names_twice_cannot_be_updated() -> None:
    base = sampled()
    base.utilized.add(Consumable("Resource", 0.9, metric="Average", name="Load", type="1min"))
    delta = Node(id=base.id, extensions=[Extension("SampleId", "run-2", "Agent"), Extension("BaseSample", "run-1", "Agent")])
    delta.utilized.add(Consumable("Resource", 0.1, metric="Average", name="Load", type="1min"))
    with pytest.raises(DocumentError, match="twice"):
        apply_delta(base, travelled(delta))


values = st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False)


@settings(max_examples=60)
@given(free=values, load=values, counter=values, state=st.sampled_from(["Idle", "Busy", "Down"]))
def test_any_change_of_values_round_trips(free: float, load: float, counter: float, state: str) -> None:
    base = travelled(sampled())
    node = later(base)
    set_value(node.available.items, 1, free)
    set_value(node.utilized.items, 1, load)
    set_value(node.utilized.items, 2, counter)
    node.state = state
    node = travelled(node)  # as written: the values the codec keeps
    delta = delta_of(base, node)
    assert delta is not None
    assert apply_delta(base, travelled(delta)) == node
