"""SSS Node objects to and from XML, validated with schemas/sss-node.xsd.

parse_node(document) -> Node checks the document against the schema first, so the model is
built only from valid input; node_to_xml(node) -> bytes writes what parse_node reads back to
an equal Node. Leading and trailing white space of text values is not significant; the
comma-delimited Feature form is read as separate features and written one per element.

Both directions are on hot paths (every agent sample is serialized, every report parsed), so
the reader walks the tree once with positional constructors and the writer builds the text
directly rather than through an element tree. The writer needs no lxml, and the agent only
writes: lxml (7.5 MiB of RSS) is imported by the reading functions alone.
"""

from __future__ import annotations

from sys import intern
from typing import TYPE_CHECKING, Final

from infosvc.codec.xmltext import attr as _attr
from infosvc.codec.xmltext import finish
from infosvc.codec.xmltext import text as _text
from infosvc.errors import DocumentError, Problem
from infosvc.model.node import (
    CONSUMABLES, RESOURCE, Category, Consumable, Extension, Node, PartTable, split_features,
)

if TYPE_CHECKING:
    from lxml import etree

SCHEMA_FILE: Final = "sss-node.xsd"
MAX_NODE_BYTES: Final = 1 << 20

#: Properties that may appear at most once (Id, exactly once, is the schema's to check).
_SINGLE: Final = {"Name": "name", "Opsys": "opsys", "Arch": "arch", "Description": "description", "State": "state"}
#: Category element -> the Node field that holds it.
_CATEGORY_FIELDS: Final = {Category.CONFIGURED.value: "configured", Category.AVAILABLE.value: "available",
                           Category.UTILIZED.value: "utilized"}
_NO_ID: Final = "Node has no Id: an SSS Node MUST have exactly one Id"


def parse_node(document: bytes | str, *, max_bytes: int = MAX_NODE_BYTES) -> Node:
    """The Node in an SSS Node XML document; DocumentError if the document is unsafe or invalid."""
    from infosvc.codec import safexml

    root = safexml.parse(document, max_bytes=max_bytes, what="SSS Node document")
    try:
        safexml.validate(root, safexml.schema(SCHEMA_FILE))
    except DocumentError as exc:
        exc.problems = [_plain_id_problem(p) for p in exc.problems]
        raise DocumentError(exc.problems[0], more=exc.problems[1:]) from None
    return node_from_element(root)


def _plain_id_problem(problem: Problem) -> Problem:
    # The schema says "one Id" through its content model; libxml2 then words a missing or a
    # second Id as a content-model error. Say it as the spec does.
    if problem.element == "Id" and "not allowed here" in problem.message:
        problem.message = "Node has more than one Id: an SSS Node MUST have exactly one Id"
    elif problem.element == "Node" and problem.message.startswith("Missing child element"):
        problem.message = _NO_ID
    return problem


#: The Extensions and Consumables parsed lately, by what they were read from (their text and
#: attributes as written), so that a report's parts equal to another's are one object: most of a
#: report is its host's kind (operating system, processor, sizes, adapters, units), alike on every
#: host of the kind and in every report of the host, and a host kept in memory would otherwise
#: hold its own copy of each (~20 KiB a host). The parts are frozen, so sharing is safe. Bounded
#: (model.node.PartTable): when full a table is emptied, and the parts alike are shared again from
#: the next report on (what is unique to a report, a sample's name or a counter, comes and goes).
_extensions = PartTable()
_consumables = PartTable()


def node_from_element(root: etree._Element) -> Node:
    """Build a Node from an element that has passed schema validation."""
    # The hot loop of every report: Extensions are most of a Node's children, so they are tested
    # first, and their attributes are read in one call (items(), in document order) rather than
    # one lookup each. The schema allows an Extension only `name` (required) and `type`; any
    # other attribute it tolerates (xsi:*) falls to the general lookups. An Extension read before
    # from the same text is taken as it is (_extensions).
    node = Node(id="")
    add_extension = node.extensions.append
    shared = _extensions.lookup
    seen: set[str] | None = None
    for child in root:
        tag = child.tag
        if tag == "Extension":
            attributes = child.items()
            if len(attributes) == 2 and attributes[0][0] == "name" and attributes[1][0] == "type":
                key = (attributes[0][1], attributes[1][1], child.text)
            elif len(attributes) == 1 and attributes[0][0] == "name":
                key = (attributes[0][1], None, child.text)
            else:
                key = (child.get("name", ""), child.get("type"), child.text)
            extension = shared(key)
            if extension is None:
                raw, kind, text = key
                name = raw.strip()
                if not name:
                    raise _blank_name(child)
                extension = Extension(intern(name), text.strip() if text else "",
                                      intern(kind) if kind is not None else None)
                _extensions.keep(key, extension)
            add_extension(extension)
        elif tag in _CATEGORY_FIELDS:
            _read_properties(child, getattr(node, _CATEGORY_FIELDS[tag]).items)
        elif tag == "Feature":
            node.features.extend(map(intern, split_features(child.text or "")))
        elif tag == "Id":
            node.id = " ".join((child.text or "").split())  # xsd:token semantics
        elif tag in _SINGLE:
            if seen is None:
                seen = set()
            elif tag in seen:
                raise DocumentError(f"Node has more than one {tag}", line=child.sourceline, element=tag,
                                    path=f"/Node/{tag}")
            seen.add(tag)
            text = child.text
            # Opsys, Arch, State (and a Description) are a few words that most hosts share.
            setattr(node, _SINGLE[tag], intern(text.strip()) if text else "")
    if not node.id:  # pragma: no cover - the schema guarantees it
        raise DocumentError(_NO_ID, line=root.sourceline, element="Node")
    return node


_INFINITY: Final = float("inf")
#: Processors beyond this are no count of a real node (and Python refuses to read ints of over
#: 4,300 digits at all); the schema's xs:nonNegativeInteger has no upper bound.
_MAX_PROCESSORS: Final = 1 << 63


def _too_large(element: etree._Element, attribute: str | None = None) -> DocumentError:
    what = f"{element.tag} {attribute}" if attribute else element.tag
    return DocumentError(f"{what} is too large for any real node", line=element.sourceline,
                         element=element.tag, attribute=attribute,
                         path=element.getroottree().getpath(element))


def _read_properties(element: etree._Element, into: list[Consumable]) -> None:
    # A Consumable is a function of its element's tag, text and attributes: one read before from
    # the same is taken as it is (_consumables), unparsed.
    append = into.append
    shared = _consumables.lookup
    for child in element:
        key = (child.tag, child.text, tuple(child.items()))
        item = shared(key)
        if item is None:
            item = _consumable_of(child, *key)
            _consumables.keep(key, item)
        append(item)


def _consumable_of(child: etree._Element, tag: str, text: str, attributes: tuple[tuple[str, str], ...]) -> Consumable:
    value: int | float
    if tag == "Processors":
        # The pattern leaves only digits here: more than 19 of them is past any real count.
        if len(text.strip().lstrip("0")) > 19 or (value := int(text)) >= _MAX_PROCESSORS:
            raise _too_large(child)
    else:
        value = float(text)
        if value == _INFINITY:  # xs:double lets 1e400 through, and it reads as infinity
            raise _too_large(child)
    tag = intern(tag)
    if not attributes:
        return Consumable(tag, value)
    units = metric = wall = name = kind = None
    rate = None
    for key, given in attributes:
        if key == "units":
            units = intern(given)
        elif key == "name":
            name = intern(given.strip())
            if not name:
                raise _blank_name(child)
        elif key == "type":
            kind = intern(given)
        elif key == "metric":
            metric = intern(given)
        elif key == "wallDuration":
            wall = given.strip()
        elif key == "consumptionRate":
            rate = float(given)
            if rate == _INFINITY:
                raise _too_large(child, key)
    return Consumable(tag, value, units, metric, wall, rate, name, kind)


def _blank_name(element: etree._Element) -> DocumentError:
    return DocumentError(f"{element.tag} has a blank name attribute", line=element.sourceline,
                         element=element.tag, attribute="name", path=element.getroottree().getpath(element))


# --- writing ---------------------------------------------------------------------------------

def format_amount(value: int | float) -> str:
    """A number as the schema's Amount: integral floats without a fraction, others exactly."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def _consumable(item: Consumable) -> str:
    kind = item.kind
    attrs = ""
    if kind == RESOURCE:
        if not item.name or not item.name.strip():
            raise ValueError("a Resource needs a name")
        attrs = f' name="{_attr(item.name)}"'
        if item.type is not None:
            attrs += f' type="{_attr(item.type)}"'
    elif kind not in CONSUMABLES:
        raise ValueError(f"{kind!r} is not a consumable resource")
    if item.units is not None:
        attrs += f' units="{_attr(item.units)}"'
    if item.metric is not None:
        attrs += f' metric="{_attr(item.metric)}"'
    if item.wall_duration is not None:
        attrs += f' wallDuration="{_attr(item.wall_duration)}"'
    if item.consumption_rate is not None:
        attrs += f' consumptionRate="{format_amount(item.consumption_rate)}"'
    return f"<{kind}{attrs}>{format_amount(item.value)}</{kind}>"


def node_to_xml(node: Node, *, pretty: bool = False) -> bytes:
    """The Node as an SSS Node XML document (UTF-8, with an XML declaration), children in the spec's order."""
    parts = ["<?xml version='1.0' encoding='UTF-8'?>\n<Node><Id>", _text(node.id), "</Id>"]
    add = parts.append
    if node.name is not None:
        add(f"<Name>{_text(node.name)}</Name>")
    for feature in node.features:
        add(f"<Feature>{_text(feature)}</Feature>")
    for tag, value in (("Opsys", node.opsys), ("Arch", node.arch), ("Description", node.description),
                       ("State", node.state)):
        if value is not None:
            add(f"<{tag}>{_text(value)}</{tag}>")
    for ext in node.extensions:
        kind = f' type="{_attr(ext.type)}"' if ext.type is not None else ""
        add(f'<Extension name="{_attr(ext.name)}"{kind}>{_text(ext.value)}</Extension>')
    for category in Category:
        items = node.category(category).items
        if items:
            add(f"<{category.value}>")
            parts.extend(map(_consumable, items))
            add(f"</{category.value}>")
    add("</Node>\n")
    return finish("".join(parts), pretty=pretty)
