"""How a match groups hosts: the static part of a job is decided once per subcluster (and node
Opsys, when it reads it), on the first host of the group that has a node, and that verdict is every
host's of the group (`StaticVerdicts`); both ways of `match` read it, and count what it evaluates."""

from __future__ import annotations

from typing import Iterator

from infosvc.matching.requirements import Requirements, Verdict, verdict_of
from infosvc.matching.view import Site
from infosvc.model.glue import Host
from infosvc.model.node import Node

__all__ = ["StaticVerdicts", "NO_STATIC_PART"]

#: The verdict of a job without a static part: every host passes it, with nothing to its score.
NO_STATIC_PART = Verdict(True, (), 0.0)


class StaticVerdicts:
    """The static part's verdicts for one match, kept in `requirements.static_cache` (so that a
    later match of the same requirements reuses them); `runs` counts those evaluated here.

    Called once per subcluster (or host) of sites of 10,000 singleton subclusters: each call
    evaluates what it must inline rather than through a further call."""

    __slots__ = ("runs", "_static", "_site", "_cache", "_by_opsys")

    def __init__(self, requirements: Requirements, site: Site) -> None:
        self.runs = 0
        self._static = requirements.static
        self._site = site
        self._cache = requirements.static_cache
        self._by_opsys = requirements.uses_opsys

    @property
    def per_subcluster(self) -> bool:
        """Whether one verdict holds for a whole subcluster (the static part does not read the
        node's Opsys, which the subcluster key lacks)."""
        return not self._by_opsys

    def of_group(self, sub_id: str, opsys: str | None, members: Iterator[tuple[Node, Host]]) -> Verdict | None:
        """The verdict of the hosts of `sub_id` (whose nodes have `opsys`, when the static part
        reads it): cached, or decided on the first of `members` (hosts with their nodes, read no
        further than that); None when none is left to decide it on."""
        key = (sub_id, opsys if self._by_opsys else None)
        found = self._cache.get(key)
        if found is None:
            sample = next(members, None)
            if sample is None:
                return None
            self.runs += 1
            found = self._cache[key] = verdict_of(self._static, sample[0], sample[1], self._site)
        return found

    def of_host(self, sub_id: str, node: Node, host: Host) -> Verdict:
        """The verdict of one host of `sub_id`: its group's, decided on it if none is yet."""
        key = (sub_id, node.opsys if self._by_opsys else None)
        found = self._cache.get(key)
        if found is None:
            self.runs += 1
            found = self._cache[key] = verdict_of(self._static, node, host, self._site)
        return found
