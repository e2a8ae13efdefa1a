"""The GLUE tree as JSON, valid against schemas/glue.schema.json.

`JsonDocuments` writes the same documents as the XML codec's `XmlDocuments`, in JSON. The tree is
flat: {"computing_elements": [...], "clusters": [...], "subclusters": [...], "hosts": [...]},
each entity naming the others by id (a CE its "clusters", a cluster its "subclusters", a
subcluster its "cluster" and "hosts", a host its "subcluster" and "cluster"). Keys are the
model's attribute names (infosvc.model.glue); a value that is not published (None) is left out.
docs/glue-rendering.md describes the shape.

A host's object names its subcluster, so the publishing layer keeps it per (host, subcluster);
the groups hosts share are kept here by value.
Strings are written with every non-ASCII character escaped, so the bytes are ASCII.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _string
from typing import Any, Final, Iterable

from infosvc.codec.glue_xml import HOST_STATES, SHARED_CACHE_MAX, Fragment, availability, count, port
from infosvc.model import glue
from infosvc.model.glue import GlueTree, Host, SubCluster
from infosvc.model.snapshot import Snapshot, SnapshotView

_dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_shared_cache: dict[tuple[object, ...], str] = {}


def _dump(value: object) -> bytes:
    return _dumps(value).encode()


def _present(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _shared_groups(architecture: glue.Architecture, operating_system: glue.OperatingSystem,
                   benchmark: glue.Benchmark | None, software: glue.ApplicationSoftware | None,
                   processor: glue.Processor) -> str:
    """The "architecture" to "processor" members a subcluster and a host share, as JSON text.

    Kept by value, as GlueXml keeps its fragment of the same groups.
    """
    key = (architecture, operating_system, benchmark, software, processor)
    text = _shared_cache.get(key)
    if text is not None:
        return text
    p = processor
    groups: dict[str, Any] = {
        "architecture": _present(platform_type=architecture.platform_type, smp_size=count(architecture.smp_size)),
        "operating_system": _present(name=operating_system.name, release=operating_system.release,
                                     version=operating_system.version),
    }
    if benchmark is not None:
        groups["benchmark"] = {"si00": max(0, benchmark.si00), "sf00": max(0, benchmark.sf00)}
    if software is not None:
        groups["application_software"] = {"runtime_environment": list(software.runtime_environment)}
    groups["processor"] = _present(
        vendor=p.vendor, model=p.model, version=p.version, clock_speed=count(p.clock_speed),
        instruction_set=p.instruction_set, features=p.features, cache_l1=count(p.cache_l1),
        cache_l1i=count(p.cache_l1i), cache_l1d=count(p.cache_l1d), cache_l2=count(p.cache_l2))
    text = _dumps(groups)[1:-1]  # the members, without the braces
    if len(_shared_cache) >= SHARED_CACHE_MAX:
        _shared_cache.clear()
    _shared_cache[key] = text
    return text


def _size(key: str, value: int | None) -> str:
    """An optional non-negative integer member, with a leading comma."""
    return f',"{key}":{value}' if value is not None and value >= 0 else ""


def _main_memory(m: glue.MainMemory) -> str:
    members = (f'{_size("ram_size", m.ram_size)}{_size("ram_available", m.ram_available)}'
               f'{_size("virtual_size", m.virtual_size)}{_size("virtual_available", m.virtual_available)}')
    return "{" + members[1:] + "}"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _file_system(fs: glue.FileSystem) -> str:
    kind = f',"type":{_string(fs.type)}' if fs.type is not None else ""
    return (f'{{"root":{_string(fs.root)},"name":{_string(fs.name)}{kind},"read_only":{_bool(fs.read_only)}'
            f'{_size("size", fs.size)}{_size("available_space", fs.available_space)},"remote":{_bool(fs.remote)}}}')


def _network_adapter(nic: glue.NetworkAdapter) -> str:
    address = f',"ip_address":{_string(nic.ip_address)}' if nic.ip_address is not None else ""
    outbound = f',"outbound_ip":{_bool(nic.outbound_ip)}' if nic.outbound_ip is not None else ""
    inbound = f',"inbound_ip":{_bool(nic.inbound_ip)}' if nic.inbound_ip is not None else ""
    return f'{{"name":{_string(nic.name)}{address}{_size("mtu", nic.mtu)}{outbound}{inbound}}}'


def _load(key: str, load: glue.Load | None) -> str:
    load = availability(load)
    if load is None:
        return ""
    return f',"{key}":{{"last_1min":{load.last_1min},"last_5min":{load.last_5min},"last_15min":{load.last_15min}}}'


def _admin_json(host: Host) -> str:
    """The agent's own State, its clock skew, and an admin's pause and reason, each when present."""
    said = f',"reported_state":{_string(host.reported_state)}' if host.reported_state else ""
    said += ',"paused":true' if host.paused else ""
    if host.clock_skew_seconds is not None:
        said += f',"clock_skew_seconds":{round(host.clock_skew_seconds, 3)!r}'
    return said + (f',"reason":{_string(host.reason)}' if host.reason else "")


def _resources(resources: glue.Resources | None) -> str:
    """The site config's "licenses" and "consumables" (name -> amount), each when there are any, with
    a leading comma (infosvc addition: GLUE 1.1 has neither)."""
    if resources is None:
        return ""
    licenses = f',"licenses":{_dumps(dict(resources.licenses))}' if resources.licenses else ""
    return licenses + (f',"consumables":{_dumps(dict(resources.consumables))}' if resources.consumables else "")


def _accelerators(accelerators: tuple[glue.Accelerator, ...]) -> str:
    """ "accelerators", each model with its count and what is known of it, with a leading comma;
    nothing for a host without (infosvc addition: GLUE 2.1's AcceleratorEnvironment)."""
    if not accelerators:
        return ""
    return ',"accelerators":' + _dumps([_present(type=a.type, model=a.model, count=a.count, vendor=a.vendor,
                                                 memory=a.memory, compute_capability=a.compute_capability)
                                        for a in accelerators])


def host_json(host: Host, subcluster: str | None) -> bytes:
    """One host as a JSON object; `subcluster` is the id of its subcluster (None: not in the roll-up)."""
    sub = f',"subcluster":{_string(subcluster)}' if subcluster is not None else ""
    return (
        f'{{"unique_id":{_string(host.unique_id)},"name":{_string(host.name)},"state":{_string(host.state)},'
        f'"reported_at":{_string(host.last_report)},"cluster":{_string(host.cluster)}{sub}{_admin_json(host)},'
        f'{_shared_groups(host.architecture, host.operating_system, host.benchmark, host.application_software, host.processor)},'
        f'"main_memory":{_main_memory(host.main_memory)},'
        f'"file_systems":[{",".join(map(_file_system, host.file_systems))}]'
        f'{_load("processor_load", host.processor_load)}{_load("smp_load", host.smp_load)},'
        f'"network_adapters":[{",".join(map(_network_adapter, host.network_adapters))}],'
        f'"total_cpus":{max(0, host.total_cpus)},"available_cpus":{max(0, host.available_cpus)},'
        f'"free_cpus":{max(0, host.free_cpus)}{_resources(host.resources)}{_accelerators(host.accelerators)}'
        f'{_accelerator_use(host)}}}'
    ).encode()


def _accelerator_use(host: Host) -> str:
    if not host.accelerators:
        return ""
    return (f',"accelerators_available":{max(0, host.accelerators_available)},'
            f'"accelerators_used":{max(0, host.accelerators_used)},'
            f'"free_accelerators":{max(0, host.free_accelerators)}')


def subcluster_json(sub: SubCluster, url: str | None, hosts: list[str]) -> bytes:
    """One subcluster as a JSON object; `hosts` are the ids of its hosts."""
    head = _dumps(_present(unique_id=sub.unique_id, name=sub.name, cluster=sub.cluster, information_service_url=url,
                           host_count=max(0, sub.host_count)))
    figures: dict[str, Any] = {"live_hosts": max(0, sub.live_hosts), "total_cpus": max(0, sub.total_cpus),
                               "free_cpus": max(0, sub.free_cpus), "ram_available": max(0, sub.ram_available)}
    if sub.accelerators:
        figures.update(total_accelerators=max(0, sub.total_accelerators),
                       used_accelerators=max(0, sub.used_accelerators),
                       free_accelerators=max(0, sub.free_accelerators))
    tail = _dumps({**figures, "states": {state: max(0, sub.states.get(state, 0)) for state in HOST_STATES},
                   "hosts": hosts})
    shared = _shared_groups(sub.architecture, sub.operating_system, sub.benchmark, sub.application_software,
                            sub.processor)
    return (f'{head[:-1]},{shared},"main_memory":{_main_memory(sub.main_memory)}{_resources(sub.resources)}'
            f'{_accelerators(sub.accelerators)},{tail[1:]}').encode()


def cluster_json(cluster: glue.Cluster, subclusters: list[str]) -> dict[str, Any]:
    out = _present(unique_id=cluster.unique_id, name=cluster.name,
                   information_service_url=cluster.information_service_url)
    out["subclusters"] = subclusters
    if cluster.licenses:
        out["licenses"] = dict(cluster.licenses)
    return out


def computing_element_json(ce: glue.ComputingElement, snapshot: Snapshot | None = None) -> dict[str, Any]:
    info, policy, state = ce.info, ce.policy, ce.state
    out = _present(unique_id=ce.unique_id, name=ce.name, queue=ce.queue,
                   information_service_url=ce.information_service_url)
    out["info"] = _present(lrms_type=info.lrms_type, lrms_version=info.lrms_version, gram_version=info.gram_version,
                           host_name=info.host_name, gatekeeper_port=port(info.gatekeeper_port),
                           total_cpus=max(0, info.total_cpus))
    out["policy"] = {"max_wall_clock_time": max(0, policy.max_wall_clock_time),
                     "max_cpu_time": max(0, policy.max_cpu_time), "max_total_jobs": max(0, policy.max_total_jobs),
                     "max_running_jobs": max(0, policy.max_running_jobs), "priority": policy.priority}
    out["state"] = {"status": state.status, "running_jobs": max(0, state.running_jobs),
                    "waiting_jobs": max(0, state.waiting_jobs), "total_jobs": max(0, state.total_jobs),
                    "worst_response_time": max(0, state.worst_response_time),
                    "estimated_response_time": max(0, state.estimated_response_time),
                    "free_cpus": max(0, state.free_cpus)}
    if snapshot is not None:
        out["state"].update(snapshot=snapshot.id, snapshot_time=snapshot.time)
    out["access_control_base"] = {"rules": list(ce.access_control_rules)}
    out["jobs"] = [_present(local_id=job.local_id, status=job.status, local_owner=job.local_owner,
                            global_owner=job.global_owner, global_id=job.global_id,
                            scheduler_specific=job.scheduler_specific) for job in ce.jobs]
    out["clusters"] = list(ce.clusters)
    if ce.accelerators is not None:
        a = ce.accelerators
        out["accelerators"] = {"total": max(0, a.total), "used": max(0, a.used), "free": max(0, a.free)}
    return out


class JsonDocuments:
    """The GLUE documents in JSON, from a tree and its hosts' fragments (`fragment(host, subcluster
    id)`, which the publishing layer caches: infosvc/publish/glue.py)."""

    media_type: Final = "application/json"

    def host(self, host: Host, sub_id: str | None) -> bytes:
        return host_json(host, sub_id)

    def tree(self, tree: GlueTree, fragment: Fragment) -> bytes:
        """{"computing_elements", "clusters", "subclusters", "hosts"}: every entity, flat, by id."""
        return b"".join(self.tree_parts(tree, fragment))

    def tree_parts(self, tree: GlueTree, fragment: Fragment) -> list[bytes]:
        """The whole tree as parts to write in turn: each host's fragment one of them, as given."""
        url = tree.information_service_url
        clusters, subclusters = [], []
        hosts: list[bytes] = []
        for cluster in tree.clusters():
            subs = tree.subclusters_of(cluster.unique_id)
            clusters.append(cluster_json(cluster, [s.unique_id for s in subs]))
            for sub in subs:
                sub_id = sub.unique_id
                ids = []
                for host in tree.hosts_of(sub_id):
                    ids.append(host.unique_id)
                    hosts += (fragment(host, sub_id), b",")
                subclusters.append(subcluster_json(sub, url, ids))
        snap = tree.snapshot if isinstance(tree, SnapshotView) else None
        ces = [computing_element_json(ce, snap) for ce in tree.computing_elements()]
        return [b'{"computing_elements":', _dump(ces), b',"clusters":', _dump(clusters),
                b',"subclusters":[', b",".join(subclusters), b'],"hosts":[', *hosts[:-1], b"]}\n"]

    def host_parts(self, fragments: Iterable[bytes]) -> list[bytes]:
        """{"hosts": [...]}: these hosts' objects, in the order given, as parts to write in turn."""
        parts = [b'{"hosts":[']
        for fragment in fragments:
            parts += (fragment, b",")
        parts[-1] = b"]}\n" if len(parts) > 1 else b'{"hosts":[]}\n'
        return parts

    def host_document(self, fragment: bytes) -> bytes:
        return fragment

    def subcluster_document(self, tree: GlueTree, sub: SubCluster, fragment: Fragment) -> bytes:
        return subcluster_json(sub, tree.information_service_url, [h.unique_id for h in tree.hosts_of(sub.unique_id)])

    def cluster_document(self, tree: GlueTree, cluster: glue.Cluster, fragment: Fragment) -> bytes:
        return _dump(cluster_json(cluster, [s.unique_id for s in tree.subclusters_of(cluster.unique_id)]))

    def computing_element_document(self, tree: GlueTree, ce: glue.ComputingElement) -> bytes:
        return _dump(computing_element_json(ce, tree.snapshot if isinstance(tree, SnapshotView) else None))
