"""The site as GLUE 2.0 entities (OGF GFD.147), once for its three syntaxes: LDIF (glue2_ldif.py),
XML (glue2_xml.py, OGF's glue2.xsd) and JSON (glue2_json.py, OGF's Glue2.json).

One ComputingService (infosvc's aggregator) with one ComputingEndpoint (its job API), one
ComputingShare per computing element (its queue, policy and state figures), one ComputingManager
(the scheduler), one ExecutionEnvironment per subcluster (homogeneous hosts: TotalInstances is its
host count), a Benchmark per benchmark value of a subcluster, one ApplicationEnvironment per
runtime environment, a MappingPolicy per share whose CE has access rules and one AccessPolicy on
the endpoint with every CE's rules (how grid clients find by VO what a site offers), and the
AdminDomain (the site) for the documents that stand alone (XML and JSON; a resource BDII leaves
the AdminDomain to the site BDII). docs/glue-mapping.md maps them.

Ids are URNs of the site id made only of the characters GLUE's LocalID_t admits, since a Service
names its shares by LocalID. Every entity carries the snapshot's time as CreationTime; the
service and the shares name the snapshot in OtherInfo (`InfosvcSnapshot=<id>`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Final, Iterable, Union
from urllib.parse import urlsplit

from infosvc.codec.glue_xml import count
from infosvc.codec.gridformat import GridOptions, site_id
from infosvc.model.glue import GlueTree, SubCluster
from infosvc.model.snapshot import Snapshot, snapshot_of

SUFFIX: Final = "o=glue"
GROUP: Final = "GLUE2GroupID=resource,o=glue"
SERVICE_TYPE: Final = "org.infosvc"
INTERFACE: Final = "org.infosvc.jobs"
CAPABILITY: Final = "executionmanagement.jobexecution"
#: the scheme of GLUE 1.3's GlueCEAccessControlBaseRule syntax (VO:name, VOMS:/fqan, ...) in GLUE 2.0,
#: as gLite's CE providers name it and the EGI profile's validator admits; the CE's rules are in it
POLICY_SCHEME: Final = "org.glite.standard"
_NOT_LOCAL = re.compile(r"[^A-Za-z0-9_.:\-]")
_VO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


@dataclass(frozen=True, slots=True)
class XB:
    """GLUE's ExtendedBoolean: true, false, or undefined (None)."""

    value: bool | None = None


Value = Union[str, int, float, XB, list[str]]


@dataclass(frozen=True, slots=True)
class Assoc:
    xml: str  # the element in <Associations>
    json: str  # the key in "Associations"
    values: tuple[str, ...]
    single: bool = False  # JSON: one string (or null), not an array


@dataclass(slots=True)
class Entity:
    kind: str  # the concrete class: ComputingShare, Benchmark, ...
    base: str  # its GLUE base class (Service, Share, ...); "" when it derives from Entity alone
    id: str
    dn: str
    name: str | None = None
    other_info: list[str] = field(default_factory=list)
    base_attrs: list[tuple[str, Value]] = field(default_factory=list)
    attrs: list[tuple[str, Value]] = field(default_factory=list)
    assoc: list[Assoc] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(default_factory=list)  # LDAP foreign keys


@dataclass(slots=True)
class Glue2Site:
    site: str
    snapshot: Snapshot
    domain: Entity
    #: every entity below the domain, in the order the XML schema lists their kinds
    entities: list[Entity]


def local(text: str) -> str:
    """`text` in LocalID_t's characters; a digest keeps two texts that differ only elsewhere apart."""
    clean = _NOT_LOCAL.sub("_", text)
    return clean if clean == text else f"{clean}.{hashlib.blake2b(text.encode(), digest_size=3).hexdigest()}"


def policy_rules(rules: Iterable[str]) -> list[str]:
    """The rules as a policy publishes them: white space trimmed and runs of it one space (LDAP's
    matching ignores the difference, so two such rules would be one value twice), no empty rule, no
    repeat, in the order given."""
    return list(dict.fromkeys(text for text in (" ".join(rule.split()) for rule in rules) if text))


def user_domain(rule: str, urn: str) -> str:
    """The UserDomain a rule admits: the VO of `VO:name` and `VOMS:/name/...` (what providers put in
    GLUE2PolicyUserDomainForeignKey); for any other rule (a DN, ...) an id of the site's making, since
    XML and JSON need one and a rule names no VO to take it from."""
    kind, sep, rest = rule.partition(":")
    kind = kind.upper()
    name = rest if kind == "VO" else rest.split("/")[1] if kind == "VOMS" and rest.startswith("/") else ""
    return name if sep and _VO_NAME.fullmatch(name) else f"{urn}:userdomain:{local(rule)}"


def _policy(kind: str, pid: str, parent_dn: str, rules: list[str], urn: str, target: Assoc,
            key: tuple[str, str]) -> Entity:
    domains = tuple(dict.fromkeys(user_domain(rule, urn) for rule in rules))
    return Entity(kind, "Policy", pid, f"GLUE2PolicyID={pid},{parent_dn}",
                  base_attrs=[("Scheme", POLICY_SCHEME), ("Rule", rules)],
                  assoc=[target, Assoc("DomainID", "UserDomainID", domains)],
                  keys=[key, *(("GLUE2PolicyUserDomainForeignKey", d) for d in domains)])


def _platform(arch: str | None) -> str:
    return {"x86_64": "amd64", "amd64": "amd64", "i386": "i686", "i686": "i686", "ia64": "itanium",
            "ppc64": "powerpc", "ppc64le": "powerpc", "aarch64": "aarch64", "arm64": "aarch64"}.get(
        (arch or "").lower(), (arch or "unknown").lower())


def _os_family(name: str | None) -> str:
    text = (name or "").lower()
    for word, family in (("linux", "linux"), ("windows", "windows"), ("darwin", "macosx"), ("mac", "macosx"),
                         ("solaris", "solaris")):
        if word in text:
            return family
    return "linux" if text else "unknown"


def _os_name(name: str | None) -> str | None:
    if not name:
        return None
    text = name.lower()
    for start, glue_name in (("scientific linux cern", "scientificlinuxcern"), ("scientific linux", "scientificlinux"),
                             ("red hat", "redhatenterpriseas"), ("suse", "suse"), ("opensuse", "suse")):
        if text.startswith(start):
            return glue_name
    return text.split()[0]


_SERVING = {"Production": "production", "Queueing": "queueing", "Draining": "draining", "Closed": "closed"}


def _serving(status: str) -> str:
    return _SERVING.get(status, "closed")


def _opt(pairs: list[tuple[str, Value | None]]) -> list[tuple[str, Value]]:
    return [(k, v) for k, v in pairs if v is not None]


def _minutes(value: int) -> int | None:
    return value * 60 if value > 0 else None


def build(tree: GlueTree, options: GridOptions) -> Glue2Site:
    """The GLUE 2.0 entities of the tree, with its CE figures of one snapshot."""
    snapshot = snapshot_of(tree)
    site = local(site_id(tree, options))
    urn = f"urn:infosvc:{site}"
    service_id, endpoint_id, manager_id = f"{urn}:service", f"{urn}:endpoint", f"{urn}:manager"
    service_dn = f"GLUE2ServiceID={service_id},{GROUP}"
    manager_dn = f"GLUE2ManagerID={manager_id},{service_dn}"
    mark = f"InfosvcSnapshot={snapshot.id}"
    ces = snapshot.computing_elements
    share_of = {ce.unique_id: f"{urn}:share:{local(ce.unique_id)}" for ce in ces}
    clusters = [c.unique_id for c in tree.clusters()]
    subs: list[SubCluster] = [s for cid in clusters for s in tree.subclusters_of(cid)]
    ee_of = {s.unique_id: f"{urn}:ee:{local(s.unique_id)}" for s in subs}
    shares_by_cluster: dict[str, list[str]] = {}
    for ce in ces:
        for cid in ce.clusters:
            shares_by_cluster.setdefault(cid, []).append(share_of[ce.unique_id])
    rtes: dict[str, list[str]] = {}  # runtime environment -> its EEs
    benchmarks: list[Entity] = []
    ees: list[Entity] = []
    for sub in subs:
        ee_id = ee_of[sub.unique_id]
        ee_dn = f"GLUE2ResourceID={ee_id},{service_dn}"
        bench_ids = []
        if sub.benchmark is not None:
            for kind, value in (("specint2000", sub.benchmark.si00), ("specfp2000", sub.benchmark.sf00)):
                if value > 0:
                    bid = f"{ee_id}:{kind}"
                    bench_ids.append(bid)
                    benchmarks.append(Entity(
                        "Benchmark", "", bid, f"GLUE2BenchmarkID={bid},{ee_dn}",
                        attrs=[("Type", kind), ("Value", float(value))],
                        assoc=[Assoc("ResourceID", "ExecutionEnvironmentID", (ee_id,), True),
                               Assoc("ManagerID", "ComputingManagerID", (manager_id,), True)],
                        keys=[("GLUE2BenchmarkExecutionEnvironmentForeignKey", ee_id),
                              ("GLUE2BenchmarkComputingManagerForeignKey", manager_id)]))
        app_ids = []
        if sub.application_software is not None:
            for rte in sub.application_software.runtime_environment:
                rtes.setdefault(rte, []).append(ee_id)
                app_ids.append(f"{urn}:appenv:{local(rte)}")
        arch, os_, p = sub.architecture, sub.operating_system, sub.processor
        ready = sub.states.get("Ready", 0)
        ees.append(Entity(
            "ExecutionEnvironment", "Resource", ee_id, ee_dn, sub.name,
            attrs=_opt([("Platform", _platform(arch.platform_type)), ("VirtualMachine", None),
                        ("TotalInstances", max(0, sub.host_count)),
                        ("UnavailableInstances", max(0, sub.host_count - ready)),
                        ("LogicalCPUs", count(arch.smp_size)), ("CPUVendor", p.vendor), ("CPUModel", p.model),
                        ("CPUVersion", p.version), ("CPUClockSpeed", count(p.clock_speed)),
                        ("MainMemorySize", count(sub.main_memory.ram_size) or 0),
                        ("OSFamily", _os_family(os_.name)), ("OSName", _os_name(os_.name)),
                        ("OSVersion", os_.release), ("ConnectivityIn", XB()), ("ConnectivityOut", XB())]),
            assoc=[Assoc("ManagerID", "ManagerID", (manager_id,), True),
                   Assoc("ShareID", "ShareID", tuple(shares_by_cluster.get(sub.cluster, ()))),
                   Assoc("ApplicationEnvironmentID", "ApplicationEnvironmentID", tuple(app_ids)),
                   Assoc("BenchmarkID", "BenchmarkID", tuple(bench_ids))],
            keys=[("GLUE2ResourceManagerForeignKey", manager_id)]))
    apps = []
    for rte, owners in rtes.items():
        aid = f"{urn}:appenv:{local(rte)}"
        apps.append(Entity(
            "ApplicationEnvironment", "", aid, f"GLUE2ApplicationEnvironmentID={aid},{manager_dn}",
            attrs=[("AppName", rte)],
            assoc=[Assoc("ResourceID", "ExecutionEnvironmentID", tuple(owners)),
                   Assoc("ManagerID", "ComputingManagerID", (manager_id,), True)],
            keys=[("GLUE2ApplicationEnvironmentComputingManagerForeignKey", manager_id),
                  *(("GLUE2ApplicationEnvironmentExecutionEnvironmentForeignKey", o) for o in owners)]))
    shares, mappings = [], []
    for ce in ces:
        sid, state, policy = share_of[ce.unique_id], ce.state, ce.policy
        share_dn = f"GLUE2ShareID={sid},{service_dn}"
        resources = tuple(ee_of[s.unique_id] for cid in ce.clusters for s in tree.subclusters_of(cid))
        rules = policy_rules(ce.access_control_rules)
        # the share's own local part under a kind of its own: a suffix (a provider's SHARE_policy)
        # could equal the id of the share of a CE whose id ends so
        pid = f"{urn}:mappingpolicy:{local(ce.unique_id)}"
        if rules:
            mappings.append(_policy("MappingPolicy", pid, share_dn, rules, urn, Assoc("ShareID", "ShareID", (sid,), True),
                                    ("GLUE2MappingPolicyShareForeignKey", sid)))
        shares.append(Entity(
            "ComputingShare", "Share", sid, share_dn, ce.name, [mark],
            base_attrs=[("Description", f"computing element {ce.unique_id}")],
            attrs=_opt([("MappingQueue", ce.queue), ("MaxWallTime", _minutes(policy.max_wall_clock_time)),
                        ("MaxCPUTime", _minutes(policy.max_cpu_time)),
                        ("MaxTotalJobs", policy.max_total_jobs or None),
                        ("MaxRunningJobs", policy.max_running_jobs or None),
                        ("ServingState", _serving(state.status)), ("TotalJobs", max(0, state.total_jobs)),
                        ("RunningJobs", max(0, state.running_jobs)), ("WaitingJobs", max(0, state.waiting_jobs)),
                        ("EstimatedAverageWaitingTime", max(0, state.estimated_response_time)),
                        ("EstimatedWorstWaitingTime", max(0, state.worst_response_time)),
                        ("FreeSlots", max(0, state.free_cpus))]),
            assoc=[Assoc("EndpointID", "EndpointID", (endpoint_id,)), Assoc("ResourceID", "ResourceID", resources),
                   Assoc("ServiceID", "ServiceID", (service_id,), True),
                   Assoc("PolicyID", "MappingPolicyID", (pid,) if rules else ())],
            keys=[("GLUE2ShareServiceForeignKey", service_id), ("GLUE2ShareEndpointForeignKey", endpoint_id),
                  *(("GLUE2ShareResourceForeignKey", r) for r in resources)]))
    first = ces[0] if ces else None
    url = tree.information_service_url
    parts = urlsplit(url) if url else None
    base_url = f"{parts.scheme}://{parts.netloc}" if parts is not None and parts.netloc else f"https://{site}"
    states = [ce.state.status for ce in ces]
    serving = next((_serving(s) for s in ("Production", "Queueing", "Draining") if s in states), "closed")
    endpoint_dn = f"GLUE2EndpointID={endpoint_id},{service_dn}"
    # the job API takes jobs for every share, so it admits whom any share maps (as a gLite CE's
    # endpoint lists every VO of its queues): what `ginfo --service --vo` reads
    every_rule = policy_rules(rule for ce in ces for rule in ce.access_control_rules)
    access = [_policy("AccessPolicy", f"{urn}:accesspolicy", endpoint_dn, every_rule, urn,
                      Assoc("EndpointID", "EndpointID", (endpoint_id,), True),
                      ("GLUE2AccessPolicyEndpointForeignKey", endpoint_id))] if every_rule else []
    endpoint = Entity(
        "ComputingEndpoint", "Endpoint", endpoint_id, endpoint_dn,
        "infosvc job API",
        base_attrs=[("URL", f"{base_url}/v1/jobs"), ("Capability", [CAPABILITY]), ("Technology", "rest"),
                    ("InterfaceName", INTERFACE), ("InterfaceVersion", "1"), ("ImplementationName", "infosvc"),
                    ("QualityLevel", "production"), ("HealthState", "ok"), ("ServingState", serving)],
        assoc=[Assoc("ServiceID", "ServiceID", (service_id,), True),
               Assoc("ShareID", "ShareID", tuple(share_of.values())),
               Assoc("PolicyID", "AccessPolicyID", tuple(a.id for a in access))],
        keys=[("GLUE2EndpointServiceForeignKey", service_id)])
    total = sum(max(0, s.total_cpus) for s in subs)
    manager = Entity(
        "ComputingManager", "Manager", manager_id, manager_dn, "infosvc scheduler",
        base_attrs=_opt([("ProductName", first.info.lrms_type if first else "infosvc"),
                         ("ProductVersion", first.info.lrms_version if first else None)]),
        attrs=[("TotalLogicalCPUs", total), ("TotalSlots", total), ("Homogeneous", XB(len(subs) <= 1))],
        assoc=[Assoc("ServiceID", "ServiceID", (service_id,), True),
               Assoc("ResourceID", "ResourceID", tuple(e.id for e in ees)),
               Assoc("ApplicationEnvironmentID", "ApplicationEnvironmentID", tuple(a.id for a in apps)),
               Assoc("BenchmarkID", "BenchmarkID", tuple(b.id for b in benchmarks))],
        keys=[("GLUE2ManagerServiceForeignKey", service_id)])
    service = Entity(
        "ComputingService", "Service", service_id, service_dn, f"infosvc of {site}", [mark],
        base_attrs=[("Capability", [CAPABILITY]), ("Type", SERVICE_TYPE), ("QualityLevel", "production")],
        assoc=[Assoc("EndpointID", "EndpointID", (endpoint_id,)), Assoc("ShareID", "ShareID", tuple(share_of.values())),
               Assoc("ManagerID", "ManagerID", (manager_id,)), Assoc("ServiceID", "ServiceID", ()),
               Assoc("ContactID", "ContactID", ()), Assoc("LocationID", "LocationID", (), True)],
        keys=[("GLUE2ServiceAdminDomainForeignKey", site)])
    domain = Entity(
        "AdminDomain", "Domain", site, f"GLUE2DomainID={site},{SUFFIX}", site,
        assoc=[Assoc("ServiceID", "ComputingServiceID", (service_id,)), Assoc("ContactID", "ContactID", ()),
               Assoc("LocationID", "LocationID", (), True), Assoc("ParentDomainID", "ParentDomainID", (), True)])
    return Glue2Site(site, snapshot, domain,
                     [service, endpoint, *shares, manager, *ees, *access, *mappings, *benchmarks, *apps])
