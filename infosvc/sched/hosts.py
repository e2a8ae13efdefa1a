"""A machine of hosts, as the service schedules on: each host with its processors, memory and
speed; CCS's exclusive use (a job has its hosts to itself by default; non-exclusive jobs share a
host only with other non-exclusive jobs); resource sorting (candidates by memory size, then by
processor speed, largest first, then by host id, as the matcher orders them); a job's minimum and
maximum processors, the hosts it may use (its requirements, asked nodes) and the hosts it must
have (required nodes). Paused hosts take jobs from administrators only; hosts that are not usable
(Pending, Unreachable, reporting themselves Offline) take none, nor do hosts no executor runs on.

An allocation is a set of hosts with the processors taken on each: as many as are free, up to the
job's maximum, at least its minimum (an exclusive job takes whole hosts, so it may hold more
processors than it uses: CCS's idle reserved processors). Jobs without requirements on
particular hosts are placed by a scan along the sorted hosts from the first that has room (the
service's common case, and 10,000 of them must plan in well under a second); the others through
numpy masks over every host.

Software licenses are pools shared by hosts (the site config's, infosvc.config.resources): a job
that asks for licenses draws its count from the pool each of its features has on its hosts while
it runs, and is placed only on hosts that draw each feature from one pool with enough free (the
hosts are tried pool by pool, in the order of their best host). A feature no pool holds is not
counted (the matcher decided the host has it).

GPUs are a consumable of each host, as processors are: a job asking for N takes N on each of its
hosts while it runs, and is placed only where N are free (what its executor is told to give it:
CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES); two jobs never hold the same GPU, exclusive or not.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
import numpy.typing as npt

from infosvc.sched.hostslots import Allocation, HostJob, HostSlot, Mask, WaitingJob
from infosvc.sched.policy import Machine, Queued
from infosvc.sched.request import JobRequest

__all__ = ["NO_EXECUTOR", "NO_HOST", "Allocation", "HostJob", "HostPool", "HostSlot", "Mask", "WaitingJob"]

#: Why a job waits when its requirements rule out every usable host (the queue adds which and why).
NO_HOST = "no usable host meets its requirements"
#: Why a job waits when only hosts without an executor would take it.
NO_EXECUTOR = "no host with an executor fits"

class HostPool:
    """The hosts of a site and what is taken on each. `copy()` shares the hosts, copies what is taken.
    `licenses`: the licenses in each license pool the slots name."""

    def __init__(self, slots: Sequence[HostSlot], licenses: Sequence[int] = ()) -> None:
        self.slots = tuple(slots)
        self.ids = tuple(slot.id for slot in self.slots)
        self.row = {slot.id: row for row, slot in enumerate(self.slots)}
        n = len(self.slots)
        self.size = np.fromiter((max(s.processors, 0) for s in self.slots), np.int64, n)
        self.memory = np.fromiter((s.memory_mb for s in self.slots), np.float64, n)
        self.usable = np.fromiter((s.usable and s.executor for s in self.slots), np.bool_, n)
        self.no_executor = np.fromiter((s.usable and not s.executor for s in self.slots), np.bool_, n)  # for `why`
        self.paused = np.fromiter((s.paused for s in self.slots), np.bool_, n)
        self.gpu_size = np.fromiter((max(s.gpus, 0) for s in self.slots), np.int64, n)
        self.gpu_free = self.gpu_size.copy()
        speed = np.fromiter((s.speed for s in self.slots), np.float64, n)
        rank = np.empty(n, np.int64)
        rank[sorted(range(n), key=self.ids.__getitem__)] = np.arange(n)
        self.order = np.lexsort((rank, -speed, -self.memory)).astype(np.intp)
        self.place_of = np.empty(n, np.intp)
        self.place_of[self.order] = np.arange(n)
        self._order_list: list[int] = self.order.tolist()
        # what is taken
        self.free = self.size.copy()
        self.memory_free = self.memory.copy()
        self.holders = np.zeros(n, np.int64)
        self.exclusive = np.zeros(n, np.bool_)
        # upper bounds that refuse a job at once; exact for a job with no host requirements
        self._open = self.usable & ~self.paused
        self.shared_free = int(self.size[self._open].sum())  # free processors on hosts no exclusive job holds
        self.idle_free = self.shared_free  # processors of hosts nobody holds
        self._changes = 0  # takes and gives so far: what describe_shortfall's memo was said at
        self._said: dict[tuple[object, ...], str] = {}
        self._said_at = -1
        self._room, self._room_at = 0, -1
        self._cursor = 0  # no host before this place in `order` has room for a shared job
        self._idle_cursor = 0  # ... nor is idle
        # license pools: their sizes and what is free; each row's feature -> pool; the rows grouped
        # by the pools they draw some features from (made on first use, shared by copies)
        self.license_size = np.asarray(licenses, np.int64)
        self.license_free = self.license_size.copy()
        self._pools_of = tuple(dict(slot.licenses) for slot in self.slots) if len(self.license_size) else ()
        self._license_groups: dict[tuple[str, ...], list[tuple[tuple[int, ...], Mask]]] = {}

    @classmethod
    def _empty(cls) -> HostPool:
        return cls.__new__(cls)

    def copy(self) -> HostPool:
        other = HostPool._empty()
        for name in ("slots", "ids", "row", "size", "memory", "usable", "no_executor", "paused", "order", "place_of",
                     "_order_list", "_open", "license_size", "_pools_of", "_license_groups", "gpu_size"):
            setattr(other, name, getattr(self, name))
        other.license_free = self.license_free.copy()
        other.gpu_free = self.gpu_free.copy()
        other.free = self.free.copy()
        other.memory_free = self.memory_free.copy()
        other.holders = self.holders.copy()
        other.exclusive = self.exclusive.copy()
        other.shared_free = self.shared_free
        other.idle_free = self.idle_free
        other._changes, other._said, other._said_at = 0, {}, -1
        other._room, other._room_at = 0, -1
        other._cursor = self._cursor
        other._idle_cursor = self._idle_cursor
        return other

    # --- placing ---------------------------------------------------------------------------

    def place(self, job: Queued, within: Machine[Allocation] | None = None) -> Allocation | None:
        hjob: HostJob = job  # type: ignore[assignment]
        request = hjob.request
        if within is not None and not isinstance(within, HostPool):
            raise TypeError("a host pool plans only within another host pool")
        if request.licenses and self._pools_of:
            return self._place_licensed(hjob, within)
        plain = (hjob.eligible is None and not request.required_nodes and request.memory_mb <= 0
                 and not hjob.admin and within is None and request.gpus <= 0)
        if plain:
            if request.min_processors > (self.idle_free if request.exclusive else self.shared_free):
                return None
            return self._scan(request)
        return self._masked(hjob, within)

    def _scan(self, request: JobRequest) -> Allocation | None:
        """Along the sorted hosts from the first with room: the common case, no numpy per job.
        Hosts passed over for want of room move the starting point of the next scan on."""
        free, holders, exclusive, open_ = self.free, self.holders, self.exclusive, self._open
        order = self._order_list
        want, most = request.min_processors, request.max_processors
        rows: list[int] = []
        taken: list[int] = []
        got = 0
        start = self._idle_cursor if request.exclusive else self._cursor
        first_room = len(order)
        for place in range(start, len(order)):
            row = order[place]
            if not open_[row]:
                continue
            if request.exclusive:
                if holders[row]:
                    continue
                take = int(free[row])
            else:
                if exclusive[row] or not free[row]:
                    continue
                take = min(int(free[row]), most - got)
            if first_room == len(order):
                first_room = place
            if take <= 0:
                continue
            rows.append(row)
            taken.append(take)
            got += take
            if got >= most:
                break
        if request.exclusive:
            self._idle_cursor = first_room
        else:
            self._cursor = first_room
        if got < want:
            return None
        return Allocation(tuple(rows), tuple(taken), 0.0, request.exclusive)

    def _candidates(self, hjob: HostJob, within: HostPool | None) -> tuple[Mask, npt.NDArray[np.int64]]:
        request = hjob.request
        usable = self.usable if hjob.admin else self._open
        room = self.free if within is None else np.minimum(self.free, within.free)
        if request.exclusive:
            mask = usable & (self.holders == 0)
            if within is not None:
                mask &= within.holders == 0
        else:
            mask = usable & ~self.exclusive & (room > 0)
            if within is not None:
                mask &= ~within.exclusive
        if request.memory_mb > 0:
            memory = self.memory_free if within is None else np.minimum(self.memory_free, within.memory_free)
            mask &= memory >= request.memory_mb
        if request.gpus > 0:
            gpus = self.gpu_free if within is None else np.minimum(self.gpu_free, within.gpu_free)
            mask &= gpus >= request.gpus
        if hjob.eligible is not None:
            mask &= hjob.eligible
        return mask, room

    def _masked(self, hjob: HostJob, within: HostPool | None, only: Mask | None = None) -> Allocation | None:
        request = hjob.request
        mask, room = self._candidates(hjob, within)
        if only is not None:
            mask &= only
        required = [self.row[name] for name in request.required_nodes if name in self.row]
        if len(required) < len(request.required_nodes) or (required and not mask[required].all()):
            return None
        ordered = self.order[mask[self.order]]
        if required:
            first = np.asarray(required, np.intp)
            ordered = np.concatenate([first, ordered[~np.isin(ordered, first)]])
        have = room[ordered]
        if not request.exclusive:
            # the most it takes: each host gives what it has until the job's maximum is reached
            cumulative = np.cumsum(have)
            before = cumulative - have
            have = np.clip(np.minimum(have, request.max_processors - before), 0, None)
        cumulative = np.cumsum(have)
        if not len(cumulative) or cumulative[-1] < request.min_processors:
            return None
        # as many as it may take, up to its maximum (CCS gives a job what is free within its range)
        count = min(int(np.searchsorted(cumulative, request.max_processors)) + 1, len(cumulative))
        count = max(count, len(required))
        rows = ordered[:count]
        taken = have[:count]
        keep = taken > 0
        if required:
            keep[:len(required)] = True
        return Allocation(tuple(int(r) for r in rows[keep]), tuple(int(t) for t in taken[keep]),
                          request.memory_mb, request.exclusive, gpus=request.gpus)

    # --- licenses ----------------------------------------------------------------------------

    def _groups(self, features: tuple[str, ...]) -> list[tuple[tuple[int, ...], Mask]]:
        """The rows by the pools they draw `features` from (-1: none, not counted), each group in
        the order of its first row in the resource sort."""
        groups = self._license_groups.get(features)
        if groups is None:
            members: dict[tuple[int, ...], list[int]] = {}
            for row in self._order_list:
                pools = self._pools_of[row]
                members.setdefault(tuple(pools.get(feature, -1) for feature in features), []).append(row)
            groups = []
            for signature, rows in members.items():
                mask = np.zeros(len(self.slots), np.bool_)
                mask[rows] = True
                groups.append((signature, mask))
            self._license_groups[features] = groups
        return groups

    def _licenses_free(self, signature: tuple[int, ...], counts: tuple[int, ...], within: HostPool | None) -> bool:
        for pool, count in zip(signature, counts):
            if pool >= 0 and (self.license_free[pool] < count
                              or (within is not None and within.license_free[pool] < count)):
                return False
        return True

    def _place_licensed(self, hjob: HostJob, within: HostPool | None) -> Allocation | None:
        """A job asking for licenses: on the hosts of one group of pools with enough free, the
        groups tried in the order of their best host."""
        features, counts = zip(*hjob.request.licenses)
        for signature, rows in self._groups(features):
            if not self._licenses_free(signature, counts, within):
                continue
            allocation = self._masked(hjob, within, rows)
            if allocation is not None:
                drawn = tuple((pool, count) for pool, count in zip(signature, counts) if pool >= 0)
                return replace(allocation, licenses=drawn)
        return None

    def licenses_of(self, rows: Sequence[int], licenses: Sequence[tuple[str, int]]) -> tuple[tuple[int, int], ...]:
        """What a job placed on `rows` draws (a job that ran before a restart): the pools of its
        first host, as placing it chose them."""
        if not licenses or not rows or not self._pools_of:
            return ()
        pools = self._pools_of[rows[0]]
        return tuple((pools[feature], count) for feature, count in licenses if feature in pools)

    def _license_shortfall(self, allowed: Mask, request: JobRequest) -> str | None:
        """"waiting for licenses: ..." when every group of pools the job may use lacks some."""
        features, counts = zip(*request.licenses)
        lacking: list[str] | None = None
        for signature, rows in self._groups(features):
            if not (rows & allowed).any():
                continue
            short = [f"{feature} ({count} asked, {max(0, int(self.license_free[pool]))} of "
                     f"{int(self.license_size[pool])} free)"
                     for feature, count, pool in zip(features, counts, signature)
                     if pool >= 0 and self.license_free[pool] < count]
            if not short:
                return None
            lacking = lacking or short
        return None if lacking is None else "waiting for licenses: " + ", ".join(lacking)

    # --- taking and giving back --------------------------------------------------------------

    def take(self, allocation: Allocation) -> None:
        """Hold `allocation`; ValueError, with nothing taken, when a host of it has no room. Its
        licenses are drawn even past what is free: a job running when a pool shrank (a new site
        config) keeps them, and the pool gives none until enough are back."""
        self._changes += 1
        for row, count in zip(allocation.rows, allocation.processors):
            if count > self.free[row] or (allocation.exclusive and self.holders[row]) or self.exclusive[row] \
                    or allocation.gpus > self.gpu_free[row]:
                raise ValueError(f"host {self.ids[row]} has no room for this allocation")
        for row, count in zip(allocation.rows, allocation.processors):
            self.gpu_free[row] -= allocation.gpus
            was_idle = not self.holders[row]
            self.free[row] -= count
            self.memory_free[row] -= allocation.memory_mb
            self.holders[row] += 1
            if self._open[row]:
                if allocation.exclusive:
                    self.exclusive[row] = True
                    self.shared_free -= count + int(self.free[row])
                else:
                    self.shared_free -= count
                if was_idle:
                    self.idle_free -= int(self.size[row])
            elif allocation.exclusive:
                self.exclusive[row] = True
        for pool, drawn in allocation.licenses:
            self.license_free[pool] -= drawn

    def give(self, allocation: Allocation) -> None:
        self._changes += 1
        for pool, count in allocation.licenses:
            self.license_free[pool] += count
        for row, count in zip(allocation.rows, allocation.processors):
            if self.holders[row] < 1 or self.free[row] + count > self.size[row]:
                raise ValueError(f"host {self.ids[row]}: giving back what was not taken")
            self.free[row] += count
            self.gpu_free[row] += allocation.gpus
            self.memory_free[row] += allocation.memory_mb
            self.holders[row] -= 1
            if self._open[row]:
                if allocation.exclusive:
                    self.exclusive[row] = False
                    self.shared_free += int(self.free[row])
                else:
                    self.shared_free += count
                if not self.holders[row]:
                    self.idle_free += int(self.size[row])
            elif allocation.exclusive:
                self.exclusive[row] = False
            place = int(self.place_of[row])
            self._cursor = min(self._cursor, place)
            self._idle_cursor = min(self._idle_cursor, place)

    def room(self) -> int:
        """The free processors of usable hosts (Paused ones too: an administrator's job may go
        there): no job gets more."""
        if self._room_at != self._changes:
            self._room, self._room_at = int(self.free[self.usable].sum()), self._changes
        return self._room

    # --- words -----------------------------------------------------------------------------------

    def describe_shortfall(self, job: Queued) -> str:
        hjob: HostJob = job  # type: ignore[assignment]
        request = hjob.request
        # Jobs asking alike wait for the same reason until something is taken or given back: a
        # pass over 10,000 waiting jobs says each reason once.
        key = (request.min_processors, request.exclusive, request.memory_mb, request.required_nodes,
               id(hjob.eligible), hjob.admin, request.licenses, request.gpus)
        if self._said_at != self._changes:
            self._said, self._said_at = {}, self._changes
        said = self._said.get(key)
        if said is None:
            said = self._said[key] = self._shortfall(hjob, request)
        return said

    def _shortfall(self, hjob: HostJob, request: JobRequest) -> str:
        usable = self.usable if hjob.admin else self._open
        allowed = usable if hjob.eligible is None else usable & hjob.eligible
        # the hosts it could use if they had an executor: said of only where they make the difference
        elsewhere = (self.no_executor if hjob.admin else self.no_executor & ~self.paused) & (
            True if hjob.eligible is None else hjob.eligible)
        if not allowed.any():
            return f"{NO_EXECUTOR} (the hosts it may use run no executor)" if elsewhere.any() else NO_HOST
        if request.memory_mb > 0 and not (self.memory[allowed] >= request.memory_mb).any():
            lead = NO_EXECUTOR + ": none" if (self.memory[elsewhere] >= request.memory_mb).any() else "no host"
            return f"{lead} it may use has {request.memory_mb:g} MB of memory"
        if request.gpus > 0 and not (self.gpu_size[allowed] >= request.gpus).any():
            most = int(self.gpu_size[allowed].max())
            return f"no host it may use has {_gpus(request.gpus)}: {most} at most"
        capacity = int(self.size[allowed].sum())
        if request.min_processors > capacity:
            lead = f"{NO_EXECUTOR}: " if request.min_processors <= capacity + int(self.size[elsewhere].sum()) else ""
            return f"{lead}needs {_processors(request.min_processors)}; the hosts it may use have {capacity}"
        if request.licenses and self._pools_of and (short := self._license_shortfall(allowed, request)):
            return short
        mask, room = self._candidates(hjob, None)
        if request.gpus > 0 and not mask.any():
            gpu_free = self.gpu_free[allowed & (self.gpu_size >= request.gpus)]
            return (f"waiting for {_gpus(request.gpus)} free on a host: "
                    f"{int(gpu_free.max()) if len(gpu_free) else 0} at most now")
        free = int(room[mask].sum())
        kind = "idle hosts" if request.exclusive else "hosts it may share"
        return f"waiting for {_processors(request.min_processors)}, {free} free on {kind}"

    def names(self, allocation: Allocation) -> list[str]:
        return [self.ids[row] for row in allocation.rows]



def _processors(count: int) -> str:
    return f"{count} processor" if count == 1 else f"{count} processors"


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"
