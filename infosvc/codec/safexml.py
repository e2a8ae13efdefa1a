"""Safe XML input: UTF-8 only, no DTD, no entity, no network, no file, bounded size; and the XML Schemas.

Every XML document that enters infosvc is parsed here, by `parse`, in three steps:

1. The encoding is decided from the bytes before lxml sees any: UTF-8 (US-ASCII being part of it),
   with or without a byte order mark, and an XML declaration that names UTF-8, US-ASCII or nothing.
   Everything else is refused, naming what was found: UTF-16 and UTF-32 (byte order mark, or the
   zero bytes of XML 1.0 Appendix F without one), EBCDIC, and an encoding= naming anything else
   (ISO-8859-1, UTF-7, "UTF-16" over UTF-8 bytes, ...). Neither the agent nor any documented client
   writes another encoding, so none is decoded here: each would be one more way to hide a DOCTYPE
   from the scan (UTF-7 writes `<!` as `<+ACE-`). libxml2 is then told the encoding (the parser's
   encoding="utf-8" overrides a byte order mark and the declaration), so the bytes scanned here are
   the characters libxml2 reads. A document that starts as the agent's do (`_USUAL_START`: the
   declaration as our writers write it, then the root element) is decided by one anchored regex.
2. The prolog (declaration, white space, comments, processing instructions) is scanned, and a
   DOCTYPE, or any other `<!` before the root element, is refused: none of the formats we read needs
   one. By the XML grammar a DOCTYPE stands only there; anywhere else libxml2 refuses it as not
   well-formed, so no DTD, internal or external, and no entity declaration is ever read.
3. libxml2 parses with a resolver that refuses every URL (no file, no network, no catalog: lxml
   falls back to libxml2's own loader only when a resolver returns None, never when it raises), and
   with load_dtd, resolve_entities, dtd_validation, huge_tree off and no_network on. Steps 1-2 make
   this a second line, and options alone are not one: lxml's collect_ids=False sets the parser
   context's `loadsubset` (XML_SKIP_IDS) on libxml2 before 2.15, and libxml2 (2.14 as lxml 6.1
   ships it) reads any non-zero `loadsubset` as "load the external subset and parameter
   entities", load_dtd=False notwithstanding. That is how a UTF-16 DOCTYPE,
   which the old byte scan missed, read file:///dev/zero for ever. collect_ids is left on here.
   After the parse, a DOCTYPE that libxml2 reports is refused as well.

No XInclude is processed and no xsi:schemaLocation followed (tests/codec/test_hostile_xml.py checks both
on every entry point). Schemas are loaded from the project's schemas/ directory, the very files
published with the project, through the same `parse`; they include and import no other file.
"""

from __future__ import annotations

import os
import re
import threading
from functools import cache
from pathlib import Path
from typing import Any

from lxml import etree

from infosvc.errors import DocumentError, Problem

#: Default bound on one document's size.
MAX_DOCUMENT_BYTES = 1 << 20

SCHEMA_DIR = Path(os.environ.get("INFOSVC_SCHEMAS", Path(__file__).resolve().parents[2] / "schemas"))

#: The encodings a document may declare: UTF-8, and its subset US-ASCII.
ACCEPTED_ENCODINGS = frozenset({"utf-8", "utf8", "us-ascii", "ascii"})
ACCEPTED = "UTF-8 (or US-ASCII), with or without a byte order mark, declared as UTF-8 or not declared"

_local = threading.local()

_UTF8_BOM = b"\xef\xbb\xbf"
#: The first bytes of a document in another encoding (XML 1.0 Appendix F), the longer first.
_FOREIGN = (
    (b"\x00\x00\xfe\xff", "UTF-32BE (with a byte order mark)"),
    (b"\xff\xfe\x00\x00", "UTF-32LE (with a byte order mark)"),
    (b"\x00\x00\x00<", "UTF-32BE (no byte order mark)"),
    (b"<\x00\x00\x00", "UTF-32LE (no byte order mark)"),
    (b"\x00\x00<\x00", "UCS-4 (byte order 2143)"),
    (b"\x00<\x00\x00", "UCS-4 (byte order 3412)"),
    (b"\xfe\xff", "UTF-16BE (with a byte order mark)"),
    (b"\xff\xfe", "UTF-16LE (with a byte order mark)"),
    (b"\x00<", "UTF-16BE (no byte order mark)"),
    (b"<\x00", "UTF-16LE (no byte order mark)"),
    (b"\x4c\x6f\xa7\x94", "EBCDIC"),
)
#: The first bytes of the signatures above; those without a NUL in their first four bytes need them.
_SUSPECT_FIRST = frozenset(b"\x00\xfe\xff\x4c")
# The encoding in an XML declaration.
_DECLARED = re.compile(rb"""\bencoding[ \t\r\n]*=[ \t\r\n]*(["'])([^"']*)\1""")
# The usual start, which the checks need not look at further: a byte order mark or none, the XML
# declaration as infosvc's writers and most others write it or none, white space, and the root
# element's start tag (an ASCII `<` and letter, so neither UTF-16 nor UTF-32; no DOCTYPE before it).
_USUAL_START = re.compile(
    rb"""(?:\xef\xbb\xbf)?(?:<\?xml version=(['"])1\.0\1(?: encoding=(['"])(?:UTF|utf)-8\2)?\?>)?[ \t\r\n]*<[A-Za-z_]""")
# The prolog before the root element: XML declaration, white space, comments, PIs.
_PROLOG = re.compile(rb"(?:[ \t\r\n]+|<\?.*?\?>|<!--.*?-->)*", re.S)


class ExternalResourceRefused(Exception):
    """Raised by the parser's resolver: the document asked for something outside itself."""


class _RefuseEveryUrl(etree.Resolver):  # type: ignore[misc]  # lxml has no stubs here
    """Refuses every external resource: file, http, catalog, whatever the URL. Raising (rather than
    returning None) is what keeps lxml from falling back to libxml2's own loader."""

    def resolve(self, system_url: str, public_id: str, context: Any) -> Any:
        raise ExternalResourceRefused("external resources are not read")


def _parser() -> etree.XMLParser:
    # lxml parsers must not be shared between threads; one per thread is cheap.
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = etree.XMLParser(
            encoding="utf-8", resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False,
            attribute_defaults=False, huge_tree=False, remove_comments=True, remove_pis=True,
            collect_ids=True,  # False makes libxml2 2.14 load external DTDs (the module's docstring)
        )
        parser.resolvers.add(_RefuseEveryUrl())
        _local.parser = parser
    return parser


def foreign_encoding(data: bytes) -> str | None:
    """The encoding the first bytes of `data` announce, when it is not UTF-8 (None: UTF-8, or no
    telling). A NUL among the first four bytes, which no UTF-8 XML document holds, counts as UTF-16
    or UTF-32: an XML document starts with an ASCII character, which both write with a zero byte.
    (A NUL further on is libxml2's to refuse: it reads UTF-8, and XML has no character 0.)"""
    head = data[:4]
    if not head or (head[0] not in _SUSPECT_FIRST and b"\x00" not in head):
        return None
    for signature, name in _FOREIGN:
        if data.startswith(signature):
            return name
    if (nul := head.find(b"\x00")) >= 0:
        return f"UTF-16 or UTF-32 (byte {nul + 1} is zero, which it never is in UTF-8 XML)"
    return None


def _refuse_foreign(data: bytes, start: int, what: str) -> None:
    """DocumentError unless `data` (its byte order mark, if any, ends at `start`) is UTF-8 XML."""
    if found := foreign_encoding(data):
        raise DocumentError(f"{what} is encoded in {found}; infosvc reads XML in {ACCEPTED}", line=1)
    if data.startswith(b"<?xml", start) and data[start + 5:start + 6] in (b" ", b"\t", b"\r", b"\n"):
        end = data.find(b"?>", start)
        declaration = data[start:end] if end >= 0 else data[start:]  # unclosed: libxml2 will say so
        if not (declared := _DECLARED.search(declaration)):
            return
        name = declared[2][:40].decode("ascii", "replace")
        if name.strip().lower() not in ACCEPTED_ENCODINGS:
            raise DocumentError(f"{what} declares encoding {name!r}; infosvc reads XML in {ACCEPTED}", line=1)


def parse(data: bytes | str, *, max_bytes: int = MAX_DOCUMENT_BYTES, what: str = "document") -> etree._Element:
    """The root element of `data`, or DocumentError saying what is wrong and where."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > max_bytes:
        raise DocumentError(f"{what} is {len(data)} bytes, over the limit of {max_bytes} bytes")
    if not data or data.isspace():
        raise DocumentError(f"{what} is empty")
    if not _USUAL_START.match(data):
        start = 3 if data.startswith(_UTF8_BOM) else 0
        _refuse_foreign(data, start, what)
        # Refuse a DOCTYPE before libxml2 reads a single declaration of its DTD.
        prolog = _PROLOG.match(data, start)
        prolog_end = prolog.end() if prolog else start  # the pattern matches the empty prolog too
        if data.startswith(b"<!", prolog_end):
            line = data.count(b"\n", 0, prolog_end) + 1
            if data.startswith(b"<!DOCTYPE", prolog_end):
                raise DocumentError(f"{what} carries a DOCTYPE, which is not accepted (no DTDs, no entities)",
                                    line=line)
            raise DocumentError(f"{what} has a markup declaration (<!...) before its root element, which is not "
                                "accepted (no DTDs, no entities)", line=line)
    try:
        root = etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as exc:
        raise DocumentError(f"{what} is not well-formed XML: {exc.msg}", line=exc.lineno) from None
    except ExternalResourceRefused:  # pragma: no cover - the scan above leaves libxml2 nothing to load
        raise DocumentError(f"{what} refers to an external resource, which is not read", line=1) from None
    # A backstop: libxml2 names any DOCTYPE it met here, internal subset or not.
    if root.getroottree().docinfo.doctype:
        raise DocumentError(f"{what} carries a DOCTYPE, which is not accepted (no DTDs, no entities)", line=1)
    return root


@cache
def schema(name: str) -> etree.XMLSchema:
    """The XML Schema schemas/`name`, loaded once."""
    path = SCHEMA_DIR / name
    return etree.XMLSchema(parse(path.read_bytes(), what=f"schema {name}"))


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
