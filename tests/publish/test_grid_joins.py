"""The joins grid clients make across the GLUE 2.0 LDIF, run as LDAP queries against Debian's slapd
(tests/support/slapd.py) holding a realistic site: several subclusters, three CEs with VO rules, CE
figures from a queue. The clients themselves are not run (ginfo crashes under Python 3 on its own
code; DIRAC is a framework): their queries are, with the bases, filters and keys they use, as read
in their sources.

DIRAC's GLUE 2 reader (DIRACGrid/DIRAC, src/DIRAC/Core/Utilities/Glue2.py: getGlue2CEInfo and the
helpers it calls; Core/Utilities/Grid.py ldapsearchBDII runs each query as
`ldapsearch -x -LLL -o ldif-wrap=no -H ldap://HOST -b o=glue FILTER`, by default against a
top-level BDII) asks, for one VO:

1. `(&(objectClass=GLUE2Policy)(|(GLUE2PolicyRule=VO:<vo>)(GLUE2PolicyRule=vo:<vo>)))`; keeps the
   entries whose DN has `GLUE2DomainID=` (the site's name is read from the DN) and takes each one's
   `GLUE2MappingPolicyShareForeignKey` (an AccessPolicy has none and is passed over);
2. `(&(objectClass=GLUE2Share)(|(GLUE2ShareID=<key>)...))`, keeping the GLUE2ComputingShare entries
   below a GLUE2DomainID;
3. each share's `GLUE2ComputingShareExecutionEnvironmentForeignKey` (none: "No entry for ..." and
   the share is skipped), all of them in `(&(objectClass=GLUE2ExecutionEnvironment)(|(GLUE2ResourceID=<key>)...))`,
   matched back on GLUE2ResourceID; of an environment it reads MainMemorySize (as an int), Platform,
   OSFamily, OSName, OSVersion and `GLUE2ExecutionEnvironmentComputingManagerForeignKey`;
4. of the share, ServingState (required), MaxCPUTime and MaxWallTime (ints), MaxRunningJobs,
   MaxSlotsPerJob, and each `GLUE2ShareEndpointForeignKey`, whose text after its last "." names the
   CE's type (only an HTCondor-CE's makes a queue; others log "Unknown CE Type"); ARC's shares,
   which have none, are read through `GLUE2ComputingShareComputingEndpointForeignKey`.

ginfo (EGI-Federation/ginfo, bin/ginfo: ELTS, shortcuts, request, list_object) asks for each object
it shows `(&(objectClass=GLUE2<Object>)<filters>)` below o=glue (subtree), a filter
`(GLUE2<attribute>=<value>)`, a comma list of values ORed. `--vo X` filters MappingPolicy (with
`--ce`) or AccessPolicy (with `--service`, `--site`) on `GLUE2PolicyRule=X`. It joins two objects
on the *first* value of a key equal to the other's id: MappingPolicy.ShareID
(MappingPolicyShareForeignKey) to the ComputingShare, AccessPolicy.EndpointID to the Endpoint,
Endpoint.ServiceID (EndpointServiceForeignKey) to the Service, Service.DomainID to the
AdminDomain, ComputingManager.ServiceID (ComputingManagerComputingServiceForeignKey) to the
Service; a ComputingShare's ExecutionEnvironmentID and EndpointID are the Computing-specific keys,
shown as they are (None when absent).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from infosvc.codec import ldif
from support.gridsite import CE_ALL, SITE, config_with_rules, queue_site, resource_ldif
from support.slapd import Slapd, normal_dn, running

GLUE = "o=glue"
SITE_URN = f"urn:infosvc:{SITE}"
#: where a top-level BDII holds the site's resource BDII's entries, below the site BDII's AdminDomain
DOMAIN_DN = f"GLUE2DomainID={SITE},GLUE2GroupID=grid,o=glue"
RESOURCE = "GLUE2GroupID=resource,o=glue"
#: the site: CE "all" serves every cluster, ce-beta one, ce-none none
RULES = {CE_ALL: ["VO:atlas", "VOMS:/dteam/Role=x"], "ce-beta": ["VO:cms", "VOMS:/cms/Role=production"],
         "ce-none": ["VO:atlas", "VO:ops"]}
SHARES_OF = {"atlas": {"all", "ce-none"}, "cms": {"ce-beta"}, "ops": {"ce-none"}, "lhcb": set()}

#: every Computing-specific key: (the class that has it, the key, the class it names, that class's id)
COMPUTING_KEYS = (
    ("GLUE2ComputingShare", "GLUE2ComputingShareExecutionEnvironmentForeignKey", "GLUE2ExecutionEnvironment",
     "GLUE2ResourceID"),
    ("GLUE2ComputingShare", "GLUE2ComputingShareComputingEndpointForeignKey", "GLUE2ComputingEndpoint",
     "GLUE2EndpointID"),
    ("GLUE2ComputingShare", "GLUE2ComputingShareComputingServiceForeignKey", "GLUE2ComputingService",
     "GLUE2ServiceID"),
    ("GLUE2ExecutionEnvironment", "GLUE2ExecutionEnvironmentComputingManagerForeignKey", "GLUE2ComputingManager",
     "GLUE2ManagerID"),
    ("GLUE2ComputingEndpoint", "GLUE2ComputingEndpointComputingServiceForeignKey", "GLUE2ComputingService",
     "GLUE2ServiceID"),
    ("GLUE2ComputingManager", "GLUE2ComputingManagerComputingServiceForeignKey", "GLUE2ComputingService",
     "GLUE2ServiceID"),
)
#: the generic key each Computing-specific one stands beside, with the same values
GENERIC = {"GLUE2ComputingShareExecutionEnvironmentForeignKey": "GLUE2ShareResourceForeignKey",
           "GLUE2ComputingShareComputingEndpointForeignKey": "GLUE2ShareEndpointForeignKey",
           "GLUE2ComputingShareComputingServiceForeignKey": "GLUE2ShareServiceForeignKey",
           "GLUE2ExecutionEnvironmentComputingManagerForeignKey": "GLUE2ResourceManagerForeignKey",
           "GLUE2ComputingEndpointComputingServiceForeignKey": "GLUE2EndpointServiceForeignKey",
           "GLUE2ComputingManagerComputingServiceForeignKey": "GLUE2ManagerServiceForeignKey"}

Entry = dict[str, list[str]]


@pytest.fixture(scope="module")
def text() -> str:
    return resource_ldif(queue_site(config_with_rules(RULES)))


@pytest.fixture
def slapd(tmp_path: Path) -> Iterator[Slapd]:
    with running(tmp_path / "slapd") as server:
        yield server


def as_top_bdii(text: str) -> str:
    """The LDIF's GLUE 2.0 entries where a top-level BDII holds them: the resource BDII's below the
    site's AdminDomain (which the site BDII publishes), below the top BDII's `GLUE2GroupID=grid`."""
    entries = ldif.parse(text)
    out = [ldif.entry(GLUE, entries[GLUE]),
           ldif.entry("GLUE2GroupID=grid,o=glue", [("objectClass", "GLUE2Group"), ("GLUE2GroupID", "grid")]),
           ldif.entry(DOMAIN_DN, [("objectClass", "GLUE2Domain"), ("objectClass", "GLUE2AdminDomain"),
                                  ("GLUE2DomainID", SITE)]),
           ldif.entry(f"GLUE2GroupID=resource,{DOMAIN_DN}", entries[RESOURCE])]
    out += [ldif.entry(dn.removesuffix(RESOURCE) + f"GLUE2GroupID=resource,{DOMAIN_DN}", attrs)
            for dn, attrs in entries.items() if dn.endswith("," + RESOURCE)]
    return "".join(out)


def search(slapd: Slapd, query: str) -> dict[str, Entry]:
    """`query` below o=glue, every attribute; entries by DN, values by attribute."""
    found: dict[str, Entry] = {}
    for dn, attrs in slapd.search(GLUE, query).items():
        entry: Entry = {}
        for name, value in attrs:
            entry.setdefault(name, []).append(value)
        found[dn] = entry
    return found


def either(attribute: str, values: list[str] | set[str]) -> str:
    return "(|" + "".join(f"({attribute}={v})" for v in sorted(values)) + ")"


def one(slapd: Slapd, kind: str, id_attribute: str, key: str) -> tuple[str, Entry]:
    """The one entry of class `kind` whose id is `key`; fails on none or several."""
    found = search(slapd, f"(&(objectClass={kind})({id_attribute}={key}))")
    assert len(found) == 1, f"{kind} {id_attribute}={key}: {len(found)} entries"
    ((dn, entry),) = found.items()
    assert kind in entry["objectClass"] and entry[id_attribute] == [key]
    return dn, entry


def queue_of(entry: Entry) -> str:
    (queue,) = entry["GLUE2ComputingShareMappingQueue"]
    return queue


# --- every key, from every entry that has one ---------------------------------------------------------


def test_every_computing_key_resolves_to_one_entry_of_its_class(slapd: Slapd, text: str) -> None:
    slapd.add(text)
    by_class = {kind: search(slapd, f"(objectClass={kind})") for kind in {k[0] for k in COMPUTING_KEYS}}
    assert [len(by_class[k]) for k in ("GLUE2ComputingShare", "GLUE2ComputingEndpoint", "GLUE2ComputingManager")] == [
        3, 1, 1]
    assert len(by_class["GLUE2ExecutionEnvironment"]) >= 4  # 16 GB benchmarked and not, 4 GB, 256 GB
    followed = 0
    for kind, key, target, id_attribute in COMPUTING_KEYS:
        for dn, entry in by_class[kind].items():
            values = entry.get(key, [])
            # beside the generic key, with the same values
            assert sorted(values) == sorted(entry.get(GENERIC[key], [])), (dn, key)
            for value in values:
                found_dn, _ = one(slapd, target, id_attribute, value)
                followed += 1
                if target == "GLUE2ComputingService":  # and the entry is below the service it names
                    assert normal_dn(dn).endswith(normal_dn(found_dn))
            if key != "GLUE2ComputingShareExecutionEnvironmentForeignKey":
                assert len(values) == 1, (dn, key)  # one endpoint, service, manager each
    assert followed >= 3 * 2 + 4 + 2
    # the shares reach every environment, each share those of the clusters its CE serves
    reached = {queue_of(e): set(e.get("GLUE2ComputingShareExecutionEnvironmentForeignKey", []))
               for e in by_class["GLUE2ComputingShare"].values()}
    every = {e["GLUE2ResourceID"][0] for e in by_class["GLUE2ExecutionEnvironment"].values()}
    assert reached["all"] == every
    assert reached["ce-beta"] and reached["ce-beta"] < every and reached["ce-none"] == set()  # ce-none: no cluster


# --- DIRAC ----------------------------------------------------------------------------------------------


def dirac_query(slapd: Slapd, query: str) -> list[tuple[str, list[str], dict[str, list[str]]]]:
    """A query as DIRAC's ldapsearchBDII runs it (the same ldapsearch options, base o=glue) and reads
    its output: per entry the DN, the objectClass values, and the lines that start with "GLUE2",
    split at their first colon (a base64 value, `attr:: ...`, would keep a leading colon)."""
    done = subprocess.run([slapd.tools["ldapsearch"], "-x", "-LLL", "-o", "ldif-wrap=no", "-H", slapd.url, "-b",
                           GLUE, query], capture_output=True, text=True, timeout=60, check=True)
    records: list[tuple[str, list[str], dict[str, list[str]]]] = []
    for line in done.stdout.splitlines():
        name, _, value = line.partition(":")
        if name == "dn":
            records.append((value.strip(), [], {}))
        elif records and name == "objectClass":
            records[-1][1].append(value.strip())
        elif records and name.startswith("GLUE2"):
            records[-1][2].setdefault(name, []).append(value.strip())
    return records


def dirac_shares(slapd: Slapd, vo: str) -> dict[str, dict[str, list[str]]]:
    """DIRAC's steps 1 and 2: the VO's ComputingShares that name their site, by share id."""
    policies = dirac_query(slapd, f"(&(objectClass=GLUE2Policy)(|(GLUE2PolicyRule=VO:{vo})(GLUE2PolicyRule=vo:{vo})))")
    keys = {attrs["GLUE2MappingPolicyShareForeignKey"][0] for dn, _, attrs in policies
            if "GLUE2DomainID=" in dn and "GLUE2MappingPolicyShareForeignKey" in attrs}
    if not keys:
        return {}
    shares = {}
    for dn, classes, attrs in dirac_query(slapd, f"(&(objectClass=GLUE2Share){either('GLUE2ShareID', keys)})"):
        if "GLUE2DomainID=" in dn and "GLUE2ComputingShare" in classes:
            assert dn.split("GLUE2DomainID=")[1].split(",", 1)[0] == SITE  # the site's name, as DIRAC reads it
            shares[attrs["GLUE2ShareID"][0]] = attrs
    assert set(shares) == keys
    return shares


def test_dirac_finds_a_vos_shares_environments_endpoint_and_manager_through_a_top_bdii(slapd: Slapd,
                                                                                         text: str) -> None:
    slapd.add(as_top_bdii(text))
    manager = search(slapd, "(objectClass=GLUE2ComputingManager)")
    (manager_id,) = {e["GLUE2ManagerID"][0] for e in manager.values()}
    for vo, expected in SHARES_OF.items():
        shares = dirac_shares(slapd, vo)
        assert {queue_of(s) for s in shares.values()} == expected, vo
        served = [s for s in shares.values() if queue_of(s) != "ce-none"]
        keys = {k for s in served for k in s.get("GLUE2ComputingShareExecutionEnvironmentForeignKey", [])}
        assert all(s.get("GLUE2ComputingShareExecutionEnvironmentForeignKey") for s in served)  # none skipped
        if not keys:
            continue
        query = f"(&(objectClass=GLUE2ExecutionEnvironment){either('GLUE2ResourceID', keys)})"
        environments = dirac_query(slapd, query)
        assert {attrs["GLUE2ResourceID"][0] for _, _, attrs in environments} == keys
        for dn, _, attrs in environments:
            assert "GLUE2DomainID=" in dn and int(attrs["GLUE2ExecutionEnvironmentMainMemorySize"][0]) > 0
            assert attrs["GLUE2ExecutionEnvironmentPlatform"] == ["amd64"]  # DIRAC reads it as x86_64
            assert attrs["GLUE2ExecutionEnvironmentOSFamily"] == ["linux"]
            assert attrs["GLUE2ExecutionEnvironmentComputingManagerForeignKey"] == [manager_id]
        for share in shares.values():
            assert share["GLUE2ComputingShareServingState"][0] in ("production", "draining", "closed", "queueing")
            for limit in ("GLUE2ComputingShareMaxCPUTime", "GLUE2ComputingShareMaxWallTime"):
                assert all(v.isdigit() for v in share.get(limit, []))
            (endpoint,) = share["GLUE2ShareEndpointForeignKey"]
            assert share["GLUE2ComputingShareComputingEndpointForeignKey"] == [endpoint]
            one(slapd, "GLUE2ComputingEndpoint", "GLUE2EndpointID", endpoint)
            (service,) = share["GLUE2ComputingShareComputingServiceForeignKey"]
            one(slapd, "GLUE2ComputingService", "GLUE2ServiceID", service)
    one(slapd, "GLUE2ComputingService", "GLUE2ServiceID", f"{SITE_URN}:service")


def test_dirac_finds_no_site_in_a_resource_bdii_alone(slapd: Slapd, text: str) -> None:
    """Its DNs name no GLUE2DomainID (the site BDII adds it), and DIRAC reads the site from there."""
    slapd.add(text)
    policies = dirac_query(slapd, "(&(objectClass=GLUE2Policy)(|(GLUE2PolicyRule=VO:atlas)(GLUE2PolicyRule=vo:atlas)))")
    assert len(policies) == 3  # two shares' MappingPolicies and the endpoint's AccessPolicy
    assert dirac_shares(slapd, "atlas") == {}


def test_dirac_can_read_a_ce_type_from_each_share_endpoint_key(text: str) -> None:
    """DIRAC reads a CE's type as `endpoint.rsplit('.', 1)[1]` of each share's endpoint key: without a
    dot that raises IndexError and stops its whole GLUE 2 pass; infosvc's says `infosvc` (a type DIRAC
    logs as unknown and skips, as it does every CE but HTCondor-CE's and ARC's)."""
    keys = [v for attrs in ldif.parse(text).values() for n, v in attrs if n == "GLUE2ShareEndpointForeignKey"]
    assert keys and all(key.rsplit(".", 1)[1] == "infosvc" for key in keys)


# --- ginfo ----------------------------------------------------------------------------------------------


def ginfo_objects(slapd: Slapd, kind: str, id_attribute: str, **filters: str) -> dict[str, Entry]:
    """ginfo's query for one object: `(&(objectClass=GLUE2<kind>)(GLUE2<attribute>=<value>)...)` below
    o=glue, a comma list of values ORed; the entries by id (the first value of `id_attribute`)."""
    parts = "".join(either(f"GLUE2{a}", v.split(",")) if "," in v else f"(GLUE2{a}={v})" for a, v in filters.items())
    return {e[id_attribute][0]: e for e in search(slapd, f"(&(objectClass=GLUE2{kind}){parts})").values()}


def joined(entries: dict[str, Entry], key: str, others: dict[str, Entry]) -> dict[str, str]:
    """ginfo's join: each entry's id to the id of the other entry named by the first value of its `key`."""
    out = {}
    for eid, entry in entries.items():
        assert key in entry, (eid, key)  # ginfo shows None and joins nothing
        assert entry[key][0] in others, (eid, key, entry[key][0])
        out[eid] = entry[key][0]
    return out


def test_ginfo_ce_vo_finds_the_shares_and_shows_their_environments_and_endpoint(slapd: Slapd, text: str) -> None:
    slapd.add(text)
    shares = ginfo_objects(slapd, "ComputingShare", "GLUE2ShareID")
    endpoints = ginfo_objects(slapd, "Endpoint", "GLUE2EndpointID")
    environments = ginfo_objects(slapd, "ExecutionEnvironment", "GLUE2ResourceID")
    for vo, expected in (("VO:atlas", {"all", "ce-none"}), ("VO:cms", {"ce-beta"}),
                         ("VO:cms,VO:ops", {"ce-beta", "ce-none"}), ("vo:atlas", set())):  # rules compare exactly
        policies = ginfo_objects(slapd, "MappingPolicy", "GLUE2PolicyID", PolicyRule=vo)
        found = joined(policies, "GLUE2MappingPolicyShareForeignKey", shares)
        assert {queue_of(shares[s]) for s in found.values()} == expected, vo
    for share in shares.values():  # what `ginfo --ce` shows of each: ExecutionEnvironmentID, EndpointID
        assert set(share.get("GLUE2ComputingShareExecutionEnvironmentForeignKey", [])) <= environments.keys()
        assert share["GLUE2ComputingShareComputingEndpointForeignKey"][0] in endpoints
    # `ginfo ComputingShare Endpoint`
    assert joined(shares, "GLUE2ComputingShareComputingEndpointForeignKey", endpoints)


def test_ginfo_service_and_site_vo_reach_the_service_and_the_site(slapd: Slapd, text: str) -> None:
    slapd.add(as_top_bdii(text))
    endpoints = ginfo_objects(slapd, "Endpoint", "GLUE2EndpointID")
    services = ginfo_objects(slapd, "Service", "GLUE2ServiceID")
    domains = ginfo_objects(slapd, "AdminDomain", "GLUE2DomainID")
    service_of = joined(endpoints, "GLUE2EndpointServiceForeignKey", services)
    domain_of = joined(services, "GLUE2ServiceAdminDomainForeignKey", domains)
    for vo in ("VO:atlas", "VO:cms", "VOMS:/dteam/Role=x"):
        access = ginfo_objects(slapd, "AccessPolicy", "GLUE2PolicyID", PolicyRule=vo)
        reached = {service_of[e] for e in joined(access, "GLUE2AccessPolicyEndpointForeignKey", endpoints).values()}
        assert reached == {f"{SITE_URN}:service"}, vo  # --service --vo
        assert {domain_of[s] for s in reached} == {SITE}, vo  # --site --vo
    assert ginfo_objects(slapd, "AccessPolicy", "GLUE2PolicyID", PolicyRule="VO:lhcb") == {}
    # `ginfo ComputingManager Service`: the manager's ServiceID
    managers = ginfo_objects(slapd, "ComputingManager", "GLUE2ManagerID")
    assert set(joined(managers, "GLUE2ComputingManagerComputingServiceForeignKey", services).values()) == {
        f"{SITE_URN}:service"}
