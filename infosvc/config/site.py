"""The site config: one TOML file (read with tomllib) describing the service and the site.

Every key is optional; `load_config(None)` gives the defaults, which publish one cluster and one
computing element over every host. Unknown keys and values of the wrong type are errors that name
the key, so a typo cannot silently change behaviour. docs/configuration.md lists every key.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Iterable

from ClusterShell.NodeSet import NodeSet, NodeSetException

# The config's CE policy is GLUE's own Policy object (minutes; 0 means not specified).
from infosvc.model.glue import CEPolicy as Policy, directory_key
from infosvc.config.addresses import check_listen, check_networks, check_origins
from infosvc.config.table import DAY_SECONDS, ConfigError, Setting, TomlTable, known_clusters, unique_ids
from infosvc.config.federation import FederationConfig, parse_federation
from infosvc.config.lrms import LrmsConfig, check_lrms_host, parse_lrms
from infosvc.config.resources import ResourceEntry, resource_entry

DEFAULT_LISTEN: Final = "127.0.0.1:8080"
DEFAULT_CLUSTER: Final = "default"
CE_STATUSES: Final = ("Queueing", "Production", "Closed", "Draining")

#: node_exporter's port: what Prometheus scrapes on each host unless the config says otherwise.
DEFAULT_EXPORTER_PORT: Final = 9100

#: The tables of plain values, key by key.
SETTINGS: Final[dict[str, tuple[Setting, ...]]] = {
    "service": (
        Setting("listen", DEFAULT_LISTEN, "the HTTP address, HOST:PORT (--listen overrides)", check=check_listen),
        Setting("db", "infosvc.sqlite", "the SQLite file of the store (--db overrides)"),
        Setting("max_body_bytes", 256 * 1024, "the largest request body accepted (else 413)", minimum=1024),
        Setting("body_timeout_seconds", 10.0, "the time a whole request body must arrive in (else 408)",
                maximum=DAY_SECONDS),
        Setting("read_token_required", False, "whether reads need a bearer token too"),
        Setting("information_service_url", "", "published as each GLUE entity's InformationServiceURL (\"\": none)"),
        Setting("max_connections", 1024, "connections held at once (fewer if the open-file limit requires: "
                "infosvc/web/connections.py)", minimum=1),
        Setting("keepalive_seconds", 30.0, "how long a connection is kept for a next request after one with a "
                "valid token", maximum=DAY_SECONDS),
        Setting("header_timeout_seconds", 10.0, "the time a client has to send a request's line and headers "
                "(also the TLS handshake's, and the longest a client may leave an answer unread)",
                maximum=DAY_SECONDS),
        Setting("max_pending_reports", 256, "agents' reports under way at once (being read, parsed, stored); "
                "more are answered 503 with Retry-After (load shedding)", minimum=1),
        Setting("cors_origins", (), "the origins whose pages may read the API across origins (CORS), each "
                "scheme://host[:port], or \"*\" alone for any; none: no CORS", check=check_origins),
    ),
    "store": (
        Setting("history_per_host", 100, "reports kept per host, the newest", minimum=1),
        Setting("past_view_max_hosts", 0, "the most hosts a past view (GET /v1/glue?at=) holds; 0: twice the hosts "
                "now, at least 1,000", minimum=0),
    ),
    # What one agent report may carry (infosvc/hosts/reportcaps.py): a count and a size in characters
    # for each family of what it lists. The defaults are about 4 times the count and 3 times the
    # size of a large real host's report (64 file systems on long remote paths, 32 adapters with 3
    # addresses each: docs/configuration.md gives its figures), so no real host nears them.
    "reports": (
        Setting("max_extensions", 2048, "Extension elements one report may carry (else 413)", minimum=1),
        Setting("max_extension_chars", 96 * 1024, "characters of all a report's Extensions together (names, "
                "types, values; else 413)", minimum=1),
        Setting("max_features", 1024, "Feature values one report may carry (else 413)", minimum=1),
        Setting("max_feature_chars", 16 * 1024, "characters of all a report's features together (else 413)",
                minimum=1),
        Setting("max_file_systems", 256, "file systems one report may describe (else 413)", minimum=1),
        Setting("max_file_system_chars", 80 * 1024, "characters of what describes a report's file systems (their "
                "Extensions and Resource types; else 413)", minimum=1),
        Setting("max_adapters", 128, "network adapters one report may describe (else 413)", minimum=1),
        Setting("max_adapter_chars", 32 * 1024, "characters of what describes a report's network adapters (their "
                "Extensions and Resource types; else 413)", minimum=1),
        Setting("max_resources", 2048, "consumables (Processors ... Resource) of the three categories one report "
                "may carry (else 413)", minimum=1),
        Setting("max_resource_chars", 48 * 1024, "characters of the names, types, units and metrics of all a "
                "report's consumables (else 413)", minimum=1),
        Setting("max_property_chars", 1024, "characters of each of a report's Name, Opsys, Arch, Description and "
                "State (else 413)", minimum=1),
    ),
    "lifecycle": (
        Setting("heartbeat_seconds", 60.0, "the interval agents are expected to report at",
                maximum=DAY_SECONDS),
        Setting("missed_heartbeats", 3, "heartbeats a host may miss before it is Unreachable", minimum=1),
        Setting("require_approval", False, "whether a new host is Pending until an admin approves it"),
    ),
    "scheduler": (
        Setting("policy", "easy", "the job queue's policy: `easy` (priority FCFS with EASY backfilling), `fcfs` "
                "(priority FCFS only) or `predictive` (run times predicted from each user's history, short jobs "
                "first within a priority, EASY's guarantee kept)", choices=("easy", "fcfs", "predictive")),
        Setting("start_timeout_seconds", 60.0, "how long a task placed on a host may wait for its executor to "
                "report it started: past it the task goes back to the queue (or fails, not rerunnable) and the "
                "host is drained (Paused, with the reason) until an admin resumes it", minimum=0.001,
                maximum=DAY_SECONDS),
        Setting("keep_ended_days", 30, "days an ended job is kept in the store (GET /v1/jobs, `infosvc jobs --all`); "
                "older ones are deleted at start and every hour", minimum=1, maximum=36500),
        Setting("refuse_unrunnable", False, "whether a job no host known now can run is refused (400, as Slurm's "
                "\"Requested node configuration is not available\") rather than queued with a warning"),
        Setting("exclusive_default", True, "whether a job that says nothing of exclusive use (IsExclusive) has its "
                "hosts to itself; a CCS job always says (CCS's default is true)"),
    ),
    "prometheus": (
        Setting("exporter_port", DEFAULT_EXPORTER_PORT, "the port of the exporter on every host, in GET "
                "/v1/prometheus/targets", minimum=1, maximum=65535),
        Setting("target_networks", (), "the networks (CIDR) whose addresses may be targets in GET "
                "/v1/prometheus/targets; none: every address but loopback, link-local, unspecified, multicast and "
                "the metadata services'", check=check_networks),
        Setting("target_names", True, "whether hosts whose Id is a name (not an address) may be targets; names "
                "are never resolved, and never the loopback's or a metadata service's"),
    ),
}


def default(table: str, key: str) -> Any:
    """The default of SETTINGS[table]'s `key`."""
    return next(s.default for s in SETTINGS[table] if s.key == key)


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    listen: str = default("service", "listen")
    db: str = default("service", "db")
    max_body_bytes: int = default("service", "max_body_bytes")
    body_timeout_seconds: float = default("service", "body_timeout_seconds")
    read_token_required: bool = default("service", "read_token_required")
    information_service_url: str = default("service", "information_service_url")
    max_connections: int = default("service", "max_connections")
    keepalive_seconds: float = default("service", "keepalive_seconds")
    header_timeout_seconds: float = default("service", "header_timeout_seconds")
    max_pending_reports: int = default("service", "max_pending_reports")
    cors_origins: tuple[str, ...] = default("service", "cors_origins")


@dataclass(frozen=True, slots=True)
class StoreConfig:
    history_per_host: int = default("store", "history_per_host")
    past_view_max_hosts: int = default("store", "past_view_max_hosts")


@dataclass(frozen=True, slots=True)
class ReportsConfig:
    max_extensions: int = default("reports", "max_extensions")
    max_extension_chars: int = default("reports", "max_extension_chars")
    max_features: int = default("reports", "max_features")
    max_feature_chars: int = default("reports", "max_feature_chars")
    max_file_systems: int = default("reports", "max_file_systems")
    max_file_system_chars: int = default("reports", "max_file_system_chars")
    max_adapters: int = default("reports", "max_adapters")
    max_adapter_chars: int = default("reports", "max_adapter_chars")
    max_resources: int = default("reports", "max_resources")
    max_resource_chars: int = default("reports", "max_resource_chars")
    max_property_chars: int = default("reports", "max_property_chars")


@dataclass(frozen=True, slots=True)
class LifecycleConfig:
    heartbeat_seconds: float = default("lifecycle", "heartbeat_seconds")
    missed_heartbeats: int = default("lifecycle", "missed_heartbeats")
    require_approval: bool = default("lifecycle", "require_approval")


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    policy: str = default("scheduler", "policy")
    start_timeout_seconds: float = default("scheduler", "start_timeout_seconds")
    keep_ended_days: int = default("scheduler", "keep_ended_days")
    refuse_unrunnable: bool = default("scheduler", "refuse_unrunnable")
    exclusive_default: bool = default("scheduler", "exclusive_default")


@dataclass(frozen=True, slots=True)
class PrometheusConfig:
    exporter_port: int = default("prometheus", "exporter_port")
    target_networks: tuple[str, ...] = default("prometheus", "target_networks")
    target_names: bool = default("prometheus", "target_names")


@dataclass(frozen=True, slots=True)
class HostGroup:
    """Hosts named by a NodeSet expression, and what the config says of them."""

    nodes: NodeSet

    def __contains__(self, host: str) -> bool:
        try:
            return host in self.nodes
        except NodeSetException:
            return False


@dataclass(frozen=True, slots=True)
class Benchmark(HostGroup):
    si00: int = 0
    sf00: int = 0


@dataclass(frozen=True, slots=True)
class Software(HostGroup):
    runtime_environment: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    id: str
    name: str
    nodes: NodeSet | None  # None: every host not claimed by another cluster

    def __contains__(self, host: str) -> bool:
        if self.nodes is None:
            return True
        try:
            return host in self.nodes
        except NodeSetException:
            return False


def leftover_cluster(clusters: Iterable[ClusterConfig]) -> ClusterConfig:
    """The cluster of the hosts no configured cluster takes: the configured one whose id is
    `default` in any case or spacing (`Default`), else `default`. A directory compares GLUE 1.3
    UniqueIDs ignoring both: a `default` beside a `Default` was one entry, the second refused."""
    return next((c for c in clusters if directory_key(c.id) == directory_key(DEFAULT_CLUSTER)),
                ClusterConfig(DEFAULT_CLUSTER, DEFAULT_CLUSTER, None))


@dataclass(frozen=True, slots=True)
class ComputingElementConfig:
    id: str
    name: str
    queue: str
    lrms_type: str = "infosvc"
    lrms_version: str = ""
    gram_version: str = ""
    host_name: str = ""
    gatekeeper_port: int = 0
    status: str = "Production"
    policy: Policy = field(default_factory=Policy)
    access_control: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    #: the default CE, made when the config names none, serves every cluster there is
    all_clusters: bool = False


@dataclass(frozen=True, slots=True)
class SiteConfig:
    service: ServiceConfig = field(default_factory=ServiceConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    lifecycle: LifecycleConfig = field(default_factory=LifecycleConfig)
    clusters: tuple[ClusterConfig, ...] = (ClusterConfig(DEFAULT_CLUSTER, DEFAULT_CLUSTER, None),)
    computing_elements: tuple[ComputingElementConfig, ...] = (
        ComputingElementConfig(DEFAULT_CLUSTER, DEFAULT_CLUSTER, DEFAULT_CLUSTER, all_clusters=True),)
    benchmarks: tuple[Benchmark, ...] = ()
    software: tuple[Software, ...] = ()
    prometheus: PrometheusConfig = field(default_factory=PrometheusConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    #: licenses and consumables of hosts (infosvc.config.resources), in file order
    resources: tuple[ResourceEntry, ...] = ()
    #: the upstream sites of a top level (infosvc.config.federation); none: a site
    federation: FederationConfig = field(default_factory=FederationConfig)
    #: what one agent report may carry (infosvc.hosts.reportcaps)
    reports: ReportsConfig = field(default_factory=ReportsConfig)
    #: the batch system (infosvc.config.lrms): the service's own queue, or a Slurm cluster read
    lrms: LrmsConfig = field(default_factory=LrmsConfig)

    def cluster_of(self, host: str) -> ClusterConfig:
        """The first cluster whose NodeSet names `host`, else the first cluster without `nodes`
        (it takes every host no other cluster claims, wherever it stands in the file); hosts no
        cluster takes go to `leftover_cluster`: `default`, or a configured cluster of that id."""
        catch_all: ClusterConfig | None = None
        for cluster in self.clusters:
            if cluster.nodes is None:
                catch_all = catch_all or cluster
            elif host in cluster:
                return cluster
        return catch_all or leftover_cluster(self.clusters)

    def benchmark_of(self, host: str) -> Benchmark | None:
        return next((b for b in self.benchmarks if host in b), None)

    def software_of(self, host: str) -> tuple[str, ...]:
        found: list[str] = []
        for entry in self.software:
            if host in entry:
                found.extend(e for e in entry.runtime_environment if e not in found)
        return tuple(found)


# --- reading ----------------------------------------------------------------------------------


def parse_config(data: dict[str, Any]) -> SiteConfig:
    top = TomlTable(data, "")
    service = ServiceConfig(**top.table("service").settings(SETTINGS["service"]))
    store = StoreConfig(**top.table("store").settings(SETTINGS["store"]))
    lifecycle = LifecycleConfig(**top.table("lifecycle").settings(SETTINGS["lifecycle"]))
    prometheus = PrometheusConfig(**top.table("prometheus").settings(SETTINGS["prometheus"]))
    scheduler = SchedulerConfig(**top.table("scheduler").settings(SETTINGS["scheduler"]))
    reports = ReportsConfig(**top.table("reports").settings(SETTINGS["reports"]))

    clusters: list[ClusterConfig] = []
    for t in top.tables("clusters"):
        cid = _id(t)
        clusters.append(ClusterConfig(cid, t.text("name", cid), t.nodeset("nodes", required=False)))
        t.done()
    unique_ids("clusters", [c.id for c in clusters])
    if not clusters:
        clusters = [ClusterConfig(DEFAULT_CLUSTER, DEFAULT_CLUSTER, None)]
    cluster_ids = {c.id for c in clusters} | {leftover_cluster(clusters).id}

    ces: list[ComputingElementConfig] = []
    for t in top.tables("computing_elements"):
        cid = _id(t)
        p = t.table("policy")
        policy = Policy(max_wall_clock_time=p.integer("max_wall_clock_time", 0), max_cpu_time=p.integer("max_cpu_time", 0),
                        max_total_jobs=p.integer("max_total_jobs", 0), max_running_jobs=p.integer("max_running_jobs", 0),
                        priority=p.integer("priority", 0, minimum=-(1 << 31)))
        p.done()
        status = t.text("status", "Production")
        if status not in CE_STATUSES:
            raise ConfigError(f"{t.where}.status: one of {', '.join(CE_STATUSES)}, got {status!r}")
        ce = ComputingElementConfig(
            id=cid, name=t.text("name", cid), queue=t.text("queue", cid), lrms_type=t.text("lrms_type", "infosvc"),
            lrms_version=t.text("lrms_version", ""), gram_version=t.text("gram_version", ""),
            host_name=t.text("host_name", ""), gatekeeper_port=t.integer("gatekeeper_port", 0, maximum=65535),
            status=status, policy=policy, access_control=_access_rules(t.where, t.strings("access_control")),
            clusters=t.strings("clusters"))
        t.done()
        unique_ids(f"{t.where}.clusters", list(ce.clusters))  # twice would count its CPUs twice
        known_clusters(f"{t.where}.clusters", ce.clusters, cluster_ids)
        ces.append(ce)
    unique_ids("computing_elements", [c.id for c in ces])
    if not ces:
        ces = [ComputingElementConfig(DEFAULT_CLUSTER, DEFAULT_CLUSTER, DEFAULT_CLUSTER, all_clusters=True)]

    benchmarks = []
    for t in top.tables("benchmarks"):
        nodes = t.nodeset("nodes")
        assert nodes is not None
        benchmarks.append(Benchmark(nodes, si00=t.integer("si00", 0), sf00=t.integer("sf00", 0)))
        t.done()
    software = []
    for t in top.tables("software"):
        nodes = t.nodeset("nodes")
        assert nodes is not None
        software.append(Software(nodes, runtime_environment=t.strings("runtime_environment")))
        t.done()
    resources = [resource_entry(t, cluster_ids) for t in top.tables("resources")]
    federation = parse_federation(top)
    lrms = parse_lrms(top)
    top.done()
    return SiteConfig(service, store, lifecycle, tuple(clusters), tuple(ces), tuple(benchmarks), tuple(software),
                      prometheus=prometheus, scheduler=scheduler, resources=tuple(resources), federation=federation,
                      reports=reports, lrms=lrms)


def _id(t: TomlTable) -> str:
    value = t.text("id")
    if not value or not value.strip():
        raise ConfigError(f"{t.where}.id: required, a non-blank string")
    return str(value).strip()


def _access_rules(where: str, rules: tuple[str, ...]) -> tuple[str, ...]:
    """A CE's AccessControlBase rules, published as given; refused when LDAP would refuse them: a
    directory compares them ignoring case and runs of spaces, and an entry holding one value twice
    so compared (`VO:atlas`, `vo:atlas`) is refused whole by ldapadd, the CE gone from a BDII."""
    seen: dict[str, str] = {}
    for rule in rules:
        if not rule.strip() or rule != rule.strip() or not rule.isprintable():
            raise ConfigError(f"{where}.access_control: {rule!r}: a rule is printable text without spaces at its ends")
        folded = " ".join(rule.split()).casefold()
        if folded in seen:
            raise ConfigError(f"{where}.access_control: {rule!r} repeats {seen[folded]!r} (directories compare "
                              "rules ignoring case and repeated spaces: a BDII would refuse the CE)")
        seen[folded] = rule
    return rules


def load_config(path: str | Path | None) -> SiteConfig:
    """The config in `path` (TOML), or the defaults when `path` is None."""
    if path is None:
        return SiteConfig()
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:  # TOML is UTF-8; tomllib decodes first
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per level of nested arrays and inline tables
        raise ConfigError(f"{path}: not valid TOML: arrays or inline tables nested too deeply") from None
    try:
        config = parse_config(data)
        check_lrms_host(config.lrms)  # what serve reads beside the file: check-config says it too
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return config
