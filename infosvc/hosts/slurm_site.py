"""A read of the Slurm cluster put into the site's hosts and CEs, at the roll-up's seams, so every
rendering (GLUE 1.1 XML/JSON, 1.3 and 2.0 LDIF, 2.0 XML/JSON, Prometheus, the page) shows them
as it shows any host and CE:

- each node an agent also reports (its host's Id is the node's name, or begins with it as its
  first label) takes Slurm's word on its state (`Rollup.set_word`);
- each other node is a host of its own, its Id the node's name (`Rollup.update`), replaced at
  each read and removed when Slurm no longer lists it;
- the CEs are made from the last good read at each rendering (`Rollup.read_lrms`);
- each node no agent reports is an SSS Node too (infosvc/lrms/sss_nodes.py), kept as a host entry
  beside the table's (`nodes`), for GET /v1/nodes: made and rendered once per read, in the read's
  worker thread (`prepare`), so a large cluster's read costs the event loop only the swap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from infosvc.hosts.slurm_ces import PartitionCE, partition_ces
from infosvc.hosts.lifecycle import NodeState
from infosvc.hosts.slurm_hosts import PAUSED, host_from_slurm, word_of
from infosvc.hosts.table import HostEntry, HostTable
from infosvc.lrms.cluster import ClusterState, SlurmNode
from infosvc.lrms.sss_nodes import sss_node
from infosvc.model import glue
from infosvc.model.glue import Host
from infosvc.model.node import Node
from infosvc.model.hostid import canonical


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class SlurmEntry(HostEntry):
    """A node no agent reports, as the table's hosts are held: its SSS State is Slurm's word
    (Offline when down), where an agent's host that fell silent is Unknown."""

    __slots__ = ()

    @property
    def sss_state(self) -> str:
        return self.node.state or "Unknown"


def slurm_entry(node: SlurmNode, host_id: str, read_at: float, made: Node | None = None) -> SlurmEntry:
    """The host entry of a node no agent reports: its SSS Node (`made` from an equal node of an
    earlier read, else made now), Slurm's state and reason."""
    word = word_of(node)
    return SlurmEntry(host_id, made or sss_node(node, host_id), read_at, read_at, approved=True,
                      paused=word.state == PAUSED, state=NodeState(word.state), reason=word.reason, heard=read_at)


@dataclass(frozen=True, slots=True)
class Prepared:
    """One read's hosts and SSS Node entries, by host Id, made off the loop (`SlurmSite.prepare`)."""

    state: ClusterState
    made: dict[str, tuple[Host, SlurmEntry]]


class SlurmSite:
    """Slurm's nodes and partitions in one site's host table and roll-up."""

    def __init__(self, table: HostTable) -> None:
        self.table = table
        self.rollup = table.rollup
        self.state: ClusterState | None = None
        #: node name -> the id of the host it is published as
        self.host_of: dict[str, str] = {}
        #: the hosts published from Slurm's facts alone, and the agents' hosts Slurm has a word on
        self.own: set[str] = set()
        self.spoken: set[str] = set()
        #: the nodes no agent reports, by host Id in sinfo's order, as SSS Nodes (GET /v1/nodes)
        self.nodes: dict[str, HostEntry] = {}
        #: the Slurm node each of `nodes` was made from
        self._read: dict[str, SlurmNode] = {}
        #: the CEs of the last read, made once per read (10,000 jobs cost tens of ms), rendered at each read
        self._ces: list[PartitionCE] = []
        self.rollup.read_lrms(self.computing_elements)

    def _agent_host(self, node: SlurmNode, by_label: dict[str, list[str]]) -> str | None:
        entries = self.table.entries
        name = canonical(node.name)
        if name in entries:
            return name
        labelled = by_label.get(name, [])
        return labelled[0] if len(labelled) == 1 else None

    def _made(self, node: SlurmNode, host_id: str, read_at: str, epoch: float) -> tuple[Host, SlurmEntry]:
        """A node no agent reports as a host and an SSS Node entry. A node as the last read found it
        keeps its SSS Node (most do, read after read: making 10,000 costs a second on a loaded
        machine, comparing them a tenth)."""
        before = self.nodes.get(host_id)
        kept = before.node if before is not None and self._read.get(host_id) == node else None
        return host_from_slurm(node, host_id, self.table.config, read_at), slurm_entry(node, host_id, epoch, kept)

    def prepare(self, state: ClusterState) -> Prepared:
        """What `publish` makes of each node, made and rendered in the read's worker thread, off the
        event loop: the hosts, the SSS Node entries and their JSON and XML. Pure of the loop's state
        but for the last read's nodes, which change only in `publish`, after this read's prepare."""
        read_at, made = _iso(state.read_at), {}
        for node in state.nodes:
            host_id = canonical(node.name)
            host, entry = made[host_id] = self._made(node, host_id, read_at, state.read_at)
            entry.json(), entry.xml()  # cached on the entry, so the first GET /v1/nodes after a read renders none
        return Prepared(state, made)

    def publish(self, state: ClusterState, prepared: Prepared | None = None) -> list[Host]:
        """Put this read in the tree; the hosts that changed (new, replaced, restated). What
        `prepare` made of this very read is used, the rest made here."""
        made = prepared.made if prepared is not None and prepared.state is state else {}
        self.state = state
        config, rollup = self.table.config, self.rollup
        by_label: dict[str, list[str]] = {}
        for host_id in self.table.entries:
            if "." in host_id:
                by_label.setdefault(host_id.split(".", 1)[0], []).append(host_id)
        read_at = _iso(state.read_at)
        changed: list[Host] = []
        host_of: dict[str, str] = {}
        own: set[str] = set()
        spoken: set[str] = set()
        nodes: dict[str, HostEntry] = {}
        read: dict[str, SlurmNode] = {}
        for node in state.nodes:
            agent = self._agent_host(node, by_label)
            if agent is not None:
                entry = self.table.entries[agent]  # an agent's report stands, with Slurm's word on its state
                restated = rollup.set_word(agent, word_of(node), (entry.state.value, entry.paused, entry.reason))
                host_of[node.name] = agent
                spoken.add(agent)
                if restated is not None:
                    changed.append(restated)
                continue
            host_id = canonical(node.name)
            host, entry = made.get(host_id) or self._made(node, host_id, read_at, state.read_at)
            rollup.update(host)
            changed.append(rollup.hosts[host_id])
            host_of[node.name] = host_id
            own.add(host_id)
            nodes[host_id] = entry
            read[host_id] = node
        for gone in self.own - own:
            if gone not in self.table.entries:
                rollup.remove(gone)
        for silent in self.spoken - spoken:
            held = self.table.entries.get(silent)
            if held is not None:
                restated = rollup.set_word(silent, None, (held.state.value, held.paused, held.reason))
                if restated is not None:
                    changed.append(restated)
        self.host_of, self.own, self.spoken, self.nodes = host_of, own, spoken, nodes
        self._read = read
        self._ces = partition_ces(state, config, host_of)
        return changed

    def only_nodes(self) -> dict[str, HostEntry]:
        """The nodes no agent reports now, by host Id: an agent that began to report one since the
        last read has it in the table, and it is left out here, so no host is listed twice."""
        entries = self.table.entries
        if entries.keys().isdisjoint(self.nodes):
            return self.nodes
        return {i: e for i, e in self.nodes.items() if i not in entries}

    def computing_elements(self) -> list[glue.ComputingElement]:
        """A CE per partition of the last good read (none before the first)."""
        now = time.time()
        return [ce.at(now) for ce in self._ces]
