"""A read of the Slurm cluster put into the site's hosts and CEs, at the roll-up's seams, so every
rendering (GLUE 1.1 XML/JSON, 1.3 and 2.0 LDIF, 2.0 XML/JSON, Prometheus, the page) shows them
as it shows any host and CE:

- each node an agent also reports (its host's Id is the node's name, or begins with it as its
  first label) takes Slurm's word on its state (`Rollup.set_word`);
- each other node is a host of its own, its Id the node's name (`Rollup.update`), replaced at
  each read and removed when Slurm no longer lists it;
- the CEs are made from the last good read at each rendering (`Rollup.read_lrms`).
"""

from __future__ import annotations

import time
from infosvc.hosts.slurm_ces import PartitionCE, partition_ces
from infosvc.hosts.slurm_hosts import host_from_slurm, word_of
from infosvc.hosts.table import HostTable
from infosvc.lrms.cluster import ClusterState, SlurmNode
from infosvc.model import glue
from infosvc.model.glue import Host
from infosvc.model.hostid import canonical


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


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

    def publish(self, state: ClusterState) -> list[Host]:
        """Put this read in the tree; the hosts that changed (new, replaced, restated)."""
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
            host = host_from_slurm(node, host_id, config, read_at)
            rollup.update(host)
            changed.append(rollup.hosts[host_id])
            host_of[node.name] = host_id
            own.add(host_id)
        for gone in self.own - own:
            if gone not in self.table.entries:
                rollup.remove(gone)
        for silent in self.spoken - spoken:
            held = self.table.entries.get(silent)
            if held is not None:
                restated = rollup.set_word(silent, None, (held.state.value, held.paused, held.reason))
                if restated is not None:
                    changed.append(restated)
        self.host_of, self.own, self.spoken = host_of, own, spoken
        self._ces = partition_ces(state, config, host_of)
        return changed

    def computing_elements(self) -> list[glue.ComputingElement]:
        """A CE per partition of the last good read (none before the first)."""
        now = time.time()
        return [ce.at(now) for ce in self._ces]
