"""Writing XML as text: escapes for text and attribute values, and the finished document.

The writers (SSS Node, SSS Job) build their documents as strings, which is several times faster
than an element tree on the agent's and the service's hot paths, and keeps lxml out of the agent.
lxml is imported only to indent a document on request, which reads it through safexml.
"""

from __future__ import annotations

import re

_TEXT_SPECIAL = re.compile(r"[&<>\r]").search
_ATTR_SPECIAL = re.compile(r'[&<>"\t\n\r]').search
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_ATTR_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;",
                               "\t": "&#9;", "\n": "&#10;", "\r": "&#13;"})
#: Characters XML 1.0 cannot carry at all, escaped or not.
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]").search


def text(value: str) -> str:
    """`value` as element content."""
    return value.translate(_TEXT_ESCAPES) if _TEXT_SPECIAL(value) else value


def attr(value: str) -> str:
    """`value` inside a double-quoted attribute (white space kept as character references)."""
    return value.translate(_ATTR_ESCAPES) if _ATTR_SPECIAL(value) else value


def finish(document: str, *, pretty: bool = False) -> bytes:
    """The document as UTF-8; ValueError if it holds a character XML cannot carry."""
    if bad := NOT_XML(document):
        raise ValueError(f"character {bad[0]!r} cannot be written in XML")
    if pretty:
        return indented(document.encode())
    return document.encode()


def indented(document: bytes) -> bytes:
    """A document of ours indented two spaces an element, with its declaration and a final newline."""
    from lxml import etree

    from infosvc.codec import safexml

    # Our own escaped text, but parsed where every document is (no entities, DTDs, files or network).
    root = safexml.parse(document, max_bytes=len(document), what="written document")
    etree.indent(root)
    written: bytes = etree.tostring(root, encoding="UTF-8", xml_declaration=True)
    return written + b"\n"
