"""`match` without a loop over the hosts: a job whose per-host part is thresholds on free CPUs and
RAM (or nothing) decided over the site's columns (infosvc.matching.hostcolumns) by array operations, with
the same verdicts, order and counts as the per-host way (docs/matching.md, "Speed")."""

from __future__ import annotations

import itertools
import operator
from typing import Any, Callable, Iterator, cast

import numpy as np

from infosvc.matching.hostcolumns import MIXED, NO_NODE, Columns, HostColumns
from infosvc.matching.requirements import Requirements, verdict_of
from infosvc.matching.result import Candidate, MatchResult
from infosvc.matching.view import Site, SiteView, SyncedColumns
from infosvc.model.glue import Host
from infosvc.model.node import Node

__all__: list[str] = []


class _ColumnsResult(MatchResult):
    """What the columnar way found: the fitting rows in order with their scores, and the mask of
    the rows that fit; Candidates and the rejected hosts are made from the snapshot when read."""

    def __init__(self, requirements: Requirements, site: Site, columns: Columns, order: Any, scores: Any,
                 fit: Any) -> None:
        super().__init__(requirements, site, [], [])
        self._columns = columns
        self._order = order
        self._scores = scores
        self._fit = fit

    def _candidates(self) -> list[Candidate]:
        cols, site, req = self._columns, self._site, self.requirements
        hosts, sub_ids = cols.hosts, cols.sub_ids
        found = []
        for row, sub, score in zip(self._order.tolist(), cols.sub_of_row[self._order].tolist(), self._scores.tolist()):
            host = hosts[row]
            found.append(Candidate(host, sub_ids[sub], req.computing_element(site, host.cluster), score))
        return found

    def _misses(self) -> Iterator[tuple[Host, str | None, Node | None]]:
        cols = self._columns
        hosts, nodes, sub_ids, sub_of_row = cols.hosts, cols.nodes, cols.sub_ids, cols.sub_of_row
        rows = np.flatnonzero(~self._fit & cols.has_node)  # in row order: subcluster by subcluster
        return ((hosts[r], sub_ids[s], nodes[r]) for r, s in zip(rows.tolist(), sub_of_row[rows].tolist()))


def _match_columns(requirements: Requirements, rollup: SiteView, node_of: Callable[[str], Node | None], site: Site,
                   keeper: HostColumns | SyncedColumns, limits: tuple[float, float | None]) -> MatchResult | None:
    """`match` for a job whose dynamic part is thresholds on free CPUs and RAM (or nothing), over
    the site's columns: the static part once per subcluster, as the general way, then every host's
    threshold and state decided by array operations; the fitting rows taken in the CCS order the
    columns keep, then stably by score; soft terms tested on the fitting hosts only. What does not
    fit stays a mask until the answer is rendered. None when the columns cannot decide it exactly:
    `match` then takes the per-host way."""
    cols = keeper.sync(rollup, node_of)
    if cols.big.any():  # a host with amounts float64 would round: the general path compares exactly
        return None
    static_runs = 0
    if requirements.static:
        cache, nodes, hosts, starts = requirements.static_cache, cols.nodes, cols.hosts, cols.starts.tolist()
        uses_opsys = requirements.uses_opsys
        oks: list[bool] = []
        scores: list[float] = []
        mixed: list[int] = []  # subclusters whose nodes differ in Opsys: decided row by row below
        for i, sub_id in enumerate(cols.sub_ids):
            if not i & 63:
                requirements.spend()
            opsys = cols.sub_opsys[i]
            if opsys is NO_NODE or (opsys is MIXED and uses_opsys):
                # No node: the subcluster's hosts are all left out (so are its rows: they have none).
                oks.append(False)
                scores.append(0.0)
                if opsys is MIXED:
                    mixed.append(i)
                continue
            key = (sub_id, cast("str | None", opsys) if uses_opsys else None)
            static = cache.get(key)
            if static is None:
                # As the general way: the verdict of the first member with a node (of that Opsys).
                sample = next((r for r in range(starts[i], starts[i + 1]) if nodes[r] is not None))
                node = nodes[sample]
                assert node is not None
                static_runs += 1
                static = cache[key] = verdict_of(requirements.static, node, hosts[sample], site)
            oks.append(static.ok)
            scores.append(static.score)
        sub_of_row = cols.sub_of_row
        static_ok = np.array(oks, np.bool_)[sub_of_row]
        base = np.array(scores, np.float64)[sub_of_row]
        for i in mixed:  # rare: a subcluster of several Opsys, one verdict per (subcluster, Opsys)
            sub_id = cols.sub_ids[i]
            for r in range(starts[i], starts[i + 1]):
                node = nodes[r]
                if node is None:
                    continue
                static = cache.get((sub_id, node.opsys))
                if static is None:
                    static_runs += 1
                    static = cache[(sub_id, node.opsys)] = verdict_of(requirements.static, node, hosts[r], site)
                static_ok[r], base[r] = static.ok, static.score
        considered = static_ok & cols.has_node & cols.ready
    else:
        considered = cols.has_node & cols.ready
        base = np.zeros(len(cols), np.float64)
    dynamic_runs = int(np.count_nonzero(considered))  # the hosts the general way evaluates per host
    min_cpus, min_ram = limits
    fit = considered
    if min_cpus != float("-inf"):
        fit = fit & (cols.cpus >= min_cpus)
    if min_ram is not None:
        fit = fit & (cols.ram >= min_ram)  # NaN (no RAM reported) is never >=
    order = cols.ccs_order[fit[cols.ccs_order]]
    score = base[order]
    if requirements.soft and len(order):
        rows = order.tolist()
        # Tuples of the fitting rows' nodes and hosts (C speed), so that the loop below is nothing
        # but the test's calls.
        pick: Callable[[list[Any]], tuple[Any, ...]] = (
            operator.itemgetter(*rows) if len(rows) > 1 else lambda values: (values[rows[0]],))
        fit_nodes: tuple[Any, ...] = ()
        fit_hosts: tuple[Any, ...] = ()
        if any(check.feature is None for check, _ in requirements.soft):
            fit_nodes, fit_hosts = pick(cols.nodes), pick(cols.hosts)  # the fitting rows all have a node
        for check, share in requirements.soft:  # in order, as the general way adds them
            requirements.spend()
            if check.feature is not None:  # a column of the site's features
                name, negated = check.feature
                held = cols.feature(name)[order]
                if negated:
                    held = ~held
            else:
                held = np.array(list(map(check.test, fit_nodes, fit_hosts, itertools.repeat(site, len(rows)))),
                                np.bool_)
            score[held] += share
    if len(order) > 1 and not (score == score[0]).all():
        by_score = np.argsort(-score, kind="stable")  # stable: equal scores keep the CCS order
        order, score = order[by_score], score[by_score]
    requirements.evaluations["static"] += static_runs
    if requirements.dynamic:
        requirements.evaluations["dynamic"] += dynamic_runs
    return _ColumnsResult(requirements, site, cols, order, score, fit)
