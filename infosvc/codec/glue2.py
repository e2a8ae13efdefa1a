"""The site as GLUE 2.0 entities (OGF GFD.147), once for its three syntaxes: LDIF (glue2_ldif.py),
XML (glue2_xml.py, OGF's glue2.xsd) and JSON (glue2_json.py, OGF's Glue2.json).

One ComputingService (infosvc's aggregator) with one ComputingEndpoint (its job API), one
ComputingShare per computing element (its queue, policy and state figures), one ComputingManager
(the scheduler), one ExecutionEnvironment per subcluster (homogeneous hosts: TotalInstances is its
host count; its accelerators in GLUE 2.1's AcceleratorEnvironment and accelerator figures, which
JSON alone carries, and in OtherInfo), a Benchmark per benchmark value of a subcluster, one ApplicationEnvironment per
runtime environment, a MappingPolicy per share whose CE has access rules and one AccessPolicy on
the endpoint with every CE's rules (how grid clients find by VO what a site offers), and the
AdminDomain (the site) for the documents that stand alone (XML and JSON; a resource BDII leaves
the AdminDomain to the site BDII). docs/glue-mapping.md maps them.

Ids are URNs of the site id made only of the characters GLUE's LocalID_t admits, since a Service
names its shares by LocalID (`local`: a text in those characters is its own id, any other has its
other characters escaped; one id per text and one text per id). Every entity carries the
snapshot's time as CreationTime; the service and the shares name the snapshot in OtherInfo
(`InfosvcSnapshot=<id>`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Iterable, Sequence, Union

from infosvc.codec.glue_xml import count
from infosvc.codec.gridformat import (
    IMPLEMENTATION_VERSION, GridOptions, all_subclusters, jobs_url, scaling_factor, scaling_reference, site_id,
    subclusters_of_ce, vo_of_rule,
)
from infosvc.model.glue import ComputingElement, GlueTree, SubCluster
from infosvc.model.snapshot import Snapshot, snapshot_of

SUFFIX: Final = "o=glue"
GROUP: Final = "GLUE2GroupID=resource,o=glue"
SERVICE_TYPE: Final = "org.infosvc"
INTERFACE: Final = "org.infosvc.jobs"
CAPABILITY: Final = "executionmanagement.jobexecution"
#: the scheme of GLUE 1.3's GlueCEAccessControlBaseRule syntax (VO:name, VOMS:/fqan, ...) in GLUE 2.0,
#: as gLite's CE providers name it and the EGI profile's validator admits; the CE's rules are in it
POLICY_SCHEME: Final = "org.glite.standard"
_LOCAL = re.compile(r"[A-Za-z0-9_.:\-]*").fullmatch
#: what `local` escapes: a character LocalID_t lacks, and an underscore before an x, which would
#: otherwise start what reads as an escape
_TO_ESCAPE = re.compile(r"[^A-Za-z0-9_.:\-]|_(?=[xX])")
#: an escape as `local` writes it, in either case (LDIF's diff and some readers ignore case)
_LIKE_ESCAPE = re.compile(r"_[xX](?:[0-9A-Fa-f]{6}|[0-9A-Fa-f]{4})_").search
#: what `id_part` escapes in a text holding ':': what `local` does, and ':'
_PART_ESCAPE = re.compile(r"[^A-Za-z0-9_.\-]|_(?=[xX])")


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
    #: the ids the entities were given (GLUE 2.1's accelerator entities name them: glue2_accelerators.py)
    ids: Ids


def local(text: str) -> str:
    """`text` in LocalID_t's characters, one-to-one: a text already in them is its own id unless it
    holds what reads as an escape; in any other, each character LocalID_t lacks is `_xHHHH_` (its
    code point, six digits beyond U+FFFF: a lone surrogate too) and an underscore before an x is
    `_x005F_`, so that every `_x` of such an id starts an escape and the text reads back from it.

    An id made this way always holds an escape and a kept one never does: no site's id can be
    another's escaped one (a digest of 24 bits, as ids were once made, could be found in seconds)."""
    if _LOCAL(text) and not _LIKE_ESCAPE(text):
        return text
    return _TO_ESCAPE.sub(_escape, text)


def id_part(text: str) -> str:
    """`local(text)` with ':' escaped too (`_x003A_`): one of the texts an id joins with ':' (GLUE
    2.1's accelerator entities), so that no two lists of texts make one id."""
    return local(text) if ":" not in text else _PART_ESCAPE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"_x{code:04X}_" if code <= 0xFFFF else f"_x{code:06X}_"


def policy_rules(rules: Iterable[str]) -> list[str]:
    """The rules as a policy publishes them: white space trimmed and runs of it one space (LDAP's
    matching ignores the difference, so two such rules would be one value twice), no empty rule, no
    repeat, in the order given."""
    return list(dict.fromkeys(text for text in (" ".join(rule.split()) for rule in rules) if text))


def user_domain(rule: str, urn: str) -> str:
    """The UserDomain a rule admits: the VO of `VO:name` and `VOMS:/name/...` (what providers put in
    GLUE2PolicyUserDomainForeignKey); for any other rule (a DN, ...) an id of the site's making, since
    XML and JSON need one and a rule names no VO to take it from."""
    return vo_of_rule(rule) or f"{urn}:userdomain:{local(rule)}"


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


def given(pairs: list[tuple[str, Value | None]]) -> list[tuple[str, Value]]:
    return [(k, v) for k, v in pairs if v is not None]


def _minutes(value: int) -> int | None:
    return value * 60 if value > 0 else None


@dataclass(frozen=True, slots=True)
class Ids:
    """The ids and DNs of one site's entities, which each family's builder names in its associations
    and foreign keys: made once, so that every family names the others alike."""

    site: str
    urn: str
    #: InfosvcSnapshot=<id>, the OtherInfo of the service and the shares
    mark: str
    service: str
    endpoint: str
    manager: str
    service_dn: str
    manager_dn: str
    #: CE id -> its share's id; subcluster id -> its execution environment's id
    share_of: dict[str, str]
    ee_of: dict[str, str]

    @classmethod
    def of(cls, site: str, snapshot: Snapshot, subs: list[SubCluster]) -> Ids:
        urn = f"urn:infosvc:{site}"
        service_id, manager_id = f"{urn}:service", f"{urn}:manager"
        service_dn = f"GLUE2ServiceID={service_id},{GROUP}"
        # the endpoint's id ends in `.infosvc`: DIRAC takes a CE's type from what follows the last
        # dot of a share's endpoint key, and a key without one stops its whole GLUE 2 pass
        return cls(site, urn, f"InfosvcSnapshot={snapshot.id}", service_id, f"{urn}:endpoint.infosvc", manager_id,
                   service_dn,
                   f"GLUE2ManagerID={manager_id},{service_dn}",
                   {ce.unique_id: f"{urn}:share:{local(ce.unique_id)}" for ce in snapshot.computing_elements},
                   # ':' escaped (id_part): a Benchmark's id is its EE's and `:specint2000`
                   {s.unique_id: f"{urn}:ee:{id_part(s.unique_id)}" for s in subs})

    def app(self, rte: str) -> str:
        return f"{self.urn}:appenv:{local(rte)}"


def build(tree: GlueTree, options: GridOptions) -> Glue2Site:
    """The GLUE 2.0 entities of the tree, with its CE figures of one snapshot."""
    snapshot = snapshot_of(tree)
    ces = snapshot.computing_elements
    subs = all_subclusters(tree)
    ids = Ids.of(local(site_id(tree, options)), snapshot, subs)
    shares_by_cluster: dict[str, list[str]] = {}
    for ce in ces:
        for cid in ce.clusters:
            shares_by_cluster.setdefault(cid, []).append(ids.share_of[ce.unique_id])
    ees: list[Entity] = []
    benchmarks: list[Entity] = []
    reference = scaling_reference(subs)
    for sub in subs:
        ee, its_benchmarks = _execution_environment(sub, ids, shares_by_cluster.get(sub.cluster, []), reference)
        ees.append(ee)
        benchmarks.extend(its_benchmarks)
    apps = _application_environments(subs, ids)
    shares, mappings = _shares(tree, ces, ids)
    endpoint, access = _endpoint(tree, ces, ids)
    manager = _manager(ces, subs, ids, ees, apps, benchmarks)
    return Glue2Site(ids.site, snapshot, _domain(ids),
                     [_service(ids), endpoint, *shares, manager, *ees, *access, *mappings, *benchmarks, *apps], ids)


ACCELERATOR_OTHER_INFO: Final = "Accelerator"


def accelerator_info(sub: SubCluster) -> list[str]:
    """What XML and LDIF say of a subcluster's accelerators, in its ExecutionEnvironment's
    OtherInfo: `Accelerator=GPU:8:NVIDIA H100 80GB HBM3`, type, count per host, model."""
    return [f"{ACCELERATOR_OTHER_INFO}={a.type}:{a.count}:{a.model}" for a in sub.accelerators]


def _benchmarks(sub: SubCluster, ee_id: str, ee_dn: str, ids: Ids) -> list[Entity]:
    """A Benchmark per benchmark value of the subcluster (none for a value of 0: not measured)."""
    if sub.benchmark is None:
        return []
    return [Entity("Benchmark", "", bid, f"GLUE2BenchmarkID={bid},{ee_dn}",
                   attrs=[("Type", kind), ("Value", float(value))],
                   assoc=[Assoc("ResourceID", "ExecutionEnvironmentID", (ee_id,), True),
                          Assoc("ManagerID", "ComputingManagerID", (ids.manager,), True)],
                   keys=[("GLUE2BenchmarkExecutionEnvironmentForeignKey", ee_id),
                         ("GLUE2BenchmarkComputingManagerForeignKey", ids.manager)])
            for kind, value in (("specint2000", sub.benchmark.si00), ("specfp2000", sub.benchmark.sf00)) if value > 0
            for bid in (f"{ee_id}:{kind}",)]


def _multiplicity(sockets: int | None, logical: int | None) -> str | None:
    """GLUE 2.0's CPUMultiplicity of a host: one or more sockets, one or more cores each."""
    if not sockets or not logical:
        return None
    return f"{'multicpu' if sockets > 1 else 'singlecpu'}-{'multicore' if logical > sockets else 'singlecore'}"


def _execution_environment(sub: SubCluster, ids: Ids, shares: list[str],
                           reference: int | None) -> tuple[Entity, list[Entity]]:
    """The subcluster's ExecutionEnvironment (`shares`: those of the CEs that serve its cluster;
    `reference`: the SpecInt2000 the scaling factors are counted against), and its Benchmarks."""
    ee_id = ids.ee_of[sub.unique_id]
    ee_dn = f"GLUE2ResourceID={ee_id},{ids.service_dn}"
    benchmarks = _benchmarks(sub, ee_id, ee_dn, ids)
    software = sub.application_software
    app_ids = tuple(ids.app(rte) for rte in software.runtime_environment) if software is not None else ()
    arch, os_, p = sub.architecture, sub.operating_system, sub.processor
    ready = sub.states.get("Ready", 0)
    sockets = sub.sockets_per_host
    factor = scaling_factor(sub, reference)
    ee = Entity(
        "ExecutionEnvironment", "Resource", ee_id, ee_dn, sub.name, accelerator_info(sub),
        attrs=given([("Platform", _platform(arch.platform_type)), ("VirtualMachine", None),
                    ("TotalInstances", max(0, sub.host_count)),
                    ("UnavailableInstances", max(0, sub.host_count - ready)), ("PhysicalCPUs", sockets),
                    ("LogicalCPUs", count(arch.smp_size)),
                    ("CPUMultiplicity", _multiplicity(sockets, count(arch.smp_size))),
                    ("CPUVendor", p.vendor), ("CPUModel", p.model),
                    ("CPUVersion", p.version), ("CPUClockSpeed", count(p.clock_speed)),
                    ("CPUTimeScalingFactor", factor), ("WallTimeScalingFactor", factor),
                    ("MainMemorySize", count(sub.main_memory.ram_size) or 0),
                    ("VirtualMemorySize", count(sub.virtual_size_per_host)),
                    ("OSFamily", _os_family(os_.name)), ("OSName", _os_name(os_.name)),
                    ("OSVersion", os_.release), ("ConnectivityIn", XB()), ("ConnectivityOut", XB())]),
        assoc=[Assoc("ManagerID", "ManagerID", (ids.manager,), True),
               Assoc("ShareID", "ShareID", tuple(shares)),
               Assoc("ApplicationEnvironmentID", "ApplicationEnvironmentID", app_ids),
               Assoc("BenchmarkID", "BenchmarkID", tuple(b.id for b in benchmarks))],
        keys=[("GLUE2ResourceManagerForeignKey", ids.manager),
              ("GLUE2ExecutionEnvironmentComputingManagerForeignKey", ids.manager)])
    return ee, benchmarks


def _application_environments(subs: list[SubCluster], ids: Ids) -> list[Entity]:
    """An ApplicationEnvironment per runtime environment, with the execution environments that have it."""
    owners_of: dict[str, list[str]] = {}
    for sub in subs:
        if sub.application_software is not None:
            for rte in sub.application_software.runtime_environment:
                owners_of.setdefault(rte, []).append(ids.ee_of[sub.unique_id])
    return [Entity("ApplicationEnvironment", "", aid, f"GLUE2ApplicationEnvironmentID={aid},{ids.manager_dn}",
                   attrs=[("AppName", rte)],
                   assoc=[Assoc("ResourceID", "ExecutionEnvironmentID", tuple(owners)),
                          Assoc("ManagerID", "ComputingManagerID", (ids.manager,), True)],
                   keys=[("GLUE2ApplicationEnvironmentComputingManagerForeignKey", ids.manager),
                         *(("GLUE2ApplicationEnvironmentExecutionEnvironmentForeignKey", o) for o in owners)])
            for rte, owners in owners_of.items() for aid in (ids.app(rte),)]


def _shares(tree: GlueTree, ces: Sequence[ComputingElement], ids: Ids) -> tuple[list[Entity], list[Entity]]:
    """A ComputingShare per CE, and a MappingPolicy for each whose CE has access rules."""
    shares, mappings = [], []
    for ce in ces:
        sid, state, policy = ids.share_of[ce.unique_id], ce.state, ce.policy
        share_dn = f"GLUE2ShareID={sid},{ids.service_dn}"
        served = subclusters_of_ce(tree, ce)
        resources = tuple(ids.ee_of[s.unique_id] for s in served)
        rules = policy_rules(ce.access_control_rules)
        # the share's own local part under a kind of its own: a suffix (a provider's SHARE_policy)
        # could equal the id of the share of a CE whose id ends so
        pid = f"{ids.urn}:mappingpolicy:{local(ce.unique_id)}"
        if rules:
            mappings.append(_policy("MappingPolicy", pid, share_dn, rules, ids.urn,
                                    Assoc("ShareID", "ShareID", (sid,), True),
                                    ("GLUE2MappingPolicyShareForeignKey", sid)))
        shares.append(Entity(
            "ComputingShare", "Share", sid, share_dn, ce.name, [ids.mark],
            base_attrs=[("Description", f"computing element {ce.unique_id}")],
            attrs=given([("MappingQueue", ce.queue), ("MaxWallTime", _minutes(policy.max_wall_clock_time)),
                        # a job that gives no limit runs with the CE's (infosvc.queue.cestate.limit_on)
                        ("DefaultWallTime", _minutes(policy.max_wall_clock_time)),
                        ("MaxCPUTime", _minutes(policy.max_cpu_time)),
                        ("DefaultCPUTime", _minutes(policy.max_cpu_time)),
                        ("MaxTotalJobs", policy.max_total_jobs or None),
                        ("MaxRunningJobs", policy.max_running_jobs or None),
                        # a job may span the CE's hosts: the scheduler places it on any of them
                        ("MaxSlotsPerJob", ce.max_slots_per_job or ce.info.total_cpus or None),
                        *_memory_limits(served),
                        ("ServingState", _serving(state.status)), ("TotalJobs", max(0, state.total_jobs)),
                        ("RunningJobs", max(0, state.running_jobs)), ("WaitingJobs", max(0, state.waiting_jobs)),
                        ("EstimatedAverageWaitingTime", max(0, state.estimated_response_time)),
                        ("EstimatedWorstWaitingTime", max(0, state.worst_response_time)),
                        ("FreeSlots", max(0, state.free_cpus)),
                        ("UsedSlots", max(0, ce.info.total_cpus - state.free_cpus))]),
            assoc=[Assoc("EndpointID", "EndpointID", (ids.endpoint,)), Assoc("ResourceID", "ResourceID", resources),
                   Assoc("ServiceID", "ServiceID", (ids.service,), True),
                   Assoc("PolicyID", "MappingPolicyID", (pid,) if rules else ())],
            # the generic keys and the Computing-specific ones beside them, as CREAM's, ARC's and
            # HTCondor-CE's providers publish: DIRAC and ginfo follow the latter
            keys=[("GLUE2ShareServiceForeignKey", ids.service), ("GLUE2ShareEndpointForeignKey", ids.endpoint),
                  *(("GLUE2ShareResourceForeignKey", r) for r in resources),
                  ("GLUE2ComputingShareComputingServiceForeignKey", ids.service),
                  ("GLUE2ComputingShareComputingEndpointForeignKey", ids.endpoint),
                  *(("GLUE2ComputingShareExecutionEnvironmentForeignKey", r) for r in resources)]))
    return shares, mappings


def _memory_limits(served: list[SubCluster]) -> list[tuple[str, Value | None]]:
    """MaxMainMemory and GuaranteedMainMemory (MB: a job on one host has at most the largest host's
    RAM, and at least the smallest's), and the same of virtual memory (RAM and swap), of the hosts
    the share's CE serves."""
    ram = [r for s in served if (r := s.ram_size_per_host)]
    virtual = [v for s in served if (v := s.virtual_size_per_host)]
    return [("MaxMainMemory", max(ram, default=None)), ("GuaranteedMainMemory", min(ram, default=None)),
            ("MaxVirtualMemory", max(virtual, default=None)),
            ("GuaranteedVirtualMemory", min(virtual, default=None))]


def _endpoint(tree: GlueTree, ces: Sequence[ComputingElement], ids: Ids) -> tuple[Entity, list[Entity]]:
    """The ComputingEndpoint (the job API, at the information service's scheme and host), serving as
    the best of the CEs' states, and its AccessPolicy when any CE has access rules."""
    states = [ce.state.status for ce in ces]
    serving = next((_serving(s) for s in ("Production", "Queueing", "Draining") if s in states), "closed")
    endpoint_dn = f"GLUE2EndpointID={ids.endpoint},{ids.service_dn}"
    # the job API takes jobs for every share, so it admits whom any share maps (as a gLite CE's
    # endpoint lists every VO of its queues): what `ginfo --service --vo` reads
    every_rule = policy_rules(rule for ce in ces for rule in ce.access_control_rules)
    access = [_policy("AccessPolicy", f"{ids.urn}:accesspolicy", endpoint_dn, every_rule, ids.urn,
                      Assoc("EndpointID", "EndpointID", (ids.endpoint,), True),
                      ("GLUE2AccessPolicyEndpointForeignKey", ids.endpoint))] if every_rule else []
    endpoint = Entity(
        "ComputingEndpoint", "Endpoint", ids.endpoint, endpoint_dn,
        "infosvc job API",
        base_attrs=[("URL", jobs_url(tree, ids.site)), ("Capability", [CAPABILITY]), ("Technology", "rest"),
                    ("InterfaceName", INTERFACE), ("InterfaceVersion", "1"), ("ImplementationName", "infosvc"),
                    ("ImplementationVersion", IMPLEMENTATION_VERSION),
                    ("QualityLevel", "production"), ("HealthState", "ok"), ("ServingState", serving)],
        assoc=[Assoc("ServiceID", "ServiceID", (ids.service,), True),
               Assoc("ShareID", "ShareID", tuple(ids.share_of.values())),
               Assoc("PolicyID", "AccessPolicyID", tuple(a.id for a in access))],
        keys=[("GLUE2EndpointServiceForeignKey", ids.service),
              ("GLUE2ComputingEndpointComputingServiceForeignKey", ids.service)])
    return endpoint, access


def _manager(ces: Sequence[ComputingElement], subs: list[SubCluster], ids: Ids, ees: list[Entity],
             apps: list[Entity], benchmarks: list[Entity]) -> Entity:
    """The ComputingManager (the scheduler, as the first CE names its LRMS), with every resource it manages."""
    first = ces[0] if ces else None
    total = sum(max(0, s.total_cpus) for s in subs)
    # sockets, when every subcluster's live hosts report them (a part would be no total)
    physical = sum(s.physical_cpus for s in subs) if all(s.sockets_per_host for s in subs if s.live_hosts) else None
    return Entity(
        "ComputingManager", "Manager", ids.manager, ids.manager_dn, "infosvc scheduler",
        base_attrs=given([("ProductName", first.info.lrms_type if first else "infosvc"),
                         ("ProductVersion", first.info.lrms_version if first else None)]),
        attrs=given([("TotalPhysicalCPUs", physical), ("TotalLogicalCPUs", total), ("TotalSlots", total),
                    ("Homogeneous", XB(len(subs) <= 1))]),
        assoc=[Assoc("ServiceID", "ServiceID", (ids.service,), True),
               Assoc("ResourceID", "ResourceID", tuple(e.id for e in ees)),
               Assoc("ApplicationEnvironmentID", "ApplicationEnvironmentID", tuple(a.id for a in apps)),
               Assoc("BenchmarkID", "BenchmarkID", tuple(b.id for b in benchmarks))],
        keys=[("GLUE2ManagerServiceForeignKey", ids.service),
              ("GLUE2ComputingManagerComputingServiceForeignKey", ids.service)])


def _service(ids: Ids) -> Entity:
    return Entity(
        "ComputingService", "Service", ids.service, ids.service_dn, f"infosvc of {ids.site}", [ids.mark],
        base_attrs=[("Capability", [CAPABILITY]), ("Type", SERVICE_TYPE), ("QualityLevel", "production")],
        assoc=[Assoc("EndpointID", "EndpointID", (ids.endpoint,)),
               Assoc("ShareID", "ShareID", tuple(ids.share_of.values())),
               Assoc("ManagerID", "ManagerID", (ids.manager,)), Assoc("ServiceID", "ServiceID", ()),
               Assoc("ContactID", "ContactID", ()), Assoc("LocationID", "LocationID", (), True)],
        keys=[("GLUE2ServiceAdminDomainForeignKey", ids.site)])


def _domain(ids: Ids) -> Entity:
    return Entity(
        "AdminDomain", "Domain", ids.site, f"GLUE2DomainID={ids.site},{SUFFIX}", ids.site,
        assoc=[Assoc("ServiceID", "ComputingServiceID", (ids.service,)), Assoc("ContactID", "ContactID", ()),
               Assoc("LocationID", "LocationID", (), True), Assoc("ParentDomainID", "ParentDomainID", (), True)])
