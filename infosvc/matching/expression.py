"""The compiled expression: a job's Requested expression with each leaf a Check. Each node
answers for itself whether it holds for a host, its score (the Preferred sets' weights), the
reasons it does not hold, whether it is static, and `fast()`: itself as one closure, which
`match` calls per host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from infosvc.matching.checks import Check, Test
from infosvc.matching.view import Site
from infosvc.model.glue import Host
from infosvc.model.node import Node

__all__ = ["CLeaf", "CNot", "CAnd", "COr", "CPreferred", "CExpr", "all_failing"]


@dataclass(frozen=True, slots=True)
class CLeaf:
    check: Check

    def is_static(self) -> bool:
        return self.check.static

    def reads_opsys(self) -> bool:
        return self.check.term.name == "OperatingSystem"

    def has_preferred(self) -> bool:
        return False

    def holds(self, node: Node, host: Host, site: Site) -> bool:
        return self.check.test(node, host, site)

    def score(self, node: Node, host: Host, site: Site) -> float:
        return 0.0

    def reasons(self, node: Node, host: Host, site: Site, negated: bool = False) -> list[str]:
        """Why this does not hold (or, negated, why it holds), in words."""
        text = self.check.explain(node, host, site)
        return [f"must not hold: {text}" if negated else text]

    def fast(self) -> Test:
        """This as one closure: what `holds` decides, without walking the expression on every call."""
        return self.check.test


@dataclass(frozen=True, slots=True)
class CNot:
    operand: CExpr

    def is_static(self) -> bool:
        return self.operand.is_static()

    def reads_opsys(self) -> bool:
        return self.operand.reads_opsys()

    def has_preferred(self) -> bool:
        return self.operand.has_preferred()

    def holds(self, node: Node, host: Host, site: Site) -> bool:
        return not self.operand.holds(node, host, site)

    def score(self, node: Node, host: Host, site: Site) -> float:
        return self.operand.score(node, host, site)

    def reasons(self, node: Node, host: Host, site: Site, negated: bool = False) -> list[str]:
        return self.operand.reasons(node, host, site, not negated)

    def fast(self) -> Test:
        inner = self.operand.fast()
        return lambda n, h, s: not inner(n, h, s)


@dataclass(frozen=True, slots=True)
class _Junction:
    """What And and Or share: their operands, and all that does not depend on which they are."""

    operands: tuple[CExpr, ...]
    #: And: True; Or: False
    conjunction: ClassVar[bool]

    def is_static(self) -> bool:
        return all(e.is_static() for e in self.operands)

    def reads_opsys(self) -> bool:
        return any(e.reads_opsys() for e in self.operands)

    def has_preferred(self) -> bool:
        return any(e.has_preferred() for e in self.operands)

    def score(self, node: Node, host: Host, site: Site) -> float:
        """The weight of the best alternative that holds, summed over the Preferred sets."""
        return sum(e.score(node, host, site) for e in self.operands)

    def reasons(self, node: Node, host: Host, site: Site, negated: bool = False) -> list[str]:
        if self.conjunction == negated:
            return _none_of(self.alternatives(node, host, site, negated))
        # not (a or b) fails like (not a) and (not b)
        return all_failing([e for e in self.operands if e.holds(node, host, site) == negated], node, host, site,
                           negated)

    def alternatives(self, node: Node, host: Host, site: Site, negated: bool) -> list[list[str]]:
        """Why each operand fails, for a junction that fails when every operand does (an Or, or a
        negated And)."""
        return [e.reasons(node, host, site, negated) for e in self.operands]

    def fast(self) -> Test:
        return _first(tuple(e.fast() for e in self.operands), not self.conjunction)


@dataclass(frozen=True, slots=True)
class CAnd(_Junction):
    conjunction: ClassVar[bool] = True

    def holds(self, node: Node, host: Host, site: Site) -> bool:
        return all(e.holds(node, host, site) for e in self.operands)


@dataclass(frozen=True, slots=True)
class COr(_Junction):
    conjunction: ClassVar[bool] = False

    def holds(self, node: Node, host: Host, site: Site) -> bool:
        return any(e.holds(node, host, site) for e in self.operands)


@dataclass(frozen=True, slots=True)
class CPreferred:
    alternatives: tuple[Check, ...]
    weights: tuple[float, ...]

    def is_static(self) -> bool:
        return all(c.static for c in self.alternatives)

    def reads_opsys(self) -> bool:
        return any(c.term.name == "OperatingSystem" for c in self.alternatives)

    def has_preferred(self) -> bool:
        return True

    def holds(self, node: Node, host: Host, site: Site) -> bool:
        return any(c.test(node, host, site) for c in self.alternatives)

    def score(self, node: Node, host: Host, site: Site) -> float:
        return max((w for c, w in zip(self.alternatives, self.weights) if c.test(node, host, site)), default=0.0)

    def reasons(self, node: Node, host: Host, site: Site, negated: bool = False) -> list[str]:
        if negated:
            return ["must not hold: " + " or ".join(c.explain(node, host, site) for c in self.alternatives
                                                     if c.test(node, host, site))]
        return ["none of the preferred alternatives holds: "
                + "; ".join(c.explain(node, host, site) for c in self.alternatives)]

    def fast(self) -> Test:
        # One alternative holding is enough (an Or), as holds() says.
        return _first(tuple(c.test for c in self.alternatives), True)


CExpr = CLeaf | CNot | CAnd | COr | CPreferred


def all_failing(failing: list[CExpr], node: Node, host: Host, site: Site, negated: bool = False) -> list[str]:
    """Why the conjuncts `failing` (each of which fails) fail, each clause said once: a clause two
    of them share (the job's and its task's Feature) and an alternative's clause that one says
    already. An alternative that fails on what is said alone holds once that is mended, and so
    does its any-of: such an any-of adds nothing and is left out."""
    found: list[str] = []
    pending: list[list[list[str]]] = []
    for e in failing:
        if isinstance(e, _Junction) and e.conjunction == negated:
            pending.append(e.alternatives(node, host, site, negated))
        else:
            found.extend(e.reasons(node, host, site, negated))
    found = list(dict.fromkeys(found))
    said = set(found)
    for alternatives in pending:
        left = [[reason for reason in alternative if reason not in said] for alternative in alternatives]
        if all(left):
            found.extend(_none_of(left))
    return found


def _none_of(alternatives: list[list[str]]) -> list[str]:
    """Failing alternatives in words, each once: alternatives that fail alike (the same clause in
    two requirement sets) would otherwise say it again and again."""
    parts = list(dict.fromkeys("; ".join(reasons) for reasons in alternatives))
    if len(parts) == 1:
        return [parts[0]]
    return ["none of: " + " | ".join(f"({p})" for p in parts)]


def _first(tests: tuple[Test, ...], want: bool) -> Test:
    """The tests as one closure that stops at the first giving `want` and gives it; else `not want`
    (want False: And; True: Or)."""

    def combined(n: Node, h: Host, s: Site) -> bool:
        for test in tests:
            if test(n, h, s) is want:
                return want
        return not want
    return combined
