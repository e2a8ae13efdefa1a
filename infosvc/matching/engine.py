"""`match`: one job over a whole site. One engine, cut along three seams that both of its ways
share: what a host is asked (infosvc.matching.hostquestion), how hosts are grouped for the static
part (infosvc.matching.subclusters) and how the fitting ones are ranked (infosvc.matching.ranking).
Given the site's columns, a job that the columns can decide goes the fast way
(infosvc.matching.columns); any other, or a call without columns, goes host by host (`match_hosts`,
here). Both give the same verdicts, order and counts."""

from __future__ import annotations

from typing import Callable, Iterable

from infosvc.matching.columns import match_columns
from infosvc.matching.hostcolumns import HostColumns
from infosvc.matching.hostquestion import HostQuestion
from infosvc.matching.ranking import Groups, in_order
from infosvc.matching.requirements import Requirements, Verdict
from infosvc.matching.result import HostFindings, MatchResult, Miss
from infosvc.matching.subclusters import NO_STATIC_PART, StaticVerdicts
from infosvc.matching.view import Site, SiteView, SyncedColumns
from infosvc.model.glue import Host
from infosvc.model.node import Node

__all__ = ["match", "match_hosts"]


def match(requirements: Requirements, rollup: SiteView, node_of: Callable[[str], Node | None],
          site: Site | None = None, *, columns: HostColumns | SyncedColumns | None = None,
          question: HostQuestion | None = None) -> MatchResult:
    """Every host of `rollup` matched (its SSS Node from `node_of(host id)`; a host without one is
    left out): the fitting ones best first (score, then memory size, then processor speed, then
    id), the others with their reasons.

    The static part is decided once per subcluster (and node Opsys, when it reads it), the
    dynamic part per Ready host that the static part lets through; `requirements.evaluations`
    counts both. With `columns` (a HostColumns kept for this roll-up, see
    infosvc.matching.hostcolumns: the server keeps one), a job whose dynamic part is thresholds on
    free CPUs and RAM and GPU amounts, or nothing, is decided with no per-host loop at all (`match_columns`).
    `question` is what each host is asked (`HostQuestion.of(requirements)` when not given).
    """
    site = site if site is not None else Site.of(rollup)
    question = question if question is not None else HostQuestion.of(requirements)
    if columns is not None and question.thresholds is not None:
        found = match_columns(requirements, rollup, node_of, site, columns, question.thresholds, question.gpus)
        if found is not None:
            return found
    return match_hosts(requirements, rollup, node_of, site, question)


def match_hosts(requirements: Requirements, rollup: SiteView, node_of: Callable[[str], Node | None],
                site: Site, question: HostQuestion) -> MatchResult:
    """`match` host by host: subcluster by subcluster in the roll-up's order, each one's hosts in
    theirs. A subcluster the static part rules out costs one append per host."""
    sweep = _Sweep(requirements, node_of, site, question)
    subclusters = rollup.subclusters
    # The CE a cluster's fitting hosts are named with, once per cluster: a site may have 10,000
    # singleton subclusters and one cluster.
    ces = {cluster: requirements.computing_element(site, cluster)
           for cluster in {sub.cluster for sub in subclusters.values()}}
    hosts, hosts_of, spend = sweep.hosts, rollup.hosts_of, requirements.spend
    for sub_id, sub in subclusters.items():
        spend()
        hosts(sub_id, ces[sub.cluster], hosts_of(sub_id))
    requirements.evaluations["static"] += sweep.statics.runs
    if requirements.dynamic:
        requirements.evaluations["dynamic"] += sweep.dynamic_runs
    return MatchResult(requirements, site, HostFindings(in_order(sweep.groups), sweep.missed))


def _anything(node: Node, host: Host, site: Site) -> bool:
    return True


class _Sweep:
    """One pass host by host: what it reads, what it found so far, and what it counted."""

    def __init__(self, requirements: Requirements, node_of: Callable[[str], Node | None], site: Site,
                 question: HostQuestion) -> None:
        self.statics = StaticVerdicts(requirements, site)
        self.groups: Groups = {}
        self.missed: list[Miss] = []
        self.dynamic_runs = 0
        self.visited = 0  # hosts, for the budget's check at each (or every 128th: `every`)
        #: the budget is checked at each host whose number ANDed with this is 0: every host for a
        #: job whose hosts cost (many terms, a pattern), every 128th for a cheap one
        self.every = 0 if requirements.every_host else 127
        #: whether the static part is decided once for a whole subcluster; else, its verdict for
        #: every host (no static part) or None (one per node Opsys, found host by host)
        self.whole = bool(requirements.static) and self.statics.per_subcluster
        self.fixed = None if requirements.static else NO_STATIC_PART
        #: what `hosts` reads on every call, in one tuple (one attribute read, not ten: it is called
        #: once per subcluster, and a site may have 10,000 of one host each)
        self.reads = (node_of, site, requirements.spend, self.groups, self.missed.append,
                      question.fits or _anything, question.scorer, self.statics.of_host, self.fixed, self.whole,
                      self.every)

    def whole_subcluster(self, sub_id: str, members: Iterable[Host]) -> tuple[Verdict | None, list[Host]]:
        """One static verdict for the whole subcluster, and its hosts; None when it is decided
        already: no host of it has a node (all are left out), or the verdict rules all out."""
        members = list(members)
        node_of = self.reads[0]
        with_nodes = ((node, host) for host in members if (node := node_of(host.unique_id)) is not None)
        static = self.statics.of_group(sub_id, None, with_nodes)
        if static is not None and not static.ok:
            self.missed.extend((host, sub_id, node_of(host.unique_id)) for host in members)
            return None, members
        return static, members

    def hosts(self, sub_id: str, ce: str | None, members: Iterable[Host]) -> None:
        """Each host of one subcluster asked the question. The hot loop of the per-host way: what it
        reads is in locals."""
        node_of, site, spend, groups, add_missed, fits, scorer, static_of, fixed, whole, every = self.reads
        if whole:
            fixed, members = self.whole_subcluster(sub_id, members)
            if fixed is None:
                return
        by_opsys: dict[str | None, Verdict] = {}  # this subcluster's part of the static cache
        visited, runs = self.visited, 0
        for host in members:
            visited += 1
            if not visited & every:
                spend()
            node = node_of(host.unique_id)
            if node is None:
                continue
            static = fixed or by_opsys.get(node.opsys) or by_opsys.setdefault(
                node.opsys, static_of(sub_id, node, host))
            if not (static.ok and host.accepts_jobs):
                add_missed((host, sub_id, node))
                continue
            runs += 1
            if not fits(node, host, site):
                add_missed((host, sub_id, node))
                continue
            score = static.score if scorer is None else scorer(node, host, site, static.score)
            rank = (score, host.main_memory.ram_size or 0, host.processor.clock_speed or 0)
            group = groups.get(rank)
            if group is None:
                groups[rank] = [(host.unique_id, host, sub_id, ce, score)]
            else:
                group.append((host.unique_id, host, sub_id, ce, score))
        self.visited, self.dynamic_runs = visited, self.dynamic_runs + runs
