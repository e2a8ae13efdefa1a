"""Safe XML input: no entity expansion, no DTD, no network, bounded size; and the XML Schemas.

Every XML document that enters infosvc is parsed here. A document carrying a DOCTYPE is refused
outright: none of the formats we read needs one, and refusing it closes the entity-expansion
(billion laughs) and external-entity doors at once. Schemas are loaded from the project's
schemas/ directory, the very files published with the project.
"""

from __future__ import annotations

import os
import re
import threading
from functools import cache
from pathlib import Path

from lxml import etree

from infosvc.errors import DocumentError, Problem

#: Default bound on one document's size.
MAX_DOCUMENT_BYTES = 1 << 20

SCHEMA_DIR = Path(os.environ.get("INFOSVC_SCHEMAS", Path(__file__).resolve().parents[2] / "schemas"))

_local = threading.local()

# The prolog before the root element: BOM, XML declaration, white space, comments, PIs.
_PROLOG = re.compile(rb"(?:\xef\xbb\xbf)?(?:\s+|<\?.*?\?>|<!--.*?-->)*", re.S)


def _parser() -> etree.XMLParser:
    # lxml parsers must not be shared between threads; one per thread is cheap.
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = etree.XMLParser(
            resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False,
            huge_tree=False, collect_ids=False, remove_comments=True, remove_pis=True,
        )
        _local.parser = parser
    return parser


def parse(data: bytes | str, *, max_bytes: int = MAX_DOCUMENT_BYTES, what: str = "document") -> etree._Element:
    """The root element of `data`, or DocumentError saying what is wrong and where."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > max_bytes:
        raise DocumentError(f"{what} is {len(data)} bytes, over the limit of {max_bytes} bytes")
    if not data or data.isspace():
        raise DocumentError(f"{what} is empty")
    # Refuse a DOCTYPE before libxml2 reads a single declaration of its DTD.
    prolog = _PROLOG.match(data)
    prolog_end = prolog.end() if prolog else 0  # the pattern matches the empty prolog too
    if data.startswith(b"<!DOCTYPE", prolog_end):
        line = data.count(b"\n", 0, prolog_end) + 1
        raise DocumentError(f"{what} carries a DOCTYPE, which is not accepted (no DTDs, no entities)", line=line)
    try:
        root = etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as exc:
        raise DocumentError(f"{what} is not well-formed XML: {exc.msg}", line=exc.lineno) from None
    # A backstop for what the byte scan cannot see, such as a UTF-16 document: libxml2 names
    # any DOCTYPE it met here, internal subset or not.
    if root.getroottree().docinfo.doctype:
        raise DocumentError(f"{what} carries a DOCTYPE, which is not accepted (no DTDs, no entities)", line=1)
    return root


@cache
def schema(name: str) -> etree.XMLSchema:
    """The XML Schema schemas/`name`, loaded once."""
    path = SCHEMA_DIR / name
    return etree.XMLSchema(etree.parse(str(path), _parser()))


_ELEMENT = re.compile(r"Element '(?:\{[^}]*\})?([^']+)'")
_ATTRIBUTE = re.compile(r"attribute '([^']+)'")
_ATOMIC_TYPE = re.compile(r"of the atomic type '(?:xs:)?(\w+)'")
#: How a schema's simple types are named to a person.
TYPE_WORDS = {
    "Count": "a non-negative integer", "Amount": "a non-negative finite number",
    "DurationOrSeconds": "an xsd:duration or a number of seconds", "NonEmptyToken": "a non-empty string",
    "integer": "an integer", "nonNegativeInteger": "a non-negative integer", "double": "a number",
    "float": "a number", "boolean": "true or false", "dateTime": "an ISO 8601 date-time",
    "duration": "an xsd:duration",
}


def validate(root: etree._Element, xsd: etree.XMLSchema) -> None:
    """Raise DocumentError for every way `root` breaks `xsd` (up to ten), the first one first."""
    if xsd.validate(root):
        return
    problems: list[Problem] = []
    for entry in xsd.error_log:
        message = entry.message
        if "No precomputed value available" in message:
            continue  # libxml2's echo of the error just before it
        element = _ELEMENT.search(message)
        attribute = _ATTRIBUTE.search(message)
        message = _ELEMENT.sub("", message, count=1).lstrip(" ,:")
        message = _ATTRIBUTE.sub("", message, count=1).lstrip(" ,:") if attribute else message
        message = _ATOMIC_TYPE.sub(lambda m: f"of {TYPE_WORDS.get(m[1], m[1])}", message)
        if message.startswith("This element is not expected"):
            message = "element not allowed here" + message[len("This element is not expected"):]
        problems.append(Problem(message, entry.line, element[1] if element else None,
                                attribute[1] if attribute else None, entry.path))
        if len(problems) == 10:
            break
    if not problems:  # pragma: no cover - libxml2 always says why
        problems.append(Problem("document is not valid", root.sourceline))
    raise DocumentError(problems[0], more=problems[1:])
