"""Reading a Slurm cluster every `[lrms] interval_seconds`, off the event loop.

`read_cluster` is one read, blocking: three commands one after the other (`sinfo --json`,
`scontrol show partition -o`, `squeue` in a format of its own, one record a job), parsed into a
`ClusterState`.
`ClusterReader`
runs it in a worker thread every interval and keeps the last good state: a read that fails
(munge not running, slurmctld not answering, a command past its time limit) leaves that state
published, and the reader `stale` with the error and when it happened, until a read succeeds
again. Its listeners hear of each good read (the hosts and CEs are published from it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from infosvc.config import LrmsConfig
from infosvc.lrms.cluster import ClusterState
from infosvc.lrms.slurm_commands import SlurmUnavailable, diagnosis, run, run_json, version
from infosvc.lrms.slurm_settings import slurm_settings
from infosvc.lrms.slurm_parse import SQUEUE_JOBS, jobs_of, nodes_of, partitions_of

log = logging.getLogger("infosvc.lrms")


def read_cluster(config: LrmsConfig, slurm_version: str = "", private: frozenset[str] = frozenset()) -> ClusterState:
    """The cluster now (blocking): SlurmUnavailable when a command fails or its output is not
    what this Slurm writes. The CPU time counts the commands' and this thread's parsing."""
    began, wall0, cpu0 = time.time(), time.monotonic(), time.thread_time()
    nodes_json, ran_nodes = run_json(config, "sinfo", key="nodes")
    nodes = nodes_of(nodes_json)
    ran_parts = run(config, "scontrol", "show", "partition", "-o")
    partitions = partitions_of(ran_parts.stdout, nodes)
    marked = SQUEUE_JOBS.drawn()  # a token of this read's own: a job's texts cannot end its record
    ran_jobs = run(config, "squeue", "-h", "-r", env=marked.environment())
    jobs = jobs_of(ran_jobs.stdout, marked)
    commands_cpu = ran_nodes.cpu_seconds + ran_parts.cpu_seconds + ran_jobs.cpu_seconds
    return ClusterState(nodes, partitions, jobs, slurm_version, began, time.monotonic() - wall0,
                        commands_cpu + time.thread_time() - cpu0, private)


class ClusterReader:
    """The cluster read every interval in a worker thread; the last good read, and why the last
    read failed while it is stale."""

    def __init__(self, config: LrmsConfig, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.clock = clock
        #: the last good read (None: none yet)
        self.state: ClusterState | None = None
        #: why the last read failed, and when; None while the last read succeeded
        self.error: str | None = None
        self.failed_at: float | None = None
        #: told of each good read, on the event loop
        self.on_read: list[Callable[[ClusterState], None]] = []
        #: given each good read first in the read's worker thread, to make there what the listeners need
        self.in_thread: list[Callable[[ClusterState], None]] = []
        self.reads = 0
        self.failures = 0
        self._version = ""
        self._private: frozenset[str] = frozenset()

    @property
    def stale(self) -> bool:
        """The published state is not the cluster's now: the last read failed."""
        return self.error is not None

    def read_now(self) -> ClusterState:
        """One read (blocking), its result kept and told: for a thread, or a test."""
        try:
            if not self._version:
                said = version(self.config)
                self._private = slurm_settings(self.config).private  # read with the version, once
                self._version = said
            state = read_cluster(self.config, self._version, self._private)
        except SlurmUnavailable as exc:
            self.failures += 1
            why = str(exc)
            if "--json reported" in why and (found := diagnosis(self.config)) is not None:
                why = f"{why} ({found})"
            if self.error is None:
                log.warning("Slurm could not be read (the last good state stays published, stale): %s", why)
            self.error, self.failed_at = why, self.clock()
            raise
        if self.error is not None:
            log.info("Slurm read again after a failure: %s", self.error)
        self.error = self.failed_at = None
        self.state = state
        self.reads += 1
        return state

    def _read_and_prepare(self) -> ClusterState:
        state = self.read_now()
        for prepare in self.in_thread:
            try:
                prepare(state)
            except Exception:  # noqa: BLE001 - what a hook left undone is done on the loop at publishing
                log.exception("preparing a Slurm read off the loop failed")
        return state

    async def read(self) -> ClusterState | None:
        """One read in a worker thread; the listeners told on the loop. None when it failed."""
        try:
            state = await asyncio.to_thread(self._read_and_prepare)
        except SlurmUnavailable:
            return None
        for listener in self.on_read:
            listener(state)
        return state

    async def run_forever(self) -> None:
        """A read, then one every interval (counted from each read's start, so a slow read does
        not drift the schedule, and never two at once)."""
        interval = self.config.interval_seconds
        while True:
            started = time.monotonic()
            try:
                await self.read()
            except Exception:  # noqa: BLE001 - a bug in one read must not end the reading
                log.exception("reading Slurm failed")
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))

    def health(self) -> dict[str, object]:
        """What /healthz says of the batch system."""
        said: dict[str, object] = {"type": self.config.type, "interval_seconds": self.config.interval_seconds}
        if self.state is not None:
            said["read_at"] = _iso(self.state.read_at)
            said["read_seconds"] = round(self.state.read_seconds, 3)
        if self.error is not None:
            said["state"] = "stale" if self.state is not None else "unread"
            said["error"] = self.error
            said["failed_at"] = _iso(self.failed_at or 0.0)
        else:
            said["state"] = "fresh" if self.state is not None else "unread"
        return said


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))

