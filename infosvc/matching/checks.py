"""The leaf checks: one term of a Requested list compiled to a test of one host (its SSS Node, its
GLUE Host, the site's CEs) and the words for its outcome. Consumables, simple properties,
features and node references here; the terms on a computing element are infosvc.matching.ce's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Container

from ClusterShell.NodeSet import NodeSetParseError

from infosvc.errors import excerpt
from infosvc.model.hostid import canonical
from infosvc.matching.errors import MatchError
from infosvc.matching.patterns import fullmatch, guarded_regex
from infosvc.matching.ranges import bound_range
from infosvc.matching.view import CE, Site
from infosvc.matching.work import WorkBudget
from infosvc.model.glue import GPU, LICENSE, Host
from infosvc.model.job import Consumable, Context, Feature, Op, Simple, Term
from infosvc.model.node import Consumable as NodeAmount, Node
from infosvc.model.nodeset import NameSet
from infosvc.model.noderef import Aggregation, NodeRef, NodeRefError
from infosvc.model.units import DEFAULT_UNITS, UnitError, convert, is_byte_unit

__all__ = ["Test", "Explain", "Check", "GpuAsk", "number_words", "consumable_check", "simple_check",
           "feature_check", "node_check", "CHARGED_FEATURES", "is_feature_pattern"]

Test = Callable[[Node, Host, Site], bool]
Explain = Callable[[Node, Host, Site], str]


@dataclass(frozen=True, slots=True)
class GpuAsk:
    """A `Resource name="GPU"` term as the columns decide it (infosvc.matching.columns): the host's
    accelerators of `model` (None: any), all of them (`configured`) or those free, compared with
    `wanted` by `compare` (elementwise on arrays too)."""

    model: str | None
    configured: bool
    compare: Callable[[Any, float], Any]
    wanted: float


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
    #: Duration): that test on one CE, and what is asked in words; see `ce_together`
    ce_test: Callable[[CE], bool] | None = None
    ce_asked: tuple[str, ...] = ()
    #: (name, negated) when the test is no more than whether the node has one feature (or not)
    feature: tuple[str, bool] | None = None
    #: a GPU amount, which the columns decide as they decide thresholds
    gpu: GpuAsk | None = None


_NUMERIC: dict[Op, Callable[[float, float], bool]] = {
    Op.EQ: lambda have, want: have == want, Op.NE: lambda have, want: have != want,
    Op.LT: lambda have, want: have < want, Op.GT: lambda have, want: have > want,
    Op.LE: lambda have, want: have <= want, Op.GE: lambda have, want: have >= want,
}


def number_words(value: float) -> str:
    """An amount as a reason writes it: 4, not 4.0; 2.5 as it is."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def consumable_check(term: Term, item: Consumable) -> Check:
    """An amount (Processors, Memory, Disk, Swap, Network, Resource) asked of a host."""
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
            bound = f"{_label(item)}: {op.value} {number_words(float(item.value))} bounds the job only"
            return Check(term, True, lambda n, h, s: True, lambda n, h, s: bound)
    asked = _Amount(term, item, op, context is Context.CONFIGURED, item.units or DEFAULT_UNITS.get(item.kind),
                    float(item.value), _label(item))
    if item.kind == "Processors":
        return _processors_check(asked)
    if item.kind == "Memory":
        return _memory_check(asked)
    if item.kind == "Resource" and item.name == GPU:
        return _gpu_check(asked)
    return _listed_amount_check(asked)


def _gpu_check(asked: _Amount) -> Check:
    """`Resource name="GPU"` (a type asks for a model): the host's accelerators of that model, all of
    them (Configured) or those free (its agent's Available; the queue asks it of the host as if
    idle, and counts what its own jobs hold itself: infosvc.sched.hosts)."""
    model, wanted, compare = asked.item.type, asked.wanted, asked.compare

    def total(host: Host) -> int:
        return sum(a.count for a in host.accelerators if model is None or a.model == model)

    def free(host: Host) -> int:
        return min(total(host), max(0, host.accelerators_available))

    def have(host: Host) -> int:
        return total(host) if asked.configured else free(host)

    want_text = f"{asked.label}: asked {asked.op.value} {number_words(wanted)} {asked.context_word}"
    return Check(asked.term, False, lambda n, h, s: compare(have(h), wanted),
                 lambda n, h, s: f"{want_text}, host has {free(h)} free of {total(h)}",
                 gpu=GpuAsk(model, asked.configured, compare, wanted))


@dataclass(frozen=True, slots=True)
class _Amount:
    """An amount term as its check reads it: the op as it applies to the host (EQ on an amount the
    job takes is GE), whether it describes the host (context Configured), the units and the value."""

    term: Term
    item: Consumable
    op: Op
    configured: bool
    units: str | None
    wanted: float
    label: str

    @property
    def compare(self) -> Callable[[float, float], bool]:
        return _NUMERIC[self.op]

    @property
    def context_word(self) -> str:
        return "configured" if self.configured else "available"

    @property
    def threshold(self) -> bool:
        """Whether the host must have at least the value free (what the columns decide)."""
        return self.op is Op.GE and not self.configured


def _processors_check(asked: _Amount) -> Check:
    configured, wanted, compare = asked.configured, asked.wanted, asked.compare

    def cpus(host: Host) -> int:
        return host.total_cpus if configured else host.available_cpus

    want_text = f"{asked.label}: asked {asked.op.value} {number_words(wanted)} {asked.context_word}"
    test_cpus: Test = (
        (lambda n, h, s: h.available_cpus >= wanted) if asked.threshold
        else (lambda n, h, s: compare(cpus(h), wanted)))
    return Check(asked.term, configured, test_cpus, lambda n, h, s: f"{want_text}, host has {cpus(h)}",
                 ("cpus", wanted) if asked.threshold else None)


def _memory_check(asked: _Amount) -> Check:
    configured, wanted, units, compare = asked.configured, asked.wanted, asked.units, asked.compare
    try:
        wanted_mb = convert(wanted, units or "MB", "MB")
    except UnitError as exc:
        raise MatchError(f"Memory units: {exc}") from None
    except OverflowError:
        raise MatchError(f"Memory: {number_words(wanted)} {units} is past any amount a host can have") from None
    in_mb = f" ({number_words(wanted_mb)} MB)" if units and units.upper() != "MB" else ""
    shown = f"{number_words(wanted)} {units}{in_mb}"
    want_text = f"{asked.label}: asked {asked.op.value} {shown} {asked.context_word}"

    def ram(host: Host) -> int | None:
        mem = host.main_memory
        return mem.ram_size if configured else mem.ram_available

    test_mem: Test
    if asked.threshold:  # the common case, without the calls
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
    return Check(asked.term, False, test_mem, explain_mem, ("ram", wanted_mb) if asked.threshold else None)


def _listed_amount_check(asked: _Amount) -> Check:
    """Disk, Swap, Network, and Resource (licenses, NetworkAdapter, ...): the node's own list, and for
    a Resource what the site config gives the host (infosvc.config.resources), in either context."""
    item, units, wanted, compare = asked.item, asked.units, asked.wanted, asked.compare
    units_bytes = units is not None and is_byte_unit(units)
    category = "configured" if asked.configured else "available"
    want_text = f"{asked.label}: asked {asked.op.value} {number_words(wanted)}{' ' + units if units else ''} {category}"

    def amounts(node: Node, host: Host) -> list[float]:
        props = node.configured if asked.configured else node.available
        found = _from_config(item, host) if item.kind == "Resource" else []
        for have in props.items:
            if not _same_kind(item, have):
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
        return any(compare(value, wanted) for value in amounts(n, h))

    def explain_other(n: Node, h: Host, s: Site) -> str:
        values = amounts(n, h)
        if not values:
            return f"{want_text}, host has none"
        return f"{want_text}, host has " + ", ".join(number_words(v) + (f" {units}" if units else "") for v in values)

    return Check(asked.term, False, test_other, explain_other)


def _from_config(item: Consumable, host: Host) -> list[float]:
    """What the site config gives the host of a Resource (infosvc.config.resources)."""
    given = host.resources
    if given is None:
        return []
    if item.name == LICENSE:  # a license pool's count: the queue holds what running jobs draw
        return [float(count) for feature, count in given.licenses if item.type in (None, feature)]
    return [float(amount) for name, amount in given.consumables if name == item.name and item.type is None]


def _same_kind(item: Consumable, have: NodeAmount) -> bool:
    """Whether a node's amount is of the kind asked (a Resource: of its name, and type if asked)."""
    if have.kind != item.kind:
        return False
    return item.kind != "Resource" or (have.name == item.name and (item.type is None or have.type == item.type))


def _label(item: Consumable) -> str:
    if item.kind != "Resource":
        return item.kind
    return excerpt(" ".join(filter(None, (item.name or "Resource", item.type))))


def _string_test(term: Term, label: str, value: str) -> Callable[[list[str]], bool]:
    """A test of the host's values (any one that satisfies the op will do; NE: none equals)."""
    op = term.effective_op
    if op is Op.MATCH:
        regex = guarded_regex(value, f"the {label} pattern")
        return lambda values: any(fullmatch(regex, v) for v in values)
    if op not in (Op.EQ, Op.NE):
        raise MatchError(f"op {op.value} does not apply to {label}: use EQ, NE or Match")
    wanted = value.casefold()
    if op is Op.EQ:
        return lambda values: any(v.casefold() == wanted for v in values)
    return lambda values: all(v.casefold() != wanted for v in values)


#: Simple properties that name no property of a host.
_NOT_OF_A_HOST = "is not a property of a host"


def simple_check(term: Term, item: Simple, notes: list[str]) -> Check:
    """A simple property of the host or its cluster; the ones asked of a computing element
    (infosvc.matching.ce.CE_TERMS) are compiled by `ce.ce_check` instead."""
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


#: A Feature pattern tested on a host of more features than this (one RE2 call each) charges the
#: work budget itself, before it is tested: a host's few features are charged with the host.
CHARGED_FEATURES = 16


def is_feature_pattern(term: Term) -> bool:
    """Whether `term` is a Feature pattern: tested against each feature of a host, one RE2 call each."""
    return isinstance(term.item, Feature) and (
        term.item.aggregation is Aggregation.PATTERN or term.effective_op is Op.MATCH)


def feature_check(term: Term, item: Feature, work: WorkBudget | None = None) -> Check:
    """A Feature term; a pattern charges `work` on a host of many features (CHARGED_FEATURES)."""
    op = term.effective_op
    if op not in (Op.EQ, Op.NE, Op.MATCH):
        raise MatchError(f"op {op.value} does not apply to Feature: use EQ, NE or Match")
    if item.aggregation is Aggregation.PATTERN or op is Op.MATCH:
        regex = guarded_regex(item.value.strip(), "the Feature pattern")
        negate = op is Op.NE
        asked = f"Feature: asked {'no feature' if negate else 'a feature'} matching {excerpt(item.value.strip())}"
        spend = work.spend if work is not None else None

        def test_pattern(n: Node, h: Host, s: Site) -> bool:
            features = n.features
            if spend is not None and len(features) > CHARGED_FEATURES:
                spend()
            return any(fullmatch(regex, f) for f in features) != negate
        test: Test = test_pattern
    else:
        if item.aggregation is Aggregation.RANGE:
            bound_range("Feature", item.value)
        try:
            names = item.names()
        except NodeRefError as exc:
            raise MatchError(str(exc)) from None
        negate = op is Op.NE
        asked = f"Feature: asked {'none of' if negate else ''} {excerpt(', '.join(names))}".replace("  ", " ")

        # As sets: a host costs its features, not names x features (a list of 60,000 names, NE,
        # against 1,024 features held a host ~1 s).
        wanted = frozenset(names)
        test = ((lambda n, h, s: wanted.isdisjoint(n.features)) if negate
                else (lambda n, h, s: wanted.issubset(n.features)))
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
    by the Name its agent chose (infosvc.model.hostid: the aggregator keeps Ids in this form already)."""
    return canonical(name)


def node_check(term: Term, item: NodeRef) -> Check:
    op = term.effective_op
    if op not in (Op.EQ, Op.NE, Op.MATCH):
        raise MatchError(f"op {op.value} does not apply to Node: use EQ, NE or Match")
    negate = op is Op.NE
    if item.aggregation is Aggregation.PATTERN or op is Op.MATCH:
        regex = guarded_regex(item.value.strip(), "the Node pattern")
        asked = f"Node: asked {'not ' if negate else ''}matching {excerpt(item.value.strip())}"

        def test_pattern(n: Node, h: Host, s: Site) -> bool:
            return fullmatch(regex, h.unique_id) != negate
        test: Test = test_pattern
    else:
        names: Container[str]
        if item.aggregation is Aggregation.RANGE:
            bound_range("Node", item.value)
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
