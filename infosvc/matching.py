"""Requirement evaluation: does an SSS Job (or task group) fit a host, and if not, why not.

Pure functions over the model, no HTTP. `compile_requirements(job)` turns the job's Requested
expressions (the job's, its task groups', their tasks') into `Requirements`; `evaluate`
gives a `Verdict(ok, reasons, score)` for one host from its SSS Node and its GLUE Host; `match`
runs a job over a whole site and orders the hosts that fit; given the site's columns
(infosvc.hostcolumns), it decides a job whose per-host part is free-CPU / RAM thresholds with
array operations instead of a loop over the hosts (`_match_columns`).

Static and dynamic parts. Each leaf of the expression is *static* when its outcome depends only on
what every host of a subcluster shares (rollup.subcluster_key: cluster, processor model and clock,
CPU count, OS name and release, architecture and ISA) or *dynamic* otherwise (free processors and
memory, configured RAM — the key rounds it to the GiB —, node names, features, disks, other
Resources). The top-level conjuncts that are wholly static are evaluated once per subcluster (and
the node's Opsys, which the key does not hold: the cache key is (subcluster, opsys)); the rest per
host. `Requirements.evaluations` counts both.

Semantics (docs/matching.md has the whole list):
- Consumables: Processors and Memory read the GLUE Host (free and total CPUs, free and total RAM
  in MB); Disk, Swap, Network and Resource (licenses, NetworkAdapter, ...) read the node's
  Available (context Available, Dedicated) or Configured category. Units are converted to the
  job's (default MB for Memory, Swap, Disk). In context Available or Dedicated an amount is what
  the job takes: EQ (the default) and GE ask the host for at least that much ("4 processors" fit a
  host with 8 free), GT for more; LE, LT and NE bound the job (Processors GE 8 with LE 16) and
  ask nothing of the host. In context Configured, which describes the host, every op is literal.
  Context Used is no requirement.
- A request is per host: Processors GE 8 asks for a host with 8 free processors.
- Feature: every feature of a List must be present (NE: none of them); a Pattern, or op Match,
  must match one of the host's features.
- Node: the host's id or name must be among the names (List, Range; compared as DNS names:
  without regard to case, one final dot ignored) or match the Pattern.
- Architecture: the node's arch or the processor's ISA. OperatingSystem: the OS name, "name
  release", or the node's Opsys, case-insensitive. Partition and Machine: the host's cluster.
- ResourceManagerType (the LRMS type, without regard to case), Queue (exactly) and Duration (the
  wall-clock time asked, against MaxWallClockTime in minutes; 0 is no limit) ask something of a CE
  serving the host's cluster; the CE terms of one conjunction must all be met by one CE
  (`_ce_together`).
- Other simple properties (User, Account, NodeCount, ...) are no property of a host: they hold,
  and compile_requirements says so in its notes.
- op Match: a regular expression, fully matched, guarded (see `guarded_regex`).
- Preferences: a Preferred set holds when one alternative holds and adds the weight of the best
  one that holds to the score; a soft (negative preference) term never fails a host and adds its
  share when it holds.
- A host that is not Ready never matches ("host is Paused").
"""

from __future__ import annotations

import itertools
import operator
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Container, Iterable, Iterator, Mapping, Protocol, cast

import numpy as np
import re2
from ClusterShell.NodeSet import NodeSetParseError

from infosvc.errors import excerpt
from infosvc.model.nodeset import NameSet, fold
from infosvc.hostid import canonical
from infosvc.hostcolumns import MIXED, NO_NODE, Columns, HostColumns

from infosvc.model.glue import Host
from infosvc.model.job import (
    And, Consumable, Context, Expr, Feature, Job, Leaf, Not, Op, Or, Preferred, Simple, Task, TaskGroup, Term,
    requirement,
)
from infosvc.model.node import Node
from infosvc.model.noderef import Aggregation, NodeRef, NodeRefError
from infosvc.model import durations
from infosvc.model.units import DEFAULT_UNITS, UnitError, convert, is_byte_unit

__all__ = [
    "MatchError", "Requirements", "Verdict", "Site", "Candidate", "MatchResult", "compile_requirements",
    "evaluate", "match", "AnswerLimits", "SiteSnapshot", "SyncedColumns", "MatchTooCostly", "MAX_REASONS", "guarded_regex", "check_range_budget", "MAX_PATTERN", "MAX_SUBJECT", "MAX_RANGE",
]

#: Longest regular expression accepted (characters), and longest text one is matched against.
MAX_PATTERN = 256
MAX_SUBJECT = 255
#: Most names a Range may expand to, and all the Ranges of one request together (check_range_budget).
MAX_RANGE = 100_000


class MatchError(ValueError):
    """A job that cannot be matched as written (a refused pattern, an op that does not apply)."""


class MatchTooCostly(MatchError):
    """The work budget of a match (Requirements.start_budget) ran out."""


# --- the regular expression guard ---------------------------------------------------------------

class Regex(Protocol):
    """A compiled pattern, as the matcher uses it."""

    def fullmatch(self, text: str) -> object | None: ...


def guarded_regex(pattern: str, what: str = "pattern") -> Regex:
    """`pattern` compiled with RE2, which matches in time linear in the subject; MatchError when
    it is longer than MAX_PATTERN characters or not a pattern RE2 accepts.

    Patterns come from anyone who may POST /v1/match. Python's `re` backtracks: `(a+)+$`, and
    subtler forms such as `(?:.?){27}_`, take exponential time on a few dozen characters, and a
    match cannot be stopped (it holds the GIL). Guarding `re` by the pattern's structure was tried
    and still let exponential and high-polynomial patterns through (found in review); RE2 has no
    backtracking at all. It is Perl syntax without backreferences and lookarounds, which are
    refused by name.
    """
    if len(pattern) > MAX_PATTERN:
        raise MatchError(f"{what} is {len(pattern)} characters long; at most {MAX_PATTERN} are accepted")
    if _OPEN_LOW_BOUND.search(pattern):
        # Python (3.11+) reads a{,3} as 0 to 3 a's; RE2 as the text "a{,3}": refused, not reread.
        raise MatchError(f"{what} {pattern!r} writes a repeat as {{,n}}; write {{0,n}}")
    try:
        return cast(Regex, re2.compile(pattern, _RE2_OPTIONS))
    except UnicodeEncodeError:
        raise MatchError(f"{what} {pattern!r} holds a character that is not Unicode text") from None
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise MatchError(f"{what} {pattern!r} is not a regular expression this matcher accepts: {reason} "
                         "(Perl syntax without backreferences or lookarounds)") from None


#: `{,n}` not escaped: Python's re (3.11+) reads it as {0,n}, RE2 as text. (Python's re here: a
#: fixed pattern over at most MAX_PATTERN characters of the submitter's.)
_OPEN_LOW_BOUND = re.compile(r"(?:^|[^\\])\{,\d+\}")
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is the submitter's 400, not a line on stderr


def _fullmatch(regex: Regex, text: str | None) -> bool:
    if text is None or len(text) > MAX_SUBJECT:
        return False
    try:
        return regex.fullmatch(text) is not None
    except UnicodeEncodeError:  # a lone surrogate (no XML or JSON we read carries one): no match
        return False


# --- compiled leaves ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CE:
    """What the matcher reads of a computing element."""

    id: str
    lrms_type: str
    queue: str
    #: GLUE Policy MaxWallClockTime, minutes (GLUE 1.1); 0: not specified, so no limit
    max_wall_clock_time: int = 0


@dataclass(frozen=True, slots=True)
class Site:
    """What a host's cluster offers beyond the host: the CEs that serve each cluster."""

    #: cluster id -> the computing elements serving it, in configuration order
    ces: Mapping[str, tuple[CE, ...]] = field(default_factory=dict)

    @property
    def computing_elements(self) -> dict[str, tuple[str, ...]]:
        """cluster id -> ids of the computing elements serving it, in configuration order."""
        return {cluster: tuple(ce.id for ce in found) for cluster, found in self.ces.items()}

    @classmethod
    def of(cls, rollup: Any) -> Site:
        """From a Rollup: its computing elements by cluster."""
        ces: dict[str, list[CE]] = {}
        for ce in rollup.computing_elements():
            summary = CE(ce.unique_id, ce.info.lrms_type, ce.queue, ce.policy.max_wall_clock_time)
            for cluster in ce.clusters:
                ces.setdefault(cluster, []).append(summary)
        return cls({k: tuple(v) for k, v in ces.items()})


_EMPTY_SITE = Site()

Test = Callable[[Node, Host, Site], bool]
Explain = Callable[[Node, Host, Site], str]


@dataclass(frozen=True, slots=True)
class Check:
    """One leaf, compiled: whether it is static, its test, and the words for its outcome."""

    term: Term
    static: bool
    test: Test
    explain: Explain
    #: a plain threshold on the GLUE Host, when the test is no more than that: ("cpus", n) for
    #: available_cpus >= n, ("ram", mb) for main_memory.ram_available (not None) >= mb
    threshold: tuple[str, float] | None = None
    #: for a term that asks something of one computing element (ResourceManagerType, Queue,
    #: Duration): that test on one CE, and what is asked in words; see `_ce_together`
    ce_test: Callable[[CE], bool] | None = None
    ce_asked: tuple[str, ...] = ()
    #: (name, negated) when the test is no more than whether the node has one feature (or not)
    feature: tuple[str, bool] | None = None


_NUMERIC: dict[Op, Callable[[float, float], bool]] = {
    Op.EQ: lambda have, want: have == want, Op.NE: lambda have, want: have != want,
    Op.LT: lambda have, want: have < want, Op.GT: lambda have, want: have > want,
    Op.LE: lambda have, want: have <= want, Op.GE: lambda have, want: have >= want,
}


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _consumable_check(term: Term, item: Consumable) -> Check:
    context = item.effective_context
    if context is Context.USED:
        return Check(term, True, lambda n, h, s: True, lambda n, h, s: f"{_label(item)}: context Used asks nothing")
    if term.effective_op is Op.MATCH:
        raise MatchError(f"op Match does not apply to the amount {item.kind}")
    try:
        float(item.value)
    except OverflowError:  # an int of hundreds of digits (a grid job's count, say)
        raise MatchError(f"{_label(item)}: {str(item.value)[:20]}... is past any amount a host can have") from None
    op = term.effective_op
    if context is not Context.CONFIGURED:
        if op is Op.EQ:
            op = Op.GE  # an amount the job takes: the host must have at least that much
        elif op in (Op.LE, Op.LT, Op.NE):
            # The most the job takes (Processors GE 8 with LE 16: 8 to 16): no bound on the host.
            return Check(term, True, lambda n, h, s: True,
                         lambda n, h, s: f"{_label(item)}: {op.value} {_num(float(item.value))} bounds the job only")
    compare = _NUMERIC[op]
    ctx_word = "configured" if context is Context.CONFIGURED else "available"
    units = item.units or DEFAULT_UNITS.get(item.kind)
    wanted = float(item.value)
    label = _label(item)

    if item.kind == "Processors":
        configured = context is Context.CONFIGURED

        def cpus(host: Host) -> int:
            return host.total_cpus if configured else host.available_cpus

        want_text = f"{label}: asked {op.value} {_num(wanted)} {ctx_word}"
        test_cpus: Test = (
            (lambda n, h, s: h.available_cpus >= wanted) if op is Op.GE and not configured
            else (lambda n, h, s: compare(cpus(h), wanted)))
        return Check(term, configured, test_cpus, lambda n, h, s: f"{want_text}, host has {cpus(h)}",
                     ("cpus", wanted) if op is Op.GE and not configured else None)

    if item.kind == "Memory":
        try:
            wanted_mb = convert(wanted, units or "MB", "MB")
        except UnitError as exc:
            raise MatchError(f"Memory units: {exc}") from None
        except OverflowError:
            raise MatchError(f"Memory: {_num(wanted)} {units} is past any amount a host can have") from None
        configured = context is Context.CONFIGURED
        shown = f"{_num(wanted)} {units}" + (f" ({_num(wanted_mb)} MB)" if units and units.upper() != "MB" else "")
        want_text = f"{label}: asked {op.value} {shown} {ctx_word}"

        def ram(host: Host) -> int | None:
            mem = host.main_memory
            return mem.ram_size if configured else mem.ram_available

        test_mem: Test
        if op is Op.GE and not configured:  # the common case, without the calls
            def test_mem(n: Node, h: Host, s: Site) -> bool:
                have = h.main_memory.ram_available
                return have is not None and have >= wanted_mb
        else:
            def test_mem(n: Node, h: Host, s: Site) -> bool:
                have = ram(h)
                return have is not None and compare(have, wanted_mb)

        def explain_mem(n: Node, h: Host, s: Site) -> str:
            have = ram(h)
            return f"{want_text}, host has " + ("no Memory reported" if have is None else f"{have} MB")

        # Configured RAM is not static: the subcluster key rounds it to the GiB.
        return Check(term, False, test_mem, explain_mem, ("ram", wanted_mb) if op is Op.GE and not configured else None)

    # Disk, Swap, Network, and Resource (licenses, NetworkAdapter, ...): the node's own list.
    if units is not None and not is_byte_unit(units):
        units_bytes = False
    else:
        units_bytes = units is not None
    category = "configured" if context is Context.CONFIGURED else "available"
    want_text = f"{label}: asked {op.value} {_num(wanted)}{' ' + units if units else ''} {ctx_word}"

    def amounts(node: Node) -> list[float]:
        props = node.configured if category == "configured" else node.available
        found = []
        for have in props.items:
            if have.kind != item.kind:
                continue
            if item.kind == "Resource" and (have.name != item.name or (item.type is not None and have.type != item.type)):
                continue
            value = float(have.value)
            if units_bytes and units is not None:
                try:
                    value = have.amount(units)
                except ValueError:
                    pass  # no units of its own: taken as written
                except OverflowError:
                    continue  # past any float in the units asked: no amount to compare
            found.append(value)
        return found

    def test_other(n: Node, h: Host, s: Site) -> bool:
        return any(compare(value, wanted) for value in amounts(n))

    def explain_other(n: Node, h: Host, s: Site) -> str:
        values = amounts(n)
        if not values:
            return f"{want_text}, host has none"
        return f"{want_text}, host has " + ", ".join(_num(v) + (f" {units}" if units else "") for v in values)

    return Check(term, False, test_other, explain_other)


def _label(item: Consumable) -> str:
    if item.kind != "Resource":
        return item.kind
    return excerpt(" ".join(filter(None, (item.name or "Resource", item.type))))


def _string_test(term: Term, label: str, value: str) -> Callable[[list[str]], bool]:
    """A test of the host's values (any one that satisfies the op will do; NE: none equals)."""
    op = term.effective_op
    if op is Op.MATCH:
        regex = guarded_regex(value, f"the {label} pattern")
        return lambda values: any(_fullmatch(regex, v) for v in values)
    if op not in (Op.EQ, Op.NE):
        raise MatchError(f"op {op.value} does not apply to {label}: use EQ, NE or Match")
    wanted = value.casefold()
    if op is Op.EQ:
        return lambda values: any(v.casefold() == wanted for v in values)
    return lambda values: all(v.casefold() != wanted for v in values)


#: Simple properties that name no property of a host.
_NOT_OF_A_HOST = "is not a property of a host"


def _simple_check(term: Term, item: Simple, notes: list[str]) -> Check:
    name, value = item.name, item.value
    op_text = term.effective_op.value
    getter: Callable[[Node, Host, Site], list[str]]
    static = True
    if name == "Architecture":
        def getter(n: Node, h: Host, s: Site) -> list[str]:
            return [v for v in (h.architecture.platform_type, h.processor.instruction_set) if v]
    elif name == "OperatingSystem":
        # Static too: the name and release are in the subcluster key, and the static cache is
        # keyed by the node's Opsys as well.
        def getter(n: Node, h: Host, s: Site) -> list[str]:
            os_ = h.operating_system
            found = [v for v in (os_.name, n.opsys) if v]
            if os_.name and os_.release:
                found.append(f"{os_.name} {os_.release}")
            return found
    elif name in ("Queue", "ResourceManagerType", "Duration"):
        return _ce_check(term, item)
    elif name in ("Partition", "Machine"):
        def getter(n: Node, h: Host, s: Site) -> list[str]:
            return [h.cluster]
    else:
        notes.append(f"Requested {name} {_NOT_OF_A_HOST}: not used to match hosts")
        return Check(term, True, lambda n, h, s: True, lambda n, h, s: f"{name} {_NOT_OF_A_HOST}")
    values_ok = _string_test(term, name, value)

    def explain(n: Node, h: Host, s: Site) -> str:
        have = list(dict.fromkeys(getter(n, h, s)))
        return f"{name}: asked {op_text} {excerpt(value)}, host has " + (" / ".join(have) if have else "none")

    return Check(term, static, lambda n, h, s: values_ok(getter(n, h, s)), explain)


def _duration_words(seconds: float) -> str:
    """A wall-clock time for people: 2 h, 90 min, 1 h 30 min, 45 s."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{_num(seconds / 3600)} h"
    if seconds >= 3600 and seconds % 60 == 0:
        return f"{_num(seconds // 3600)} h {_num(seconds % 3600 / 60)} min"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{_num(seconds / 60)} min"
    return f"{_num(seconds)} s"


def _ce_words(ce: CE, with_wall_clock: bool) -> str:
    words = [ce.lrms_type, f"queue {ce.queue}"]
    if with_wall_clock:
        limit = ce.max_wall_clock_time
        words.append(f"at most {_duration_words(limit * 60)}" if limit else "no wall-clock limit")
    return f"{ce.id} ({', '.join(words)})"


def _ce_check(term: Term, item: Simple) -> Check:
    """A term on one computing element (docs/job-formats.md): ResourceManagerType (the CE's LRMS
    type, without regard to case), Queue (the CE's queue, exactly: batch systems treat queue names
    so), Duration (the wall-clock time asked, in seconds or as an xsd:duration, against the CE's
    MaxWallClockTime in minutes; 0, not specified, is no limit). The host fits when some CE serving
    its cluster satisfies it; `_ce_together` joins a level's CE terms so that one CE must satisfy
    them all."""
    name, value, op = item.name, item.value, term.effective_op
    op_text = op.value
    ce_test: Callable[[CE], bool]
    if name == "Duration":
        if op in (Op.NE, Op.MATCH):
            raise MatchError(f"op {op_text} does not apply to Duration: it is the wall-clock time the job asks")
        try:
            asked = durations.seconds(value)
        except ValueError as exc:
            raise MatchError(f"Duration: {exc}") from None
        # The job runs for (at most) that long, whatever the op: the CE must allow as much (GT: more).
        if op is Op.GT:
            def ce_test(ce: CE) -> bool:
                return not ce.max_wall_clock_time or ce.max_wall_clock_time * 60 > asked
        else:
            def ce_test(ce: CE) -> bool:
                return not ce.max_wall_clock_time or ce.max_wall_clock_time * 60 >= asked
        words = f"Duration {'more than ' if op is Op.GT else ''}{_duration_words(asked)}"
        want = f"Duration: asked {'more than ' if op is Op.GT else ''}{_duration_words(asked)}"

        def explain(n: Node, h: Host, s: Site) -> str:
            found = s.ces.get(h.cluster, ())
            if not found:
                return f"{want}, no CE serves cluster {h.cluster}"
            return f"{want}, " + ", ".join(
                f"CE {ce.id} allows at most {_duration_words(ce.max_wall_clock_time * 60)}" if ce.max_wall_clock_time
                else f"CE {ce.id} has no wall-clock limit" for ce in found)
    else:
        read: Callable[[CE], str] = (lambda ce: ce.queue) if name == "Queue" else (lambda ce: ce.lrms_type)
        if op is Op.MATCH:
            regex = guarded_regex(value, f"the {name} pattern")
            ce_test = lambda ce: _fullmatch(regex, read(ce))  # noqa: E731
        elif op not in (Op.EQ, Op.NE):
            raise MatchError(f"op {op_text} does not apply to {name}: use EQ, NE or Match")
        else:
            if name == "Queue":
                equal: Callable[[CE], bool] = lambda ce: ce.queue == value  # noqa: E731
            else:
                wanted = value.casefold()
                equal = lambda ce: ce.lrms_type.casefold() == wanted  # noqa: E731
            ce_test = equal if op is Op.EQ else (lambda ce: not equal(ce))
        words = f"{name} {op_text} {excerpt(value)}"

        def explain(n: Node, h: Host, s: Site) -> str:
            have = list(dict.fromkeys(read(ce) for ce in s.ces.get(h.cluster, ())))
            return f"{name}: asked {op_text} {excerpt(value)}, host has " + (" / ".join(have) if have else "none")

    return Check(term, True, lambda n, h, s: any(ce_test(ce) for ce in s.ces.get(h.cluster, ())), explain,
                 ce_test=ce_test, ce_asked=(words,))


def _ce_together(conjuncts: list[CExpr]) -> list[CExpr]:
    """The CE terms of a conjunction as one leaf, in the place of the first: what a task asks of a
    computing element (LRMS, queue, wall-clock time) must be met by one CE serving the host, not
    each by some CE or other (docs/job-formats.md, "CE terms go together")."""
    found = [e for e in conjuncts if isinstance(e, CLeaf) and e.check.ce_test is not None]
    if len(found) < 2:
        return conjuncts
    tests = tuple(e.check.ce_test for e in found if e.check.ce_test is not None)
    asked = tuple(words for e in found for words in e.check.ce_asked)
    wall_clock = any(e.check.term.name == "Duration" for e in found)

    def ce_test(ce: CE) -> bool:
        return all(test(ce) for test in tests)

    def explain(n: Node, h: Host, s: Site) -> str:
        ces = s.ces.get(h.cluster, ())
        have = "; ".join(_ce_words(ce, wall_clock) for ce in ces) if ces else f"none serves cluster {h.cluster}"
        return f"CE: asked {excerpt(', '.join(asked), 200)} of one CE, host's CEs: {have}"

    joined = CLeaf(Check(found[0].check.term, True, lambda n, h, s: any(ce_test(ce) for ce in s.ces.get(h.cluster, ())),
                         explain, ce_test=ce_test, ce_asked=asked))
    first = conjuncts.index(found[0])
    joined_ids = {id(f) for f in found}  # a set: a job of thousands of CE terms must not be quadratic
    rest = [e for e in conjuncts if id(e) not in joined_ids]
    return rest[:first] + [joined] + rest[first:]


def _bound_range(what: str, expression: str) -> None:
    """MatchError for a Range of more than MAX_RANGE names, told from its text before anything
    is expanded (infosvc.model.nodeset.names_upper_bound)."""
    if _range_size(what, expression) > MAX_RANGE:
        raise MatchError(f"{what} Range {excerpt(expression.strip())!r} names more than {MAX_RANGE} names; "
                         f"at most {MAX_RANGE} are accepted")


def _range_size(what: str, expression: str) -> int:
    from infosvc.model.nodeset import names_upper_bound

    try:
        return names_upper_bound(expression.strip())
    except NodeSetParseError as exc:
        raise MatchError(f"bad {what} Range: {exc}") from None


def check_range_budget(jobs: Iterable[Job | TaskGroup | Task], budget: int = MAX_RANGE) -> None:
    """MatchError when the Ranges of `jobs` (Node and Feature terms of every job, task group and
    task) name more than `budget` names together: one budget for everything a request asks, told
    from the texts before any Range is expanded. Each Range alone is bounded by compile_requirements."""
    total = 0
    for target in _levels(jobs):
        for term in target.properties.requested:
            item = term.item
            if isinstance(item, (NodeRef, Feature)) and item.aggregation is Aggregation.RANGE:
                size = _range_size(term.name, item.value)
                if size > MAX_RANGE:
                    _bound_range(term.name, item.value)
                total += size
                if total > budget:
                    raise MatchError(f"the Ranges of this request name more than {budget} names in all; "
                                     f"at most {budget} are accepted")


def _levels(jobs: Iterable[Job | TaskGroup | Task]) -> Iterator[Job | TaskGroup | Task]:
    for target in jobs:
        yield target
        if isinstance(target, Job):
            yield from _levels(target.task_groups)
        elif isinstance(target, TaskGroup):
            yield from _levels(target.tasks)


def _feature_check(term: Term, item: Feature) -> Check:
    op = term.effective_op
    if op not in (Op.EQ, Op.NE, Op.MATCH):
        raise MatchError(f"op {op.value} does not apply to Feature: use EQ, NE or Match")
    if item.aggregation is Aggregation.PATTERN or op is Op.MATCH:
        regex = guarded_regex(item.value.strip(), "the Feature pattern")
        negate = op is Op.NE
        asked = f"Feature: asked {'no feature' if negate else 'a feature'} matching {excerpt(item.value.strip())}"

        def test_pattern(n: Node, h: Host, s: Site) -> bool:
            return any(_fullmatch(regex, f) for f in n.features) != negate
        test: Test = test_pattern
    else:
        if item.aggregation is Aggregation.RANGE:
            _bound_range("Feature", item.value)
        try:
            names = item.names()
        except NodeRefError as exc:
            raise MatchError(str(exc)) from None
        negate = op is Op.NE
        asked = f"Feature: asked {'none of' if negate else ''} {excerpt(', '.join(names))}".replace("  ", " ")

        def test_names(n: Node, h: Host, s: Site) -> bool:
            have = n.features
            return all(f not in have for f in names) if negate else all(f in have for f in names)
        test = test_names
        if len(names) == 1:
            one = names[0]
            test = (lambda n, h, s: one not in n.features) if negate else (lambda n, h, s: one in n.features)

    def explain(n: Node, h: Host, s: Site) -> str:
        return f"{asked}, host has " + (", ".join(n.features) if n.features else "no features")

    single = item.aggregation is not Aggregation.PATTERN and op is not Op.MATCH and len(names) == 1
    return Check(term, False, test, explain, feature=(names[0], negate) if single else None)


def _host_key(name: str) -> str:
    """A host name as DNS compares it: without regard to case, one final dot ignored (grid
    `hostname`; CCS's Windows names are without case too). A host is named by its Id alone, never
    by the Name its agent chose (infosvc.hostid: the aggregator keeps Ids in this form already)."""
    return canonical(name)


def _node_check(term: Term, item: NodeRef) -> Check:
    op = term.effective_op
    if op not in (Op.EQ, Op.NE, Op.MATCH):
        raise MatchError(f"op {op.value} does not apply to Node: use EQ, NE or Match")
    negate = op is Op.NE
    if item.aggregation is Aggregation.PATTERN or op is Op.MATCH:
        regex = guarded_regex(item.value.strip(), "the Node pattern")
        asked = f"Node: asked {'not ' if negate else ''}matching {excerpt(item.value.strip())}"

        def test_pattern(n: Node, h: Host, s: Site) -> bool:
            return _fullmatch(regex, h.unique_id) != negate
        test: Test = test_pattern
    else:
        names: Container[str]
        if item.aggregation is Aggregation.RANGE:
            _bound_range("Node", item.value)
            # a membership test, never the names written out (infosvc.model.nodeset.NameSet)
            try:
                names = NameSet(item.value)
            except NodeSetParseError as exc:
                raise MatchError(f"bad Node Range: {exc}") from None
        else:
            names = frozenset(_host_key(name) for name in item.names())
        asked = f"Node: asked {'not ' if negate else ''}{excerpt(item.value.strip())}"

        def test_names(n: Node, h: Host, s: Site) -> bool:
            return (_host_key(h.unique_id) in names) != negate
        test = test_names

    # The host's Id is not in its reason: the answer names the hosts of each reason (grouped).
    named = "the host is one of them" if negate else "the host is not one of them"
    return Check(term, False, test, lambda n, h, s: f"{asked}; {named}")


def _compile_leaf(term: Term, notes: list[str]) -> Check:
    item = term.item
    if isinstance(item, Consumable):
        return _consumable_check(term, item)
    if isinstance(item, Simple):
        return _simple_check(term, item, notes)
    if isinstance(item, Feature):
        return _feature_check(term, item)
    return _node_check(term, item)


# --- the compiled expression --------------------------------------------------------------------

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


def _compile(expr: Expr, notes: list[str]) -> CExpr:
    if isinstance(expr, Leaf):
        return CLeaf(_compile_leaf(expr.term, notes))
    if isinstance(expr, Not):
        return CNot(_compile(expr.operand, notes))
    if isinstance(expr, And):
        operands = _ce_together([_compile(e, notes) for e in expr.operands])
        return CAnd(tuple(operands)) if len(operands) != 1 else operands[0]
    if isinstance(expr, Or):
        return COr(tuple(_compile(e, notes) for e in expr.operands))
    return CPreferred(tuple(_compile_leaf(leaf.term, notes) for leaf in expr.alternatives), expr.weights)


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


# --- requirements -------------------------------------------------------------------------------

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
    #: the most seconds `match` and the reasons of its result may take (None: no bound); see spend()
    budget_seconds: float | None = None
    _deadline: float | None = None

    def __post_init__(self) -> None:
        self.uses_opsys = any(_reads_opsys(e) for e in self.static)

    def start_budget(self, seconds: float) -> None:
        """Bound the work `match` (and explaining its result) may do for these requirements from now:
        past `seconds`, they raise MatchTooCostly. One request's work is bounded this way, whatever
        its site and its terms multiply to."""
        self.budget_seconds = seconds
        self._deadline = time.monotonic() + seconds

    def spend(self) -> None:
        """MatchTooCostly when the budget is spent (a check, made every few hosts)."""
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise MatchTooCostly(f"matching this job against this site takes more than {self.budget_seconds:g} s; "
                                 "ask with fewer terms, or match fewer jobs at once")

    def static_key(self, subcluster: str, node: Node) -> tuple[str, str | None]:
        return (subcluster, node.opsys if self.uses_opsys else None)

    def computing_element(self, site: Site, cluster: str) -> str | None:
        """The CE a fitting host of `cluster` is named with: the first (in configuration order)
        that gives what the job asks of one CE (`_ce_together`), else the first."""
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


def _reads_opsys(expr: CExpr) -> bool:
    if isinstance(expr, CLeaf):
        return expr.check.term.name == "OperatingSystem"
    if isinstance(expr, CNot):
        return _reads_opsys(expr.operand)
    if isinstance(expr, CPreferred):
        return any(c.term.name == "OperatingSystem" for c in expr.alternatives)
    return any(_reads_opsys(e) for e in expr.operands)


def _conjuncts(expr: CExpr | None) -> list[CExpr]:
    if expr is None:
        return []
    return list(expr.operands) if isinstance(expr, CAnd) else [expr]


def compile_requirements(target: Job | TaskGroup | Task) -> Requirements:
    """The requirements of a resolved Job (see model.job.resolve), or of one task group or task.

    What is evaluated is the Requested lists alone (as infosvc.submission maps the other formats):
    the target's own, and below it its task groups' and their tasks': a host fits when it meets
    the job's own and those of at least one task group (and of that group, at least one task), so
    that one child's requirements are simply required with the parent's.
    Raises MatchError for what cannot be evaluated (a refused pattern, an op that does not apply).
    """
    notes: list[str] = []
    conjuncts, soft = _level(target, notes)
    static = tuple(e for e in conjuncts if _is_static(e))
    dynamic = tuple(e for e in conjuncts if not _is_static(e))
    total = sum(w for _, w in soft)
    shares = tuple((c, w / total) for c, w in soft) if total else ()
    return Requirements(static, dynamic, shares, tuple(dict.fromkeys(notes)))


def _level(target: Job | TaskGroup | Task, notes: list[str]) -> tuple[list[CExpr], list[tuple[Check, float]]]:
    conjuncts, soft = _requested(target.properties.requested, notes)
    children: list[Job | TaskGroup | Task] = []
    if isinstance(target, Job):
        children.extend(target.task_groups)
    elif isinstance(target, TaskGroup):
        children.extend(target.tasks)
    below = [_level(child, notes) for child in children]
    below = [b for b in below if b[0] or b[1]]
    if len(below) == 1:
        conjuncts.extend(below[0][0])
    elif below:
        alternatives = [c for c, _ in below]
        if all(alternatives):
            conjuncts.append(COr(tuple(CAnd(tuple(c)) if len(c) != 1 else c[0] for c in alternatives)))
    for _, s in below:
        soft.extend(s)
    return _ce_together(conjuncts), soft


def _requested(terms: list[Term], notes: list[str]) -> tuple[list[CExpr], list[tuple[Check, float]]]:
    conjuncts: list[CExpr] = []
    soft: list[tuple[Check, float]] = []
    if terms:
        req = requirement(terms)
        if req.expr is not None:
            conjuncts.extend(_conjuncts(_compile(req.expr, notes)))
        soft.extend((_compile_leaf(term, notes), share) for term, share in req.soft)
    return conjuncts, soft


def _verdict(parts: tuple[CExpr, ...], node: Node, host: Host, site: Site) -> Verdict:
    reasons: list[str] = []
    score = 0.0
    for expr in parts:
        if _holds(expr, node, host, site):
            if isinstance(expr, CPreferred) or _has_preferred(expr):
                score += _score(expr, node, host, site)
        else:
            reasons.extend(_reasons(expr, node, host, site))
    return Verdict(not reasons, tuple(reasons), score)


def evaluate(requirements: Requirements, node: Node, host: Host, *, subcluster: str | None = None,
             site: Site | None = None) -> Verdict:
    """Whether `host` (its SSS Node and GLUE Host) fits, every reason if not, and its score.

    With `subcluster`, the static part is evaluated once per (subcluster, node Opsys) and reused.
    """
    return _evaluate(requirements, node, host, subcluster, site or _EMPTY_SITE, count=True)


def _evaluate(requirements: Requirements, node: Node, host: Host, subcluster: str | None, site: Site, *,
              count: bool) -> Verdict:
    reasons: list[str] = []
    if host.state != "Ready":
        reasons.append(f"host is {host.state}")
    if requirements.static:
        key = requirements.static_key(subcluster, node) if subcluster is not None else None
        cached = requirements.static_cache.get(key) if key is not None else None
        if cached is None:
            requirements.evaluations["static"] += count
            cached = _verdict(requirements.static, node, host, site)
            if key is not None:
                requirements.static_cache[key] = cached
        static_score = cached.score
        reasons.extend(cached.reasons)
    else:
        static_score = 0.0
    score = static_score
    if requirements.dynamic:
        requirements.evaluations["dynamic"] += count
        verdict = _verdict(requirements.dynamic, node, host, site)
        reasons.extend(verdict.reasons)
        score += verdict.score
    for check, share in requirements.soft:
        if check.test(node, host, site):
            score += share
    return Verdict(not reasons, tuple(reasons), score)


# --- a whole site ---------------------------------------------------------------------------------

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


#: A fitting host as `match` collects it: its id (what orders it within its group, see `_order`),
#: then the Candidate's fields.
_Found = tuple[str, Host, "str | None", "str | None", float]
#: Fitting hosts grouped by what orders them first: (score, memory size, processor speed).
_Groups = dict[tuple[float, int, int], list[_Found]]
#: A host that does not fit: what its reasons are worked out from, when they are asked for (its
#: node as it was decided on: the answer may be rendered later, in a thread, while hosts report).
_Miss = tuple[Host, "str | None", "Node | None"]


class MatchResult:
    """What `match` found. The reasons of the rejected hosts are put in words when first asked for
    (`rejected`, `as_json`): deciding is cheap, explaining is not."""

    def __init__(self, requirements: Requirements, site: Site, found: list[_Found], missed: list[_Miss]) -> None:
        self.requirements = requirements
        self.notes = requirements.notes
        self._site = site
        self._found = found
        self._missed = missed
        self._matches: list[Candidate] | None = None
        self._rejected: list[tuple[str, tuple[str, ...]]] | None = None

    def _candidates(self) -> list[Candidate]:
        return [Candidate(f[1], f[2], f[3], f[4]) for f in self._found]

    def _misses(self) -> Iterator[tuple[Host, str | None, Node | None]]:
        """The hosts that do not fit, in the order they were visited, with their nodes."""
        return iter(self._missed)

    @property
    def matches(self) -> list[Candidate]:
        if self._matches is None:
            self._matches = self._candidates()
        return self._matches

    @property
    def rejected(self) -> list[tuple[str, tuple[str, ...]]]:
        if self._rejected is None:
            req, site = self.requirements, self._site
            self._rejected = [(host.unique_id, _evaluate(req, node, host, sub, site, count=False).reasons)
                              for host, sub, node in self._misses() if node is not None]
        return self._rejected

    def rejected_groups(self) -> list[tuple[tuple[str, ...], list[str]]]:
        """The rejected hosts grouped by their reasons, (reasons, host ids), in the order first met:
        the hosts of one subcluster in one state commonly share theirs."""
        req, site = self.requirements, self._site
        groups: dict[tuple[str, ...], list[str]] = {}
        for index, (host, sub, node) in enumerate(self._misses()):
            if not index & 63:
                req.spend()
            if node is not None:
                groups.setdefault(_evaluate(req, node, host, sub, site, count=False).reasons, []).append(host.unique_id)
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


class SiteSnapshot:
    """What `match` reads of a roll-up and its nodes, copied at one instant (~1 ms per 3,000 hosts),
    so that a match can run in a worker thread while the roll-up changes on the event loop. The
    Host objects are frozen and the nodes are replaced, never changed, on each report: copying the
    containers is enough."""

    def __init__(self, rollup: Any, node_of: Callable[[str], Node | None]) -> None:
        self.subclusters: dict[str, Any] = dict(rollup.subclusters)
        self._members = {sub_id: tuple(rollup.hosts_of(sub_id)) for sub_id in self.subclusters}
        self._nodes = {host.unique_id: node_of(host.unique_id) for members in self._members.values()
                       for host in members}

    def hosts_of(self, sub_id: str) -> Iterator[Host]:
        return iter(self._members.get(sub_id, ()))

    def node_of(self, host_id: str) -> Node | None:
        return self._nodes.get(host_id)

    def __len__(self) -> int:
        return len(self._nodes)


class SyncedColumns:
    """Columns synced on the event loop (HostColumns.sync reads the live roll-up), handed to a
    match in a worker thread as `match(columns=)`: its sync is the snapshot taken."""

    def __init__(self, columns: Columns) -> None:
        self.columns = columns

    def sync(self, rollup: Any, node_of: Callable[[str], Node | None]) -> Columns:
        return self.columns


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


def match(requirements: Requirements, rollup: Any, node_of: Callable[[str], Node | None],
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

    With `columns` (a HostColumns kept for this roll-up, see infosvc.hostcolumns: the server keeps
    one), such a job is decided with no per-host loop at all (`_match_columns`), again with the
    same verdicts, order and counts.
    """
    site = site if site is not None else Site.of(rollup)
    if columns is not None:
        limits = _limits(requirements.dynamic) if requirements.dynamic else (float("-inf"), None)
        if limits is not None:
            return _match_columns(requirements, rollup, node_of, site, columns, limits)
    limits = _limits(requirements.dynamic)
    min_cpus, min_ram = limits if limits is not None else (0.0, None)
    dynamic = tuple(_fast(e) for e in requirements.dynamic)
    only = dynamic[0] if len(dynamic) == 1 else None
    preferred = tuple(e for e in requirements.dynamic if _has_preferred(e))
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
                static = cache[(sub_id, None)] = _verdict(requirements.static, sample[1], sample[0], site)
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
                        static = cache[key] = _verdict(requirements.static, node, host, site)
                    by_opsys[node.opsys] = static
                if not static.ok:
                    add_missed((host, sub_id, node))
                    continue
                score = static.score
            if host.state != "Ready":
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
                score += _score(expr, node, host, site)
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


def _match_columns(requirements: Requirements, rollup: Any, node_of: Callable[[str], Node | None], site: Site,
                   keeper: HostColumns | SyncedColumns, limits: tuple[float, float | None]) -> MatchResult:
    """`match` for a job whose dynamic part is thresholds on free CPUs and RAM (or nothing), over
    the site's columns: the static part once per subcluster, as the general way, then every host's
    threshold and state decided by array operations; the fitting rows taken in the CCS order the
    columns keep, then stably by score; soft terms tested on the fitting hosts only. What does not
    fit stays a mask until the answer is rendered."""
    cols = keeper.sync(rollup, node_of)
    if cols.big.any():  # a host with amounts float64 would round: the general path compares exactly
        return match(requirements, rollup, node_of, site)
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
                static = cache[key] = _verdict(requirements.static, node, hosts[sample], site)
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
                    static = cache[(sub_id, node.opsys)] = _verdict(requirements.static, node, hosts[r], site)
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
