"""The aggregator's in-memory view of its hosts, rebuilt from the store at start.

Each host has its newest SSS Node, when it reported, the admin's decisions, and its life-cycle
state (the document it came in is the store's: here it would double what a host costs). Every change is passed on to the GLUE roll-up, one host at
a time, so the roll-up never recomputes over every host. Rendered forms of each node (JSON,
XML, its lines of GET /metrics) are cached here and dropped when the host changes, because
listing thousands of nodes should cost a join, not thousands of renderings.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator

from infosvc.codec.node_json import node_to_json
from infosvc.codec.node_compact import node_from_compact, node_to_compact
from infosvc.codec.node_xml import node_to_xml, parse_node
from infosvc.errors import DocumentError
from infosvc.hosts.lifecycle import NodeState, node_state, unreachable_at
from infosvc.model.node import Node
from infosvc.model.nodedelta import AGENT, SAMPLE_ID, BaseIndex, apply_delta
from infosvc.hosts.rollup import Rollup
from infosvc.hosts.glue_host import host_from_node
from infosvc.config import SiteConfig
from infosvc.store import HostRecord, SnapshotRow

log = logging.getLogger("infosvc.hosts.table")


def iso_time(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


@dataclass(slots=True)
class HostEntry:
    id: str
    node: Node
    reported_at: float
    first_seen: float
    approved: bool
    paused: bool
    state: NodeState = NodeState.READY
    #: the admin's reason for the last decision on it (approve, pause, resume)
    reason: str | None = None
    #: when the host was last heard from, for its liveness: reported_at, moved with any step of
    #: the wall clock since (HostTable.shift_liveness), so a step neither kills nor revives hosts
    heard: float = 0.0
    #: the agent's clock less the server's, in seconds (hosts/clockskew.py); None: unknown
    clock_skew: float | None = None
    _json: bytes | None = field(default=None, repr=False)
    _xml: bytes | None = field(default=None, repr=False)
    #: this host's lines of the per-host families of GET /metrics (infosvc.publish.prometheus.host_lines)
    metric_lines: tuple[str, ...] | None = field(default=None, repr=False)
    #: the host's newest whole report, which its delta reports build on (None: none held), and its
    #: number in the store's history
    base: Node | None = field(default=None, repr=False)
    base_seq: int | None = None
    _base_index: BaseIndex | None = field(default=None, repr=False)

    def base_index(self) -> BaseIndex | None:
        """Where the base's parts are, for its deltas (made at the first, kept until a new base)."""
        if self.base is None:
            return None
        if self._base_index is None:
            self._base_index = BaseIndex(self.base)
        return self._base_index

    @property
    def base_sample(self) -> str | None:
        """The SampleId of the whole report this host's deltas may build on."""
        return self.base.extension(SAMPLE_ID, AGENT) if self.base is not None and self.base_seq is not None else None

    @property
    def document(self) -> bytes:
        """The host's newest report as an SSS Node document, written from its node: what the host
        sent once parsed, not byte for byte (the bytes as they came are kept by the store alone)."""
        return node_to_xml(self.node)

    @property
    def sss_state(self) -> str:
        """The SSS State published for it: the agent's word while it is heard from, else Unknown."""
        if self.state is NodeState.UNREACHABLE or not self.node.state:
            return "Unknown"
        return self.node.state

    def published_node(self) -> Node:
        """The node as published: an SSS State from the SSS vocabulary (the life-cycle state is
        published beside it, in JSON and GLUE)."""
        node, state = self.node, self.sss_state
        return node if node.state == state else replace(node, state=state)

    def json(self) -> bytes:
        if self._json is None:
            body = node_to_json(self.published_node())
            body["reported_at"] = iso_time(self.reported_at)
            body["life_cycle"] = self.state.value
            body["paused"] = self.paused
            if self.reason is not None:
                body["reason"] = self.reason
            if self.clock_skew is not None:
                body["clock_skew_seconds"] = round(self.clock_skew, 3)
            self._json = json.dumps(body, separators=(",", ":")).encode()
        return self._json

    def xml(self) -> bytes:
        if self._xml is None:
            document = node_to_xml(self.published_node())
            self._xml = document[document.index(b"<Node>"):].rstrip()
        return self._xml

    def forget_renderings(self) -> None:
        self._json = self._xml = None
        self.metric_lines = None


def _held(record: HostRecord) -> tuple[Node, Node, bool]:
    """The host's newest sample and the whole one its deltas build on, from the snapshot when it
    has them (True), else from the documents."""
    if record.snapshot is not None:
        try:
            node = node_from_compact(record.snapshot)
            return node, node_from_compact(record.snapshot_base) if record.snapshot_base is not None else node, True
        except DocumentError as exc:
            log.warning("snapshot of %s unreadable, its documents read instead: %s", record.id, exc)
    base = parse_node(record.document)
    base.id = record.id  # the key it was stored under: canonical (infosvc.model.hostid) since schema 2
    return (base if record.delta is None else apply_delta(base, parse_node(record.delta))), base, False


class HostTable:
    def __init__(self, config: SiteConfig, rollup: Rollup | None = None) -> None:
        self.config = config
        self.rollup = rollup if rollup is not None else Rollup(config)
        self.entries: dict[str, HostEntry] = {}
        #: of the hosts `load` read, how many came from the snapshot of the last clean stop
        self.from_snapshot = 0

    def _state(self, entry: HostEntry, now: float) -> NodeState:
        life = self.config.lifecycle
        return node_state(approved=entry.approved, paused=entry.paused, last_report=entry.heard, now=now,
                          heartbeat_seconds=life.heartbeat_seconds, missed_heartbeats=life.missed_heartbeats)

    def _publish(self, entry: HostEntry) -> None:
        entry.forget_renderings()
        self.rollup.update(host_from_node(entry.node, entry.state.value, self.config, iso_time(entry.reported_at),
                                          entry.paused, entry.reason, entry.clock_skew))

    def load(self, records: Iterable[HostRecord], now: float | None = None) -> int:
        """Rebuild from the store: each host from the snapshot of the last clean stop where that
        holds its newest report, else from its documents; a stored document that no longer parses
        is skipped and logged."""
        now = time.time() if now is None else now
        count = 0
        for record in records:
            try:
                node, base, snapshot = _held(record)
            except DocumentError as exc:
                log.error("stored report of %s does not parse any more, skipped: %s", record.id, exc)
                continue
            entry = HostEntry(record.id, node, record.reported_at, record.first_seen, record.approved,
                              record.paused, reason=record.reason, heard=record.reported_at, base=base,
                              base_seq=record.base_seq)
            entry.state = self._state(entry, now)
            self.entries[entry.id] = entry
            self._publish(entry)
            count += 1
            self.from_snapshot += snapshot
        return count

    def snapshot(self) -> list[SnapshotRow]:
        """Every host as held now, for the next start (HostTable.load) to read without parsing."""
        return [SnapshotRow(e.id, e.reported_at, node_to_compact(e.node),
                            node_to_compact(e.base) if e.base is not None and e.base is not e.node else None)
                for e in self.entries.values()]

    def new_host_approved(self) -> bool:
        return not self.config.lifecycle.require_approval

    def report(self, node: Node, now: float, clock_skew: float | None = None, *,
               seq: int | None = None, delta: bool = False) -> HostEntry:
        """Apply a report that the store has committed as number `seq`; `clock_skew`: its host's,
        with it counted. A whole report (`delta` false) becomes the base of the host's deltas."""
        entry = self.entries.get(node.id)
        if entry is None:
            entry = HostEntry(node.id, node, now, now, self.new_host_approved(), False, heard=now)
            self.entries[node.id] = entry
        else:
            entry.node, entry.reported_at, entry.heard = node, now, now
        if not delta:
            entry.base, entry.base_seq, entry._base_index = node, seq, None
        entry.clock_skew = clock_skew
        entry.state = self._state(entry, now)
        self._publish(entry)
        return entry

    def set_flags(self, host_id: str, now: float, *, approved: bool | None = None,
                  paused: bool | None = None, reason: str | None = None) -> HostEntry | None:
        """An admin's decision, with its reason (which replaces the last one, or clears it)."""
        entry = self.entries.get(host_id)
        if entry is None:
            return None
        if approved is not None:
            entry.approved = approved
        if paused is not None:
            entry.paused = paused
        entry.reason = reason
        self._restate(entry, now, decided=True)
        return entry

    def remove(self, host_id: str) -> HostEntry | None:
        """The host leaves the table and the roll-up (an admin decommissioned it)."""
        entry = self.entries.pop(host_id, None)
        if entry is not None:
            self.rollup.remove(host_id)
        return entry

    def _restate(self, entry: HostEntry, now: float, decided: bool = False) -> bool:
        state = self._state(entry, now)
        if state is entry.state and not decided:
            return False
        changed = state is not entry.state
        entry.state = state
        entry.forget_renderings()
        self.rollup.set_state(entry.id, state.value, entry.paused, entry.reason)
        return changed

    def sweep(self, now: float) -> list[HostEntry]:
        """Mark hosts whose heartbeats stopped as Unreachable; returns the hosts that changed."""
        life = self.config.lifecycle
        changed = []
        for entry in self.entries.values():
            if entry.state is NodeState.UNREACHABLE or entry.state is NodeState.PENDING:
                continue
            if now > unreachable_at(entry.heard, life.heartbeat_seconds, life.missed_heartbeats):
                if self._restate(entry, now):
                    changed.append(entry)
        return changed

    def shift_liveness(self, step: float) -> None:
        """The wall clock stepped by `step` seconds: move every host's last-heard time with it."""
        for entry in self.entries.values():
            entry.heard += step

    def __iter__(self) -> Iterator[HostEntry]:
        return iter(self.entries.values())

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, host_id: str) -> HostEntry | None:
        return self.entries.get(host_id)
