"""The site's hosts as the scheduler's machine (a HostPool), kept for the job queue: built again
only when a host changes what the scheduler reads of it (new, gone, its processors, whether it
may take jobs, paused), and built off the event loop. Only the hosts an executor token is bound to
take jobs.

At 10,000 hosts a build is tens of milliseconds, far more on a busy machine: built on the loop
at each change (hosts joining, say), it was the loop's longest pauses under a soak of 10,000
agents. The hosts are taken on the loop (frozen objects, a list of references), the pool is made
in a thread, and any host that changed meanwhile is checked against the result.
"""

from __future__ import annotations

import asyncio
from typing import Container, Iterable

from infosvc.model.glue import Host
from infosvc.sched.hosts import HostPool
from infosvc.queue.cestate import serving_clusters
from infosvc.queue.eligibility import pool_of
from infosvc.queue.planners import planned
from infosvc.hosts import HostTable
from infosvc.config import LicensePools

#: builds off the loop before one is made on it (a site whose hosts change faster than a build)
OFF_LOOP_TRIES = 3


def differs(pool: HostPool, hosts: Iterable[Host], served: Container[str] | None,
            executors: Container[str] | None = None) -> bool:
    """Whether the scheduler reads any of `hosts` otherwise than `pool` holds it."""
    for host in hosts:
        row = pool.row.get(host.unique_id)
        usable = host.live and not host.offline and (served is None or host.cluster in served) and (
            executors is None or host.unique_id in executors)
        if (row is None or pool.size[row] != host.total_cpus or pool.gpu_size[row] != host.total_accelerators
                or bool(pool.usable[row]) != usable
                or bool(pool.paused[row]) != (host.state == "Paused")):
            return True
    return False


class SiteMachine:
    """The queue's HostPool of the table's hosts, and each host's cluster as it was built."""

    def __init__(self, table: HostTable, executors: Container[str] | None = None) -> None:
        self.table = table
        #: the hosts an executor runs jobs on (executor tokens' hosts; fixed while the service runs)
        self.executors = executors
        self.pool: HostPool | None = None
        self.cluster_of: dict[str, str] = {}
        self._served: Container[str] | None = None
        #: hosts changed while a build is under way (None: none is)
        self._meanwhile: list[Host] | None = None
        self._removals = 0
        #: one build at a time: a second caller waits for it (each took the record of the changes
        #: made meanwhile for its own, and the first to end ended the other's); one lock per event
        #: loop, as a lock waited on is bound to its loop (the service has one; tests start several)
        self._building: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def _inputs(self) -> tuple[list[Host], frozenset[str], Container[str] | None, LicensePools]:
        rollup = self.table.rollup
        return (list(rollup.hosts.values()), frozenset(e.id for e in self.table if e.paused),
                serving_clusters(rollup.computing_elements()), LicensePools(rollup.config.resources))

    def _install(self, hosts: list[Host], pool: HostPool, served: Container[str] | None) -> HostPool:
        self.pool, self._served = pool, served
        self.cluster_of = {host.unique_id: host.cluster for host in hosts}
        return pool

    def current(self) -> HostPool:
        """The pool, built now (on the caller's thread) if a change dropped it."""
        if self.pool is not None:
            return self.pool
        hosts, paused, served, licenses = self._inputs()
        return self._install(hosts, pool_of(hosts, paused.__contains__, served, licenses, self.executors), served)

    async def ready(self) -> None:
        """Build the pool off the loop if a change dropped it (callers at once share one build)."""
        loop = asyncio.get_running_loop()
        if self._building is None or self._building[0] is not loop:
            self._building = (loop, asyncio.Lock())
        async with self._building[1]:
            for _ in range(OFF_LOOP_TRIES):
                if self.pool is not None:
                    return
                hosts, paused, served, licenses = self._inputs()
                removals, self._meanwhile = self._removals, []
                try:
                    built = await planned(pool_of, hosts, paused.__contains__, served, licenses, self.executors)
                    changed = self._meanwhile
                finally:
                    self._meanwhile = None
                if self.pool is None and removals == self._removals and not differs(built, changed, served,
                                                                                    self.executors):
                    self._install(hosts, built, served)

    def hosts_changed(self, hosts: Iterable[Host]) -> bool:
        """The roll-up says these hosts changed; True when the pool had to be dropped for them."""
        if self._meanwhile is not None:
            self._meanwhile.extend(hosts)
        if self.pool is not None and differs(self.pool, hosts, self._served, self.executors):
            self.pool = None
            return True
        return False

    def host_removed(self) -> None:
        self.pool = None
        self._removals += 1
