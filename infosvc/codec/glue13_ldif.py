"""The site as GLUE 1.3 LDIF, where a resource BDII's information providers put it: below
`mds-vo-name=resource,o=grid`, with the object classes of schemas/glue1.3 (Glue-CORE, Glue-CE).

Entries: one GlueCE per computing element, one GlueCluster per cluster, one GlueSubCluster per
subcluster below its cluster, carrying the GlueHost* attributes its hosts share (as brokers and
lcg-infosites read them). GlueCESEBind is not written: infosvc knows no storage element. The CE
figures come from one snapshot (infosvc.model.snapshot), named in each GlueCE by two
GlueCECapability values, `InfosvcSnapshot=<id>` and `InfosvcSnapshotTime=<time>` (GLUE 1.3 has no
attribute for when a figure was taken; Capability is its free-form key=value list), and in the
comment that opens the document. docs/glue-mapping.md maps every attribute.
"""

from __future__ import annotations

from typing import Final

from infosvc.codec import ldif
from infosvc.codec.glue_xml import Fragment, count, port
from infosvc.codec.gridformat import (
    IMPLEMENTATION_VERSION, JOB_MANAGER, GridOptions, TreeDocuments, all_subclusters, gap_comments, jobs_url,
    scaling_reference, site_id, vo_of_rule,
)
from infosvc.model import glue
from infosvc.model.glue import GlueTree, SubCluster, directory_key
from infosvc.model.snapshot import snapshot_of

SUFFIX: Final = "o=grid"
BASE: Final = "mds-vo-name=resource,o=grid"
_VERSION: Final = [("GlueSchemaVersionMajor", "1"), ("GlueSchemaVersionMinor", "3")]


def base_entries() -> str:
    """The BDII's own entries above the providers' (written only on request)."""
    return (ldif.entry(SUFFIX, [("objectClass", "organization"), ("o", "grid")])
            + ldif.entry(BASE, [("objectClass", "Mds"), ("Mds-Vo-name", "resource")]))


def _entry(dn: str, attributes: ldif.Attributes) -> str:
    """An entry with every value in IA5: GLUE 1.3 types all its strings so (the DN's values are
    made IA5 before they are escaped, by _rdn)."""
    return ldif.entry(dn, [(name, ldif.ia5(value)) for name, value in attributes])


def _rdn(value: str) -> str:
    return ldif.dn_value(ldif.ia5(value))


def _classes(*names: str) -> ldif.Attributes:
    return [("objectClass", name) for name in names]


def ce_entry(ce: glue.ComputingElement, site: str, snapshot: tuple[str, str], contact: str,
             reference: int | None = None) -> str:
    """The CE's entry; `contact` the job API's URL, `reference` the SpecInt2000 its time limits are
    counted in (GlueCECapability CPUScalingReferenceSI00, as gLite's providers write it)."""
    info, policy, state = ce.info, ce.policy, ce.state
    classes = ["GlueCETop", "GlueCE", "GlueCEInfo", "GlueCEPolicy", "GlueCEState"]
    if ce.access_control_rules:
        classes.append("GlueCEAccessControlBase")
    attrs = _classes(*classes, "GlueInformationService", "GlueKey", "GlueSchemaVersion")
    attrs += ldif.lines_of([
        ("GlueCEUniqueID", ce.unique_id), ("GlueCEName", ce.name),
        ("GlueCEHostingCluster", ce.clusters[0] if ce.clusters else None),
        ("GlueCEImplementationName", "infosvc"), ("GlueCEImplementationVersion", IMPLEMENTATION_VERSION),
        ("GlueCEInfoTotalCPUs", max(0, info.total_cpus)), ("GlueCEInfoLRMSType", info.lrms_type),
        ("GlueCEInfoLRMSVersion", info.lrms_version), ("GlueCEInfoGRAMVersion", info.gram_version),
        ("GlueCEInfoHostName", info.host_name), ("GlueCEInfoGatekeeperPort", port(info.gatekeeper_port)),
        ("GlueCEInfoContactString", contact), ("GlueCEInfoJobManager", JOB_MANAGER),
        ("GlueCEStateStatus", state.status),
        ("GlueCEStateRunningJobs", max(0, state.running_jobs)), ("GlueCEStateWaitingJobs", max(0, state.waiting_jobs)),
        ("GlueCEStateTotalJobs", max(0, state.total_jobs)),
        ("GlueCEStateEstimatedResponseTime", max(0, state.estimated_response_time)),
        ("GlueCEStateWorstResponseTime", max(0, state.worst_response_time)),
        ("GlueCEStateFreeCPUs", max(0, state.free_cpus)), ("GlueCEStateFreeJobSlots", max(0, state.free_cpus)),
        ("GlueCEPolicyMaxWallClockTime", max(0, policy.max_wall_clock_time)),
        ("GlueCEPolicyMaxCPUTime", max(0, policy.max_cpu_time)),
        ("GlueCEPolicyMaxTotalJobs", max(0, policy.max_total_jobs)),
        ("GlueCEPolicyMaxRunningJobs", max(0, policy.max_running_jobs)),
        ("GlueCEPolicyPriority", policy.priority), ("GlueCEPolicyMaxSlotsPerJob", ce.max_slots_per_job),
        ("GlueCECapability", f"InfosvcSnapshot={snapshot[0]}"),
        ("GlueCECapability", f"InfosvcSnapshotTime={snapshot[1]}"),
        ("GlueCECapability", f"CPUScalingReferenceSI00={reference}" if reference is not None else None),
    ])
    attrs += [("GlueCEAccessControlBaseRule", rule) for rule in ce.access_control_rules]
    attrs += [("GlueForeignKey", f"GlueClusterUniqueID={cid}") for cid in ce.clusters]
    attrs += ldif.lines_of([("GlueInformationServiceURL", ce.information_service_url)])
    attrs += _VERSION
    return _entry(f"GlueCEUniqueID={_rdn(ce.unique_id)},{BASE}", attrs)


def vo_view_entries(ce: glue.ComputingElement) -> str:
    """A GlueVOView below the CE for each VO its rules admit (what lcg-infosites and the WMS's
    ranking read per VO): its running and waiting jobs are those whose Project names the VO; when
    no job of the CE names one, the CE's, as sites without accounting per VO publish
    (docs/glue-mapping.md)."""
    state, policy = ce.state, ce.policy
    # by the VO's directory_key: GlueVOViewLocalID compares ignoring case, so `VO:atlas` and
    # `VOMS:/ATLAS/Role=production` name one view (two were one entry twice, the second refused);
    # it is named as the first rule spells the VO, and counts the jobs of every spelling
    counted: dict[str, tuple[int, int]] = {}
    for f in ce.by_vo:
        running, waiting = counted.get(key := directory_key(f.vo), (0, 0))
        counted[key] = (running + f.running_jobs, waiting + f.waiting_jobs)
    out = []
    views: dict[str, tuple[str, str]] = {}
    for rule in ce.access_control_rules:
        vo = vo_of_rule(rule)
        if vo is not None:
            views.setdefault(directory_key(vo), (vo, rule.strip()))
    for key, (vo, rule) in views.items():
        running, waiting = counted.get(key, (0, 0)) if counted else (state.running_jobs, state.waiting_jobs)
        attrs = _classes("GlueCETop", "GlueVOView", "GlueCEInfo", "GlueCEState", "GlueCEAccessControlBase",
                         "GlueCEPolicy", "GlueKey", "GlueSchemaVersion")
        attrs += ldif.lines_of([
            ("GlueVOViewLocalID", vo), ("GlueCEAccessControlBaseRule", rule),
            ("GlueCEStateRunningJobs", max(0, running)), ("GlueCEStateWaitingJobs", max(0, waiting)),
            ("GlueCEStateTotalJobs", max(0, running + waiting)),
            ("GlueCEStateFreeJobSlots", max(0, state.free_cpus)),
            ("GlueCEStateEstimatedResponseTime", max(0, state.estimated_response_time)),
            ("GlueCEStateWorstResponseTime", max(0, state.worst_response_time)),
            ("GlueCEPolicyMaxWallClockTime", max(0, policy.max_wall_clock_time)),
            ("GlueCEPolicyMaxCPUTime", max(0, policy.max_cpu_time)),
            ("GlueChunkKey", f"GlueCEUniqueID={ce.unique_id}"),
        ])
        attrs += _VERSION
        out.append(_entry(f"GlueVOViewLocalID={_rdn(vo)},GlueCEUniqueID={_rdn(ce.unique_id)},{BASE}", attrs))
    return "".join(out)


def cluster_dn(cluster_id: str) -> str:
    return f"GlueClusterUniqueID={_rdn(cluster_id)},{BASE}"


def cluster_entry(cluster: glue.Cluster, site: str, services: list[str]) -> str:
    attrs = _classes("GlueClusterTop", "GlueCluster", "GlueInformationService", "GlueKey", "GlueSchemaVersion")
    attrs += [("GlueClusterUniqueID", cluster.unique_id), ("GlueClusterName", cluster.name)]
    attrs += [("GlueClusterService", ce_id) for ce_id in services]
    attrs.append(("GlueForeignKey", f"GlueSiteUniqueID={site}"))
    attrs += [("GlueForeignKey", f"GlueCEUniqueID={ce_id}") for ce_id in services]
    attrs += ldif.lines_of([("GlueInformationServiceURL", cluster.information_service_url)])
    attrs += _VERSION
    return _entry(cluster_dn(cluster.unique_id), attrs)


def subcluster_entry(sub: SubCluster, url: str | None) -> str:
    arch, os_, p, mem = sub.architecture, sub.operating_system, sub.processor, sub.main_memory
    classes = ["GlueClusterTop", "GlueSubCluster", "GlueHostArchitecture", "GlueHostOperatingSystem",
               "GlueHostProcessor", "GlueHostMainMemory"]
    if sub.benchmark is not None:
        classes.append("GlueHostBenchmark")
    if sub.application_software is not None:
        classes.append("GlueHostApplicationSoftware")
    attrs = _classes(*classes, "GlueInformationService", "GlueKey", "GlueSchemaVersion")
    attrs += ldif.lines_of([
        ("GlueSubClusterUniqueID", sub.unique_id), ("GlueSubClusterName", sub.name),
        ("GlueSubClusterPhysicalCPUs", sub.physical_cpus if sub.sockets_per_host else None),
        ("GlueSubClusterLogicalCPUs", max(0, sub.total_cpus)),
        ("GlueHostArchitecturePlatformType", arch.platform_type), ("GlueHostArchitectureSMPSize", count(arch.smp_size)),
        ("GlueHostOperatingSystemName", os_.name), ("GlueHostOperatingSystemRelease", os_.release),
        ("GlueHostOperatingSystemVersion", os_.version),
        ("GlueHostProcessorVendor", p.vendor), ("GlueHostProcessorModel", p.model),
        ("GlueHostProcessorVersion", p.version), ("GlueHostProcessorClockSpeed", count(p.clock_speed)),
        ("GlueHostProcessorInstructionSet", p.instruction_set),
        ("GlueHostProcessorCacheL1", count(p.cache_l1)), ("GlueHostProcessorCacheL1I", count(p.cache_l1i)),
        ("GlueHostProcessorCacheL1D", count(p.cache_l1d)), ("GlueHostProcessorCacheL2", count(p.cache_l2)),
        ("GlueHostMainMemoryRAMSize", count(mem.ram_size)),
        ("GlueHostMainMemoryVirtualSize", count(sub.virtual_size_per_host)),
    ])
    if sub.benchmark is not None:
        attrs += [("GlueHostBenchmarkSI00", str(max(0, sub.benchmark.si00))),
                  ("GlueHostBenchmarkSF00", str(max(0, sub.benchmark.sf00)))]
    if sub.application_software is not None:
        attrs += [("GlueHostApplicationSoftwareRunTimeEnvironment", rte)
                  for rte in sub.application_software.runtime_environment]
    attrs.append(("GlueChunkKey", f"GlueClusterUniqueID={sub.cluster}"))
    attrs += ldif.lines_of([("GlueInformationServiceURL", url)])
    attrs += _VERSION
    return _entry(f"GlueSubClusterUniqueID={_rdn(sub.unique_id)},{cluster_dn(sub.cluster)}", attrs)


class Glue13Ldif(TreeDocuments):
    """The tree as GLUE 1.3 LDIF (the publishing layer's documents object for `format=ldif&schema=1.3`)."""

    media_type = "text/plain"

    def __init__(self, options: GridOptions = GridOptions()) -> None:
        self.options = options

    def tree(self, tree: GlueTree, fragment: Fragment) -> bytes:
        snapshot = snapshot_of(tree)
        site = site_id(tree, self.options)
        out = [f"# GLUE 1.3 of site {site} by infosvc; CE figures of snapshot {snapshot.id} at {snapshot.time}\n",
               gap_comments(tree.information_service_url, snapshot.computing_elements), "\n"]
        if self.options.base:
            out.append(base_entries())
        marks = (snapshot.id, snapshot.time)
        services: dict[str, list[str]] = {}
        contact = jobs_url(tree, site)
        # the site's reference, as GLUE 2.0's scaling factors are counted against it
        reference = scaling_reference(all_subclusters(tree))
        for ce in snapshot.computing_elements:
            out.append(ce_entry(ce, site, marks, contact, reference))
            out.append(vo_view_entries(ce))
            for cid in ce.clusters:
                services.setdefault(cid, []).append(ce.unique_id)
        url = tree.information_service_url
        for cluster in tree.clusters():
            out.append(cluster_entry(cluster, site, services.get(cluster.unique_id, [])))
            out.extend(subcluster_entry(sub, url) for sub in tree.subclusters_of(cluster.unique_id))
        return "".join(out).encode()
