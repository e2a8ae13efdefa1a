"""The aggregator's behaviour, apart from HTTP: who may report what, and what a report changes.

`Aggregator.ingest` takes the digest of an agent's token (the HTTP layer has checked the token and
its role) and a body, and either refuses them (`Forbidden`, or DocumentError for a bad document)
or returns the host's entry after the report is committed to the store. Nothing is visible in
memory before it is durable.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections import Counter
from typing import Callable, Generator, Iterable, Mapping

from infosvc.codec.node_xml import parse_node
from infosvc.errors import DocumentError, excerpt
from infosvc.model.hostid import HostIdError, canonical, host_id
from infosvc.model.glue import Host
from infosvc.model.node import Node
from infosvc.model.nodedelta import apply_delta, base_sample
from infosvc.model.nodeset import NameSet
from infosvc.hosts.clockskew import ClockSkew
from infosvc.hosts.history import PastReport, node_history, site_at
from infosvc.hosts.query import HostFilter
from infosvc.hosts.rollup import Rollup
from infosvc.hosts.slurm_site import Prepared, SlurmSite
from infosvc.hosts.table import HostEntry, HostTable
from infosvc.lrms.cluster import ClusterState
from infosvc.hosts.reportcaps import check_report
from infosvc.config import SiteConfig
from infosvc.store import HostEvent, PastViewTooLarge, Report, Store
from infosvc.errors import Conflict, Forbidden, NotFound, TooLarge, Unavailable
from infosvc.hosts.tokens import Tokens

log = logging.getLogger("infosvc.hosts.aggregator")
#: the audit trail (infosvc/cli/logs.py): hosts changing state, here
audit = logging.getLogger("infosvc.audit")


#: A difference between the wall and the monotonic clock's progress beyond this is a step.
CLOCK_STEP_SECONDS = 1.0
#: A `nodes` filter that takes more steps than this to evaluate (HostNames.cost) is evaluated off
#: the event loop (about a microsecond a step: names written out, or hosts tested against terms)
INLINE_CHOOSING = 20_000
#: A report at most this long is parsed on the event loop (a few ms); a longer one in a thread
INLINE_REPORT_BYTES = 16 * 1024
#: A past view (GET /v1/glue?at=, tree_at) holds at most twice the hosts now, and at least this
#: many: an instant with more hosts published is refused (413), not answered with some of them
PAST_VIEW_MIN_HOSTS = 1000


class Aggregator:
    def __init__(self, config: SiteConfig, store: Store, tokens: Tokens, *,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic,
                 load: bool = True) -> None:
        self.config = config
        self.store = store
        self.tokens = tokens
        self.clock = clock
        self.monotonic = monotonic
        self._clocks = (clock(), monotonic())
        self.table = HostTable(config)
        self._choosing = asyncio.Lock()  # one costly host selection at a time (choose)
        # an admin's (or the queue's) decisions on hosts one at a time, each checked, stored and
        # applied whole: a pause that passed its check while a removal of the same host was being
        # stored found no host after its own write
        self._deciding = asyncio.Lock()
        #: told of the GLUE hosts that changed, once they have (the publishing layer renders them)
        self.on_change: list[Callable[[list[Host]], None]] = []
        #: told of each host an admin removed
        self.on_remove: list[Callable[[str], None]] = []
        #: token digest -> reports in flight carrying its first claim on a host (see ingest)
        self._claims: dict[str, int] = {}
        #: reports taken by the HTTP layer and not answered yet (read, parsed, waiting for the
        #: store): it counts them, and sheds load beyond service.max_pending_reports
        self.pending = 0
        #: reports accepted, and refused by reason (for /metrics)
        self.accepted = 0
        #: samples delivered again and acknowledged without a second row (see _repeat_of)
        self.repeated = 0
        #: (host, SampleId) of the reports waiting for the store
        self._storing: set[tuple[str, str]] = set()
        #: each host's agent clock against ours, from its reports' SampleTime
        self.clock_skew = ClockSkew()
        self.rejected: Counter[str] = Counter()
        #: of the reports accepted, how many were deltas
        self.deltas = 0
        #: stored bindings the tokens file overrides: dropped from the store by `start()`
        self.stale_bindings: list[str] = []
        for key, host in store.token_bindings().items():
            try:
                tokens.bind(key, host)
            except ValueError as exc:  # the tokens file now binds differently than first use did
                # Dropped, not just ignored: the stored row would still hold the host, and another
                # token's first claim on it would then fail in SQLite, not here.
                log.warning("dropping stored token binding for %s: %s", host, exc)
                self.stale_bindings.append(key)
        #: a Slurm cluster's hosts and CEs ([lrms] type = "slurm"), put in the tree at each read
        self.slurm: SlurmSite | None = SlurmSite(self.table) if config.lrms.slurm else None
        self._prepared: Prepared | None = None  # the newest read's hosts, made off the loop (prepare_slurm)
        #: whether the hosts were read from the store (`load`): until then the table is empty
        self.loaded = False
        if load:
            self.load()

    def load(self) -> int:
        """Read the hosts from the store into the table (the snapshot of the last clean stop where
        it holds their newest reports, else their documents); how many."""
        count = self.table.load(self.store.hosts(), now=self.now())
        self.loaded = True
        return count

    async def save_snapshot(self) -> int:
        """Keep the hosts as held now in the store (at a clean stop), for the next start; how many."""
        if not self.loaded:
            return 0  # stopped while loading: the last snapshot's rows still say what they said
        rows = self.table.snapshot()
        await self.store.save_snapshot(rows)
        return len(rows)

    async def start(self) -> None:
        """Drop from the store the bindings the tokens file overrides (see __init__): until then,
        another token's first claim on such a host would fail in SQLite."""
        while self.stale_bindings:
            await self.store.forget_binding(self.stale_bindings[0])
            self.stale_bindings.pop(0)

    def now(self) -> float:
        """The wall-clock time, for reports and liveness. Reports keep wall-clock times (they are
        shown and stored), but liveness must not follow a step of the wall clock (an NTP step at
        boot, a VM resumed): a step forward would make every host Unreachable at once, a step back
        would keep a dead host Ready for as long. A step is the wall clock moving more than one
        second apart from the monotonic clock since the last reading; hosts' last-heard times are
        moved with it."""
        wall, steady = self.clock(), self.monotonic()
        last_wall, last_steady = self._clocks
        self._clocks = (wall, steady)
        step = (wall - last_wall) - (steady - last_steady)
        if abs(step) > CLOCK_STEP_SECONDS:
            log.warning("the wall clock stepped by %+.1f s; host liveness moved with it", step)
            self.table.shift_liveness(step)
        return wall

    async def ingest(self, key: str, body: bytes) -> HostEntry:
        """Store and apply the report `body` of the agent whose token's digest is `key`: a whole
        report, or a delta of the host's whole report this server holds (Conflict if it does not)."""
        base_seq: int | None = None
        try:
            limit = self.config.service.max_body_bytes
            # parsing and validating is ~0.16 ms a KB: a large body (a 256 KB one held the loop 42 ms,
            # and an unbound agent token could send 256 at once) is parsed in a worker thread
            node = (parse_node(body, max_bytes=limit) if len(body) <= INLINE_REPORT_BYTES
                    else await asyncio.to_thread(parse_node, body, max_bytes=limit))
            try:
                node.id = host_id(node.id)
            except HostIdError as exc:
                raise DocumentError(str(exc), element="Id") from None
            bind = self._check_binding(key, node.id)
            self._check_name(node)
            check_report(node, self.config.reports)
            builds_on = base_sample(node)
            if builds_on is not None:
                entry = self.table.get(node.id)
                if entry is None or entry.base is None or entry.base_sample != builds_on:
                    self.rejected["no_base"] += 1
                    raise Conflict(f"host {node.id!r}: no sample {builds_on!r} held to build this delta on",
                                   "send the whole document")
                base_seq = entry.base_seq
                node = apply_delta(entry.base, node, entry.base_index())
        except Forbidden:
            self.rejected["forbidden"] += 1
            raise
        except TooLarge:
            self.rejected["too_large"] += 1
            raise
        except ValueError:  # DocumentError
            self.rejected["invalid"] += 1
            raise
        repeat = self._repeat_of(node)
        if repeat is not None:
            return repeat
        now = self.now()
        if bind:
            self.tokens.bind(key, node.id)  # claimed now, so a concurrent second claim is refused
            self._claims[key] = 0
        # Until a report carrying the claim has committed, every report of the token carries it:
        # should the first fail in the store, a second that committed without it would leave the
        # host stored but claimable by any token.
        carries = key in self._claims
        if carries:
            self._claims[key] += 1
        entry = self.table.get(node.id)
        before = entry.state.value if entry is not None else "new"
        approved = entry.approved if entry is not None else self.table.new_host_approved()
        storing = (node.id, node.extension("SampleId", "Agent") or "")
        self._storing.add(storing)
        try:
            seq = await self.store.add_report(Report(node.id, body, now, approved, base=base_seq),
                                              bind_token=key if carries else None)
        except Exception as exc:
            if carries and key in self._claims:  # not durable yet
                self._claims[key] -= 1
                if not self._claims[key]:  # no other report in flight carries it: undo the claim
                    del self._claims[key]
                    self.tokens.unbind(key, node.id)
                # "UNIQUE constraint failed: token_bindings.host_id": the store holds another claim
                if isinstance(exc, sqlite3.IntegrityError) and "token_bindings" in str(exc):
                    self.rejected["forbidden"] += 1
                    raise Forbidden(f"host {node.id!r} reports with another token") from None
            self.rejected["store"] += 1
            raise
        finally:
            self._storing.discard(storing)
        if carries:
            self._claims.pop(key, None)  # the claim is durable
        self.accepted += 1
        if base_seq is not None:
            self.deltas += 1
        entry = self.table.report(node, now, self.clock_skew.observe(node.id, node, now), seq=seq,
                                  delta=base_seq is not None)
        if entry.state.value != before:
            audit.info("host %s: %s -> %s (a report)", entry.id, before, entry.state.value)
        self._warm((entry,))
        return entry

    def _repeat_of(self, node: Node) -> HostEntry | None:
        """The host's entry when `node` is the sample it holds, delivered again (an agent that did
        not hear the first answer: a reset, a timeout, a proxy's 5xx): acknowledged, not stored
        twice. A sample is named by the agent's SampleId; documents without one are always new.
        The same sample still waiting for the store is refused (503): the agent sends it again."""
        sample = node.extension("SampleId", "Agent")
        if sample is None:
            return None
        entry = self.table.get(node.id)
        if entry is not None and entry.node.extension("SampleId", "Agent") == sample:
            self.repeated += 1
            return entry
        if (node.id, sample) in self._storing:
            raise Unavailable("this sample is being stored", "send it again: it will be acknowledged once stored")
        return None

    def count_refused(self, reason: str) -> None:
        """A report refused before it reached `ingest` (its token, its size, its body), by reason."""
        self.rejected[reason] += 1

    def _check_binding(self, key: str, host: str) -> bool:
        """Whether this report binds the token now; Forbidden if the token or host is bound elsewhere."""
        bound = self.tokens.host_of(key)
        if bound is not None:
            if bound != host:
                raise Forbidden(f"this token reports for host {bound!r}, not {host!r}")
            return False
        if self.tokens.holder_of(host) is not None:
            raise Forbidden(f"host {host!r} reports with another token")
        return True

    def _check_name(self, node: Node) -> None:
        """Forbidden when the report's Name is another host's Id, unless it is the first label of its
        own Id (the agent's short name: `node1` for node1.b.org, beside a host node1): the Name is
        the agent's own word, shown beside the Id, and must not pass one host off as another."""
        named = canonical(node.name or node.id)
        if named not in (node.id, node.id.split(".", 1)[0]) and named in self.table.entries:
            raise Forbidden(f"the Name {excerpt(node.name or '')!r} is the Id of another host",
                          "a host's Name may be anything but the Id of another host")

    def hosts_named(self, expression: str) -> list[str]:
        """The known hosts a host Id or a NodeSet (`cn[07-08]`) names, each by its Id or by its
        first label (`cn07` names cn07.example.org); NodeSetParseError for a bad expression. A
        membership test per host: a NodeSet of a million names costs what it costs to test."""
        if not any(c in expression for c in "[],!&^ "):
            host = canonical(expression)
            short = [key for key in self.table.entries if key.split(".", 1)[0] == host]
            return [host] if host in self.table.entries else short[:1] if len(short) == 1 else []
        names = NameSet(expression)
        return [key for key in self.table.entries if key in names or key.split(".", 1)[0] in names]

    async def set_flags(self, host_id: str, *, approved: bool | None = None, paused: bool | None = None,
                        action: str = "admin", reason: str | None = None) -> HostEntry:
        return await self._decide(host_id, approved, paused, action, reason, "an admin")

    async def drain(self, host_id: str, reason: str) -> HostEntry:
        """Pause a host for the job queue, as Slurm drains a node after a launch failure: stored as
        a pause with its reason (shown wherever the host is), lifted by an admin's resume."""
        return await self._decide(host_id, None, True, "pause", reason, "drained by the job queue")

    async def _decide(self, host_id: str, approved: bool | None, paused: bool | None, action: str,
                      reason: str | None, by: str) -> HostEntry:
        async with self._deciding:
            current = self.table.get(host_id)
            if current is None:
                raise NotFound(f"no host {host_id!r}")
            before = current.state.value
            await self.store.set_flags(host_id, approved=approved, paused=paused,
                                       event=HostEvent(host_id, self.clock(), action, reason))
            entry = self.table.set_flags(host_id, self.now(), approved=approved, paused=paused, reason=reason)
        if entry is None:  # only a removal takes a host from the table, and none ran meanwhile
            raise NotFound(f"no host {host_id!r}")
        if entry.state.value != before:
            audit.info("host %s: %s -> %s (%s)", entry.id, before, entry.state.value, by)
        self._warm((entry,))
        return entry

    async def remove(self, host_id: str, *, purge: bool = False, reason: str | None = None) -> HostEntry:
        """Decommission a host: gone from the table, GLUE, status and discovery; its history kept
        (or with `purge`, deleted). Jobs running on it are treated as on a lost host."""
        async with self._deciding:
            if self.table.get(host_id) is None:
                raise NotFound(f"no host {host_id!r}")
            await self.store.remove_host(HostEvent(host_id, self.clock(), "remove", reason), purge=purge)
            entry = self.table.remove(host_id)
        if entry is None:
            raise NotFound(f"no host {host_id!r}")
        self.clock_skew.forget(host_id)
        audit.info("host %s removed (an admin), history %s", host_id, "purged" if purge else "kept")
        for listener in self.on_remove:
            listener(host_id)
        return entry

    # --- what readers ask of the site (the HTTP layer's face; none of it changes anything) -----

    @property
    def tree(self) -> Rollup:
        """The site's GLUE tree as published now (a GlueTree, and the matcher's SiteView)."""
        return self.table.rollup

    def slurm_nodes(self) -> dict[str, HostEntry]:
        """Slurm's nodes that no agent reports, by host Id, as SSS Nodes (none when Slurm is not read)."""
        return self.slurm.only_nodes() if self.slurm is not None else {}

    def node_entries(self) -> list[HostEntry]:
        """Every host as GET /v1/nodes and GET /metrics's per-host families list them: the agents'
        hosts, then Slurm's nodes no agent reports."""
        return [*self.table, *self.slurm_nodes().values()]

    def chosen(self, chosen: HostFilter, slurm: Mapping[str, HostEntry] | None = None) -> list[HostEntry]:
        """The hosts a filter chooses, as every route that lists hosts lists them: the agents'
        hosts, then Slurm's nodes no agent reports (`slurm`, when read already)."""
        slurm = self.slurm_nodes() if slurm is None else slurm
        return [*chosen.select(self.table), *chosen.select_from(slurm, self.config)]

    async def choose(self, chosen: HostFilter) -> list[HostEntry]:
        """`chosen(chosen)`, in a worker thread on a copy of the hosts when its `nodes` expression
        costs more than INLINE_CHOOSING steps to evaluate here, one such at a time: 1,150 terms
        tested against each of 2,000 hosts held the event loop 1.5-2 s."""
        slurm = self.slurm_nodes()
        if chosen.nodes is None or chosen.nodes.cost(len(self.table) + len(slurm)) <= INLINE_CHOOSING:
            return self.chosen(chosen, slurm)
        agents, config = dict(self.table.entries), self.config

        def choose() -> list[HostEntry]:
            return [*chosen.select_from(agents, config), *chosen.select_from(slurm, config)]
        async with self._choosing:
            return await asyncio.to_thread(choose)

    def tree_of(self, entries: Iterable[HostEntry]) -> Rollup:
        """The tree of these hosts alone, rolled up afresh (their subclusters, totals and CEs):
        blocking, as long as a site's roll-up; run it in a thread."""
        hosts = self.table.rollup.hosts
        return self.table.rollup.of_hosts(h for e in entries if (h := hosts.get(e.id)) is not None)

    def tree_at(self, at: float) -> Rollup:
        """The tree as published at `at`, from the store's history (infosvc.hosts.history): blocking.
        Every host published then is in it; TooLarge (413) when they were more than a past view
        holds, `[store] past_view_max_hosts` or else max(2 x the hosts now, PAST_VIEW_MIN_HOSTS),
        rather than some of them."""
        set_bound = self.config.store.past_view_max_hosts
        bound = set_bound or max(len(self.table) * 2, PAST_VIEW_MIN_HOSTS)
        try:
            return site_at(self.config, self.store, at, lambda h: (e.approved if (e := self.table.get(h)) else None),
                           max_hosts=bound)
        except PastViewTooLarge as exc:
            why = "as [store] past_view_max_hosts sets" if set_bound else (
                f"twice the hosts now, at least {PAST_VIEW_MIN_HOSTS}; [store] past_view_max_hosts sets another")
            raise TooLarge(f"{exc.hosts} hosts were published at that time, more than the {bound} a past view "
                           f"holds ({why})",
                           "GET /v1/nodes/{id}/history gives any host's reports of that time") from None

    def node_history(self, host_id: str, since: float, until: float, limit: int,
                     before: int | None = None) -> Generator[PastReport, None, None]:
        """The host's stored reports in [since, until], newest first (blocking: read in a thread)."""
        return node_history(self.store, host_id, since, until, limit, before)

    def ever_reported(self, host_id: str) -> bool:
        """Whether the host is here now or has a stored report (blocking: the store is read)."""
        return self.table.get(host_id) is not None or bool(self.store.history(host_id, 1))

    def store_failure(self) -> str | None:
        """Why reports are not being stored now, or None while they are."""
        store = self.store
        if store.writing and not store.failing:
            return None
        return (f"the database file is damaged ({store.damage}); restore it from a backup" if store.damage
                else f"the store takes no writes now ({store.failing}); free space on its disk"
                if store.failing else "the store's writer has stopped")

    def store_bytes(self) -> int:
        return self.store.size_bytes()

    # --- liveness --------------------------------------------------------------------------------

    def sweep(self) -> int:
        changed = self.table.sweep(self.now())
        for entry in changed:
            audit.info("host %s is now %s (no report in time)", entry.id, entry.state.value)
        self._warm(changed)
        return len(changed)

    def prepare_slurm(self, state: ClusterState) -> None:
        """In the read's worker thread: what publishing this read needs, made off the event loop."""
        if self.slurm is not None:
            self._prepared = self.slurm.prepare(state)

    def publish_slurm(self, state: ClusterState) -> None:
        """A good read of the Slurm cluster: its nodes and partitions published as hosts and CEs."""
        if self.slurm is None:
            raise RuntimeError("this site reads no Slurm cluster ([lrms] type is not \"slurm\")")
        prepared, self._prepared = self._prepared, None
        self._tell(self.slurm.publish(state, prepared))

    def _warm(self, entries: Iterable[HostEntry]) -> None:
        self._tell([h for h in map(self.table.rollup.hosts.get, (e.id for e in entries)) if h is not None])

    def _tell(self, hosts: list[Host]) -> None:
        for listener in self.on_change:
            listener(hosts)
