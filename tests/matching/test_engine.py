"""The match engine's seams (infosvc/matching/engine.py): the per-host way and the columns' way give
the same verdicts, order and counts, called directly on the same site, at the thresholds' edges, at
the answer's limits and when the work budget is spent; what a host is asked (HostQuestion), how
hosts are grouped (StaticVerdicts) and how the fitting ones are ranked, each on its own; and no
module of the package reaching into another's private names."""

from __future__ import annotations

import ast
import itertools
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from support.documents import make_node
from test_matching import THRESHOLD_JOBS, outcome, requirements, site, varied_site, with_clock
from infosvc.matching import AnswerLimits, HostQuestion, MatchResult, MatchTooCostly, Requirements, Site
from infosvc.matching.columns import match_columns
from infosvc.matching.engine import match_hosts
from infosvc.matching.hostcolumns import HostColumns
from infosvc.matching.hostquestion import NOTHING_ASKED
from infosvc.matching.ranking import by_score, in_order
from infosvc.matching.subclusters import StaticVerdicts
from infosvc.model.node import Node
from infosvc.hosts.rollup import Rollup

ROOT = Path(__file__).resolve().parents[2]


def both_ways(requested: str, rollup: Rollup, by_id: dict[str, Node]) -> tuple[Any, ...]:
    """The same job matched host by host and over fresh columns, each with its own Requirements:
    (per-host result, its Requirements, columns result, its Requirements)."""
    slow_req, fast_req = requirements(requested), requirements(requested)
    site_ = Site.of(rollup)
    slow = match_hosts(slow_req, rollup, by_id.get, site_, HostQuestion.of(slow_req))
    limits = HostQuestion.of(fast_req).thresholds
    assert limits is not None, "a job the columns can decide"
    fast = match_columns(fast_req, rollup, by_id.get, site_, HostColumns(), limits)
    assert fast is not None, "the columns decided it"
    return slow, slow_req, fast, fast_req


@pytest.mark.parametrize("requested", [*THRESHOLD_JOBS, ""])
def test_the_two_ways_called_directly_agree(requested: str) -> None:
    rollup, by_id = varied_site()
    slow, slow_req, fast, fast_req = both_ways(requested, rollup, by_id)
    assert outcome(fast, fast_req) == outcome(slow, slow_req)
    assert slow.matches and slow.rejected
    assert slow_req.evaluations["static"] >= 1 or not slow_req.static


def edge_site() -> tuple[Rollup, dict[str, Node]]:
    """Hosts one below, at and one above 4 free processors and 2048 MB free, or reporting no free
    memory, and one Paused at the limits; their clocks (three subclusters) follow their processors."""
    nodes, states = [], {}
    for cpus, ram in itertools.product((3, 4, 5), (2047.0, 2048.0, 2049.0, None)):
        node = make_node(f"c{cpus}-r{ram}", processors=8, free_processors=cpus, memory_mb=8192,
                         free_memory_mb=ram if ram is not None else 0.0)
        if ram is None:
            node.available.items = [c for c in node.available.items if c.kind != "Memory"]
        nodes.append(with_clock(node, 2000 + cpus))
    paused = make_node("paused-at-limits", processors=8, free_processors=4, memory_mb=8192, free_memory_mb=2048.0)
    nodes.append(paused)
    states[paused.id] = "Paused"
    return site(nodes, states)


@pytest.mark.parametrize("requested,fitting", [
    ('<Processors op="GE">4</Processors><Memory op="GE">2048</Memory>',
     {f"c{c}-r{r}" for c in (4, 5) for r in (2048.0, 2049.0)}),
    ('<Processors op="GE">4</Processors>', {f"c{c}-r{r}" for c in (4, 5) for r in (2047.0, 2048.0, 2049.0, None)}),
    ('<Memory op="GE">2048</Memory>', {f"c{c}-r{r}" for c in (3, 4, 5) for r in (2048.0, 2049.0)}),
    ('<Memory op="GE" units="GB">2</Memory>', {f"c{c}-r{r}" for c in (3, 4, 5) for r in (2048.0, 2049.0)}),
])
def test_the_two_ways_agree_at_the_thresholds_edges(requested: str, fitting: set[str]) -> None:
    rollup, by_id = edge_site()
    slow, slow_req, fast, fast_req = both_ways(requested, rollup, by_id)
    assert outcome(fast, fast_req) == outcome(slow, slow_req)
    assert {c.host.unique_id for c in slow.matches} == fitting
    # the fitting ones ranked by clock (here, their free processors) then id; the Paused one rejected
    assert [c.host.unique_id for c in slow.matches] == sorted(fitting, key=lambda h: (-int(h[1]), h))
    assert dict(slow.rejected)["paused-at-limits"] == ("host is Paused",)


@pytest.mark.parametrize("limits", [
    AnswerLimits(1, 1, 0), AnswerLimits(12, 3, 0), AnswerLimits(13, 3, 3), AnswerLimits(11, 2, 4),
    AnswerLimits(1000, 100, 1000),
])
def test_the_two_ways_answer_alike_at_the_answers_limits(limits: AnswerLimits) -> None:
    rollup, by_id = edge_site()
    requested = '<Processors op="GE">3</Processors><Memory op="GE">2048</Memory><Feature preference="-1">x</Feature>'
    slow, _, fast, _ = both_ways(requested, rollup, by_id)
    answer = slow.as_json(limits)
    assert answer == fast.as_json(limits)
    assert answer["matches_total"] == 6 and len(answer["matches"]) == min(limits.matches, 6)
    groups = 3  # 2047 MB free, no free memory reported, Paused
    assert answer["rejected_groups"] == groups
    assert len(answer["rejected"]) == max(0, min(limits.rejected, groups - limits.rejected_offset))


def test_a_spent_budget_stops_both_ways_before_anything_is_counted() -> None:
    rollup, by_id = varied_site()
    requested = THRESHOLD_JOBS[0]
    site_ = Site.of(rollup)
    limits = HostQuestion.of(requirements(requested)).thresholds
    assert limits == (2.0, 2048.0)
    for way in ("hosts", "columns"):
        req = requirements(requested)
        req.start_budget(0.0)
        with pytest.raises(MatchTooCostly):
            if way == "hosts":
                match_hosts(req, rollup, by_id.get, site_, HostQuestion.of(req))
            else:
                match_columns(req, rollup, by_id.get, site_, HostColumns(), limits)
        assert req.evaluations == {"static": 0, "dynamic": 0} and not req.static_cache, way
    # a budget not spent changes nothing in either way's answer
    slow, slow_req, fast, fast_req = both_ways(requested, rollup, by_id)
    budgeted = []
    for way in ("hosts", "columns"):
        req = requirements(requested)
        req.start_budget(60.0)
        found: MatchResult | None = (
            match_hosts(req, rollup, by_id.get, site_, HostQuestion.of(req)) if way == "hosts"
            else match_columns(req, rollup, by_id.get, site_, HostColumns(), limits))
        assert found is not None
        budgeted.append(outcome(found, req))
    assert budgeted == [outcome(slow, slow_req), outcome(fast, fast_req)]


def test_what_a_host_is_asked() -> None:
    thresholds = requirements('<Processors>4</Processors><Memory units="GB">2</Memory><Feature preference="-1">ib'
                              '</Feature>')
    asked = HostQuestion.of(thresholds)
    assert asked.thresholds == (4.0, 2048.0) and asked.fits is not None and asked.scorer is not None
    node, other = make_node("a", free_processors=4, free_memory_mb=2048.0, features=("ib",)), make_node("b")
    rollup, _ = site([node, other])
    host = rollup.hosts["a"]
    assert asked.fits(node, host, Site()) and asked.scorer(node, host, Site(), 0.5) == 1.5
    general = HostQuestion.of(thresholds, use_thresholds=False)
    assert general.thresholds is None and general.fits is not None and general.fits(node, host, Site())
    nothing = HostQuestion.of(requirements(""))
    assert nothing.thresholds == NOTHING_ASKED and nothing.fits is None and nothing.scorer is None
    assert HostQuestion.of(requirements("<Feature>ib</Feature>")).thresholds is None  # asked per host


def test_static_verdicts_are_one_per_subcluster_and_opsys() -> None:
    nodes = [make_node("l1"), make_node("l2"), make_node("g1", opsys="GNU")]
    rollup, by_id = site(nodes)
    hosts = rollup.hosts
    by_opsys = requirements("<OperatingSystem>Linux</OperatingSystem>")
    verdicts = StaticVerdicts(by_opsys, Site())
    assert not verdicts.per_subcluster
    assert verdicts.of_host("s", by_id["l1"], hosts["l1"]).ok
    assert verdicts.of_host("s", by_id["l2"], hosts["l2"]).ok  # the same group's: not evaluated again
    assert not verdicts.of_host("s", by_id["g1"], hosts["g1"]).ok
    assert verdicts.runs == 2 and set(by_opsys.static_cache) == {("s", "Linux"), ("s", "GNU")}
    # a later match of the same requirements reuses them
    again = StaticVerdicts(by_opsys, Site())
    assert again.of_group("s", "GNU", iter(())) is not None and again.runs == 0
    per_subcluster = requirements("<Architecture>x86_64</Architecture>")
    verdicts = StaticVerdicts(per_subcluster, Site())
    assert verdicts.per_subcluster
    assert verdicts.of_group("s", None, iter(())) is None  # no host with a node to decide it on
    members = iter([(by_id["l1"], hosts["l1"]), (by_id["l2"], hosts["l2"])])
    assert verdicts.of_group("s", "ignored", members) is not None and verdicts.runs == 1
    assert next(members)[0] is by_id["l2"]  # read no further than the first


def test_ranking_is_a_sort_on_the_whole_key() -> None:
    rng = random.Random(25)
    found = [(f"h{i:03d}", None, None, None, rng.choice((0.0, 0.5))) for i in range(200)]
    ranks = {f[0]: (f[4], rng.choice((0, 4096)), rng.choice((0, 2000, 3000))) for f in found}
    rng.shuffle(found)
    groups: dict[Any, list[Any]] = {}
    for f in found:
        groups.setdefault(ranks[f[0]], []).append(f)
    ordered = in_order(groups)
    assert [f[0] for f in ordered] == sorted(ranks, key=lambda h: (tuple(-k for k in ranks[h]), h))
    # the columns' order: already by (memory, clock, id), then stably by score
    rows = np.arange(6)
    order, score = by_score(rows, np.array([0.0, 1.0, 0.0, 1.0, 0.5, 0.0]))
    assert order.tolist() == [1, 3, 4, 0, 2, 5] and score.tolist() == [1.0, 1.0, 0.5, 0.0, 0.0, 0.0]
    same, _ = by_score(rows, np.zeros(6))
    assert same is rows


def _private_uses(path: Path, root: Path = ROOT) -> list[str]:
    """Private names of infosvc.matching's modules that `path` imports or reads from another module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("infosvc.matching"):
            found += [f"from {node.module} import {a.name}" for a in node.names if a.name.startswith("_")]
            modules |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            modules |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("infosvc")}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, (ast.Name, ast.Attribute))
                and ast.unparse(node.value).split(".")[0] in modules):
            found.append(ast.unparse(node))
    return [f"{path.relative_to(root)}: {use}" for use in found]


def test_no_private_name_of_the_matcher_crosses_a_module() -> None:
    paths = [*(ROOT / "infosvc").rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").glob("*.py")]
    crossing = [use for path in sorted(paths) for use in _private_uses(path)]
    assert not crossing, "\n".join(crossing)


def test_the_private_name_check_sees_what_it_must(tmp_path: Path) -> None:
    # the check above, shown to fail on both forms it looks for
    sample = tmp_path / "sample.py"
    sample.write_text("from infosvc.matching.engine import _Sweep, match\nimport infosvc.matching\n"
                      "infosvc.matching.engine._Sweep\nmatch._private\n", encoding="utf-8")
    assert len(_private_uses(sample, tmp_path)) == 3


def test_requirements_reused_across_both_ways_count_what_each_evaluates() -> None:
    # one Requirements matched host by host, then over the columns: the static verdicts the first
    # decided are not decided (nor counted) again by the second
    rollup, by_id = varied_site()
    req: Requirements = requirements(THRESHOLD_JOBS[0])
    site_ = Site.of(rollup)
    question = HostQuestion.of(req)
    assert question.thresholds is not None
    match_hosts(req, rollup, by_id.get, site_, question)
    static_once = req.evaluations["static"]
    assert static_once > 0
    assert match_columns(req, rollup, by_id.get, site_, HostColumns(), question.thresholds) is not None
    assert req.evaluations["static"] == static_once


# --- the work budget, charged where the work is ----------------------------------------------

def _patterns(count: int, op: str = "NE") -> str:
    """The review's costly job: `count` Feature patterns that no feature matches; NE, every host
    fits and each term is tested against each of its features (one RE2 call each); EQ, every host
    is rejected and explaining it tests each term against each feature again."""
    return "".join(f'<Feature op="{op}" aggregation="Pattern">zz{i}[0-9]*</Feature>' for i in range(count))


SPENT_AT = 1000  # RE2 calls, after which the budget is spent


def _spent_after(monkeypatch: pytest.MonkeyPatch, req: Requirements) -> list[int]:
    """RE2 calls counted (infosvc.matching.checks.fullmatch); `req`'s budget spent after SPENT_AT of
    them: how many more a match makes tells where it checks its budget, with no clock involved."""
    from infosvc.matching import checks

    calls = [0]
    real = checks.fullmatch

    def counted(regex: Any, text: str | None) -> bool:
        calls[0] += 1
        if calls[0] == SPENT_AT:
            req.start_budget(-1.0)  # spent from here on
        return real(regex, text)
    monkeypatch.setattr(checks, "fullmatch", counted)
    return calls


@pytest.mark.parametrize("features,terms", [(8, 200), (200, 100)])
@pytest.mark.parametrize("phase", ["match", "explain"])
def test_a_costly_job_stops_within_one_host_or_one_term_of_its_budget(
        monkeypatch: pytest.MonkeyPatch, features: int, terms: int, phase: str) -> None:
    # 128 hosts of 8 features and 4,000 NE patterns (243 KB, no token) ran 6.9 s on the event loop
    # before the budget, checked every 128 hosts, was first looked at; 500 patterns on hosts of 200
    # features 21 s. A host's terms are charged to it now, and a pattern over many features each.
    from infosvc.matching import match

    names = tuple(f"feat{j:04d}" for j in range(features))
    rollup, by_id = site([make_node(f"n{i:03d}", features=names) for i in range(128)])
    req = requirements(_patterns(terms, "NE" if phase == "match" else "EQ"))
    req.start_budget(60.0)
    if phase == "match":
        calls = _spent_after(monkeypatch, req)
        with pytest.raises(MatchTooCostly):
            match(req, rollup, by_id.get)
    else:
        result = match(req, rollup, by_id.get)
        assert not result.matches
        calls = _spent_after(monkeypatch, req)
        with pytest.raises(MatchTooCostly):
            result.as_json()
    # past its budget, the work goes on to the end of the host (a few features) or of the term
    # (many), never to the next 64th or 128th host
    one_host = 2 * terms * features  # explaining a host tests each term twice at most
    assert calls[0] - SPENT_AT <= (one_host if features <= 16 else features), calls
