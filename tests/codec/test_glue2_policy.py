"""GLUE 2.0's access rules: a MappingPolicy per share whose CE has rules (the config's
`access_control`, GLUE 1.3's GlueCEAccessControlBaseRule) and one AccessPolicy on the job API's
endpoint with every CE's rules, in the three renderings, each checked against its vendored schema
(glue2.xsd, Glue2.json, GLUE20.schema) and all three telling the same policies. slapd answering a
grid client's VO query: tests/publish/test_slapd.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from infosvc.codec import ldif
from infosvc.codec.glue2 import POLICY_SCHEME, local, policy_rules, user_domain
from infosvc.codec.gridformat import GridOptions
from infosvc.publish.glue import Glue
from infosvc.config.site import SiteConfig, parse_config
from infosvc.hosts.rollup import Rollup
from support.gridcheck import GLUE20, NS, check_ldif, glue2_validator, xml_valid
from support.gridsite import CONFIG, site_rollup

ALL, BETA, NONE = "ce.example.org:2119/jobmanager-infosvc-all", "ce-beta", "ce-none"
URN = "urn:infosvc:EXAMPLE-SITE"
DN_RULE = "DN:/C=CH/O=Example & Co/CN=Jo <Smith>"
#: ce-beta's rules as another site's GLUE may carry them (a top level renders what it read; our own
#: config refuses these): a repeat, stray white space, an empty one, a subject
BETA_RULES = ["VO:cms", " VO:cms ", "", "VO:atlas", DN_RULE, "VOMS:/cms/Role=production"]
Policies = set[tuple[str, str, tuple[str, ...], str, tuple[str, ...]]]  # kind, id, rules, for whom, domains


def config_with_rules(rules: dict[str, list[str]]) -> SiteConfig:
    """CONFIG with these rules, set past parse_config's checks (see BETA_RULES)."""
    config = parse_config(json.loads(json.dumps(CONFIG)))
    return replace(config, computing_elements=tuple(replace(ce, access_control=tuple(rules.get(ce.id, [])))
                                                    for ce in config.computing_elements))


def share(ce: str) -> str:
    return f"{URN}:share:{local(ce)}"


def render(rollup: Rollup, fmt: str) -> bytes:
    return Glue(rollup).rendering(fmt, GridOptions(site="EXAMPLE-SITE", base=True)).tree()


@pytest.fixture
def rollup() -> Rollup:
    return site_rollup(config_with_rules({ALL: ["VO:atlas", "VOMS:/dteam/Role=x"], BETA: BETA_RULES}))


def xml_policies(root: Any) -> Policies:
    out = set()
    for kind, target in (("MappingPolicy", "ShareID"), ("AccessPolicy", "EndpointID")):
        for p in root.iter(f"{NS}{kind}"):
            assert p.findtext(f"{NS}Scheme") == POLICY_SCHEME
            assoc = p.find(f"{NS}Associations")
            out.add((kind, p.findtext(f"{NS}ID"), tuple(r.text for r in p.iter(f"{NS}Rule")),
                     assoc.findtext(f"{NS}{target}"), tuple(d.text for d in assoc.iter(f"{NS}DomainID"))))
    return out


def json_policies(document: dict[str, Any]) -> Policies:
    out = set()
    for kind, target in (("MappingPolicy", "ShareID"), ("AccessPolicy", "EndpointID")):
        for p in document.get(kind, []):
            assert p["Scheme"] == POLICY_SCHEME
            out.add((kind, p["ID"], tuple(p["Rule"]), p["Associations"][target],
                     tuple(p["Associations"]["UserDomainID"])))
    return out


def ldif_policies(entries: dict[str, ldif.Attributes]) -> Policies:
    out = set()
    for dn, attrs in entries.items():
        classes = [v for n, v in attrs if n == "objectClass"]
        if "GLUE2Policy" not in classes:
            continue
        kind = classes[1][len("GLUE2"):]
        values = {n: [v for m, v in attrs if m == n] for n, _ in attrs}
        assert classes == ["GLUE2Policy", f"GLUE2{kind}"] and values["GLUE2PolicyScheme"] == [POLICY_SCHEME]
        target = values[f"GLUE2{kind}{'ShareForeignKey' if kind == 'MappingPolicy' else 'EndpointForeignKey'}"]
        parent = f"GLUE2{'ShareID' if kind == 'MappingPolicy' else 'EndpointID'}={target[0]},"
        assert dn == f"GLUE2PolicyID={values['GLUE2PolicyID'][0]},{parent}GLUE2ServiceID={URN}:service," \
                     "GLUE2GroupID=resource,o=glue"  # below what it is for, as gLite's providers place it
        out.add((kind, values["GLUE2PolicyID"][0], tuple(values["GLUE2PolicyRule"]), target[0],
                 tuple(values["GLUE2PolicyUserDomainForeignKey"])))
    return out


def test_every_rendering_publishes_the_same_policies_valid_against_its_schema(rollup: Rollup) -> None:
    root = xml_valid(render(rollup, "glue2-xml"))
    document = json.loads(render(rollup, "glue2-json"))
    glue2_validator().validate(document)
    entries = check_ldif(render(rollup, "ldif-2.0").decode(), GLUE20)
    policies = xml_policies(root)
    assert json_policies(document) == policies and ldif_policies(entries) == policies
    beta = ("VO:cms", "VO:atlas", DN_RULE, "VOMS:/cms/Role=production")
    subject = f"{URN}:userdomain:{local(DN_RULE)}"
    assert policies == {
        ("MappingPolicy", f"{URN}:mappingpolicy:{local(ALL)}", ("VO:atlas", "VOMS:/dteam/Role=x"), share(ALL),
         ("atlas", "dteam")),
        ("MappingPolicy", f"{URN}:mappingpolicy:{local(BETA)}", beta, share(BETA), ("cms", "atlas", subject)),
        ("AccessPolicy", f"{URN}:accesspolicy", ("VO:atlas", "VOMS:/dteam/Role=x", *beta[:1], *beta[2:]),
         f"{URN}:endpoint.infosvc", ("atlas", "dteam", "cms", subject)),
    }  # ce-none has no rules, so no policy
    # and the share and the endpoint name theirs
    for s in root.iter(f"{NS}ComputingShare"):
        sid = s.findtext(f"{NS}ID")
        mapped = [p.text for p in s.find(f"{NS}Associations").iter(f"{NS}PolicyID")]
        assert mapped == ([] if sid == share(NONE) else [f"{URN}:mappingpolicy:{sid.rsplit(':share:')[1]}"])
    shares = {s["ID"]: s["Associations"]["MappingPolicyID"] for s in document["ComputingShare"]}
    assert shares[share(NONE)] == [] and shares[share(BETA)] == [f"{URN}:mappingpolicy:{local(BETA)}"]
    assert document["ComputingEndpoint"][0]["Associations"]["AccessPolicyID"] == [f"{URN}:accesspolicy"]


def test_the_schemas_refuse_a_policy_without_its_rules_or_user_domains(rollup: Rollup) -> None:
    """Why a rule that names no VO gets a user domain of the site's making: XML and JSON need one."""
    document = json.loads(render(rollup, "glue2-json"))
    for key, drop in (("Rule", lambda p: p.pop("Rule")), ("UserDomainID", lambda p: p["Associations"].pop(
            "UserDomainID")), ("ShareID", lambda p: p["Associations"].pop("ShareID"))):
        broken = json.loads(json.dumps(document))
        drop(broken["MappingPolicy"][0])
        assert not glue2_validator().is_valid(broken), key
    text = render(rollup, "glue2-xml")
    start = text.index(b"<MappingPolicy ")
    no_domain = text[:start] + text[start:].replace(b"<DomainID>atlas</DomainID><DomainID>dteam</DomainID>", b"", 1)
    assert no_domain != text
    with pytest.raises(Exception):
        xml_valid(no_domain)


def test_without_rules_there_is_no_policy(rollup: Rollup) -> None:
    bare = site_rollup(config_with_rules({}))
    root = xml_valid(render(bare, "glue2-xml"))
    document = json.loads(render(bare, "glue2-json"))
    glue2_validator().validate(document)
    entries = check_ldif(render(bare, "ldif-2.0").decode(), GLUE20)
    assert xml_policies(root) == json_policies(document) == ldif_policies(entries) == set()
    assert "MappingPolicy" not in document and "AccessPolicy" not in document
    assert document["ComputingEndpoint"][0]["Associations"]["AccessPolicyID"] == []
    assert not any("GLUE2PolicyID=" in dn for dn in entries)


def test_rules_and_their_user_domains() -> None:
    assert policy_rules(["VO:atlas", " VO:atlas", "VO:atlas\t", "  ", "", "DN:/CN=Jo   Smith ", "VO:Atlas"]) == [
        "VO:atlas", "DN:/CN=Jo Smith", "VO:Atlas"]  # LDAP's caseExactMatch tells case apart, not white space
    assert user_domain("VO:atlas", URN) == "atlas" and user_domain("vo:cms", URN) == "cms"
    assert user_domain("VOMS:/atlas/Role=production", URN) == user_domain("VOMS:/atlas", URN) == "atlas"
    assert user_domain("VO:vo.example.org", URN) == "vo.example.org"
    for other in ("DN:/C=CH/CN=Jo", "VO:", "VOMS:/", "VOMS:atlas", "atlas", "VO:a b", "FQAN:/atlas"):
        assert user_domain(other, URN) == f"{URN}:userdomain:{local(other)}", other
    assert user_domain("DN:/CN=a b", URN) != user_domain("DN:/CN=a_b", URN)  # local() keeps them apart
