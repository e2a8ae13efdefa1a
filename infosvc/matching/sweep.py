"""`match`: one job over a whole site, subcluster by subcluster: the static part once per
subcluster (and node Opsys), the dynamic part per host, the fitting hosts best first; given the
site's columns, a job of thresholds goes to infosvc.matching.columns instead of the loop."""

from __future__ import annotations

from typing import Callable

import infosvc.matching as _package
from infosvc.matching.hostcolumns import HostColumns
from infosvc.matching.columns import _match_columns
from infosvc.matching.expression import CExpr, CLeaf
from infosvc.matching.requirements import Requirements, Verdict, verdict_of
from infosvc.matching.result import MatchResult, _Found, _Miss
from infosvc.matching.view import Site, SiteView, SyncedColumns
from infosvc.model.node import Node

__all__ = ["match"]

#: Fitting hosts grouped by what orders them first: (score, memory size, processor speed).
_Groups = dict[tuple[float, int, int], list[_Found]]


def _limits(dynamic: tuple[CExpr, ...]) -> tuple[float, float | None] | None:
    """The least available CPUs and RAM (MB; None: no Memory asked) a host must have, when the
    dynamic part is nothing but such thresholds (`Check.threshold`); None otherwise."""
    if not dynamic:
        return None  # nothing to decide per host
    cpus = float("-inf")
    ram: float | None = None
    for expr in dynamic:
        if not isinstance(expr, CLeaf) or expr.check.threshold is None:
            return None
        kind, wanted = expr.check.threshold
        if wanted != wanted:
            return None  # NaN: max() would not be the conjunction of the comparisons
        if kind == "cpus":
            cpus = max(cpus, wanted)
        else:
            ram = wanted if ram is None else max(ram, wanted)
    return cpus, ram


def _order(groups: _Groups) -> list[_Found]:
    """The fitting hosts best first: score, then the CCS resource sort (memory size, then processor
    speed), largest first; then the host id. The same order as sorting every host on that whole
    key, cheaper: the groups are few, and the ids (unique) are strings compared by the C sort."""
    ordered: list[_Found] = []
    for key in sorted(groups, reverse=True):  # distinct keys: reversed is descending, exactly
        group = groups[key]
        if len(group) > 1:
            group.sort()  # by id: the ids are unique, so no comparison reaches the Host
        ordered.extend(group)
    return ordered


def match(requirements: Requirements, rollup: SiteView, node_of: Callable[[str], Node | None],
          site: Site | None = None, *, columns: HostColumns | SyncedColumns | None = None) -> MatchResult:
    """Every host of `rollup` matched (its SSS Node from `node_of(host id)`; a host without one is
    left out): the fitting ones best first (score, then memory size, then processor speed), the
    others with their reasons.

    Subcluster by subcluster: the static part is decided once per subcluster (and node Opsys,
    when it reads it) — a subcluster it rules out costs one append per host —, the dynamic part
    per Ready host that the static part lets through. `requirements.evaluations` counts both.
    When the dynamic part is nothing but thresholds on the GLUE Host's available CPUs and RAM (the
    common case, see `_limits`), they are compared inline, without a closure call per host; a
    single soft term is tested without a loop; and the fitting hosts are grouped by (score,
    memory, clock) as they are found, each group then ordered by host id (`_order`): the same
    verdicts, order and counts as the general way.

    With `columns` (a HostColumns kept for this roll-up, see infosvc.matching.hostcolumns: the server keeps
    one), such a job is decided with no per-host loop at all (`_match_columns`), again with the
    same verdicts, order and counts.
    """
    site = site if site is not None else Site.of(rollup)
    # `_limits` as the package has it: tests replace infosvc.matching._limits to send a job of
    # thresholds the closures' way (tests/matching/test_matching.py).
    limits_of = _package._limits
    if columns is not None:
        limits = limits_of(requirements.dynamic) if requirements.dynamic else (float("-inf"), None)
        if limits is not None:
            found = _match_columns(requirements, rollup, node_of, site, columns, limits)
            if found is not None:
                return found
    limits = limits_of(requirements.dynamic)
    min_cpus, min_ram = limits if limits is not None else (0.0, None)
    dynamic = tuple(e.fast() for e in requirements.dynamic)
    only = dynamic[0] if len(dynamic) == 1 else None
    preferred = tuple(e for e in requirements.dynamic if e.has_preferred())
    soft = requirements.soft
    soft_test, soft_share = (soft[0][0].test, soft[0][1]) if len(soft) == 1 else (None, 0.0)
    has_static = bool(requirements.static)
    cache = requirements.static_cache
    groups: _Groups = {}
    missed: list[_Miss] = []
    add_missed = missed.append
    static_runs = dynamic_runs = 0
    uses_opsys = requirements.uses_opsys
    spend = requirements.spend
    visited = 0
    for sub_id, sub in rollup.subclusters.items():
        spend()
        ce = requirements.computing_element(site, sub.cluster)
        members = rollup.hosts_of(sub_id)
        by_opsys: dict[str | None, Verdict] = {}  # this subcluster's part of the static cache
        if has_static and not uses_opsys:
            # One verdict for the whole subcluster: a subcluster it rules out costs no per-host work.
            static = cache.get((sub_id, None))
            if static is None:
                members = list(members)
                sample = next(((h, n) for h in members if (n := node_of(h.unique_id)) is not None), None)
                if sample is None:
                    continue
                static_runs += 1
                static = cache[(sub_id, None)] = verdict_of(requirements.static, sample[1], sample[0], site)
            if not static.ok:
                for host in members:
                    add_missed((host, sub_id, node_of(host.unique_id)))
                continue
            fixed: Verdict | None = static
        else:
            fixed = None
        for host in members:
            visited += 1
            if not visited & 127:
                spend()
            node = node_of(host.unique_id)
            if node is None:
                continue
            score = 0.0
            if has_static:
                static = fixed or by_opsys.get(node.opsys)
                if static is None:
                    key = (sub_id, node.opsys)
                    static = cache.get(key)
                    if static is None:
                        static_runs += 1
                        static = cache[key] = verdict_of(requirements.static, node, host, site)
                    by_opsys[node.opsys] = static
                if not static.ok:
                    add_missed((host, sub_id, node))
                    continue
                score = static.score
            if not host.accepts_jobs:
                add_missed((host, sub_id, node))
                continue
            dynamic_runs += 1
            if limits is not None:
                if not (host.available_cpus >= min_cpus and (min_ram is None or (
                        (have := host.main_memory.ram_available) is not None and have >= min_ram))):
                    add_missed((host, sub_id, node))
                    continue
            elif only is not None:
                if not only(node, host, site):
                    add_missed((host, sub_id, node))
                    continue
            elif dynamic:
                ok = True
                for test in dynamic:
                    if not test(node, host, site):
                        ok = False
                        break
                if not ok:
                    add_missed((host, sub_id, node))
                    continue
            for expr in preferred:
                score += expr.score(node, host, site)
            if soft_test is not None:
                if soft_test(node, host, site):
                    score += soft_share
            else:
                for check, share in soft:
                    if check.test(node, host, site):
                        score += share
            rank = (score, host.main_memory.ram_size or 0, host.processor.clock_speed or 0)
            group = groups.get(rank)
            if group is None:
                groups[rank] = [(host.unique_id, host, sub_id, ce, score)]
            else:
                group.append((host.unique_id, host, sub_id, ce, score))
    requirements.evaluations["static"] += static_runs
    if requirements.dynamic:
        requirements.evaluations["dynamic"] += dynamic_runs
    return MatchResult(requirements, site, _order(groups), missed)


