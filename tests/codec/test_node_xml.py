"""The SSS Node XML codec against the spec: its examples, its MUSTs, bad documents, round trips."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.codec import safexml
from infosvc.codec.node_json import node_to_json
from infosvc.codec.node_xml import node_to_xml, parse_node
from infosvc.errors import DocumentError
from infosvc.model.node import Consumable, Extension, Node, Properties

ROOT = Path(__file__).resolve().parents[2]

# The spec's examples (section 1.2), with its typographic quotes made straight.
SIMPLE = """<Node>
  <Id>Node64</Id>
  <Configured>
    <Processors>2</Processors>
    <Memory>512</Memory>
  </Configured>
</Node>"""

ELABORATE = """<Node>
  <Id>64</Id>
  <Name>Netpipe2</Name>
  <Feature>BigMem</Feature>
  <Feature>NetOC12</Feature>
  <Opsys>AIX</Opsys>
  <Arch>Power4</Arch>
  <Configured>
    <Processors>16</Processors>
    <Memory units="MB">512</Memory>
    <Swap>512</Swap>
  </Configured>
  <Available>
    <Processors>7</Processors>
    <Memory metric="Instantaneous">143</Memory>
  </Available>
  <Utilized>
    <Processors wallDuration="3576">8</Processors>
    <Memory metric="Average" wallDuration="3576">400</Memory>
  </Utilized>
</Node>"""


def node_doc(body: str) -> str:
    return f"<Node><Id>n1</Id>{body}</Node>"


def rejected(document: str | bytes, **limits: int) -> DocumentError:
    with pytest.raises(DocumentError) as caught:
        parse_node(document, **limits)
    return caught.value


# --- the spec's examples -------------------------------------------------------------------

def test_simple_example() -> None:
    node = parse_node(SIMPLE)
    assert node.id == "Node64"
    assert node.configured.get("Processors").value == 2
    memory = node.configured.get("Memory")
    assert memory.value == 512.0 and memory.units is None
    assert memory.amount("GB") == 0.5  # no units attribute: MB


def test_elaborate_example() -> None:
    node = parse_node(ELABORATE)
    assert (node.id, node.name, node.opsys, node.arch) == ("64", "Netpipe2", "AIX", "Power4")
    assert node.features == ["BigMem", "NetOC12"]
    assert [(c.kind, c.value) for c in node.configured] == [("Processors", 16), ("Memory", 512.0), ("Swap", 512.0)]
    assert node.available.get("Memory").metric == "Instantaneous"
    utilized = node.utilized.get("Processors")
    assert utilized.value == 8 and utilized.wall_duration == "3576"
    assert node.utilized.get("Memory", metric="Average").value == 400.0
    assert parse_node(node_to_xml(node)) == node


def test_spec_consumable_and_resource_examples() -> None:
    node = parse_node(node_doc(
        '<Utilized><Memory metric="Max" units="GB">483</Memory>'
        '<Processors wallDuration="1234" consumptionRate="0.63">4</Processors>'
        '<Resource name="License" type="MATLAB">1</Resource>'
        '<Resource name="Telescope" type="Zoom2000" wallDuration="750" metric="KX">10</Resource></Utilized>'))
    memory = node.utilized.get("Memory")
    assert memory.amount("MB") == 483 * 1024
    processors = node.utilized.get("Processors")
    assert processors.consumption_rate == 0.63 and processors.wall_duration == "1234"
    assert node.utilized.get("Resource", name="License").type == "MATLAB"
    telescope = node.utilized.get("Resource", name="Telescope")
    assert (telescope.type, telescope.metric, telescope.wall_duration, telescope.value) == ("Zoom2000", "KX", "750", 10.0)


def test_spec_extension_example() -> None:
    node = parse_node(node_doc('<Extension type="Chemistry" name="Software">NWChem</Extension>'))
    assert node.extensions == [Extension("Software", "NWChem", "Chemistry")]
    assert node.extension("Software") == "NWChem"


# --- every MUST of the spec ----------------------------------------------------------------

def test_must_exactly_one_node_element() -> None:
    assert rejected("<Host><Id>a</Id></Host>").element == "Host"
    assert "well-formed" in str(rejected("<Node><Id>a</Id></Node><Node><Id>b</Id></Node>"))


def test_must_one_or_more_properties() -> None:
    # Id is the property every node must specify, so an empty Node is told it lacks one.
    error = rejected("<Node/>")
    assert error.element == "Node" and "no Id" in str(error)


def test_must_id() -> None:
    error = rejected("<Node>\n<Name>x</Name>\n</Node>")
    assert "no Id" in str(error) and error.element == "Node" and error.line == 1
    error = rejected("<Node><Id>a</Id>\n<Id>b</Id></Node>")
    assert "more than one Id" in str(error) and error.line == 2
    assert rejected("<Node><Id>  </Id></Node>").element == "Id"


@pytest.mark.parametrize("tag", ["Name", "Opsys", "Arch", "Description", "State"])
def test_simple_properties_at_most_once(tag: str) -> None:
    error = rejected(node_doc(f"<{tag}>x</{tag}><{tag}>y</{tag}>"))
    assert f"more than one {tag}" in str(error) and error.element == tag


def test_must_state_supported() -> None:
    for state in ("Offline", "Configured", "Unknown", "Idle", "Busy"):
        node = parse_node(node_doc(f"<State>{state}</State>"))
        assert node.state == state and parse_node(node_to_xml(node)).state == state


def test_must_extension_name() -> None:
    error = rejected(node_doc('<Extension type="x">v</Extension>'))
    assert error.element == "Extension" and error.attribute == "name"
    error = rejected(node_doc('<Extension name="  ">v</Extension>'))
    assert (error.element, error.attribute) == ("Extension", "name") and "blank" in str(error)


@pytest.mark.parametrize("kind", ["Processors", "Memory", "Disk", "Swap", "Network"])
def test_must_consumables_be_categorized(kind: str) -> None:
    error = rejected(node_doc(f"<{kind}>1</{kind}>"))
    assert error.element == kind and "not allowed" in str(error)


def test_must_resource_be_categorized_and_named() -> None:
    assert rejected(node_doc('<Resource name="GPU">1</Resource>')).element == "Resource"
    error = rejected(node_doc('<Configured><Resource type="x">1</Resource></Configured>'))
    assert error.element == "Resource" and error.attribute == "name"
    error = rejected(node_doc('<Configured>\n<Resource name="">1</Resource></Configured>'))
    assert (error.element, error.attribute, error.line) == ("Resource", "name", 2)


def test_must_configured_available_utilized_supported() -> None:
    node = parse_node(node_doc("<Configured><Processors>4</Processors></Configured>"
                               "<Available><Processors>3</Processors></Available>"
                               "<Utilized><Processors>1</Processors></Utilized>"))
    assert [node.category(c).get("Processors").value for c in ("Configured", "Available", "Utilized")] == [4, 3, 1]


def test_processors_must_be_integer() -> None:
    for bad in ("2.5", "two", "", "1e3"):
        error = rejected(node_doc(f"<Configured><Processors>{bad}</Processors></Configured>"))
        assert error.element == "Processors" and "integer" in str(error)


@pytest.mark.parametrize("bad", ["INF", "NaN", "-1", "lots", "0x10"])
def test_amounts_are_finite_non_negative_numbers(bad: str) -> None:
    assert rejected(node_doc(f"<Available><Memory>{bad}</Memory></Available>")).element == "Memory"


def test_boundaries_accepted() -> None:
    node = parse_node(node_doc("<Configured><Processors>0</Processors><Memory>0</Memory>"
                               "<Disk>1.7976931348623157e+308</Disk><Swap> 12 </Swap></Configured>"))
    assert node.configured.get("Processors").value == 0
    assert node.configured.get("Disk").value == 1.7976931348623157e308
    assert node.configured.get("Swap").value == 12.0
    big = 2**63 - 1  # the largest count read; more is refused (test_amounts_beyond_any_real_node...)
    assert parse_node(node_doc(f"<Configured><Processors>{big}</Processors></Configured>")).configured.get("Processors").value == big


def test_wall_duration_forms() -> None:
    node = parse_node(node_doc('<Utilized><Memory wallDuration="PT1H2M">1</Memory>'
                               '<Disk wallDuration="3576.5">1</Disk></Utilized>'))
    assert node.utilized.get("Memory").wall_duration == "PT1H2M"
    error = rejected(node_doc('<Utilized><Memory wallDuration="soon">1</Memory></Utilized>'))
    assert (error.element, error.attribute) == ("Memory", "wallDuration")


def test_feature_comma_delimited_form() -> None:
    node = parse_node(node_doc("<Feature>BigMem, NetOC12,,GPU</Feature><Feature>IB</Feature>"))
    assert node.features == ["BigMem", "NetOC12", "GPU", "IB"]
    assert parse_node(node_to_xml(node)).features == node.features


def test_children_in_any_order_and_categories_merge() -> None:
    node = parse_node("<Node><Configured><Processors>2</Processors></Configured><State>Idle</State>"
                      "<Id>late</Id><Configured><Memory>8</Memory></Configured></Node>")
    assert node.id == "late" and [c.kind for c in node.configured] == ["Processors", "Memory"]


# --- bad documents: one error type, saying what and where ----------------------------------

def test_unknown_element_and_attribute() -> None:
    error = rejected("<Node>\n<Id>a</Id>\n<Colour>red</Colour>\n</Node>")
    assert (error.element, error.line) == ("Colour", 3)
    error = rejected(node_doc('<Configured><Memory unit="MB">1</Memory></Configured>'))
    assert (error.element, error.attribute) == ("Memory", "unit")


def test_truncated_and_not_xml() -> None:
    error = rejected("<Node>\n<Id>a</Id>\n<Configured><Proc")
    assert "well-formed" in str(error) and error.line == 3
    assert "well-formed" in str(rejected("Id=a"))
    assert "empty" in str(rejected(b"  "))


def test_doctype_with_entities_is_refused() -> None:
    error = rejected('<?xml version="1.0"?>\n<!-- c -->\n<!DOCTYPE Node [<!ENTITY x "evil">]>\n<Node><Id>&x;</Id></Node>')
    assert "DOCTYPE" in str(error) and error.line == 3
    assert "DOCTYPE" in str(rejected('<!DOCTYPE Node SYSTEM "node.dtd"><Node><Id>a</Id></Node>'))


def test_doctype_in_utf16_is_refused() -> None:
    # Refused for its encoding, before the DOCTYPE is looked at (tests/codec/test_hostile_xml.py has the rest).
    document = '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE Node [<!ENTITY x "e">]><Node><Id>&x;</Id></Node>'
    assert "UTF-16" in str(rejected(document.encode("utf-16")))


def test_external_entity_is_refused_and_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t")
    error = rejected(f'<!DOCTYPE Node [<!ENTITY x SYSTEM "file://{secret}">]><Node><Id>&x;</Id></Node>')
    assert "DOCTYPE" in str(error) and "s3cr3t" not in str(error)


def test_billion_laughs_is_refused_quickly() -> None:
    entities = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{i} "{("&lol%d;" % (i - 1)) * 10}">' for i in range(1, 10)]
    document = f'<?xml version="1.0"?><!DOCTYPE Node [{"".join(entities)}]><Node><Id>&lol9;</Id></Node>'
    started = time.perf_counter()
    error = rejected(document)
    assert "DOCTYPE" in str(error)
    assert time.perf_counter() - started < 1.0  # expansion would be 3 GB of "lol"


def test_size_bound() -> None:
    document = node_doc("<Description>" + "x" * 5000 + "</Description>")
    assert "over the limit" in str(rejected(document, max_bytes=4096))
    assert parse_node(document, max_bytes=len(document)).description == "x" * 5000


def test_error_json_body() -> None:
    body = rejected(node_doc("<Configured><Processors>x</Processors></Configured>")).as_json()
    assert set(body) == {"error", "detail"}
    assert body["detail"][0]["element"] == "Processors" and body["detail"][0]["line"] == 1


def test_the_code_validates_with_the_schema_file(tmp_path: Path) -> None:
    """Edit a copy of schemas/: the codec's behaviour follows the file it is pointed at."""
    shutil.copytree(ROOT / "schemas", tmp_path / "schemas")
    xsd = tmp_path / "schemas" / "sss-node.xsd"
    xsd.write_text(xsd.read_text().replace('<xs:element name="Opsys" type="xs:string"/>', ""))
    code = ("from infosvc.codec.node_xml import parse_node\n"
            "parse_node('<Node><Id>a</Id><Opsys>Linux</Opsys></Node>')")
    env = {**os.environ, "INFOSVC_SCHEMAS": str(tmp_path / "schemas")}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode != 0 and "Opsys" in result.stderr
    assert safexml.SCHEMA_DIR == ROOT / "schemas"


def test_json_rendering_keeps_the_facts() -> None:
    data = node_to_json(parse_node(ELABORATE))
    assert data["id"] == "64" and data["features"] == ["BigMem", "NetOC12"]
    assert data["utilized"][0] == {"kind": "Processors", "value": 8, "wall_duration": "3576"}


# --- round trips ---------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Co", "Cn")), max_size=12)
stripped = _text.map(str.strip)
token = _text.map(lambda s: " ".join(s.split())).filter(bool)
feature = stripped.filter(lambda s: s and "," not in s)
amount = st.floats(min_value=0, allow_nan=False, allow_infinity=False)
durations = st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(["PT1H", "P1DT2H3M4.5S", "PT0.25S", "12.5"]))


@st.composite
def consumables(draw: st.DrawFn) -> Consumable:
    kind = draw(st.sampled_from(["Processors", "Memory", "Disk", "Swap", "Network", "Resource"]))
    value = draw(st.integers(0, 2**63 - 1)) if kind == "Processors" else draw(amount)
    return Consumable(
        kind, value,
        units=draw(st.none() | st.sampled_from(["MB", "GB", "byte", "Kilobyte"]) | _text),
        metric=draw(st.none() | st.sampled_from(["Total", "Average", "Max"])),
        wall_duration=draw(st.none() | durations),
        consumption_rate=draw(st.none() | amount),
        name=draw(token) if kind == "Resource" else None,
        type=draw(st.none() | _text) if kind == "Resource" else None,
    )


nodes = st.builds(
    Node,
    id=token,
    name=st.none() | stripped,
    features=st.lists(feature, max_size=3),
    opsys=st.none() | stripped,
    arch=st.none() | stripped,
    description=st.none() | stripped,
    state=st.none() | st.sampled_from(["Idle", "Busy", "Offline"]),
    extensions=st.lists(st.builds(Extension, name=token, value=stripped, type=st.none() | _text), max_size=3),
    configured=st.lists(consumables(), max_size=4).map(Properties),
    available=st.lists(consumables(), max_size=4).map(Properties),
    utilized=st.lists(consumables(), max_size=4).map(Properties),
)


@settings(max_examples=300, deadline=None)
@given(nodes)
def test_round_trip_keeps_every_fact(node: Node) -> None:
    document = node_to_xml(node)
    assert parse_node(document) == node
    assert node_to_xml(parse_node(document)) == document


@pytest.mark.parametrize("element", [
    "<Processors>" + "9" * 5000 + "</Processors>",  # past Python's int limit: a 500 before
    "<Processors>9223372036854775808</Processors>",  # 2**63
    "<Memory>1e400</Memory>",  # xs:double reads it as infinity
    "<Disk>" + "9" * 400 + "</Disk>",
    '<Memory consumptionRate="1e999">1</Memory>',
])
def test_amounts_beyond_any_real_node_are_refused_by_name(element: str) -> None:
    with pytest.raises(DocumentError, match="too large") as caught:
        parse_node(f"<Node><Id>a</Id><Configured>{element}</Configured></Node>")
    assert caught.value.element == element[1:element.index(">")].split()[0]


def test_large_but_finite_amounts_and_leading_zeros_are_read() -> None:
    node = parse_node("<Node><Id>a</Id><Configured><Processors>0000000000000000000000012</Processors>"
                      "<Memory>1e300</Memory></Configured></Node>")
    assert [item.value for item in node.configured] == [12, 1e300]


# --- what reports have alike is one object (memory per host) ------------------------------------

def _host_report(host: str, free_mb: str, sample: str) -> str:
    return (f'<Node><Id>{host}</Id><Opsys>Linux</Opsys><Feature>IB, BigMem</Feature>'
            f'<Extension name="SampleId" type="Agent">{sample}</Extension>'
            '<Extension name="Name" type="OperatingSystem">Debian</Extension>'
            '<Extension name=" Vendor " type="Processor"> AMD </Extension>'
            '<Configured><Processors>8</Processors><Memory units="MB">4096</Memory>'
            '<Resource name="FileSystem" type="/" units="MB">100</Resource></Configured>'
            f'<Available><Memory units="MB">{free_mb}</Memory><Swap>0</Swap><Swap>0.00</Swap></Available></Node>')


def test_reports_alike_share_their_equal_parts_and_keep_their_own() -> None:
    one, two = parse_node(_host_report("h1", "1000", "s-1")), parse_node(_host_report("h2", "2000", "s-2"))
    # the host's kind: one object for both hosts, its strings interned
    assert one.extensions[1] is two.extensions[1] and one.extensions[2] is two.extensions[2]
    assert one.extensions[2] == Extension("Vendor", "AMD", "Processor")  # read as before: stripped
    assert all(a is b for a, b in zip(one.configured, two.configured))
    assert one.opsys is two.opsys and one.features[0] is two.features[0]
    # what each has of its own stays its own
    assert (one.extensions[0].value, two.extensions[0].value) == ("s-1", "s-2")
    assert (one.available.items[0].value, two.available.items[0].value) == (1000.0, 2000.0)
    # a part is known by its text: the same value written otherwise is read as it was
    zero, written_long = one.available.items[1:]
    assert zero == written_long and zero is not written_long
    # every rendering is what a Node built afresh gives
    fresh = Node("h1", opsys="Linux", features=["IB", "BigMem"],
                 extensions=[Extension("SampleId", "s-1", "Agent"), Extension("Name", "Debian", "OperatingSystem"),
                             Extension("Vendor", "AMD", "Processor")],
                 configured=Properties([Consumable("Processors", 8), Consumable("Memory", 4096.0, "MB"),
                                        Consumable("Resource", 100.0, "MB", name="FileSystem", type="/")]),
                 available=Properties([Consumable("Memory", 1000.0, "MB"), Consumable("Swap", 0.0),
                                       Consumable("Swap", 0.0)]))
    assert one == fresh and node_to_xml(one) == node_to_xml(fresh) and node_to_json(one) == node_to_json(fresh)


def test_a_shared_part_cannot_be_changed_under_another_host() -> None:
    from dataclasses import FrozenInstanceError, replace

    one, two = parse_node(_host_report("h1", "1000", "s-1")), parse_node(_host_report("h2", "1000", "s-1"))
    with pytest.raises(FrozenInstanceError):
        one.extensions[1].value = "Changed"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        one.configured.items[0].value = 1  # type: ignore[misc]
    # a host's own change is a new part in its own node
    one.extensions[1] = replace(one.extensions[1], value="Changed")
    assert two.extensions[1].value == "Debian" and parse_node(_host_report("h3", "1", "s")).extensions[1].value == "Debian"


def test_the_table_of_shared_parts_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from infosvc.codec import node_xml

    monkeypatch.setattr(node_xml._extensions, "limit", 4)
    monkeypatch.setattr(node_xml._consumables, "limit", 4)
    nodes = [parse_node(_host_report(f"h{i}", str(i), f"s-{i}")) for i in range(20)]
    assert len(node_xml._extensions) <= 4 and len(node_xml._consumables) <= 4
    assert [n.extensions[0].value for n in nodes] == [f"s-{i}" for i in range(20)]
    assert {n.extensions[2] for n in nodes} == {Extension("Vendor", "AMD", "Processor")}
