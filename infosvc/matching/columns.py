"""The fast way of `match` (infosvc.matching.engine): a job whose per-host part is thresholds on free
CPUs and RAM and GPU amounts (or nothing) decided over the site's columns (infosvc.matching.hostcolumns) by array
operations, with the same verdicts, order and counts as the per-host way (docs/matching.md,
"Speed"). The static part and the ranking are the engine's seams, read row-wise."""

from __future__ import annotations

import itertools
import operator
from typing import Any, Callable, Iterator

import numpy as np

from infosvc.matching.hostcolumns import (
    MIXED, NO_NODE, BoolArray, Columns, FloatArray, HostColumns, IndexArray,
)
from infosvc.matching.checks import GpuAsk
from infosvc.matching.hostquestion import Thresholds
from infosvc.matching.ranking import by_score
from infosvc.matching.requirements import Requirements
from infosvc.matching.result import Candidate, MatchResult, Miss
from infosvc.matching.subclusters import StaticVerdicts
from infosvc.matching.view import Site, SiteView, SyncedColumns
from infosvc.model.node import Node

__all__ = ["ColumnFindings", "match_columns"]


class ColumnFindings:
    """What the columnar way found: the fitting rows in order with their scores, and the mask of
    the rows that fit; Candidates and the rejected hosts are made from the snapshot when read."""

    __slots__ = ("requirements", "site", "columns", "order", "scores", "fit")

    def __init__(self, requirements: Requirements, site: Site, columns: Columns, order: Any, scores: Any,
                 fit: Any) -> None:
        self.requirements, self.site, self.columns = requirements, site, columns
        self.order, self.scores, self.fit = order, scores, fit

    def candidates(self) -> list[Candidate]:
        cols, site, req = self.columns, self.site, self.requirements
        hosts, sub_ids = cols.hosts, cols.sub_ids
        found = []
        for row, sub, score in zip(self.order.tolist(), cols.sub_of_row[self.order].tolist(), self.scores.tolist()):
            host = hosts[row]
            found.append(Candidate(host, sub_ids[sub], req.computing_element(site, host.cluster), score))
        return found

    def misses(self) -> Iterator[Miss]:
        cols = self.columns
        hosts, nodes, sub_ids, sub_of_row = cols.hosts, cols.nodes, cols.sub_ids, cols.sub_of_row
        rows = np.flatnonzero(~self.fit & cols.has_node)  # in row order: subcluster by subcluster
        return ((hosts[r], sub_ids[s], nodes[r]) for r, s in zip(rows.tolist(), sub_of_row[rows].tolist()))


def match_columns(requirements: Requirements, rollup: SiteView, node_of: Callable[[str], Node | None], site: Site,
                  keeper: HostColumns | SyncedColumns, limits: Thresholds,
                  gpus: tuple[GpuAsk, ...] = ()) -> MatchResult | None:
    """`match` for a job whose dynamic part is `limits` (HostQuestion.thresholds) and `gpus`
    (HostQuestion.gpus), over the site's
    columns: the static part once per subcluster, as the per-host way, then every host's
    thresholds and state decided by array operations; the fitting rows taken in the CCS order the
    columns keep, then stably by score; soft terms tested on the fitting hosts only. What does not
    fit stays a mask until the answer is rendered. None when the columns cannot decide it exactly:
    `match` then takes the per-host way."""
    cols = keeper.sync(rollup, node_of)
    if cols.big.any():  # a host with amounts float64 would round: the per-host way compares exactly
        return None
    statics = StaticVerdicts(requirements, site)
    if requirements.static:
        static_ok, base = _static_part(cols, statics, requirements)
        considered = static_ok & cols.has_node & cols.ready
    else:
        considered = cols.has_node & cols.ready
        base = np.zeros(len(cols), np.float64)
    dynamic_runs = int(np.count_nonzero(considered))  # the hosts the per-host way asks the question
    fit = _within(considered, cols, limits, gpus)
    order = cols.ccs_order[fit[cols.ccs_order]]
    score = base[order]
    if requirements.soft and len(order):
        _add_soft(score, order, cols, requirements, site)
    order, score = by_score(order, score)
    requirements.evaluations["static"] += statics.runs
    if requirements.dynamic:
        requirements.evaluations["dynamic"] += dynamic_runs
    return MatchResult(requirements, site, ColumnFindings(requirements, site, cols, order, score, fit))


def _static_part(cols: Columns, statics: StaticVerdicts, requirements: Requirements) -> tuple[BoolArray, FloatArray]:
    """Whether each row passes the static part, and its score: one verdict per subcluster (and
    Opsys), as the per-host way decides it (on its first host with a node), spread over its rows."""
    nodes, hosts, starts, of_host = cols.nodes, cols.hosts, cols.starts.tolist(), statics.of_host
    per_subcluster = statics.per_subcluster
    oks: list[bool] = []
    scores: list[float] = []
    mixed: list[int] = []  # subclusters whose nodes differ in Opsys: decided row by row below
    every = 0 if requirements.every_host else 63  # a static part of many terms costs each subcluster
    for i, (sub_id, opsys) in enumerate(zip(cols.sub_ids, cols.sub_opsys)):
        if not i & every:
            requirements.spend()
        if opsys is NO_NODE or (opsys is MIXED and not per_subcluster):
            # No node: the subcluster's hosts are all left out (so are its rows: they have none).
            if opsys is MIXED:
                mixed.append(i)
            oks.append(False)
            scores.append(0.0)
            continue
        row = starts[i]
        if nodes[row] is None:  # rare: its first host has no node
            row = next(r for r in range(row, starts[i + 1]) if nodes[r] is not None)
        node = nodes[row]
        assert node is not None
        static = of_host(sub_id, node, hosts[row])
        oks.append(static.ok)
        scores.append(static.score)
    static_ok = np.array(oks, np.bool_)[cols.sub_of_row]
    base = np.array(scores, np.float64)[cols.sub_of_row]
    for i in mixed:  # rare: a subcluster of several Opsys, one verdict per (subcluster, Opsys)
        sub_id = cols.sub_ids[i]
        for r in range(starts[i], starts[i + 1]):
            node = nodes[r]
            if node is not None:
                static = of_host(sub_id, node, hosts[r])
                static_ok[r], base[r] = static.ok, static.score
    return static_ok, base


def _within(considered: BoolArray, cols: Columns, limits: Thresholds, gpus: tuple[GpuAsk, ...]) -> BoolArray:
    """The considered rows that have the free CPUs and RAM asked, and the GPUs (infosvc.matching.checks'
    GPU check: of the model asked, all of them or those free, which are at most all of them)."""
    min_cpus, min_ram = limits
    fit = considered
    if min_cpus != float("-inf"):
        fit = fit & (cols.cpus >= min_cpus)
    if min_ram is not None:
        fit = fit & (cols.ram >= min_ram)  # NaN (no RAM reported) is never >=
    for ask in gpus:
        total = cols.gpu_total(ask.model)
        have = total if ask.configured else np.minimum(total, cols.gpus_available)
        fit = fit & ask.compare(have, ask.wanted)
    return fit


def _add_soft(score: FloatArray, order: IndexArray, cols: Columns, requirements: Requirements, site: Site) -> None:
    """Each soft term's share added to the scores of the fitting rows (`order`) that it holds for,
    term by term in order, as the per-host way adds them."""
    rows = order.tolist()
    # Tuples of the fitting rows' nodes and hosts (C speed), so that the loop below is nothing
    # but the test's calls.
    pick: Callable[[list[Any]], tuple[Any, ...]] = (
        operator.itemgetter(*rows) if len(rows) > 1 else lambda values: (values[rows[0]],))
    fit_nodes: tuple[Any, ...] = ()
    fit_hosts: tuple[Any, ...] = ()
    if any(check.feature is None for check, _ in requirements.soft):
        fit_nodes, fit_hosts = pick(cols.nodes), pick(cols.hosts)  # the fitting rows all have a node
    for check, share in requirements.soft:
        requirements.spend()
        if check.feature is not None:  # a column of the site's features
            name, negated = check.feature
            held = cols.feature(name)[order]
            if negated:
                held = ~held
        else:
            held = np.array(list(map(check.test, fit_nodes, fit_hosts, itertools.repeat(site, len(rows)))), np.bool_)
        score[held] += share
