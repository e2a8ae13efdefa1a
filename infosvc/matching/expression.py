"""The compiled expression: a job's Requested expression with each leaf a Check, and what is
asked of it for a host: whether it holds, its score (the Preferred sets' weights), the reasons it
does not hold, whether it is static, and `_fast`: the whole as one closure, which `match` calls
per host."""

from __future__ import annotations

from dataclasses import dataclass

from infosvc.matching.checks import Check, Test
from infosvc.matching.view import Site
from infosvc.model.glue import Host
from infosvc.model.node import Node

__all__ = ["CLeaf", "CNot", "CAnd", "COr", "CPreferred", "CExpr"]


@dataclass(frozen=True, slots=True)
class CLeaf:
    check: Check


@dataclass(frozen=True, slots=True)
class CNot:
    operand: CExpr


@dataclass(frozen=True, slots=True)
class CAnd:
    operands: tuple[CExpr, ...]


@dataclass(frozen=True, slots=True)
class COr:
    operands: tuple[CExpr, ...]


@dataclass(frozen=True, slots=True)
class CPreferred:
    alternatives: tuple[Check, ...]
    weights: tuple[float, ...]


CExpr = CLeaf | CNot | CAnd | COr | CPreferred


def _is_static(expr: CExpr) -> bool:
    if isinstance(expr, CLeaf):
        return expr.check.static
    if isinstance(expr, CNot):
        return _is_static(expr.operand)
    if isinstance(expr, CPreferred):
        return all(c.static for c in expr.alternatives)
    return all(_is_static(e) for e in expr.operands)


def _holds(expr: CExpr, node: Node, host: Host, site: Site) -> bool:
    if isinstance(expr, CLeaf):
        return expr.check.test(node, host, site)
    if isinstance(expr, CAnd):
        return all(_holds(e, node, host, site) for e in expr.operands)
    if isinstance(expr, COr):
        return any(_holds(e, node, host, site) for e in expr.operands)
    if isinstance(expr, CNot):
        return not _holds(expr.operand, node, host, site)
    return any(c.test(node, host, site) for c in expr.alternatives)


def _score(expr: CExpr, node: Node, host: Host, site: Site) -> float:
    """The weight of the best alternative that holds, summed over the Preferred sets."""
    if isinstance(expr, CPreferred):
        return max((w for c, w in zip(expr.alternatives, expr.weights) if c.test(node, host, site)), default=0.0)
    if isinstance(expr, CLeaf):
        return 0.0
    if isinstance(expr, CNot):
        return _score(expr.operand, node, host, site)
    return sum(_score(e, node, host, site) for e in expr.operands)


def _has_preferred(expr: CExpr) -> bool:
    if isinstance(expr, CPreferred):
        return True
    if isinstance(expr, CLeaf):
        return False
    if isinstance(expr, CNot):
        return _has_preferred(expr.operand)
    return any(_has_preferred(e) for e in expr.operands)


def _reasons(expr: CExpr, node: Node, host: Host, site: Site, negated: bool = False) -> list[str]:
    """Why `expr` does not hold (or, negated, why it holds), in words."""
    if isinstance(expr, CLeaf):
        text = expr.check.explain(node, host, site)
        return [f"must not hold: {text}" if negated else text]
    if isinstance(expr, CNot):
        return _reasons(expr.operand, node, host, site, not negated)
    if isinstance(expr, CPreferred):
        if negated:
            return ["must not hold: " + " or ".join(c.explain(node, host, site) for c in expr.alternatives
                                                     if c.test(node, host, site))]
        return ["none of the preferred alternatives holds: "
                + "; ".join(c.explain(node, host, site) for c in expr.alternatives)]
    conjunctive = isinstance(expr, CAnd) != negated  # not (a or b) fails like (not a) and (not b)
    if conjunctive:
        found: list[str] = []
        for e in expr.operands:
            if _holds(e, node, host, site) == negated:
                found.extend(_reasons(e, node, host, site, negated))
        return found
    parts = ["; ".join(_reasons(e, node, host, site, negated)) for e in expr.operands]
    return ["none of: " + " | ".join(f"({p})" for p in parts)]


def _reads_opsys(expr: CExpr) -> bool:
    if isinstance(expr, CLeaf):
        return expr.check.term.name == "OperatingSystem"
    if isinstance(expr, CNot):
        return _reads_opsys(expr.operand)
    if isinstance(expr, CPreferred):
        return any(c.term.name == "OperatingSystem" for c in expr.alternatives)
    return any(_reads_opsys(e) for e in expr.operands)


def _fast(expr: CExpr) -> Test:
    """`expr` as one closure: what `_holds` decides, without its type tests on every call."""
    if isinstance(expr, CLeaf):
        return expr.check.test
    if isinstance(expr, CNot):
        inner = _fast(expr.operand)
        return lambda n, h, s: not inner(n, h, s)
    if isinstance(expr, CPreferred):
        tests = tuple(c.test for c in expr.alternatives)
        want = False
    else:
        tests = tuple(_fast(e) for e in expr.operands)
        want = isinstance(expr, COr)  # And: stop at the first False; Or: at the first True

    def combined(n: Node, h: Host, s: Site) -> bool:
        for test in tests:
            if test(n, h, s) is want:
                return want
        return not want
    return combined
