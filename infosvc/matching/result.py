"""What a match found: the fitting hosts best first (`Candidate`), and the rejected ones, whose
reasons are put in words only when asked for (`MatchResult`); the answer of POST /v1/match,
bounded by `AnswerLimits` whatever the job and the site."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Protocol

from infosvc.errors import excerpt
from infosvc.matching.requirements import Requirements, evaluate
from infosvc.matching.view import Site
from infosvc.model.glue import Host
from infosvc.model.node import Node
from infosvc.model.folding import fold

__all__ = ["Candidate", "MatchResult", "AnswerLimits", "MAX_REASONS", "MAX_REASON_CHARS", "Found", "Miss", "Findings",
           "HostFindings"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A host that fits, with what orders it."""

    host: Host
    subcluster: str | None
    computing_element: str | None
    score: float

    def as_json(self) -> dict[str, Any]:
        h = self.host
        return {"host": h.unique_id, "subcluster": self.subcluster, "computing_element": self.computing_element,
                "cluster": h.cluster, "score": round(self.score, 6), "memory_mb": h.main_memory.ram_size,
                "clock_mhz": h.processor.clock_speed, "free_cpus": h.free_cpus}


#: A fitting host as the per-host way collects it: its id (what orders it within its group, see
#: infosvc.matching.ranking), then the Candidate's fields.
Found = tuple[str, Host, "str | None", "str | None", float]
#: A host that does not fit: what its reasons are worked out from, when they are asked for (its
#: node as it was decided on: the answer may be rendered later, in a thread, while hosts report).
Miss = tuple[Host, "str | None", "Node | None"]


class Findings(Protocol):
    """What a way of matching found, in the form it found it (host by host, or rows of columns):
    made into Candidates and rejected hosts only when the answer reads them."""

    def candidates(self) -> list[Candidate]:
        """The fitting hosts, best first."""
        ...

    def misses(self) -> Iterator[Miss]:
        """The hosts that do not fit, in the order they were visited, with their nodes."""
        ...


class HostFindings:
    """What the per-host way found: the fitting hosts in order, and the others as visited."""

    __slots__ = ("found", "missed")

    def __init__(self, found: list[Found], missed: list[Miss]) -> None:
        self.found = found
        self.missed = missed

    def candidates(self) -> list[Candidate]:
        return [Candidate(f[1], f[2], f[3], f[4]) for f in self.found]

    def misses(self) -> Iterator[Miss]:
        return iter(self.missed)


class MatchResult:
    """What `match` found. The reasons of the rejected hosts are put in words when first asked for
    (`rejected`, `as_json`): deciding is cheap, explaining is not."""

    def __init__(self, requirements: Requirements, site: Site, findings: Findings) -> None:
        self.requirements = requirements
        self.notes = requirements.notes
        self._site = site
        self._findings = findings
        self._matches: list[Candidate] | None = None
        self._rejected: list[tuple[str, tuple[str, ...]]] | None = None

    def misses(self) -> Iterator[Miss]:
        """The hosts that do not fit, in the order the match visited them, each with its subcluster
        and the node it was decided on (None for a host without one: it has no reasons)."""
        return self._findings.misses()

    @property
    def matches(self) -> list[Candidate]:
        if self._matches is None:
            self._matches = self._findings.candidates()
        return self._matches

    def _reasons(self, host: Host, subcluster: str | None, node: Node) -> tuple[str, ...]:
        """Why a host the match rejected does not fit, from the node it was decided on."""
        return evaluate(self.requirements, node, host, subcluster=subcluster, site=self._site, count=False).reasons

    @property
    def rejected(self) -> list[tuple[str, tuple[str, ...]]]:
        if self._rejected is None:
            self._rejected = [(host.unique_id, self._reasons(host, sub, node))
                              for host, sub, node in self.misses() if node is not None]
        return self._rejected

    def rejected_groups(self) -> list[tuple[tuple[str, ...], list[str]]]:
        """The rejected hosts grouped by their reasons, (reasons, host ids), in the order first met:
        the hosts of one subcluster in one state commonly share theirs."""
        req = self.requirements
        every = 0 if req.every_host else 63  # a host's reasons cost its terms: see Requirements.every_host
        groups: dict[tuple[str, ...], list[str]] = {}
        for index, (host, sub, node) in enumerate(self.misses()):
            if not index & every:
                req.spend()
            if node is not None:
                groups.setdefault(self._reasons(host, sub, node), []).append(host.unique_id)
        return list(groups.items())

    def as_json(self, limits: AnswerLimits | None = None) -> dict[str, Any]:
        """The answer, bounded whatever the job and the site (docs/matching.md): at most
        `limits.matches` matches, and one page of `limits.rejected` groups of rejected hosts, each
        a NodeSet with at most MAX_REASONS reasons, each reason quoting a bounded excerpt of the job."""
        limits = limits or AnswerLimits()
        matches = self.matches
        groups = self.rejected_groups()
        page = groups[limits.rejected_offset:limits.rejected_offset + limits.rejected]
        return {"matches": [c.as_json() for c in matches[:limits.matches]],
                "matches_total": len(matches),
                "rejected": [{"hosts": fold(ids), "count": len(ids), "reasons": _listed(reasons)}
                             for reasons, ids in page],
                "rejected_hosts": sum(len(ids) for _, ids in groups),
                "rejected_groups": len(groups),
                "rejected_offset": limits.rejected_offset}


#: The most reasons listed for one group of rejected hosts; the rest are counted.
MAX_REASONS = 10
#: The longest reason, in characters (each quotes at most an excerpt of the job: a backstop).
MAX_REASON_CHARS = 300


def _listed(reasons: tuple[str, ...]) -> list[str]:
    listed = [excerpt(reason, MAX_REASON_CHARS) for reason in reasons[:MAX_REASONS]]
    if len(reasons) > MAX_REASONS:
        listed.append(f"and {len(reasons) - MAX_REASONS} more reasons")
    return listed


@dataclass(frozen=True, slots=True)
class AnswerLimits:
    """How much of a match the answer lists (POST /v1/match's `limit`, `rejected_limit` and
    `rejected_offset`)."""

    matches: int = 1000
    rejected: int = 100
    rejected_offset: int = 0
