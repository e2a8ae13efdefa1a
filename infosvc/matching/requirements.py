"""A job's requirements compiled (`compile_requirements`): its Requested expressions, its task
groups' and their tasks', split into the static part (decided once per subcluster) and the dynamic
part (per host), with the soft terms and the work budget of one request; and one host's `Verdict`
(`evaluate`). A job carries at most MAX_TERMS terms, counted before any is compiled."""

from __future__ import annotations

from dataclasses import dataclass, field

from infosvc.matching.ce import CE_TERMS, ce_check, ce_together
from infosvc.matching.checks import Check, consumable_check, feature_check, is_feature_pattern, node_check, simple_check
from infosvc.matching.errors import MatchError
from infosvc.matching.expression import CAnd, CExpr, CLeaf, CNot, COr, CPreferred, all_failing
from infosvc.matching.view import Site
from infosvc.matching.work import MatchTooCostly, WorkBudget
from infosvc.model.glue import Host
from infosvc.model.job import (
    And, Consumable, Expr, Feature, Job, Leaf, Not, Or, Simple, Task, TaskGroup, Term, requirement,
)
from infosvc.model.node import Node

__all__ = ["CHEAP_TERMS", "MAX_TERMS", "MatchTooCostly", "Verdict", "Requirements", "compile_requirements", "evaluate",
           "verdict_of"]

#: The most Requested terms one job may carry, its own, its task groups' and their tasks' together:
#: each is tested on every host (a Feature pattern once per feature of it, one RE2 call each), and
#: 4,000 patterns (243 KB) cost 6.9 s against 128 hosts. A CCS or grid job's task carries 2 to 4.
MAX_TERMS = 512
#: A job of at most this many terms, none a Feature pattern, costs a microsecond or two a host: its
#: budget is checked every 128 hosts (every 64 explained); any other's at every host.
CHEAP_TERMS = 8


_EMPTY_SITE = Site()


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    reasons: tuple[str, ...]
    score: float


@dataclass(slots=True)
class Requirements:
    """A job's requirements, compiled: the conjuncts split into static and dynamic, the soft terms.

    `static_cache` holds the static part's verdict per (subcluster id, node Opsys); `evaluations`
    counts how often each part was evaluated (tests and benchmarks read it).
    """

    static: tuple[CExpr, ...]
    dynamic: tuple[CExpr, ...]
    soft: tuple[tuple[Check, float], ...] = ()
    notes: tuple[str, ...] = ()
    static_cache: dict[tuple[str, str | None], Verdict] = field(default_factory=dict)
    evaluations: dict[str, int] = field(default_factory=lambda: {"static": 0, "dynamic": 0})
    #: whether the static part reads the node's Opsys (then the cache is keyed by it too)
    uses_opsys: bool = False
    _ce_site: Site | None = None  # the site `_ce_of` holds the CEs of
    _ce_of: dict[str, str | None] = field(default_factory=dict)
    #: the seconds `match` and the reasons of its result may take (see spend()): its checks hold it
    work: WorkBudget = field(default_factory=WorkBudget)
    #: the Requested terms compiled, and how many of them are Feature patterns (what a host costs)
    terms: int = 0
    patterns: int = 0

    def __post_init__(self) -> None:
        self.uses_opsys = any(e.reads_opsys() for e in self.static)

    def start_budget(self, seconds: float) -> None:
        """Bound the work `match` (and explaining its result) may do for these requirements from now:
        past `seconds`, they raise MatchTooCostly. One request's work is bounded this way, whatever
        its site and its terms multiply to."""
        self.work.start(seconds)

    @property
    def budget_seconds(self) -> float | None:
        """The seconds of the budget started (None: no bound)."""
        return self.work.seconds

    def spend(self) -> None:
        """MatchTooCostly when the budget is spent (a check, made at every host, or every few hosts
        for a cheap job: `every_host`)."""
        self.work.spend()

    @property
    def every_host(self) -> bool:
        """Whether a host costs enough that the budget is checked at each (see CHEAP_TERMS)."""
        return self.terms > CHEAP_TERMS or self.patterns > 0

    def host_steps(self, features: int) -> int:
        """About how many steps deciding one host takes, on hosts of at most `features` features:
        one, and one per term, and a Feature pattern one per feature (an RE2 call each)."""
        return 1 + self.terms + self.patterns * features

    def static_key(self, subcluster: str, node: Node) -> tuple[str, str | None]:
        return (subcluster, node.opsys if self.uses_opsys else None)

    def computing_element(self, site: Site, cluster: str) -> str | None:
        """The CE a fitting host of `cluster` is named with: the first (in configuration order)
        that gives what the job asks of one CE (`ce_together`), else the first."""
        if self._ce_site is not site:
            self._ce_site, self._ce_of = site, {}
        if cluster in self._ce_of:
            return self._ce_of[cluster]
        ces = site.ces.get(cluster)
        test = next((e.check.ce_test for e in self.static if isinstance(e, CLeaf) and e.check.ce_test is not None),
                    None)
        found = next((ce.id for ce in ces if test is None or test(ce)), ces[0].id) if ces else None
        self._ce_of[cluster] = found
        return found


# --- compiling ----------------------------------------------------------------------------------

def _compile_leaf(term: Term, notes: list[str], work: WorkBudget) -> Check:
    item = term.item
    if isinstance(item, Consumable):
        return consumable_check(term, item)
    if isinstance(item, Simple):
        if item.name in CE_TERMS:
            return ce_check(term, item)
        return simple_check(term, item, notes)
    if isinstance(item, Feature):
        return feature_check(term, item, work)
    return node_check(term, item)


def _compile(expr: Expr, notes: list[str], work: WorkBudget) -> CExpr:
    if isinstance(expr, Leaf):
        return CLeaf(_compile_leaf(expr.term, notes, work))
    if isinstance(expr, Not):
        return CNot(_compile(expr.operand, notes, work))
    if isinstance(expr, And):
        operands = ce_together([_compile(e, notes, work) for e in expr.operands])
        return CAnd(tuple(operands)) if len(operands) != 1 else operands[0]
    if isinstance(expr, Or):
        return COr(tuple(_compile(e, notes, work) for e in expr.operands))
    return CPreferred(tuple(_compile_leaf(leaf.term, notes, work) for leaf in expr.alternatives), expr.weights)


def _conjuncts(expr: CExpr | None) -> list[CExpr]:
    if expr is None:
        return []
    return list(expr.operands) if isinstance(expr, CAnd) else [expr]


def compile_requirements(target: Job | TaskGroup | Task) -> Requirements:
    """The requirements of a resolved Job (see model.job.resolve), or of one task group or task.

    What is evaluated is the Requested lists alone (as infosvc.codec.submission maps the other formats):
    the target's own, and below it its task groups' and their tasks': a host fits when it meets
    the job's own and those of at least one task group (and of that group, at least one task), so
    that one child's requirements are simply required with the parent's.
    Raises MatchError for what cannot be evaluated (a refused pattern, an op that does not apply),
    and for more than MAX_TERMS terms in all, counted before any is compiled.
    """
    terms = [term for level in _levels(target) for term in level.properties.requested]
    if len(terms) > MAX_TERMS:
        raise MatchError(f"the job has {len(terms)} Requested terms (its own, its task groups' and their "
                         f"tasks' together); at most {MAX_TERMS} are matched: ask for several features with "
                         "one Feature List or Pattern, or for hosts by a Node Range")
    notes: list[str] = []
    work = WorkBudget()
    conjuncts, soft = _level(target, notes, work)
    static = tuple(e for e in conjuncts if e.is_static())
    dynamic = tuple(e for e in conjuncts if not e.is_static())
    total = sum(w for _, w in soft)
    shares = tuple((c, w / total) for c, w in soft) if total else ()
    return Requirements(static, dynamic, shares, tuple(dict.fromkeys(notes)), work=work, terms=len(terms),
                        patterns=sum(map(is_feature_pattern, terms)))


def _children(target: Job | TaskGroup | Task) -> list[Job | TaskGroup | Task]:
    """The levels below `target` that its requirements read: a job's task groups, a group's tasks."""
    if isinstance(target, Job):
        return list(target.task_groups)
    if isinstance(target, TaskGroup):
        return list(target.tasks)
    return []


def _levels(target: Job | TaskGroup | Task) -> list[Job | TaskGroup | Task]:
    """`target` and every level below it (what `_level` compiles)."""
    found = [target]
    for child in _children(target):
        found.extend(_levels(child))
    return found


def _level(target: Job | TaskGroup | Task, notes: list[str],
           work: WorkBudget) -> tuple[list[CExpr], list[tuple[Check, float]]]:
    conjuncts, soft = _requested(target.properties.requested, notes, work)
    below = [_level(child, notes, work) for child in _children(target)]
    below = [b for b in below if b[0] or b[1]]
    if len(below) == 1:
        conjuncts.extend(below[0][0])
    elif below:
        alternatives = [c for c, _ in below]
        if all(alternatives):
            conjuncts.append(COr(tuple(CAnd(tuple(c)) if len(c) != 1 else c[0] for c in alternatives)))
    for _, s in below:
        soft.extend(s)
    return ce_together(conjuncts), soft


def _requested(terms: list[Term], notes: list[str], work: WorkBudget) -> tuple[list[CExpr], list[tuple[Check, float]]]:
    conjuncts: list[CExpr] = []
    soft: list[tuple[Check, float]] = []
    if terms:
        req = requirement(terms)
        if req.expr is not None:
            conjuncts.extend(_conjuncts(_compile(req.expr, notes, work)))
        soft.extend((_compile_leaf(term, notes, work), share) for term, share in req.soft)
    return conjuncts, soft


# --- one host -----------------------------------------------------------------------------------

def verdict_of(parts: tuple[CExpr, ...], node: Node, host: Host, site: Site) -> Verdict:
    """Whether `parts` (a Requirements' static or dynamic conjuncts) all hold for one host, the
    reasons of those that do not, and the Preferred sets' score: no cache, nothing counted."""
    failing: list[CExpr] = []
    score = 0.0
    for expr in parts:
        if expr.holds(node, host, site):
            if expr.has_preferred():
                score += expr.score(node, host, site)
        else:
            failing.append(expr)
    reasons = all_failing(failing, node, host, site) if failing else []
    return Verdict(not failing, tuple(reasons), score)


def evaluate(requirements: Requirements, node: Node, host: Host, *, subcluster: str | None = None,
             site: Site | None = None, count: bool = True) -> Verdict:
    """Whether `host` (its SSS Node and GLUE Host) fits, every reason if not, and its score.

    With `subcluster`, the static part is evaluated once per (subcluster, node Opsys) and reused.
    With `count` False, `requirements.evaluations` is left as it is: a match's answer explains the
    hosts it rejected with this, and the counts are the match's own.
    """
    site = site or _EMPTY_SITE
    reasons: list[str] = []
    if (refusal := host.refusal) is not None:
        reasons.append(refusal)
    if requirements.static:
        key = requirements.static_key(subcluster, node) if subcluster is not None else None
        cached = requirements.static_cache.get(key) if key is not None else None
        if cached is None:
            requirements.evaluations["static"] += count
            cached = verdict_of(requirements.static, node, host, site)
            if key is not None:
                requirements.static_cache[key] = cached
        static_score = cached.score
        reasons.extend(cached.reasons)
    else:
        static_score = 0.0
    score = static_score
    if requirements.dynamic:
        requirements.evaluations["dynamic"] += count
        verdict = verdict_of(requirements.dynamic, node, host, site)
        reasons.extend(verdict.reasons)
        score += verdict.score
    for check, share in requirements.soft:
        if check.test(node, host, site):
            score += share
    # a clause of both parts (a static and a dynamic conjunct alike) is said once
    return Verdict(not reasons, tuple(dict.fromkeys(reasons)), score)
