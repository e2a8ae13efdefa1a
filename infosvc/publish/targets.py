"""The hosts as Prometheus HTTP service discovery targets (`GET /v1/prometheus/targets`).

Prometheus's http_sd_configs reads a JSON array of target groups, each
`{"targets": ["HOST:PORT", ...], "labels": {NAME: VALUE, ...}}`. Here each host is one group:
its SSS Node Id and the exporter port of the config (`prometheus.exporter_port`), labelled with
the host (`node`, the label name of infosvc's own metrics) and where the GLUE roll-up puts it
(`subcluster`, `cluster`).

Which hosts: every host an admin has let in, that is all but Pending ones. Unreachable hosts stay
listed on purpose: Prometheus marks a target it cannot scrape `up == 0`, which is what an alert
wants to see; a host dropped from discovery instead has its series go stale without a word.
Pending hosts are not listed: nobody approved them yet, so nobody asked for them to be scraped.
The life-cycle state goes along as the meta label `__meta_infosvc_state`, for relabelling (to
drop Paused hosts, say), and not as a target label: a label that changes with the state would
start a new series at every change.
"""

from __future__ import annotations

from typing import Any, Final

from infosvc.site.hosts import HostEntry, HostTable
from infosvc.site.lifecycle import NodeState

#: The life-cycle states whose hosts are listed.
LISTED_STATES: Final = frozenset({NodeState.READY, NodeState.PAUSED, NodeState.UNREACHABLE})

STATE_LABEL: Final = "__meta_infosvc_state"


def address(host: str, port: int) -> str:
    """HOST:PORT, with an IPv6 literal in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def target_group(entry: HostEntry, table: HostTable, port: int) -> dict[str, Any]:
    labels = {"node": entry.id}
    sub = table.rollup.subcluster_of(entry.id)
    if sub is not None:
        labels["subcluster"] = sub.unique_id
    host = table.rollup.hosts.get(entry.id)
    if host is not None and host.cluster:
        labels["cluster"] = host.cluster
    labels[STATE_LABEL] = entry.state.value
    return {"targets": [address(entry.id, port)], "labels": labels}


def targets(table: HostTable, port: int) -> list[dict[str, Any]]:
    """One target group per listed host, in order of host Id (a stable answer for a stable site)."""
    listed = sorted((e for e in table if e.state in LISTED_STATES), key=lambda e: e.id)
    return [target_group(entry, table, port) for entry in listed]
