"""The GLUE Computing Element schema 1.1 as plain dataclasses.

ComputingElement (Info, Policy, State, AccessControlBase, Job) points to Clusters; a Cluster
holds SubClusters; a SubCluster holds Hosts. Attribute names follow the schema's (in snake case
here; codecs write the schema's own spelling). Sizes are in MB, clock speeds in MHz, cache sizes
in KB, times in minutes (Policy) or seconds (State), as the schema says. A value of None is "not
published": GLUE is built top down, and every group below the structural objects is optional.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Protocol, Sequence


def directory_key(text: str) -> str:
    """`text` (a GLUE UniqueID, a VO name) as a directory compares it: ignoring case (GLUE 1.3's
    caseIgnoreIA5Match) and runs of spaces, leading and trailing ones too (slapd refuses `a  b`
    beside `a b`, `x ` beside `x`). Unicode case folding takes two texts for one more often
    than a directory does, never less: at worst an id is renamed in the union that need not be."""
    return " ".join(text.split()).casefold()



@dataclass(frozen=True, slots=True)
class Architecture:
    platform_type: str | None = None
    smp_size: int | None = None


@dataclass(frozen=True, slots=True)
class OperatingSystem:
    name: str | None = None
    release: str | None = None
    version: str | None = None


@dataclass(frozen=True, slots=True)
class Benchmark:
    si00: int = 0
    sf00: int = 0


@dataclass(frozen=True, slots=True)
class ApplicationSoftware:
    """A host's or subcluster's runtime environments, each once, in the spelling and order first
    given: what gathers them (the config's entries, a Slurm node's features beside them, a site's
    document at a top level) may give one twice, or twins a directory takes for one
    (`directory_key`: GLUE 1.3's RunTimeEnvironment is caseIgnoreIA5Match), and slapd refuses the
    subcluster's entry holding a value twice; GLUE 2.0 named its execution environment twice."""

    runtime_environment: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        first: dict[str, str] = {}
        for name in self.runtime_environment:
            first.setdefault(directory_key(name), name)
        if len(first) < len(self.runtime_environment):
            object.__setattr__(self, "runtime_environment", tuple(first.values()))


#: The SSS Resource name a job asks for a software license by (`<Resource name="License"
#: type="matlab">2</Resource>`: the SSS spec's own example; CCS SoftwareLicense is mapped so).
LICENSE = "License"
#: The SSS Resource name of a host's GPUs, as the agent reports them (docs/node-mapping.md, GPUs) and
#: a job asks for them (`<Resource name="GPU" type="NVIDIA H100 80GB HBM3">2</Resource>`)
GPU = "GPU"


@dataclass(frozen=True, slots=True)
class Resources:
    """infosvc addition, with no GLUE 1.1 counterpart: what the site config gives a host beyond
    GLUE (infosvc.config.resources): software licenses, each with the count of the pool it shares
    with other hosts, and generic consumable resources of its own, each with its amount."""

    licenses: tuple[tuple[str, int], ...] = ()
    consumables: tuple[tuple[str, int | float], ...] = ()


@dataclass(frozen=True, slots=True)
class Processor:
    vendor: str | None = None
    model: str | None = None
    version: str | None = None
    clock_speed: int | None = None  # MHz
    instruction_set: str | None = None  # ComputerISA
    features: str | None = None
    cache_l1: int | None = None  # KB
    cache_l1i: int | None = None
    cache_l1d: int | None = None
    cache_l2: int | None = None


@dataclass(frozen=True, slots=True)
class MainMemory:
    ram_size: int | None = None  # MB
    ram_available: int | None = None
    virtual_size: int | None = None
    virtual_available: int | None = None


@dataclass(frozen=True, slots=True)
class FileSystem:
    """A file system; `remote` selects GLUE's RemoteFileSystem specialisation over the local one."""

    root: str
    name: str
    type: str | None = None
    read_only: bool = False
    size: int | None = None  # MB
    available_space: int | None = None  # MB
    remote: bool = False


@dataclass(frozen=True, slots=True)
class Load:
    """ProcessorLoad or SMPLoad: availability x 100 over 1, 5 and 15 minutes."""

    last_1min: int
    last_5min: int
    last_15min: int


@dataclass(frozen=True, slots=True)
class NetworkAdapter:
    name: str
    ip_address: str | None = None
    mtu: int | None = None
    outbound_ip: bool | None = None
    inbound_ip: bool | None = None


@dataclass(frozen=True, slots=True)
class Accelerator:
    """The devices of one model a host has (infosvc addition to GLUE 1.1; GLUE 2.1's
    AcceleratorEnvironment): what the agent reports as `Resource name="GPU" type=MODEL`
    (docs/node-mapping.md). Its fields are what hosts of one subcluster share: they are in the
    homogeneity key. How many are free or busy now is the host's (Host.accelerators_free)."""

    type: str  # GLUE 2.1 AccType_t: GPU
    model: str
    count: int  # Configured: whole devices, or MIG instances where the GPU is split
    vendor: str | None = None
    memory: int | None = None  # MB, of each (the least of its devices)
    compute_capability: str | None = None


@dataclass(frozen=True, slots=True)
class Host:
    """One host: its unique name, its CCS life-cycle state, and the Host groups of the schema."""

    unique_id: str
    name: str
    state: str
    last_report: str  # ISO 8601 UTC
    cluster: str  # the id of its cluster (from the site config)
    architecture: Architecture = field(default_factory=Architecture)
    operating_system: OperatingSystem = field(default_factory=OperatingSystem)
    benchmark: Benchmark | None = None
    application_software: ApplicationSoftware | None = None
    processor: Processor = field(default_factory=Processor)
    main_memory: MainMemory = field(default_factory=MainMemory)
    file_systems: tuple[FileSystem, ...] = ()
    processor_load: Load | None = None
    smp_load: Load | None = None
    network_adapters: tuple[NetworkAdapter, ...] = ()
    #: CPUs: configured, and available now per the agent (not yet weighed by state)
    total_cpus: int = 0
    available_cpus: int = 0
    #: the SSS State the agent reported (Idle, Busy, Offline, ...), kept beside the life-cycle state
    reported_state: str | None = None
    #: an admin paused it (kept while it is Unreachable, so a paused host that went silent says so)
    paused: bool = False
    #: the admin's reason for the last approve, pause, resume
    reason: str | None = None
    #: licenses and consumables from the site config (infosvc addition); None: none
    resources: Resources | None = None
    #: the agent's clock less the server's, in seconds (infosvc addition, hosts/clockskew.py); None: unknown
    clock_skew_seconds: float | None = None
    #: processor sockets (GLUE 1.3 PhysicalCPUs, 2.0 PhysicalCPUs); None: not reported
    physical_cpus: int | None = None
    #: its accelerators by model (infosvc addition; GLUE 2.1 AcceleratorEnvironment); and how many of
    #: them the agent reports free (Available) and busy (Utilized) now
    accelerators: tuple[Accelerator, ...] = ()
    accelerators_available: int = 0
    accelerators_used: int = 0

    @property
    def total_accelerators(self) -> int:
        return sum(a.count for a in self.accelerators)

    @property
    def free_accelerators(self) -> int:
        """Free for a scheduler: only a host that accepts jobs gives any."""
        return self.accelerators_available if self.accepts_jobs else 0

    @property
    def live(self) -> bool:
        """Counted in TotalCPUs: the host reports and an admin has let it in."""
        return self.state in ("Ready", "Paused")

    @property
    def offline(self) -> bool:
        """The host says it is Offline (SSS): it takes no new job, whatever its life-cycle state."""
        return self.reported_state == "Offline"

    @property
    def accepts_jobs(self) -> bool:
        """Ready, and not Offline by its own word: a scheduler may start any job on it."""
        return self.state == "Ready" and self.reported_state != "Offline"

    @property
    def refusal(self) -> str | None:
        """Why it takes no job now, or None."""
        if self.state != "Ready":
            return f"host is {self.state}"
        return "host reports itself Offline" if self.reported_state == "Offline" else None

    @property
    def free_cpus(self) -> int:
        """Free for a scheduler: only a host that accepts jobs gives any."""
        return self.available_cpus if self.accepts_jobs else 0


@dataclass(slots=True)
class SubCluster:
    """Homogeneous hosts of one cluster: the attributes they share, and running aggregates."""

    unique_id: str
    name: str
    cluster: str
    architecture: Architecture
    operating_system: OperatingSystem
    processor: Processor
    main_memory: MainMemory  # RAMSize only: the shared, configured size
    benchmark: Benchmark | None = None
    application_software: ApplicationSoftware | None = None
    host_count: int = 0  # SubClusterCount
    #: what the config gives every host of it (in the homogeneity key); None: nothing
    resources: Resources | None = None
    live_hosts: int = 0
    total_cpus: int = 0  # over live hosts
    free_cpus: int = 0  # over Ready hosts
    ram_available: int = 0  # MB, over live hosts
    #: processor sockets, over live hosts that report them; and how many hosts report them
    physical_cpus: int = 0
    hosts_with_sockets: int = 0
    #: RAM, and RAM and swap (MB), over live hosts: each host's main and virtual memory, as GLUE 1.3
    #: and 2.0 publish them (main_memory.ram_size is the RAM class the subcluster is keyed by)
    ram_size: int = 0
    virtual_size: int = 0
    states: dict[str, int] = field(default_factory=dict)
    #: the accelerators each host has (in the homogeneity key); and over live hosts, all of them and
    #: those busy, and over Ready hosts those free
    accelerators: tuple[Accelerator, ...] = ()
    total_accelerators: int = 0
    used_accelerators: int = 0
    free_accelerators: int = 0

    @property
    def sockets_per_host(self) -> int | None:
        """Sockets per host when every live host reports them (the hosts share a processor model)."""
        if not self.live_hosts or self.hosts_with_sockets != self.live_hosts:
            return None
        return self.physical_cpus // self.live_hosts

    @property
    def ram_size_per_host(self) -> int | None:
        """A host's RAM (MB), the mean over live hosts: no more than identical hosts have."""
        return self.ram_size // self.live_hosts if self.live_hosts else None

    @property
    def virtual_size_per_host(self) -> int | None:
        """A host's RAM and swap (MB), the mean over live hosts (identical hosts have the same swap)."""
        return self.virtual_size // self.live_hosts if self.live_hosts else None


@dataclass(frozen=True, slots=True)
class Cluster:
    unique_id: str
    name: str
    information_service_url: str | None = None
    #: the license pools its hosts share (infosvc addition): feature -> licenses in the pool
    licenses: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class CEInfo:
    lrms_type: str
    lrms_version: str | None
    gram_version: str | None
    host_name: str | None
    gatekeeper_port: int | None
    total_cpus: int


@dataclass(frozen=True, slots=True)
class AcceleratorFigures:
    """A CE's accelerators (GLUE 2.1 ComputingManagerAcceleratorInfo, ComputingShareAcceleratorInfo)."""

    total: int = 0
    used: int = 0
    free: int = 0


@dataclass(frozen=True, slots=True)
class CEPolicy:
    max_wall_clock_time: int = 0
    max_cpu_time: int = 0
    max_total_jobs: int = 0
    max_running_jobs: int = 0
    priority: int = 0


@dataclass(frozen=True, slots=True)
class CEState:
    status: str
    running_jobs: int = 0
    waiting_jobs: int = 0
    worst_response_time: int = 0
    estimated_response_time: int = 0
    free_cpus: int = 0

    @property
    def total_jobs(self) -> int:
        return self.running_jobs + self.waiting_jobs


@dataclass(frozen=True, slots=True)
class VOFigures:
    """A VO's jobs on a CE: those whose Project names it (GLUE 1.3 GlueVOView)."""

    vo: str
    running_jobs: int
    waiting_jobs: int


@dataclass(frozen=True, slots=True)
class CEQueued:
    """What a job queue tells a CE it publishes: its State, its jobs, and its jobs per VO (empty when
    no job of it names a VO: the VO views then show the CE's figures)."""

    state: CEState
    jobs: tuple[CEJob, ...] = ()
    by_vo: tuple[VOFigures, ...] = ()


class CEQueueFigures(Protocol):
    """The one way a job queue's figures reach the CEs a roll-up publishes: read-only, asked by the
    publisher at each rendering; a queue implements it (infosvc.queue.jobqueue.JobQueue)."""

    def ce_state(self, ce_id: str, status: str, free_cpus: int, total_cpus: int) -> CEQueued | None:
        """The CE's State now, from its `status` and its hosts' processors, free and in all, its
        jobs and its jobs per VO; None when the queue has no figures for it."""


class NoQueue:
    """A site without a job queue (a federation's union, a test's roll-up): no CE has figures."""

    def ce_state(self, ce_id: str, status: str, free_cpus: int, total_cpus: int) -> CEQueued | None:
        return None


NO_QUEUE: CEQueueFigures = NoQueue()


@dataclass(frozen=True, slots=True)
class CEJob:
    local_id: str
    status: str  # SUBMITTED, WAITING, READY, SCHEDULED, RUNNING, ABORTED, DONE, CLEARED, CHECKPOINTED
    local_owner: str | None = None
    global_owner: str | None = None
    global_id: str | None = None
    scheduler_specific: str | None = None


@dataclass(frozen=True, slots=True)
class ComputingElement:
    unique_id: str
    name: str
    queue: str
    info: CEInfo
    policy: CEPolicy
    state: CEState
    access_control_rules: tuple[str, ...] = ()
    jobs: tuple[CEJob, ...] = ()
    clusters: tuple[str, ...] = ()  # cluster unique ids
    information_service_url: str | None = None
    #: its jobs per VO, from their Project (infosvc addition; empty: no job names a VO)
    by_vo: tuple[VOFigures, ...] = ()
    #: the accelerators of its clusters' hosts (infosvc addition; GLUE 2.1's accelerator slots):
    #: all of live hosts, those busy, those free on Ready hosts
    accelerators: AcceleratorFigures | None = None
    #: the CPUs one job may hold (GLUE 1.3 and 2.0 MaxSlotsPerJob), where the batch system limits
    #: it (Slurm's MaxNodes); None: not limited but by the CE's TotalCPUs
    max_slots_per_job: int | None = None


class GlueTree(Protocol):
    """A site's published GLUE tree, as every reader of it sees it: the publishing layer and its
    renderings, the matcher (infosvc.matching.view.SiteView reads part of it), a simulator's site.
    infosvc.hosts.rollup.Rollup keeps one."""

    @property
    def hosts(self) -> Mapping[str, Host]: ...

    @property
    def subclusters(self) -> Mapping[str, SubCluster]: ...

    @property
    def information_service_url(self) -> str | None: ...

    def clusters(self) -> Sequence[Cluster]: ...

    def cluster(self, cluster_id: str) -> Cluster | None: ...

    def subclusters_of(self, cluster_id: str) -> Sequence[SubCluster]: ...

    def hosts_of(self, sub_id: str) -> Iterable[Host]: ...

    def subcluster_of(self, host_id: str) -> SubCluster | None: ...

    def computing_elements(self) -> Sequence[ComputingElement]: ...

    def computing_element(self, ce_id: str) -> ComputingElement | None: ...
