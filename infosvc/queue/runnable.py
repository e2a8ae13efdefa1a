"""Whether any host the site knows now could ever run a submitted job, and why not: what a
submission's answer warns of (or refuses, with `[scheduler] refuse_unrunnable`, as Slurm refuses
"Requested node configuration is not available").

A host could run the job when its requirements let it through with the host taken as idle and
Ready (infosvc.queue.eligibility: the same mask the scheduling pass uses, so the answer and the
pass agree), and the hosts let through together have the processors it asks, one of them the
memory per host it asks, and every node it requires. Whether they are up, paused or busy now is
not asked: a job waiting for a host to come back is not refused. A site that knows no host at all
(just set up, its agents not yet reported) warns of nothing.
"""

from __future__ import annotations

import math
from typing import Callable, Final, Mapping

import numpy as np

from infosvc.errors import Invalid, excerpt
from infosvc.hosts import HostTable
from infosvc.matching import Requirements, Site
from infosvc.model.folding import fold
from infosvc.model.glue import Host
from infosvc.model.node import Node
from infosvc.queue.eligibility import Eligibility
from infosvc.queue.submissions import Prepared
from infosvc.sched.hosts import HostPool, Mask
from infosvc.sched.request import JobRequest

__all__ = ["UNRUNNABLE", "screened", "unrunnable"]

#: How the warning (and the refusal) starts: the reasons follow.
UNRUNNABLE: Final = "no host known now can run it"
#: The longest list of reasons one job's warning quotes.
MAX_WHY_CHARS: Final = 1000
#: The most (mask, memory asked) sums kept between changes of the pool (memory asked is anyone's)
MAX_KEPT_CAPACITIES: Final = 4096


def unrunnable(request: JobRequest, requirements: Requirements | None, pool: HostPool, eligibility: Eligibility,
               hosts: Mapping[str, Host], node_of: Callable[[str], Node | None],
               site: Callable[[], Site]) -> str | None:
    """Why no host of `pool` (the site's known hosts) could run the job, or None when one could."""
    if not pool.ids:
        return None  # a site just set up, its agents not reported yet: nothing to tell from
    mask = eligibility.mask(request, requirements, pool, hosts, node_of, site)
    if mask is not None and not mask.any():
        rejected = eligibility.rejected_for(request, requirements)
        if rejected:  # each "hosts: reasons" as "hosts (reasons)": a reason's own "; " tells them apart no more
            return excerpt(", ".join("{} ({})".format(*kind.split(": ", 1)) for kind in rejected), MAX_WHY_CHARS)
        asked = request.asked_nodes or ()
        return excerpt(f"it asks for the nodes {fold(asked)}, none of which the site knows", MAX_WHY_CHARS)
    missing = [name for name in request.required_nodes if name not in pool.row]
    if missing:
        return excerpt(f"it requires the nodes {fold(missing)}, which the site does not know", MAX_WHY_CHARS)
    lead = "the hosts its requirements let through" if mask is not None else "the site's hosts"
    key = (id(mask), request.memory_mb)  # a mask's id is its own while the eligibility keeps it
    found = eligibility.capacities.get(key)
    if found is None:
        if len(eligibility.capacities) >= MAX_KEPT_CAPACITIES:
            eligibility.capacities.clear()
        found = eligibility.capacities[key] = capacity_of(pool, mask, request.memory_mb)
    most, capacity = found
    if most < request.memory_mb:
        return f"it asks {request.memory_mb:g} MB of memory per host; {lead} have at most {most:g} MB"
    if request.min_processors > capacity:
        return f"it asks {request.min_processors} processors; {lead} have {capacity}"
    return None


def capacity_of(pool: HostPool, rows: Mask | None, memory_mb: float) -> tuple[float, int]:
    """The most memory of a host among `rows` of `pool` (None: every host; inf when the job asks
    none), and the processors of those rows' hosts with `memory_mb` or more."""
    most = math.inf
    if memory_mb > 0:
        most = float((pool.memory if rows is None else pool.memory[rows]).max())
        big = pool.memory >= memory_mb
        rows = big if rows is None else rows & big
    return most, int((pool.size if rows is None else pool.size[rows]).sum())


def screened(prepared: list[Prepared], shared: dict[str, Requirements], refuse: bool, pool: HostPool,
             eligibility: Eligibility, table: HostTable, site: Callable[[], Site]) -> list[str]:
    """A warning for each job of a submission no host of `pool` could run; Invalid for the first
    when the site refuses them (`refuse`). `shared`: the queue's compiled requirements by signature,
    so that the pass finds the masks made here (kept per requirements object); `site`: the CEs by
    cluster, asked for only when a job's requirements are evaluated on the hosts (not when the
    queue already holds their mask)."""
    def node_of(host_id: str) -> Node | None:
        entry = table.get(host_id)
        return None if entry is None else entry.node

    said = []
    for item in prepared:
        requirements = None if item.requirements is None else shared.setdefault(item.signature, item.requirements)
        why = unrunnable(item.request, requirements, pool, eligibility, table.rollup.hosts, node_of, site)
        if why is None:
            continue
        whose = "" if len(prepared) == 1 else f"job {excerpt(item.name)!r}: "
        if refuse:
            raise Invalid(f"{whose}{UNRUNNABLE}: {why}", "Requested node configuration is not available: this site "
                          "refuses jobs no host can run ([scheduler] refuse_unrunnable)")
        said.append(f"{whose}{UNRUNNABLE}: {why}")
    return said
