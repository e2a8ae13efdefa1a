"""GLUE JSON -> the model: the reading side of infosvc/codec/glue_json.py, for a top level that
pulls a site's GET /v1/glue (infosvc/federation/).

What the site wrote is data from another server: every member is checked for its type as the
objects are built (the shape of schemas/glue.schema.json, read by hand: a 1,000-host document is
read in tens of milliseconds, where a JSON Schema validator takes a second), unknown members are
ignored (a newer site may publish more), and an error names the entity and member. Beyond types,
what no site's own config and roll-up would publish is refused too (infosvc/codec/glue_checks.py):
ids no directory or XML document carries, two entities of one id (ignoring case, as a directory
compares them), references to clusters the document does not publish. A host whose
JSON object equals the one read last time keeps its Host object, so the publishing layer's cache
of its renderings (infosvc/publish/glue.py) still holds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final, Mapping

from infosvc.codec.glue_checks import GlueReadError as GlueReadError, Unique, check_id, check_references, check_rules
from infosvc.codec.glue_xml import HOST_STATES
from infosvc.model import glue
from infosvc.model.glue import Host, SubCluster

#: The most hosts one site's document may hold.
MAX_HOSTS: Final = 200_000
_STATUSES: Final = ("Queueing", "Production", "Closed", "Draining")


@dataclass
class GlueDocument:
    """One site's tree as read: entities in the site's order, hosts with their subcluster."""

    computing_elements: list[glue.ComputingElement] = field(default_factory=list)
    clusters: list[glue.Cluster] = field(default_factory=list)
    #: subcluster -> the ids of its hosts, in the site's order
    subclusters: list[tuple[SubCluster, list[str]]] = field(default_factory=list)
    hosts: dict[str, Host] = field(default_factory=dict)
    #: the site's InformationServiceURL, as its subclusters publish it
    information_service_url: str | None = None
    #: host id -> its JSON object, to keep an unchanged host's Host object next time
    raw: dict[str, Any] = field(default_factory=dict)


def _fail(where: str, message: str) -> GlueReadError:
    return GlueReadError(f"{where}: {message}")


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, "expected an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(where, "expected an array")
    return value


def _str(o: Mapping[str, Any], key: str, where: str, required: bool = False) -> Any:
    value = o.get(key)
    if type(value) is str:  # the common case first: ~40 members a host
        return value
    if value is None:
        if required:
            raise _fail(where, f"{key!r} is required")
        return None
    if not isinstance(value, str):
        raise _fail(where, f"{key!r}: expected a string")
    return value


def _int(o: Mapping[str, Any], key: str, where: str, required: bool = False, minimum: int | None = 0) -> Any:
    value = o.get(key)
    if type(value) is int and (minimum is None or value >= minimum):  # not a bool: its type is bool
        return value
    if value is None:
        if required:
            raise _fail(where, f"{key!r} is required")
        return None
    if not isinstance(value, int) or isinstance(value, bool) or (minimum is not None and value < minimum):
        raise _fail(where, f"{key!r}: expected an integer" + (f" of at least {minimum}" if minimum is not None else ""))
    return value


def _bool(o: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = o.get(key)
    if value is not None and not isinstance(value, bool):
        raise _fail(where, f"{key!r}: expected true or false")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    items = _list(value, where)
    if not all(isinstance(item, str) for item in items):
        raise _fail(where, "expected an array of strings")
    return tuple(items)


def _amounts(o: Mapping[str, Any], key: str, where: str) -> tuple[tuple[str, Any], ...]:
    value = o.get(key)
    if value is None:
        return ()
    for name, amount in _obj(value, f"{where}.{key}").items():
        if not isinstance(amount, (int, float)) or isinstance(amount, bool) or not amount > 0:
            raise _fail(f"{where}.{key}", f"{name!r}: expected a positive number")
    return tuple(value.items())


def _resources(o: Mapping[str, Any], where: str) -> glue.Resources | None:
    licenses, consumables = _amounts(o, "licenses", where), _amounts(o, "consumables", where)
    return glue.Resources(licenses, consumables) if licenses or consumables else None


def _accelerators(o: Mapping[str, Any], where: str) -> tuple[glue.Accelerator, ...]:
    found = []
    for i, value in enumerate(_list(o.get("accelerators", []), f"{where}.accelerators")):
        a, w = _obj(value, f"{where}.accelerators[{i}]"), f"{where}.accelerators[{i}]"
        found.append(glue.Accelerator(_str(a, "type", w, True), _str(a, "model", w, True), _int(a, "count", w, True),
                                      _str(a, "vendor", w), _int(a, "memory", w), _str(a, "compute_capability", w)))
    return tuple(found)


def _shared(o: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The groups a host and a subcluster share: architecture to main memory."""
    a = _obj(o.get("architecture", {}), f"{where}.architecture")
    s = _obj(o.get("operating_system", {}), f"{where}.operating_system")
    p = _obj(o.get("processor", {}), f"{where}.processor")
    m = _obj(o.get("main_memory", {}), f"{where}.main_memory")
    b, sw = o.get("benchmark"), o.get("application_software")
    w = where
    return dict(
        architecture=glue.Architecture(_str(a, "platform_type", w), _int(a, "smp_size", w)),
        operating_system=glue.OperatingSystem(_str(s, "name", w), _str(s, "release", w), _str(s, "version", w)),
        benchmark=None if b is None else glue.Benchmark(_int(_obj(b, w), "si00", w, True), _int(b, "sf00", w, True)),
        application_software=None if sw is None else glue.ApplicationSoftware(
            _strings(_obj(sw, w).get("runtime_environment", []), f"{w}.application_software")),
        processor=glue.Processor(
            vendor=_str(p, "vendor", w), model=_str(p, "model", w), version=_str(p, "version", w),
            clock_speed=_int(p, "clock_speed", w), instruction_set=_str(p, "instruction_set", w),
            features=_str(p, "features", w), cache_l1=_int(p, "cache_l1", w), cache_l1i=_int(p, "cache_l1i", w),
            cache_l1d=_int(p, "cache_l1d", w), cache_l2=_int(p, "cache_l2", w)),
        main_memory=glue.MainMemory(_int(m, "ram_size", w), _int(m, "ram_available", w),
                                    _int(m, "virtual_size", w), _int(m, "virtual_available", w)),
        resources=_resources(o, w), accelerators=_accelerators(o, w),
    )


def _load(value: Any, where: str) -> glue.Load | None:
    if value is None:
        return None
    o = _obj(value, where)
    return glue.Load(*(_int(o, key, where, True, minimum=None) for key in ("last_1min", "last_5min", "last_15min")))


def _file_system(value: Any, where: str) -> glue.FileSystem:
    o = _obj(value, where)
    return glue.FileSystem(root=_str(o, "root", where, True), name=_str(o, "name", where, True),
                           type=_str(o, "type", where), read_only=bool(_bool(o, "read_only", where)),
                           size=_int(o, "size", where), available_space=_int(o, "available_space", where),
                           remote=bool(_bool(o, "remote", where)))


def _adapter(value: Any, where: str) -> glue.NetworkAdapter:
    o = _obj(value, where)
    return glue.NetworkAdapter(name=_str(o, "name", where, True), ip_address=_str(o, "ip_address", where),
                               mtu=_int(o, "mtu", where), outbound_ip=_bool(o, "outbound_ip", where),
                               inbound_ip=_bool(o, "inbound_ip", where))


def read_host(o: dict[str, Any], where: str) -> Host:
    """One host's JSON object (glue_json.host_json) as a Host."""
    state = _str(o, "state", where, True)
    if state not in HOST_STATES:
        raise _fail(where, f"'state': one of {', '.join(HOST_STATES)}")
    paused = _bool(o, "paused", where)
    return Host(
        unique_id=check_id(_str(o, "unique_id", where, True), f"{where}: 'unique_id'"),
        name=_str(o, "name", where, True), state=state,
        last_report=_str(o, "reported_at", where, True), cluster=_str(o, "cluster", where, True),
        **_shared(o, where),
        file_systems=tuple(_file_system(v, f"{where}.file_systems") for v in _list(o.get("file_systems", []), where)),
        processor_load=_load(o.get("processor_load"), f"{where}.processor_load"),
        smp_load=_load(o.get("smp_load"), f"{where}.smp_load"),
        network_adapters=tuple(_adapter(v, f"{where}.network_adapters")
                               for v in _list(o.get("network_adapters", []), where)),
        total_cpus=_int(o, "total_cpus", where, True), available_cpus=_int(o, "available_cpus", where, True),
        reported_state=_str(o, "reported_state", where), paused=bool(paused), reason=_str(o, "reason", where),
        accelerators_available=_int(o, "accelerators_available", where) or 0,
        accelerators_used=_int(o, "accelerators_used", where) or 0)


def _subcluster(o: dict[str, Any], where: str) -> tuple[SubCluster, list[str]]:
    states = _obj(o.get("states", {}), f"{where}.states")
    sub = SubCluster(
        unique_id=check_id(_str(o, "unique_id", where, True), f"{where}: 'unique_id'"),
        name=_str(o, "name", where, True), cluster=_str(o, "cluster", where, True), **_shared(o, where),
        host_count=_int(o, "host_count", where, True), live_hosts=_int(o, "live_hosts", where, True),
        total_cpus=_int(o, "total_cpus", where, True), free_cpus=_int(o, "free_cpus", where, True),
        ram_available=_int(o, "ram_available", where, True),
        states={state: _int(states, state, where) or 0 for state in HOST_STATES},
        total_accelerators=_int(o, "total_accelerators", where) or 0,
        used_accelerators=_int(o, "used_accelerators", where) or 0,
        free_accelerators=_int(o, "free_accelerators", where) or 0)
    return sub, list(_strings(o.get("hosts", []), f"{where}.hosts"))


def _cluster(o: dict[str, Any], where: str) -> glue.Cluster:
    return glue.Cluster(unique_id=check_id(_str(o, "unique_id", where, True), f"{where}: 'unique_id'"),
                        name=_str(o, "name", where, True),
                        information_service_url=_str(o, "information_service_url", where),
                        licenses=_amounts(o, "licenses", where))


def _computing_element(o: dict[str, Any], where: str) -> glue.ComputingElement:
    w = where
    info, policy = _obj(o.get("info"), f"{w}.info"), _obj(o.get("policy", {}), f"{w}.policy")
    state = _obj(o.get("state"), f"{w}.state")
    status = _str(state, "status", w, True)
    if status not in _STATUSES:
        raise _fail(f"{w}.state", f"'status': one of {', '.join(_STATUSES)}")
    jobs = []
    for i, job in enumerate(_list(o.get("jobs", []), f"{w}.jobs")):
        j, jw = _obj(job, f"{w}.jobs[{i}]"), f"{w}.jobs[{i}]"
        jobs.append(glue.CEJob(_str(j, "local_id", jw, True), _str(j, "status", jw, True), _str(j, "local_owner", jw),
                               _str(j, "global_owner", jw), _str(j, "global_id", jw),
                               _str(j, "scheduler_specific", jw)))
    return glue.ComputingElement(
        unique_id=check_id(_str(o, "unique_id", w, True), f"{w}: 'unique_id'"), name=_str(o, "name", w, True),
        queue=_str(o, "queue", w, True),
        info=glue.CEInfo(_str(info, "lrms_type", w, True), _str(info, "lrms_version", w),
                         _str(info, "gram_version", w), _str(info, "host_name", w),
                         _int(info, "gatekeeper_port", w), _int(info, "total_cpus", w, True)),
        policy=glue.CEPolicy(*(_int(policy, key, w, minimum=None) or 0 for key in (
            "max_wall_clock_time", "max_cpu_time", "max_total_jobs", "max_running_jobs", "priority"))),
        state=glue.CEState(status, *(_int(state, key, w) or 0 for key in (
            "running_jobs", "waiting_jobs", "worst_response_time", "estimated_response_time", "free_cpus"))),
        access_control_rules=check_rules(_strings(_obj(o.get("access_control_base", {}), w).get("rules", []), w), w),
        jobs=tuple(jobs), clusters=_strings(o.get("clusters", []), f"{w}.clusters"),
        information_service_url=_str(o, "information_service_url", w), accelerators=_accelerator_figures(o, w))


def _accelerator_figures(o: Mapping[str, Any], where: str) -> glue.AcceleratorFigures | None:
    if o.get("accelerators") is None:
        return None
    a = _obj(o["accelerators"], f"{where}.accelerators")
    return glue.AcceleratorFigures(*(_int(a, key, where, True) for key in ("total", "used", "free")))


_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
#: The longest value decoded in one step (an array's element, or a member that is no array): a
#: subcluster of 100,000 hosts lists ~3 MB of their ids, a host's object is a few kilobytes.
MAX_ITEM_CHARS: Final = 4 * 1024 * 1024
#: The members decoded an element at a time: the entities' arrays. Any other is one value.
STEPPED: Final = frozenset({"computing_elements", "clusters", "subclusters", "hosts"})
_FIRST_WINDOW: Final = 4 * 1024
#: Within this of a window's end, a value or an error may be the cut's (a number, an escape, a literal)
_MARGIN: Final = 16


def _skip(text: str, at: int) -> int:
    """Past the white space at `at`."""
    found = _SPACE.match(text, at)
    return found.end() if found is not None else at


def _after_item(text: str, at: int, close: str) -> tuple[int, bool]:
    """After an array's element or an object's member: (where the next one starts, False), or
    (past the closing `close`, True)."""
    at = _skip(text, at)
    if text[at] == close:
        return at + 1, True
    if text[at] != ",":
        raise ValueError(f"expected ',' or '{close}' at character {at}")
    return _skip(text, at + 1), False


class PastBound(ValueError):
    """A document past what one step may decode, or with more entities than a site may publish."""


def loads_in_steps(body: bytes, max_items: int = MAX_HOSTS) -> Any:
    """json.loads(body), the members of a top-level object that are arrays of entities (STEPPED)
    decoded one element at a time. It is read in a worker thread, and json.loads holds the GIL for
    the whole document in one call (0.8 s for a site of 40,000 hosts), so the event loop could not run meanwhile; between two
    elements the loop gets its turn. So each value decoded at once (an element, or a member that
    is no array) is at most MAX_ITEM_CHARS long, and an array has at most `max_items` elements:
    more is refused as it is read (an upstream's `{"x": [0, 0, ...]}` of 64 MB held the loop 1.7
    s; `[{}, {}, ...]`, 50 s and 1.7 GB). Refuses what json.loads refuses (ValueError)."""
    text = body.decode(json.detect_encoding(body))
    at = _skip(text, 0)
    if not text.startswith("{", at):
        value, at = _decoded(text, at)
        if _skip(text, at) != len(text):
            raise ValueError(f"extra data at character {at}")
        return value
    found: dict[str, Any] = {}
    try:
        at = _skip(text, at + 1)
        if text[at] == "}":
            at += 1
        else:
            while True:
                if text[at] != '"':
                    raise ValueError(f"expected a member name at character {at}")
                key, at = _decoded(text, at)
                at = _skip(text, at)
                if text[at] != ":":
                    raise ValueError(f"expected ':' at character {at}")
                at = _skip(text, at + 1)
                if text[at] == "[" and key in STEPPED:
                    items: list[Any] = []
                    at = _skip(text, at + 1)
                    if text[at] == "]":
                        at += 1
                    else:
                        closed = False
                        while not closed:
                            if len(items) == max_items:
                                raise PastBound(f"{key}: more than the {max_items:,} entities a site may publish")
                            item, at = _decoded(text, at)
                            items.append(item)
                            at, closed = _after_item(text, at, "]")
                    found[key] = items
                else:
                    found[key], at = _decoded(text, at)
                at, closed = _after_item(text, at, "}")
                if closed:
                    break
    except IndexError:
        raise ValueError("the document ends early") from None
    if _skip(text, at) != len(text):
        raise ValueError(f"extra data at character {at}")
    return found


def _decoded(text: str, at: int) -> tuple[Any, int]:
    """The JSON value at `at` and where it ends, decoded from a window of the text that grows (x4)
    from _FIRST_WINDOW (4 KiB) to MAX_ITEM_CHARS, so that a value larger than that costs only that much to refuse.
    A value or an error within _MARGIN of the window's end may be the cut's (a number, a string, an
    escape): it is tried again on a larger window."""
    window = _FIRST_WINDOW
    while True:
        if at + window >= len(text):
            return _DECODER.raw_decode(text, at)  # what is left fits: the text itself, not a copy
        piece = text[at:at + window]
        try:
            value, used = _DECODER.raw_decode(piece)
            if used <= len(piece) - _MARGIN:  # a number read up to near the end may go on past it ("1." of "1.5")
                return value, at + used
        except json.JSONDecodeError as exc:
            # cut by the window's end (a string, an escape, a literal): try more; else it is wrong
            if exc.pos < len(piece) - _MARGIN and not exc.msg.startswith("Unterminated string"):
                raise ValueError(f"{exc.msg} at character {at + exc.pos}") from None
        if window >= MAX_ITEM_CHARS:
            raise PastBound(f"a value at character {at} is larger than {MAX_ITEM_CHARS:,} characters")
        window = min(window * 4, MAX_ITEM_CHARS)


def read_glue(body: bytes, previous: GlueDocument | None = None, max_hosts: int = MAX_HOSTS) -> GlueDocument:
    """A site's GET /v1/glue JSON as model objects; `previous` (the last document of the same
    site) lends its Host objects to hosts whose JSON is unchanged. GlueReadError says what is wrong."""
    try:
        data = loads_in_steps(body, max_hosts)
    except PastBound as exc:
        raise GlueReadError(str(exc)) from None
    except (ValueError, RecursionError) as exc:
        raise GlueReadError(f"not JSON: {str(exc)[:200]}") from None
    top = _obj(data, "the document")
    found = GlueDocument()
    hosts = _list(top.get("hosts"), "hosts")
    if len(hosts) > max_hosts:
        raise GlueReadError(f"hosts: {len(hosts)}, more than the {max_hosts} a site may publish")
    old_raw, old_hosts = (previous.raw, previous.hosts) if previous is not None else ({}, {})
    for i, value in enumerate(hosts):
        o = _obj(value, f"hosts[{i}]")
        ident = o.get("unique_id")
        kept = old_hosts.get(ident) if isinstance(ident, str) else None
        host = kept if kept is not None and old_raw.get(kept.unique_id) == o else read_host(o, f"hosts[{i}]")
        if host.unique_id in found.hosts:
            raise GlueReadError(f"hosts[{i}]: host {host.unique_id!r} is listed twice")
        found.hosts[host.unique_id], found.raw[host.unique_id] = host, o
    subs, clusters, ces = Unique("subcluster"), Unique("cluster"), Unique("computing element")
    for i, value in enumerate(_list(top.get("subclusters"), "subclusters")):
        where = f"subclusters[{i}]"
        found.subclusters.append(_subcluster(_obj(value, where), where))
        subs.add(found.subclusters[-1][0].unique_id, where)
        found.information_service_url = found.information_service_url or _str(value, "information_service_url", where)
    for i, value in enumerate(_list(top.get("clusters"), "clusters")):
        found.clusters.append(_cluster(_obj(value, f"clusters[{i}]"), f"clusters[{i}]"))
        clusters.add(found.clusters[-1].unique_id, f"clusters[{i}]")
    for i, value in enumerate(_list(top.get("computing_elements"), "computing_elements")):
        where = f"computing_elements[{i}]"
        found.computing_elements.append(_computing_element(_obj(value, where), where))
        ces.add(found.computing_elements[-1].unique_id, where)
    check_references({c.unique_id for c in found.clusters}, found.subclusters, found.hosts.values(),
                     found.computing_elements)
    return found
