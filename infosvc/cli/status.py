"""`infosvc status`: the operator's view of a site, as sinfo or condor_status give it.

One GET of /v1/glue (JSON) with the command line's client (infosvc/cli/client.py), filtered by the
server (`--state`, `--cluster`, a NodeSet), then, as sinfo does, a line per cluster, subcluster and
state with its hosts folded (`cn[01-12,15]`) and the admins' reasons; `--hosts` gives a line per
host instead (state, CPUs free/total, memory free/total, the 1-minute load, the age of the last
report, the reason). Then a line per subcluster (by its readable GLUE name) and per computing
element. `--json` prints the same as one JSON object. Free CPUs are the roll-up's: only a Ready
host that is not Offline has any, as its load leaves them. Beside them, CPUS(A/I/O/T) is the
scheduler's split (GET /v1/processors: allocated, idle, other, total, as `sinfo -o %C`), which
decides whether a job starts; `-` where the server does not give it.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
from dataclasses import asdict, dataclass
from typing import Any

from infosvc.controls import visible, visible_lines
from infosvc.cli.tables import table
from infosvc.cli.client import Client, ClientError, epoch_of
from infosvc.model.folding import fold


class StatusError(Exception):
    """The server could not be reached, or did not answer with a GLUE tree."""


@dataclass(frozen=True, slots=True)
class HostRow:
    host: str
    state: str
    cpus_free: int
    cpus_total: int
    memory_free_mb: int | None
    memory_total_mb: int | None
    load_1min: float | None
    reported_at: str | None
    age_seconds: float | None
    cluster: str
    subcluster: str
    subcluster_name: str
    reported_state: str | None
    paused: bool
    reason: str | None
    #: the scheduler's split (allocated, idle, other); None where the server does not give it
    cpus_allocated: int | None = None
    cpus_idle: int | None = None
    cpus_other: int | None = None


@dataclass(frozen=True, slots=True)
class SubClusterRow:
    subcluster: str
    name: str
    cluster: str
    hosts: int
    live_hosts: int
    cpus_free: int
    cpus_total: int


@dataclass(frozen=True, slots=True)
class ComputingElementRow:
    computing_element: str
    queue: str
    status: str
    clusters: list[str]
    hosts: int
    cpus_free: int
    cpus_total: int


@dataclass(frozen=True, slots=True)
class Status:
    server: str
    hosts: list[HostRow]
    subclusters: list[SubClusterRow]
    computing_elements: list[ComputingElementRow]

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def fetch_glue(client: Client, filters: dict[str, str] | None = None) -> dict[str, Any]:
    """GET SERVER/v1/glue as JSON, with the host filters of the API (state, cluster, nodes);
    StatusError names the server and what went wrong."""
    query = "?" + urllib.parse.urlencode(filters) if filters else ""
    try:
        data = client.call("GET", "/v1/glue" + query)
    except ClientError as exc:
        raise StatusError(str(exc)) from None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), list) for k in
                                             ("computing_elements", "clusters", "subclusters", "hosts")):
        raise StatusError(f"{client.server}/v1/glue: the answer is not a GLUE tree")
    return data


def fetch_split(client: Client) -> dict[str, dict[str, int]]:
    """GET SERVER/v1/processors: host -> the scheduler's split; {} from a server without it."""
    try:
        data = client.call("GET", "/v1/processors")
    except ClientError:
        return {}
    hosts = data.get("hosts") if isinstance(data, dict) else None
    return {host: split for host, split in hosts.items() if isinstance(split, dict)} if isinstance(hosts, dict) else {}


def _load_1min(host: dict[str, Any]) -> float | None:
    """The 1-minute load average, back from GLUE's SMPLoad: (CPUs - load) x 100."""
    smp = host.get("smp_load")
    cpus = host.get("total_cpus")
    if not isinstance(smp, dict) or not isinstance(smp.get("last_1min"), int) or not isinstance(cpus, int) or cpus <= 0:
        return None
    return round(cpus - int(smp["last_1min"]) / 100, 2)


def status_of(glue: dict[str, Any], server: str, now: float, split: dict[str, dict[str, int]] | None = None) -> Status:
    names = {s["unique_id"]: s.get("name") or s["unique_id"] for s in glue["subclusters"]}
    hosts = []
    split = split or {}
    for h in glue["hosts"]:
        held = split.get(h["unique_id"], {})
        memory = h.get("main_memory") or {}
        reported = epoch_of(h.get("reported_at"))
        sub = h.get("subcluster", "")
        hosts.append(HostRow(
            host=h["unique_id"], state=h.get("state", "?"), cpus_free=h.get("free_cpus", 0),
            cpus_total=h.get("total_cpus", 0), memory_free_mb=memory.get("ram_available"),
            memory_total_mb=memory.get("ram_size"), load_1min=_load_1min(h), reported_at=h.get("reported_at"),
            age_seconds=None if reported is None else max(0.0, round(now - reported, 1)),
            cluster=h.get("cluster", ""), subcluster=sub, subcluster_name=names.get(sub, sub),
            reported_state=h.get("reported_state"), paused=bool(h.get("paused")), reason=h.get("reason"),
            cpus_allocated=held.get("allocated"), cpus_idle=held.get("idle"), cpus_other=held.get("other")))
    hosts.sort(key=lambda row: row.host)
    subs = [SubClusterRow(s["unique_id"], names[s["unique_id"]], s.get("cluster", ""), s.get("host_count", 0),
                          s.get("live_hosts", 0), s.get("free_cpus", 0), s.get("total_cpus", 0))
            for s in glue["subclusters"]]
    hosts_in: dict[str, int] = {}
    for row in hosts:
        hosts_in[row.cluster] = hosts_in.get(row.cluster, 0) + 1
    ces = []
    for ce in glue["computing_elements"]:
        clusters = list(ce.get("clusters", []))
        ces.append(ComputingElementRow(
            ce["unique_id"], ce.get("queue", ""), (ce.get("state") or {}).get("status", ""), clusters,
            sum(hosts_in.get(c, 0) for c in clusters), (ce.get("state") or {}).get("free_cpus", 0),
            (ce.get("info") or {}).get("total_cpus", 0)))
    return Status(server, hosts, subs, ces)


def age(seconds: float | None) -> str:
    """5s, 3m, 2h, 4d: the age of a report, as sinfo-like tools print it."""
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def _memory(mb: int | None) -> str:
    return "-" if mb is None else f"{mb / 1024:.1f}G"


def _split(rows: list[HostRow]) -> str:
    """allocated/idle/other/total over the rows, as `sinfo -o %C`; `-` when the server gave no split."""
    if any(r.cpus_allocated is None for r in rows):
        return "-"
    return "/".join(str(sum(getattr(r, name) or 0 for r in rows))
                    for name in ("cpus_allocated", "cpus_idle", "cpus_other", "cpus_total"))


def _state_of(row: HostRow) -> str:
    """The life-cycle state, with what else holds the host back: `Unreachable(paused)`, `Ready(Offline)`."""
    marks = [word for word, on in (("paused", row.paused and row.state != "Paused"),
                                   ("Offline", row.reported_state == "Offline")) if on]
    return f"{row.state}({','.join(marks)})" if marks else row.state


def summary(status: Status) -> list[str]:
    """sinfo's view: a line per cluster, subcluster and state, its hosts folded; then the reasons."""
    groups: dict[tuple[str, str, str], list[HostRow]] = {}
    for row in status.hosts:
        groups.setdefault((row.cluster, row.subcluster_name, _state_of(row)), []).append(row)
    lines = table(["CLUSTER", "SUBCLUSTER", "STATE", "HOSTS", "CPUS(F/T)", "CPUS(A/I/O/T)", "NODELIST"], [
        [cluster, name, state, str(len(rows)), f"{sum(r.cpus_free for r in rows)}/{sum(r.cpus_total for r in rows)}",
         _split(rows), fold(r.host for r in rows)] for (cluster, name, state), rows in sorted(groups.items())])
    reasons: dict[str, list[str]] = {}
    for row in status.hosts:
        if row.reason:
            reasons.setdefault(row.reason, []).append(row.host)
    if reasons:
        lines.append("")
        lines += table(["REASON", "NODELIST"], [[reason, fold(hosts)] for reason, hosts in sorted(reasons.items())])
    return lines


def host_lines(status: Status) -> list[str]:
    """A line per host."""
    return table(["HOST", "STATE", "CPUS(F/T)", "CPUS(A/I/O/T)", "MEMORY(F/T)", "LOAD1", "AGE", "REASON"], [
        [h.host, _state_of(h), f"{h.cpus_free}/{h.cpus_total}", _split([h]),
         f"{_memory(h.memory_free_mb)}/{_memory(h.memory_total_mb)}",
         "-" if h.load_1min is None else f"{h.load_1min:.2f}", age(h.age_seconds), h.reason or ""]
        for h in status.hosts])


def unmatched(filters: dict[str, str] | None) -> str:
    """What an empty answer means: no host at all, or none the filters match (`cn[90-99] --state Ready`)."""
    if not filters:
        return "(no hosts have reported)"
    asked = [filters["nodes"]] if "nodes" in filters else []
    asked += [f"--{key} {filters[key]}" for key in ("state", "cluster") if key in filters]
    return f"(no host matches {' '.join(asked)})"


def render(status: Status, per_host: bool = False, filters: dict[str, str] | None = None) -> str:
    lines = host_lines(status) if per_host else summary(status)
    if not status.hosts:
        lines = [unmatched(filters)]
    lines.append("")
    lines += table(["SUBCLUSTER", "CLUSTER", "HOSTS", "LIVE", "CPUS(F/T)"], [
        [s.name, s.cluster, str(s.hosts), str(s.live_hosts), f"{s.cpus_free}/{s.cpus_total}"]
        for s in status.subclusters])
    lines.append("")
    lines += table(["CE", "QUEUE", "STATUS", "CLUSTERS", "HOSTS", "CPUS(F/T)"], [
        [c.computing_element, c.queue, c.status, ",".join(c.clusters) or "-", str(c.hosts),
         f"{c.cpus_free}/{c.cpus_total}"] for c in status.computing_elements])
    return visible_lines(lines)


def add_command(commands: Any, common: Any) -> None:
    status = commands.add_parser("status", parents=[common], help="the hosts, subclusters and CEs of a server, "
                                 "as sinfo shows a cluster")
    status.add_argument("nodes", nargs="?", metavar="NODESET", help="only these hosts (cn[01-12]; quote it)")
    status.add_argument("--state", metavar="S", help="only hosts in these life-cycle states (Ready,Paused,...)")
    status.add_argument("--cluster", metavar="C", help="only hosts of these clusters (comma-separated)")
    status.add_argument("-N", "--hosts", action="store_true", help="a line per host instead of folded lists")
    status.add_argument("--json", action="store_true", help="print one JSON object instead")


def run(server: str, as_json: bool, *, token_file: str | None = None, ca_file: str | None = None,
        now: float | None = None, filters: dict[str, str] | None = None, per_host: bool = False) -> int:
    """`infosvc status`: prints the view of `server`; 1, with the reason on stderr, when there is none."""
    try:
        client = Client.of(server, token_file=token_file, ca_file=ca_file)
        glue = fetch_glue(client, filters)
        status = status_of(glue, server, time.time() if now is None else now, fetch_split(client))
    except (ClientError, StatusError) as exc:
        print(f"infosvc status: {visible(str(exc))}", file=sys.stderr)
        return 1
    print(json.dumps(status.as_json()) if as_json else render(status, per_host, filters))
    return 0
