"""Checks of the grid's renderings against the public schemas vendored in schemas/glue1.3 and
schemas/glue2: OGF's glue2.xsd (through safexml's schema loader), OGF's Glue2.json and the files it
references (jsonschema, draft 4, resolved from the vendored directory, never the network), and the
OpenLDAP schema files (object classes, attributes, MUSTs, read from the files themselves)."""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft4Validator
from referencing import Registry
from referencing.jsonschema import DRAFT4

from infosvc.codec import ldif, safexml
from support import ROOT

NS = "{http://schemas.ogf.org/glue/2009/03/spec_2.0_r1}"


def vendored_json_schemas() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((ROOT / "schemas/glue2/json").glob("*.json"))]


def glue2_validator(schemas: list[dict[str, Any]] | None = None) -> Draft4Validator:
    schemas = schemas or vendored_json_schemas()
    registry: Registry[Any] = Registry().with_resources((s["id"], DRAFT4.create_resource(s)) for s in schemas)
    top = next(s for s in schemas if s["id"].endswith("/Glue2.json"))
    Draft4Validator.check_schema(top)
    return Draft4Validator(top, registry=registry)


def xml_valid(document: bytes) -> Any:
    root = safexml.parse(document, max_bytes=1 << 28, what="GLUE 2.0 document")
    safexml.validate(root, safexml.schema("glue2/glue2.xsd"))
    return root


# --- the LDAP schemas, read from the vendored files ------------------------------------------

_DEFINITION = re.compile(r"^(attributetype|objectclass)\s*\((.*?)(?=^\s*(?:attributetype|objectclass)\b|\Z)",
                         re.S | re.M | re.I)


def ldap_schema(*files: str) -> tuple[set[str], dict[str, set[str]]]:
    """The attribute names and each object class's MUST attributes (lower case), as the files define them."""
    attributes: set[str] = set()
    classes: dict[str, set[str]] = {}
    for name in files:
        text = re.sub(r"#[^\n]*", "", (ROOT / "schemas" / name).read_text())
        for kind, body in _DEFINITION.findall(text):
            body = re.sub(r"DESC\s+'[^']*'", "", body)
            named = re.search(r"NAME\s*(\([^)]*\)|'[^']*')", body)
            assert named is not None, body[:200]
            names = [n.lower() for n in re.findall(r"'([^']+)'", named.group(1))]
            if kind.lower() == "attributetype":
                attributes.update(names)
            else:
                must = re.search(r"MUST\s*(\([^)]*\)|[\w-]+)", body)
                musts = {m.lower() for m in re.findall(r"[\w-]+", must.group(1))} if must else set()
                for n in names:
                    classes[n] = musts
    return attributes, classes


GLUE13 = ldap_schema("glue1.3/Glue-CORE.schema", "glue1.3/Glue-CE.schema", "glue1.3/Glue-MDS.schema")
GLUE20 = ldap_schema("glue2/GLUE20.schema")
CORE = ({"o", "objectclass"}, {"organization": {"o"}})


def check_ldif(text: str, schema: tuple[set[str], dict[str, set[str]]]) -> dict[str, ldif.Attributes]:
    """Every entry's classes and attributes defined, its MUSTs present; the entries."""
    attributes, classes = schema[0] | CORE[0], {**schema[1], **CORE[1]}
    entries = ldif.parse(text)
    assert entries
    for dn, attrs in entries.items():
        names = {name.lower() for name, _ in attrs}
        assert names <= attributes, (dn, names - attributes)
        own = [v.lower() for n, v in attrs if n.lower() == "objectclass"]
        assert own and set(own) <= classes.keys(), (dn, own)
        for cls in own:
            assert classes[cls] <= names, (dn, cls, classes[cls] - names)
    return entries
