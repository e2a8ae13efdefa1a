"""`infosvc status`: the operator's view of a site, as sinfo or condor_status give it.

One GET of /v1/glue (JSON) with the command line's client (infosvc/cli/client.py), then a table of hosts (state,
CPUs free/total, memory free/total, the 1-minute load, the age of the last report) and a line per
subcluster and per computing element. `--json` prints the same as one JSON object. Free CPUs are
the roll-up's: only a Ready host has any.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from infosvc.cli.client import Client, ClientError, epoch_of


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
    last_report: str | None
    age_seconds: float | None
    cluster: str
    subcluster: str


@dataclass(frozen=True, slots=True)
class SubClusterRow:
    subcluster: str
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


def fetch_glue(client: Client) -> dict[str, Any]:
    """GET SERVER/v1/glue as JSON; StatusError names the server and what went wrong."""
    try:
        data = client.call("GET", "/v1/glue")
    except ClientError as exc:
        raise StatusError(str(exc)) from None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), list) for k in
                                             ("computing_elements", "clusters", "subclusters", "hosts")):
        raise StatusError(f"{client.server}/v1/glue: the answer is not a GLUE tree")
    return data


def _load_1min(host: dict[str, Any]) -> float | None:
    """The 1-minute load average, back from GLUE's SMPLoad: (CPUs - load) x 100."""
    smp = host.get("smp_load")
    cpus = host.get("total_cpus")
    if not isinstance(smp, dict) or not isinstance(smp.get("last_1min"), int) or not isinstance(cpus, int) or cpus <= 0:
        return None
    return round(cpus - int(smp["last_1min"]) / 100, 2)


def status_of(glue: dict[str, Any], server: str, now: float) -> Status:
    hosts = []
    for h in glue["hosts"]:
        memory = h.get("main_memory") or {}
        reported = epoch_of(h.get("last_report"))
        hosts.append(HostRow(
            host=h["unique_id"], state=h.get("state", "?"), cpus_free=h.get("free_cpus", 0),
            cpus_total=h.get("total_cpus", 0), memory_free_mb=memory.get("ram_available"),
            memory_total_mb=memory.get("ram_size"), load_1min=_load_1min(h), last_report=h.get("last_report"),
            age_seconds=None if reported is None else max(0.0, round(now - reported, 1)),
            cluster=h.get("cluster", ""), subcluster=h.get("subcluster", "")))
    hosts.sort(key=lambda row: row.host)
    subs = [SubClusterRow(s["unique_id"], s.get("cluster", ""), s.get("host_count", 0), s.get("live_hosts", 0),
                          s.get("free_cpus", 0), s.get("total_cpus", 0)) for s in glue["subclusters"]]
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


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in [header, *rows]]


def render(status: Status) -> str:
    lines = _table(["HOST", "STATE", "CPUS(F/T)", "MEMORY(F/T)", "LOAD1", "AGE"], [
        [h.host, h.state, f"{h.cpus_free}/{h.cpus_total}",
         f"{_memory(h.memory_free_mb)}/{_memory(h.memory_total_mb)}",
         "-" if h.load_1min is None else f"{h.load_1min:.2f}", age(h.age_seconds)]
        for h in status.hosts])
    if not status.hosts:
        lines.append("(no hosts have reported)")
    lines.append("")
    lines += _table(["SUBCLUSTER", "CLUSTER", "HOSTS", "LIVE", "CPUS(F/T)"], [
        [s.subcluster, s.cluster, str(s.hosts), str(s.live_hosts), f"{s.cpus_free}/{s.cpus_total}"]
        for s in status.subclusters])
    lines.append("")
    lines += _table(["CE", "QUEUE", "STATUS", "CLUSTERS", "HOSTS", "CPUS(F/T)"], [
        [c.computing_element, c.queue, c.status, ",".join(c.clusters) or "-", str(c.hosts),
         f"{c.cpus_free}/{c.cpus_total}"] for c in status.computing_elements])
    return "\n".join(lines)


def run(server: str, as_json: bool, *, token_file: str | None = None, ca_file: str | None = None,
        now: float | None = None) -> int:
    """`infosvc status`: prints the view of `server`; 1, with the reason on stderr, when there is none."""
    try:
        glue = fetch_glue(Client.of(server, token_file=token_file, ca_file=ca_file))
        status = status_of(glue, server, time.time() if now is None else now)
    except (ClientError, StatusError) as exc:
        print(f"infosvc status: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(status.as_json()) if as_json else render(status))
    return 0
