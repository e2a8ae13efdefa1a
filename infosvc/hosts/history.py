"""What the service held at a past time, from the store's history: a host's reports over a period
(GET /v1/nodes/{id}/history), and the site as it was published at an instant (GET /v1/glue?at=):
each host's newest report then, its life-cycle state then (from the report's age and the admin
decisions kept as events), rolled up into GLUE by the same code as the live site.

It reaches back as far as the history is kept ([store] history_per_host reports per host); the
computing elements' job figures are those of the live queue's absence (0), not reconstructed.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Generator, Iterable

from infosvc.codec.node_json import node_to_json
from infosvc.errors import DocumentError
from infosvc.config import SiteConfig
from infosvc.hosts.table import iso_time
from infosvc.hosts.lifecycle import node_state
from infosvc.hosts.reports import node_of_report
from infosvc.hosts.query import QueryError
from infosvc.hosts.rollup import Rollup
from infosvc.hosts.glue_host import host_from_node
from infosvc.store import HostEvent, Store

#: the most reports one history answer holds
HISTORY_MAX = 1000


def parse_time(text: str, parameter: str) -> float:
    """An instant as a query gives it: ISO 8601 (`2026-11-25T03:10:00Z`, an offset, or none: UTC)
    or seconds since the epoch."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise QueryError(parameter, "an ISO 8601 time (2026-11-25T03:10:00Z) or seconds since the epoch") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return when.timestamp()
    if not math.isfinite(value):
        raise QueryError(parameter, "a finite number of seconds since the epoch")
    return value


@dataclass(slots=True)
class PastReport:
    """One stored report of a host: its number in the store (a page's cursor), when it came, the Node."""

    seq: int
    reported_at: str
    node: dict[str, Any]


def node_history(store: Store, host_id: str, since: float, until: float, limit: int,
                 before: int | None = None) -> Generator[PastReport, None, None]:
    """The host's reports received in [since, until] and numbered below `before`, newest first, at
    most `limit`, parsed one at a time as they are taken; a stored document that no longer parses
    is left out."""
    with contextlib.closing(store.history_pages(host_id, limit, since, until, before)) as rows:
        for seq, reported_at, document, base in rows:
            try:
                node = node_of_report(document, base)
            except DocumentError:
                continue
            node.id = host_id
            yield PastReport(seq, iso_time(reported_at), node_to_json(node))


@dataclass(slots=True)
class Decided:
    """An admin's decisions on one host as they stood at an instant."""

    approved: bool | None = None  # None: no approval decided by then
    approved_later: bool = False
    paused: bool = False
    reason: str | None = None
    removed_at: float | None = None


def decisions_at(events: Iterable[HostEvent], at: float) -> dict[str, Decided]:
    decided: dict[str, Decided] = {}
    for event in events:
        mine = decided.setdefault(event.host_id, Decided())
        if event.at > at:
            mine.approved_later = mine.approved_later or event.action == "approve"
            continue
        if event.action == "remove":
            mine.removed_at = event.at
            continue
        mine.reason = event.reason
        if event.action == "approve":
            mine.approved = True
        elif event.action in ("pause", "resume"):
            mine.paused = event.action == "pause"
    return decided


def site_at(config: SiteConfig, store: Store, at: float, approved_now: Callable[[str], bool | None],
            max_hosts: int) -> Rollup:
    """The GLUE roll-up of the site as published at `at`. `approved_now(host)` says whether a host
    is approved today (None: it is gone), for hosts with no approval kept by then."""
    life = config.lifecycle
    decided = decisions_at(store.host_events(), at)
    rollup = Rollup(config)
    for host_id, reported_at, document, base in store.reports_at(at, max_hosts):
        mine = decided.get(host_id, Decided())
        if mine.removed_at is not None and mine.removed_at >= reported_at:
            continue  # removed by then, and not heard from since
        try:
            node = node_of_report(document, base)
        except DocumentError:
            continue
        node.id = host_id
        approved = mine.approved
        if approved is None:
            # No approval by then: pending if one came later, else as it is today (or, for a host
            # gone since, approved: it was published).
            now = approved_now(host_id)
            approved = not mine.approved_later and (now is None or now)
        state = node_state(approved=approved, paused=mine.paused, last_report=reported_at, now=at,
                           heartbeat_seconds=life.heartbeat_seconds, missed_heartbeats=life.missed_heartbeats)
        rollup.update(host_from_node(node, state.value, config, iso_time(reported_at), mine.paused, mine.reason))
    return rollup
