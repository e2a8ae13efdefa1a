"""infosvc.matching: requirement evaluation of SSS Jobs against hosts, pure (no server)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from conftest import make_node
from infosvc.codec.job_xml import parse_job
from infosvc.matching import (
    MatchError, Requirements, Verdict, compile_requirements, evaluate, guarded_regex, match,
)
from infosvc.model.glue import Host
from infosvc.model.job import resolve
from infosvc.model.node import Consumable, Extension, Node
from infosvc.rollup import Rollup, host_from_node
from infosvc.siteconfig import SiteConfig

CONFIG = SiteConfig()


def requirements(requested: str = "", extra: str = "") -> Requirements:
    body = f"<Requested>{requested}</Requested>" if requested else ""
    parsed = parse_job(f"<Job><Id>j1</Id>{extra}{body}</Job>")
    return compile_requirements(resolve(parsed.job)[0])


def host_of(node: Node, state: str = "Ready") -> Host:
    return host_from_node(node, state, CONFIG, "2026-01-01T00:00:00Z")


def check(req: Requirements, node: Node, state: str = "Ready") -> Verdict:
    return evaluate(req, node, host_of(node, state))


def fits(req: Requirements, **kwargs: Any) -> bool:
    return check(req, make_node("n1.example", **kwargs)).ok


def with_clock(node: Node, mhz: int) -> Node:
    node.extensions = [replace(e, value=str(mhz)) if e.name == "ClockSpeed" else e for e in node.extensions]
    return node


# --- conj and group ----------------------------------------------------------------------------

SUBSETS = [(), ("a",), ("b",), ("a", "b")]


@pytest.mark.parametrize(("conj", "expected"), [
    ("And", [False, False, False, True]),
    ("Or", [False, True, True, True]),
    ("Nand", [False, True, False, False]),  # a and not b
    ("Nor", [True, True, False, True]),  # a or not b
])
def test_conj_truth_tables(conj: str, expected: list[bool]) -> None:
    req = requirements(f'<Feature>a</Feature><Feature conj="{conj}">b</Feature>')
    assert [fits(req, features=s) for s in SUBSETS] == expected


def test_groups_nest() -> None:
    # a Or (b And c)
    req = requirements('<Feature>a</Feature><Feature conj="Or" group="1">b</Feature><Feature group="-1">c</Feature>')
    assert [fits(req, features=s) for s in [("a",), ("b",), ("b", "c"), ("c",), ()]] == [True, False, True, False, False]
    # (a Or b) And c
    req = requirements('<Feature group="1">a</Feature><Feature conj="Or" group="-1">b</Feature><Feature>c</Feature>')
    assert [fits(req, features=s) for s in [("a",), ("a", "c"), ("b", "c"), ("c",)]] == [False, True, True, False]
    # Nand of a group: a And Not (b Or c)
    req = requirements('<Feature>a</Feature><Feature conj="Nand" group="1">b</Feature>'
                       '<Feature conj="Or" group="-1">c</Feature>')
    assert [fits(req, features=s) for s in [("a",), ("a", "b"), ("a", "c"), ()]] == [True, False, False, False]


def test_or_reasons_name_every_alternative() -> None:
    req = requirements('<Feature>a</Feature><Feature conj="Or">b</Feature>')
    verdict = check(req, make_node("n1", features=("c",)))
    assert verdict.reasons == ("none of: (Feature: asked a, host has c) | (Feature: asked b, host has c)",)


def test_nand_reason() -> None:
    req = requirements('<Feature>a</Feature><Feature conj="Nand">b</Feature>')
    verdict = check(req, make_node("n1", features=("a", "b")))
    assert verdict.reasons == ("must not hold: Feature: asked b, host has a, b",)


# --- preferences -------------------------------------------------------------------------------

def test_positive_preferences_need_one_and_rank_by_weight() -> None:
    req = requirements('<Memory preference="2">1024</Memory><Memory preference="1">512</Memory>')
    best = check(req, make_node("n1", free_memory_mb=2048))
    second = check(req, make_node("n1", free_memory_mb=700))
    none = check(req, make_node("n1", free_memory_mb=100))
    assert best.ok and best.score == pytest.approx(2 / 3)
    assert second.ok and second.score == pytest.approx(1 / 3)
    assert not none.ok
    assert none.reasons[0].startswith("none of the preferred alternatives holds: Memory: asked GE 1024 MB available")


def test_negative_preferences_are_soft() -> None:
    req = requirements('<Processors op="GE">2</Processors><Feature preference="-3">gpu</Feature>'
                       '<Feature preference="-1">ib</Feature>')
    plain = check(req, make_node("n1"))
    gpu = check(req, make_node("n1", features=("gpu",)))
    both = check(req, make_node("n1", features=("gpu", "ib")))
    assert plain.ok and plain.score == 0
    assert gpu.ok and gpu.score == pytest.approx(0.75)
    assert both.ok and both.score == pytest.approx(1.0)
    assert not check(req, make_node("n1", free_processors=1)).ok  # the hard part still counts


# --- ops, units, reasons -----------------------------------------------------------------------

@pytest.mark.parametrize(("op", "value", "expected"), [
    ("EQ", 4, True), ("EQ", 3, False), ("NE", 4, False), ("NE", 3, True), ("LT", 5, True), ("LT", 4, False),
    ("LE", 4, True), ("LE", 3, False), ("GT", 3, True), ("GT", 4, False), ("GE", 4, True), ("GE", 5, False),
])
def test_numeric_ops(op: str, value: int, expected: bool) -> None:
    req = requirements(f'<Processors op="{op}" context="Configured">{value}</Processors>')
    assert fits(req, processors=4) is expected
    req = requirements(f'<Memory op="{op}" context="Configured">{value * 1024}</Memory>')
    assert fits(req, memory_mb=4096) is expected


def test_available_amounts_are_what_the_job_takes() -> None:
    req = requirements("<Processors>2</Processors>")
    assert fits(req, processors=8)
    assert not fits(req, processors=8, free_processors=1)
    req = requirements('<Processors op="GE">8</Processors><Processors op="LE">16</Processors>')
    assert fits(req, processors=32) and fits(req, processors=8) and not fits(req, processors=4)
    req = requirements('<Processors op="GT">4</Processors>')
    assert fits(req, processors=5) and not fits(req, processors=4)
    # Configured: EQ as written
    req = requirements('<Processors context="Configured">4</Processors>')
    assert fits(req, processors=4) and not fits(req, processors=8)


def test_memory_reason_wording() -> None:
    req = requirements('<Memory op="GE">4096</Memory>')
    verdict = check(req, make_node("n1", memory_mb=4096, free_memory_mb=2048))
    assert verdict == Verdict(False, ("Memory: asked GE 4096 MB available, host has 2048 MB",), 0.0)


def test_units_are_converted() -> None:
    node = make_node("n1", memory_mb=16384, free_memory_mb=4096)
    assert check(requirements('<Memory op="GE" units="GB">4</Memory>'), node).ok
    verdict = check(requirements('<Memory op="GE" units="GB">5</Memory>'), node)
    assert verdict.reasons == ("Memory: asked GE 5 GB (5120 MB) available, host has 4096 MB",)
    assert check(requirements('<Memory op="GE" context="Configured" units="Gigabyte">16</Memory>'), node).ok
    assert check(requirements('<Memory op="LT" units="KB">4194305</Memory>'), node).ok


def test_disk_and_licenses_and_adapters() -> None:
    node = make_node("n1")
    node.available.add(Consumable("Disk", 2.0, units="GB"))
    node.available.add(Consumable("Resource", 2, name="License", type="matlab"))
    node.configured.add(Consumable("Resource", 10000, name="NetworkAdapter", type="ib0"))
    assert check(requirements('<Disk op="GE">2048</Disk>'), node).ok
    assert not check(requirements('<Disk op="GE" units="GB">3</Disk>'), node).ok
    assert check(requirements('<Resource name="License" type="matlab">2</Resource>'), node).ok
    verdict = check(requirements('<Resource name="License" type="ansys">1</Resource>'), node)
    assert verdict.reasons == ("License ansys: asked GE 1 available, host has none",)
    assert check(requirements('<Resource name="NetworkAdapter" context="Configured" op="GE">1000</Resource>'), node).ok


def test_string_properties() -> None:
    node = make_node("n1", opsys="Linux", arch="x86_64", os_name="Rocky Linux", os_release="9.3")
    assert check(requirements("<Architecture>x86_64</Architecture>"), node).ok
    assert check(requirements("<OperatingSystem>linux</OperatingSystem>"), node).ok
    assert check(requirements("<OperatingSystem>Rocky Linux 9.3</OperatingSystem>"), node).ok
    assert check(requirements('<OperatingSystem op="Match">Rocky.*</OperatingSystem>'), node).ok
    assert check(requirements('<Architecture op="NE">aarch64</Architecture>'), node).ok
    verdict = check(requirements("<Architecture>aarch64</Architecture>"), node)
    assert verdict.reasons == ("Architecture: asked EQ aarch64, host has x86_64",)
    # outside Requested: a description, not a requirement
    assert check(requirements(extra="<Architecture>aarch64</Architecture>"), node).ok
    with pytest.raises(MatchError, match="does not apply"):
        requirements('<Architecture op="GT">x</Architecture>')


def test_not_a_host_property_is_noted() -> None:
    req = requirements("<User>amy</User><Processors>1</Processors>")
    assert req.notes == ("Requested User is not a property of a host: not used to match hosts",)
    assert fits(req)


# --- regular expressions -----------------------------------------------------------------------

@pytest.mark.parametrize("pattern", ["(a+)+$", "(a*)*b", "(a|aa)*c", r"(a)\1", "x" * 300, "a.*b.*c.*d.*e", "(a"])
def test_pathological_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(MatchError):
        guarded_regex(pattern)


def test_refused_pattern_in_a_job() -> None:
    with pytest.raises(MatchError, match="nests a repeat"):
        requirements('<Node aggregation="Pattern">(a+)+$</Node>')


def test_accepted_pattern_runs_fast_on_long_subjects() -> None:
    regex = guarded_regex("a.*a.*a.*b")
    started = time.perf_counter()
    assert regex.fullmatch("a" * 255) is None
    assert time.perf_counter() - started < 1.0


# --- features and nodes ------------------------------------------------------------------------

def test_features() -> None:
    req = requirements('<Feature aggregation="List">gpu,ib</Feature>')
    assert fits(req, features=("gpu", "ib", "ssd")) and not fits(req, features=("gpu",))
    req = requirements('<Feature aggregation="Pattern">gpu-.*</Feature>')
    assert fits(req, features=("gpu-a100",)) and not fits(req, features=("gpu",))
    req = requirements('<Feature op="NE">gpu</Feature>')
    assert fits(req, features=("ib",)) and not fits(req, features=("gpu",))
    verdict = check(requirements("<Feature>gpu</Feature>"), make_node("n1"))
    assert verdict.reasons == ("Feature: asked gpu, host has no features",)


@pytest.mark.parametrize(("ref", "expected"), [
    ('<Node aggregation="List">n1,n3</Node>', [True, False, True]),
    ('<Node aggregation="Pattern">n[12]</Node>', [True, True, False]),
    ('<Node aggregation="Range">n[2-3]</Node>', [False, True, True]),
    ("<Node>n2</Node>", [False, True, False]),
    ('<Node op="NE">n2</Node>', [True, False, True]),
])
def test_node_references(ref: str, expected: list[bool]) -> None:
    req = requirements(ref)
    assert [check(req, make_node(f"n{i}")).ok for i in (1, 2, 3)] == expected


def test_huge_range_refused() -> None:
    with pytest.raises(MatchError, match="at most"):
        requirements('<Node aggregation="Range">n[1-1000000]</Node>')


# --- state, task groups ------------------------------------------------------------------------

def test_hosts_not_ready_never_match() -> None:
    verdict = check(requirements("<Processors>1</Processors>"), make_node("n1"), state="Paused")
    assert verdict == Verdict(False, ("host is Paused",), 0.0)
    assert check(requirements(), make_node("n1"), state="Unreachable").reasons == ("host is Unreachable",)


def test_task_groups() -> None:
    doc = ("<Job><Id>j</Id><TaskGroup><TaskCount>1</TaskCount><Requested><Feature>gpu</Feature></Requested>"
           "</TaskGroup><TaskGroup><TaskCount>1</TaskCount><Requested><Feature>ib</Feature></Requested>"
           "</TaskGroup></Job>")
    job = resolve(parse_job(doc).job)[0]
    req = compile_requirements(job)
    assert [fits(req, features=f) for f in [("gpu",), ("ib",), ()]] == [True, True, False]
    only_first = compile_requirements(job.task_groups[0])
    assert [fits(only_first, features=f) for f in [("gpu",), ("ib",)]] == [True, False]
    # tasks too: Requested in the tasks of one group
    doc = ("<Job><Id>j</Id><Requested><Processors>2</Processors></Requested><TaskGroup><TaskCount>2</TaskCount>"
           "<Task><Requested><Feature>gpu</Feature></Requested></Task>"
           "<Task><Requested><Feature>ib</Feature></Requested></Task></TaskGroup></Job>")
    req = compile_requirements(resolve(parse_job(doc).job)[0])
    assert [fits(req, features=f) for f in [("gpu",), ("ib",), ()]] == [True, True, False]
    assert not fits(req, features=("gpu",), free_processors=1)


# --- a site: ordering and caching --------------------------------------------------------------

def site(nodes: list[Node], states: dict[str, str] | None = None) -> tuple[Rollup, dict[str, Node]]:
    rollup = Rollup(CONFIG)
    for node in nodes:
        rollup.update(host_of(node, (states or {}).get(node.id, "Ready")))
    return rollup, {node.id: node for node in nodes}


def test_order_by_score_then_memory_then_clock() -> None:
    nodes = [
        with_clock(make_node("small-fast", memory_mb=4096), 3000),
        with_clock(make_node("big-slow", memory_mb=16384), 2000),
        with_clock(make_node("big-fast", memory_mb=16384), 3000),
        with_clock(make_node("gpu-small", memory_mb=2048, features=("gpu",)), 1000),
        make_node("paused"),
        make_node("tiny", processors=1),
    ]
    rollup, nodes_by_id = site(nodes, {"paused": "Paused"})
    req = requirements('<Processors op="GE">2</Processors><Feature preference="-1">gpu</Feature>')
    result = match(req, rollup, nodes_by_id.get)
    assert [c.host.unique_id for c in result.matches] == ["gpu-small", "big-fast", "big-slow", "small-fast"]
    assert dict(result.rejected) == {"paused": ("host is Paused",),
                                     "tiny": ("Processors: asked GE 2 available, host has 1",)}
    body = result.as_json()
    assert body["matches"][0]["host"] == "gpu-small"
    assert body["matches"][0]["subcluster"] == rollup.subcluster_of("gpu-small").unique_id  # type: ignore[union-attr]
    assert set(body["matches"][0]) >= {"host", "subcluster", "computing_element", "score"}


def test_static_part_is_evaluated_once_per_subcluster() -> None:
    nodes = [make_node(f"x{i}", arch="x86_64") for i in range(6)] + [make_node(f"a{i}", arch="aarch64")
                                                                      for i in range(4)]
    rollup, nodes_by_id = site(nodes)
    assert len(rollup.subclusters) == 2
    req = requirements('<Architecture>x86_64</Architecture><Processors context="Configured">4</Processors>'
                       '<Memory op="GE">1024</Memory>')
    result = match(req, rollup, nodes_by_id.get)
    assert len(result.matches) == 6
    assert {r for _, r in result.rejected} == {("Architecture: asked EQ x86_64, host has aarch64",)}
    # the static part once per subcluster; the dynamic part only on the hosts the static part let through
    assert req.evaluations == {"static": 2, "dynamic": 6}
    # a second run reuses the cache
    match(req, rollup, nodes_by_id.get)
    assert req.evaluations == {"static": 2, "dynamic": 12}
    # one host at a time, with its subcluster: the same cache
    req = requirements('<Architecture>x86_64</Architecture><Memory op="GE">1024</Memory>')
    for node in nodes:
        sub = rollup.subcluster_of(node.id)
        assert sub is not None
        evaluate(req, node, rollup.hosts[node.id], subcluster=sub.unique_id)
    assert req.evaluations == {"static": 2, "dynamic": 10}


def test_node_extension_clock_helper() -> None:
    node = with_clock(make_node("n1"), 3300)
    assert host_of(node).processor.clock_speed == 3300
    assert node.extensions[-1] == Extension("ClockSpeed", "3300", "Processor")


def test_static_cache_keeps_the_opsys_apart() -> None:
    # Same OS name and release (so one subcluster), different SSS Opsys: the static cache must not mix them.
    nodes = [make_node("lin", opsys="Linux"), make_node("other", opsys="GNU")]
    rollup, nodes_by_id = site(nodes)
    assert len(rollup.subclusters) == 1
    req = requirements("<OperatingSystem>Linux</OperatingSystem>")
    assert req.static and not req.dynamic
    result = match(req, rollup, nodes_by_id.get)
    # "Rocky Linux" is the OS name of both; only the Opsys differs, and both ask "Linux"
    assert [c.host.unique_id for c in result.matches] == ["lin"]
    assert dict(result.rejected) == {"other": ("OperatingSystem: asked EQ Linux, host has Rocky Linux / GNU / "
                                               "Rocky Linux 9.3",)}
    assert req.evaluations["static"] == 2


def varied_site() -> tuple[Rollup, dict[str, Node]]:
    """Several subclusters (models, CPU counts, architectures), mixed states and free amounts, ties
    in score, memory and clock, two Opsys values in one subcluster, and a host without a node."""
    nodes, states = [], {}
    for i in range(240):
        cpus = (2, 4, 8, 16)[i % 4]
        node = make_node(f"h{(i * 37) % 240:03d}", processors=cpus, free_processors=(i * 7) % (cpus + 1),
                         memory_mb=(4096, 8192)[(i // 4) % 2], free_memory_mb=float((i * 13) % 9 * 1024),
                         features=("ib",) if i % 3 == 0 else ("ib", "ssd") if i % 5 == 0 else (),
                         opsys="GNU" if i % 60 == 7 else "Linux", arch="aarch64" if i % 11 == 0 else "x86_64",
                         model=f"Xeon {i % 6}")
        nodes.append(with_clock(node, (2000, 3000)[(i // 8) % 2]))
        if i % 17 == 3:
            states[node.id] = ("Paused", "Pending", "Unreachable")[i % 3]
    rollup, by_id = site(nodes, states)
    del by_id[nodes[5].id]  # a host the rollup knows without a node: left out
    return rollup, by_id


@pytest.mark.parametrize("requested", [
    '<Architecture>x86_64</Architecture><OperatingSystem>Linux</OperatingSystem>'
    '<Processors context="Configured" op="GE">4</Processors><Processors op="GE">2</Processors>'
    '<Memory op="GE" units="GB">2</Memory><Feature preference="-1">ib</Feature>'
    '<Feature preference="-2">ssd</Feature>',
    '<Architecture>x86_64</Architecture><Memory op="GE">3072</Memory><Memory>1024</Memory>',
    '<Processors>3</Processors><Processors op="GE">1</Processors>',
    '<OperatingSystem>Linux</OperatingSystem><Feature preference="-1">ssd</Feature>',
    '<Processors op="GE">1</Processors><Processors op="LE">8</Processors><Memory op="GE">0</Memory>',
])
def test_threshold_fast_path_is_the_general_path(requested: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from infosvc import matching

    rollup, by_id = varied_site()
    assert len(rollup.subclusters) > 5
    fast_req = requirements(requested)
    assert (matching._limits(fast_req.dynamic) is not None) == bool(fast_req.dynamic)  # thresholds inline
    fast = match(fast_req, rollup, by_id.get)
    with monkeypatch.context() as m:
        m.setattr(matching, "_limits", lambda dynamic: None)  # the closures of the general path
        slow_req = requirements(requested)
        slow = match(slow_req, rollup, by_id.get)
    assert fast.matches and fast.rejected
    assert [(c.host.unique_id, c.subcluster, c.computing_element, c.score) for c in fast.matches] == \
        [(c.host.unique_id, c.subcluster, c.computing_element, c.score) for c in slow.matches]
    assert fast.rejected == slow.rejected
    assert [(h.unique_id, s) for h, s in fast._missed] == [(h.unique_id, s) for h, s in slow._missed]
    assert fast_req.evaluations == slow_req.evaluations
    # the order is a plain sort on the whole key
    def whole_key(c: Any) -> tuple[float, int, int, str]:
        return (-c.score, -(c.host.main_memory.ram_size or 0), -(c.host.processor.clock_speed or 0), c.host.unique_id)
    assert fast.matches == sorted(fast.matches, key=whole_key)
    assert len({whole_key(c)[:3] for c in fast.matches}) < len(fast.matches)  # ties, broken by id
    # and against one host at a time
    one = requirements(requested)
    for c in fast.matches:
        verdict = evaluate(one, by_id[c.host.unique_id], c.host)
        assert verdict.ok and verdict.score == c.score
    for host_id, reasons in fast.rejected:
        assert not evaluate(one, by_id[host_id], rollup.hosts[host_id]).ok


def test_thresholds_compile_only_for_plain_amounts() -> None:
    from infosvc import matching

    assert matching._limits(requirements('<Processors>4</Processors><Memory units="GB">2</Memory>').dynamic) \
        == (4.0, 2048.0)
    for requested in ('<Processors op="GT">4</Processors>', '<Memory context="Configured" op="GE">4</Memory>',
                      '<Feature>ib</Feature>', '<Disk op="GE">10</Disk>'):
        assert matching._limits(requirements(requested).dynamic) is None, requested
