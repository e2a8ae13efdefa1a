"""LDIF (RFC 2849) as the grid's LDAP servers read it: writing entries, reading them back, and the
change records that turn one set of entries into another.

Writing: a value that is not a SAFE-STRING (a NUL, CR or LF, a byte beyond ASCII, a leading space,
colon or '<', a trailing space) or holds any other control character is written base64
(`attr:: ...`); lines longer than 76 characters are folded, each continuation starting with one space, as OpenLDAP's own tools fold them. DN values are
escaped as RFC 4514 says.

`parse` reads entries back (unfolding, base64), for `changes` and for tests; `changes(old, new)`
writes what bdii-update feeds ldapmodify: `delete` for entries gone (children first), `add` for new
ones (parents first), `modify` with one `replace` or `delete` per attribute whose values differ.
"""

from __future__ import annotations

import base64
import re
from typing import Final, Iterable, Mapping, Sequence

#: Line length before folding (RFC 2849 allows any; 76 is what OpenLDAP's tools write).
WIDTH: Final = 76

#: An attribute's values in order; an entry's attributes in order (objectClass first).
Attributes = list[tuple[str, str]]

# A SAFE-STRING: SAFE-INIT-CHAR then SAFE-CHARs, and (RFC 2849's note) no trailing space, which
# some readers strip. RFC 2849 lets the control characters through raw (all but NUL, LF and CR);
# here only printable ASCII is, so that LDIF printed to a terminal carries no escape sequence.
_SAFE = re.compile(r"(?:[\x21-\x39\x3b\x3d-\x7e][\x20-\x7e]*)?").fullmatch
_DN_SPECIAL = re.compile(r'[,+"\\<>;=]')


def dn_value(text: str) -> str:
    """An attribute value escaped for a DN (RFC 4514): its special characters after a backslash, a
    character that is not printable (a control, NUL among them) as the hex pairs of its UTF-8."""
    out = _DN_SPECIAL.sub(lambda m: "\\" + m.group(), text)
    if not out.isprintable():
        # slapd takes an unescaped tab, newline or carriage return at either end for the white
        # space around a value, not the value (an RDN then unlike its entry's attribute: refused)
        out = "".join(c if c.isprintable() else _hex_pairs(c) for c in out)
    if text.startswith((" ", "#")):
        out = "\\" + out
    if text.endswith(" ") and text != " ":  # told from the text: `x\\ ` ends in an escaped backslash, then a space
        out = out[:-1] + "\\ "
    return out


def _hex_pairs(char: str) -> str:
    # surrogatepass: a lone surrogate, which an upstream's JSON can carry, has no UTF-8
    return "".join(f"\\{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))


def _fold(line: str) -> str:
    if len(line) <= WIDTH:
        return line
    parts = [line[:WIDTH]]
    parts.extend(" " + line[i:i + WIDTH - 1] for i in range(WIDTH, len(line), WIDTH - 1))
    return "\n".join(parts)


def line(attribute: str, value: str) -> str:
    """One `attribute: value` line, base64 when the value is not safe, folded at WIDTH."""
    if _SAFE(value) is not None and not value.endswith(" "):
        return _fold(f"{attribute}: {value}")
    return _fold(f"{attribute}:: {base64.b64encode(value.encode(errors='replace')).decode()}")


def ia5(text: str) -> str:
    """`text` in IA5 (ASCII), as GLUE 1.3's attribute syntax requires: every other character as a
    Python-style escape (\\xe9, \\u20ac), so it stays readable, and a backslash doubled, so that
    it stays distinct (`x\\xe9` as written is not `x` and e-acute). ASCII without a backslash is as it is."""
    if text.isascii() and "\\" not in text:
        return text
    return text.replace("\\", "\\\\").encode("ascii", "backslashreplace").decode()


def entry(dn: str, attributes: Iterable[tuple[str, str]]) -> str:
    """An entry as LDIF text, with the blank line that ends it. Empty values are left out: no
    string syntax of the GLUE schemas admits one."""
    lines = [line("dn", dn)]
    lines.extend(line(name, value) for name, value in attributes if value)
    lines.append("\n")
    return "\n".join(lines)


# --- reading back ----------------------------------------------------------------------------

def _unfolded(text: str) -> list[str]:
    lines: list[str] = []
    for raw in text.split("\n"):
        raw = raw.removesuffix("\r")
        if raw.startswith(" ") and lines:
            lines[-1] += raw[1:]
        elif raw.startswith("#") and not (lines and lines[-1] == ""):
            lines.append("#")  # a comment; a folded comment continues it
        else:
            lines.append(raw)
    return [x for x in lines if not x.startswith("#")]


def parse(text: str) -> dict[str, Attributes]:
    """LDIF content records -> {dn: [(attribute, value), ...]}, in the order written. Attribute
    names keep their spelling; a `version:` line is skipped."""
    entries: dict[str, Attributes] = {}
    current: Attributes | None = None
    for raw in _unfolded(text):
        if not raw:
            current = None
            continue
        name, sep, rest = raw.partition(":")
        if not sep:
            raise ValueError(f"not an LDIF line: {raw[:80]!r}")
        if rest.startswith(":"):
            value = base64.b64decode(rest[1:].strip()).decode()
        else:
            value = rest[1:] if rest.startswith(" ") else rest
        if name.lower() == "version" and current is None:
            continue
        if current is None:
            if name.lower() != "dn":
                raise ValueError(f"an entry must start with dn: {raw[:80]!r}")
            current = entries.setdefault(value, [])
        else:
            current.append((name, value))
    return entries


# --- changes --------------------------------------------------------------------------------

#: an escaped character of a DN, or the first of a hex pair (whose second is a hex digit): no comma of them separates
_DN_ESCAPE = re.compile(r"\\.", re.S)


def _depth(dn: str) -> int:
    # read escape by escape: `x\\,` is an escaped backslash, then a comma that separates
    return _DN_ESCAPE.sub("", dn).count(",")


def _values(attributes: Attributes) -> dict[str, tuple[str, list[str]]]:
    """lower-cased name -> (the name as written, its values in order)."""
    found: dict[str, tuple[str, list[str]]] = {}
    for name, value in attributes:
        found.setdefault(name.lower(), (name, []))[1].append(value)
    return found


def changes(old: Mapping[str, Attributes], new: Mapping[str, Attributes]) -> str:
    """The LDIF change records that make the entries `old` into `new` (DNs compared as written):
    deletions deepest first, then additions shallowest first, then modifications. Empty when equal."""
    out: list[str] = []
    old_keys = {dn.lower(): dn for dn in old}
    new_keys = {dn.lower(): dn for dn in new}
    for key in sorted(old_keys.keys() - new_keys.keys(), key=_depth, reverse=True):
        out.append("\n".join((line("dn", old_keys[key]), "changetype: delete", "\n")))
    for key in sorted(new_keys.keys() - old_keys.keys(), key=_depth):
        dn = new_keys[key]
        out.append("\n".join((line("dn", dn), "changetype: add", *(line(n, v) for n, v in new[dn]), "\n")))
    for key in new_keys.keys() & old_keys.keys():
        before, after = _values(old[old_keys[key]]), _values(new[new_keys[key]])
        mods: list[str] = []
        for attr in after:
            name, values = after[attr]
            if attr not in before or sorted(before[attr][1]) != sorted(values):
                mods.append("\n".join([f"replace: {name}", *(line(name, v) for v in values), "-"]))
        for attr in before.keys() - after.keys():
            mods.append(f"delete: {before[attr][0]}\n-")
        if mods:
            out.append("\n".join((line("dn", new_keys[key]), "changetype: modify", *mods, "\n")))
    return "".join(out)


def lines_of(attributes: Sequence[tuple[str, str | int | None]]) -> Attributes:
    """Attributes with None dropped and numbers written as text."""
    return [(name, value if isinstance(value, str) else str(value)) for name, value in attributes if value is not None]
