"""What a match asks of each host beyond the static part: the dynamic part as one test
(`HostQuestion.fits`), its thresholds when it is no more than thresholds on free CPUs and RAM and
GPU amounts (what the columns decide without a loop), and what a fitting host's score gains (Preferred sets and soft
terms). Both ways of `match` (infosvc.matching.engine, infosvc.matching.columns) read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from infosvc.matching.checks import Check, GpuAsk, Test
from infosvc.matching.expression import CExpr, CLeaf
from infosvc.matching.requirements import Requirements
from infosvc.matching.view import Site
from infosvc.model.glue import Host
from infosvc.model.node import Node

__all__ = ["HostQuestion", "Scorer", "Thresholds", "gpu_asks", "thresholds"]

#: The least available CPUs, and RAM in MB (None: no Memory asked), that a host must have.
Thresholds = tuple[float, float | None]
#: A fitting host's score from its static part's: the Preferred sets' and soft terms' shares added.
Scorer = Callable[[Node, Host, Site, float], float]

#: A job asking nothing per host: any free CPUs and RAM will do (the columns' way takes it too).
NOTHING_ASKED: Thresholds = (float("-inf"), None)


def thresholds(dynamic: tuple[CExpr, ...]) -> Thresholds | None:
    """The least available CPUs and RAM a host must have, when the dynamic part is nothing but such
    thresholds (`Check.threshold`) and GPU amounts (`gpu_asks`: the columns decide those too);
    None otherwise, and for no dynamic part (nothing to decide)."""
    if not dynamic:
        return None
    cpus = float("-inf")
    ram: float | None = None
    for expr in dynamic:
        if isinstance(expr, CLeaf) and expr.check.gpu is not None and expr.check.gpu.wanted == expr.check.gpu.wanted:
            continue  # (not NaN, as below)
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


def gpu_asks(dynamic: tuple[CExpr, ...]) -> tuple[GpuAsk, ...]:
    """The GPU amounts among the dynamic part's terms (all of it when `thresholds` is not None)."""
    return tuple(expr.check.gpu for expr in dynamic if isinstance(expr, CLeaf) and expr.check.gpu is not None)


@dataclass(frozen=True, slots=True)
class HostQuestion:
    """What each Ready host that passes the static part is asked, compiled once per match."""

    #: the dynamic part as one test; None when nothing is asked per host
    fits: Test | None
    #: what a fitting host's score gains; None when nothing adds to it
    scorer: Scorer | None
    #: the dynamic part as thresholds, when it is no more than that (NOTHING_ASKED for no dynamic
    #: part): the columns can decide it; None when it is not, or when built without thresholds
    thresholds: Thresholds | None
    #: with `thresholds`, the GPU amounts the columns decide beside them
    gpus: tuple[GpuAsk, ...] = ()

    @classmethod
    def of(cls, requirements: Requirements, *, use_thresholds: bool = True) -> HostQuestion:
        """The question of `requirements`. With `use_thresholds` False, a job of thresholds is asked
        through its terms' own tests, as any other job is, and never over the columns: the same
        verdicts, order and counts (a seam for the tests that say so)."""
        dynamic = requirements.dynamic
        limits = (thresholds(dynamic) if dynamic else NOTHING_ASKED) if use_thresholds else None
        gpus = gpu_asks(dynamic) if limits is not None else ()
        if limits is not None and dynamic and not gpus:
            fits: Test | None = _within(*limits)
        else:
            fits = _all_of(tuple(e.fast() for e in dynamic))
        preferred = tuple(e for e in dynamic if e.has_preferred())
        return cls(fits, _scorer(preferred, requirements.soft), limits, gpus)


def _within(min_cpus: float, min_ram: float | None) -> Test:
    """Thresholds as one test, compared inline rather than through each term's closure."""
    if min_ram is None:
        return lambda n, h, s: h.available_cpus >= min_cpus

    def within(n: Node, h: Host, s: Site) -> bool:
        have = h.main_memory.ram_available
        return h.available_cpus >= min_cpus and have is not None and have >= min_ram
    return within


def _all_of(tests: tuple[Test, ...]) -> Test | None:
    """The tests as one, stopping at the first that fails; the one test itself when there is one."""
    if len(tests) < 2:
        return tests[0] if tests else None

    def all_of(n: Node, h: Host, s: Site) -> bool:
        for test in tests:
            if not test(n, h, s):
                return False
        return True
    return all_of


def _scorer(preferred: tuple[CExpr, ...], soft: tuple[tuple[Check, float], ...]) -> Scorer | None:
    """The Preferred sets' weights, then each soft term's share, added one by one to the static
    score, in that order: a float sum depends on its order, and the columns add the soft shares
    in the same one."""
    if not preferred and not soft:
        return None
    if not preferred and len(soft) == 1:  # the common case: one soft term, one call
        (check, share), = soft
        if check.feature is not None:  # one feature (or its absence): read inline, not through the test
            name, negated = check.feature
            return lambda n, h, s, score: score + share if (name in n.features) != negated else score
        test = check.test
        return lambda n, h, s, score: score + share if test(n, h, s) else score

    def scored(n: Node, h: Host, s: Site, score: float) -> float:
        for expr in preferred:
            score += expr.score(n, h, s)
        for check, share in soft:
            if check.test(n, h, s):
                score += share
        return score
    return scored
