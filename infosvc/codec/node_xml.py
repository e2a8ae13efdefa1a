"""SSS Node objects to and from XML, validated with schemas/sss-node.xsd.

parse_node(document) -> Node checks the document against the schema first, so the model is
built only from valid input; node_to_xml(node) -> bytes writes what parse_node reads back to
an equal Node. Leading and trailing white space of text values is not significant; the
comma-delimited Feature form is read as separate features and written one per element.
"""

from __future__ import annotations

from typing import Final

from lxml import etree

from infosvc.codec import safexml
from infosvc.errors import DocumentError
from infosvc.model.node import CONSUMABLES, RESOURCE, Category, Consumable, Extension, Node, Properties, split_features
from infosvc.model.noderef import Aggregation, NodeRef

SCHEMA_FILE: Final = "sss-node.xsd"
MAX_NODE_BYTES: Final = 1 << 20

_SIMPLE: Final = ("Name", "Opsys", "Arch", "Description", "State")
_CATEGORIES: Final = {c.value: c for c in Category}
_CONSTRAINTS: Final = {
    "NodeHasOneId": ("Node has no Id: an SSS Node MUST have exactly one Id",
                     "Node has more than one Id: an SSS Node MUST have exactly one Id"),
    **{f"NodeHasOne{tag}": (f"Node has no {tag}", f"Node has more than one {tag}") for tag in _SIMPLE},
}


def parse_node(document: bytes | str, *, max_bytes: int = MAX_NODE_BYTES) -> Node:
    """The Node in an SSS Node XML document; DocumentError if the document is unsafe or invalid."""
    root = safexml.parse(document, max_bytes=max_bytes, what="SSS Node document")
    safexml.validate(root, safexml.schema(SCHEMA_FILE), constraint_messages=_CONSTRAINTS)
    return node_from_element(root)


def node_from_element(root: etree._Element) -> Node:
    """Build a Node from an element that has passed schema validation."""
    node = Node(id="")
    for child in root:
        tag = child.tag
        text = (child.text or "").strip()
        if tag == "Id":
            node.id = " ".join(text.split())  # xsd:token semantics
        elif tag == "Feature":
            node.features.extend(split_features(text))
        elif tag == "Extension":
            node.extensions.append(Extension(child.get("name", "").strip(), text, child.get("type")))
        elif tag in _CATEGORIES:
            _read_properties(child, node.category(_CATEGORIES[tag]))
        elif tag == "Name":
            node.name = text
        elif tag == "Opsys":
            node.opsys = text
        elif tag == "Arch":
            node.arch = text
        elif tag == "Description":
            node.description = text
        elif tag == "State":
            node.state = text
    if not node.id:  # pragma: no cover - the schema's key guarantees it
        raise DocumentError("Node has no Id", line=root.sourceline, element="Node")
    return node


def _read_properties(element: etree._Element, into: Properties) -> None:
    for child in element:
        tag = child.tag
        text = child.text or ""
        attrib = child.attrib
        wall = attrib.get("wallDuration")
        rate = attrib.get("consumptionRate")
        into.items.append(Consumable(
            kind=tag,
            value=int(text) if tag == "Processors" else float(text),
            units=attrib.get("units"),
            metric=attrib.get("metric"),
            wall_duration=wall.strip() if wall is not None else None,
            consumption_rate=float(rate) if rate is not None else None,
            name=attrib.get("name", "").strip() or None if tag == RESOURCE else None,
            type=attrib.get("type") if tag == RESOURCE else None,
        ))


def format_amount(value: int | float) -> str:
    """A number as the schema's Amount: integral floats without a fraction, others exactly."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def node_to_element(node: Node) -> etree._Element:
    """The Node as an lxml element, children in the spec's order."""
    root = etree.Element("Node")
    sub = etree.SubElement
    sub(root, "Id").text = node.id
    if node.name is not None:
        sub(root, "Name").text = node.name
    for feature in node.features:
        sub(root, "Feature").text = feature
    for tag, value in (("Opsys", node.opsys), ("Arch", node.arch), ("Description", node.description),
                       ("State", node.state)):
        if value is not None:
            sub(root, tag).text = value
    for ext in node.extensions:
        el = sub(root, "Extension", name=ext.name)
        if ext.type is not None:
            el.set("type", ext.type)
        el.text = ext.value
    for category in Category:
        properties = node.category(category)
        if not properties.items:
            continue
        group = sub(root, category.value)
        for item in properties.items:
            if item.kind not in CONSUMABLES and item.kind != RESOURCE:
                raise ValueError(f"{item.kind!r} is not a consumable resource")
            el = sub(group, item.kind)
            if item.kind == RESOURCE:
                if not item.name:
                    raise ValueError("a Resource needs a name")
                el.set("name", item.name)
                if item.type is not None:
                    el.set("type", item.type)
            if item.units is not None:
                el.set("units", item.units)
            if item.metric is not None:
                el.set("metric", item.metric)
            if item.wall_duration is not None:
                el.set("wallDuration", item.wall_duration)
            if item.consumption_rate is not None:
                el.set("consumptionRate", format_amount(item.consumption_rate))
            el.text = format_amount(item.value)
    return root


def node_to_xml(node: Node, *, pretty: bool = False) -> bytes:
    """The Node as an SSS Node XML document (UTF-8, with an XML declaration)."""
    return etree.tostring(node_to_element(node), encoding="UTF-8", xml_declaration=True, pretty_print=pretty)


def noderef_from_element(element: etree._Element) -> NodeRef:
    """A node reference (spec 4.4) from a `<Node>` element with text content."""
    aggregation = element.get("aggregation")
    count = element.get("count")
    try:
        return NodeRef(
            value=(element.text or "").strip(),
            aggregation=Aggregation(aggregation) if aggregation is not None else None,
            delimiter=element.get("delimiter"),
            count=int(count) if count is not None else None,
        )
    except ValueError as exc:
        raise DocumentError(f"bad node reference: {exc}", line=element.sourceline, element=element.tag) from None


def noderef_to_element(ref: NodeRef, tag: str = "Node") -> etree._Element:
    element = etree.Element(tag)
    element.text = ref.value
    if ref.aggregation is not None:
        element.set("aggregation", ref.aggregation.value)
    if ref.delimiter is not None:
        element.set("delimiter", ref.delimiter)
    if ref.count is not None:
        element.set("count", str(ref.count))
    return element
