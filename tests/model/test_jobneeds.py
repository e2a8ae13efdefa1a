"""What an SSS job writes outside Requested, read as what it needs (infosvc/model/jobneeds.py): which
properties are read, the precedence of Requested, the names the answers give, and that joining
them to a Requested list of any grouping means that list And them."""

from __future__ import annotations

from itertools import product
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.documents import make_node
from infosvc.codec.job_xml import parse_job
from infosvc.errors import DocumentError
from infosvc.matching import compile_requirements, evaluate
from infosvc.model.job import (
    And, Conj, Expr, Job, Leaf, Not, Or, Preferred, Simple, Term, requirement, resolve,
)
from infosvc.model.jobneeds import conjoined, read_needs
from infosvc.config.site import SiteConfig
from infosvc.hosts.rollup import host_from_node

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sss-job-examples"


def jobs_of(text: str) -> list[Job]:
    return resolve(parse_job(text).job)


def read(text: str) -> tuple[Job, tuple[str, ...]]:
    [job] = jobs_of(text)
    return read_needs(job)


def test_the_simple_example_needs_16_processors() -> None:
    job, names = read((FIXTURES / "simple.xml").read_text())
    assert names == ("Processors",)
    [term] = job.properties.requested
    assert term.name == "Processors" and term.item.value == 16  # type: ignore[union-attr]
    # Duration, User and the rest stay as written: only consumables and Features are read so
    assert [t.name for t in job.properties.requested] == ["Processors"]


def test_the_elaborate_example_s_master_task_group_needs_its_memory_license_and_feature() -> None:
    first, second = jobs_of((FIXTURES / "elaborate.xml").read_text())
    # the first job's tasks name the nodes they ran on: not needs
    assert read_needs(first) == (first, ())
    job, names = read_needs(second)
    assert names == ("TaskGroup Master: Memory", "TaskGroup Master: Resource License", "TaskGroup Master: Feature")
    master = job.task_groups[0]
    assert [t.name for t in master.properties.requested] == ["Memory", "Resource", "Feature"]
    # and the matcher holds a host to them
    requirements = compile_requirements(job)
    bare = make_node("n1.example", memory_mb=8192, free_memory_mb=4096)
    host = host_from_node(bare, "Ready", SiteConfig(), "2026-01-01T00:00:00Z")
    verdict = evaluate(requirements, bare, host)
    said = "; ".join(verdict.reasons)  # a host fits one of the task groups: none of them here
    assert not verdict.ok and "Feature: asked Jumbo-Frame, host has no features" in said, said
    assert "License ESSL2: asked GE 1 available, host has none" in said
    assert "Memory: asked GE 2048 MB available, host has 4096 MB" not in said  # 4096 free is enough


def test_a_requested_term_of_the_same_kind_takes_precedence() -> None:
    job, names = read("<Job><Id>j</Id><Processors>16</Processors><Memory>512</Memory>"
                      "<Requested><Processors op='GE'>2</Processors></Requested></Job>")
    assert names == ("Memory",)
    assert [(t.name, t.item.value) for t in job.properties.requested] == [  # type: ignore[union-attr]
        ("Processors", 2), ("Memory", 512.0)]


def test_resources_take_precedence_by_name() -> None:
    _, names = read("<Job><Id>j</Id><Resource name='License' type='a'>1</Resource>"
                    "<Resource name='Telescope'>1</Resource>"
                    "<Requested><Resource name='License' type='b'>2</Resource></Requested></Job>")
    assert names == ("Resource Telescope",)


def test_used_resources_and_nodes_are_not_needs() -> None:
    job, names = read("<Job><Id>j</Id><Processors context='Used'>4</Processors><Node>n1</Node>"
                      "<Disk context='Configured' units='GB'>100</Disk></Job>")
    assert names == ("Disk",)
    assert [t.name for t in job.properties.requested] == ["Disk"]


def test_tasks_are_named_by_name_id_or_number() -> None:
    _, names = read("<Job><Id>j</Id><TaskGroup><TaskCount>1</TaskCount><Task><Id>t1</Id><Swap>1</Swap></Task>"
                    "<Task><Feature>ib</Feature></Task></TaskGroup></Job>")
    assert names == ("TaskGroup 1, Task t1: Swap", "TaskGroup 1, Task 2: Feature")


def test_reading_again_reads_nothing_more() -> None:
    job, names = read((FIXTURES / "simple.xml").read_text())
    assert names and read_needs(job) == (job, ())


def test_the_scheduler_reads_them() -> None:
    from infosvc.model.jobneeds import read_needs
    from infosvc.sched.request import read_request

    [job] = jobs_of((FIXTURES / "simple.xml").read_text())
    request = read_request(read_needs(job), "someone")
    assert (request.min_processors, request.max_processors, request.read_as_requested) == (16, 16, ("Processors",))
    [group_memory] = jobs_of("<Job><Id>j</Id><TaskGroup><Name>g</Name><Memory units='GB'>2</Memory></TaskGroup></Job>")
    assert read_request(read_needs(group_memory), "someone").memory_mb == 2048


# --- joining them to a Requested list of any grouping -----------------------------------------------

def _holds(expr: Expr | None, truth: dict[str, bool]) -> bool:
    if expr is None:
        return True
    if isinstance(expr, Leaf):
        assert isinstance(expr.term.item, Simple)
        return truth[expr.term.item.name]
    if isinstance(expr, Not):
        return not _holds(expr.operand, truth)
    if isinstance(expr, And):
        return all(_holds(e, truth) for e in expr.operands)
    if isinstance(expr, Or):
        return any(_holds(e, truth) for e in expr.operands)
    return any(_holds(leaf, truth) for leaf in expr.alternatives)


def _preferred(expr: Expr | None) -> list[tuple[tuple[str, ...], tuple[float, ...]]]:
    """Every Preferred set of an expression, by its terms' names, with their weights."""
    if isinstance(expr, Preferred):
        return [(tuple(leaf.term.name for leaf in expr.alternatives), expr.weights)]
    if isinstance(expr, Not):
        return _preferred(expr.operand)
    if isinstance(expr, (And, Or)):
        return [found for e in expr.operands for found in _preferred(e)]
    return []


TERMS = st.lists(st.tuples(st.integers(-2, 2), st.sampled_from([None, *Conj]),
                           st.sampled_from([None, None, None, 1, 2, -1])), min_size=1, max_size=6)


@given(TERMS)
def test_conjoined_means_the_list_and_the_needs(spec: list[tuple[int, Conj | None, int | None]]) -> None:
    terms = [Term(Simple(f"t{number}", "x"), conj=conj, group=group, preference=preference)
             for number, (group, conj, preference) in enumerate(spec)]
    need = Term(Simple("need", "x"))
    try:
        joined = conjoined(terms, [need])
    except DocumentError:
        # the one case refused: a first term that closes or negates, and a last term with a
        # positive preference in its own group
        assert terms[0].group < 0 or terms[0].effective_conj in (Conj.NAND, Conj.NOR)
        assert terms[-1].group > 0 and (terms[-1].preference or 0) > 0
        return
    before, after = requirement(terms), requirement(joined)
    names = [f"t{number}" for number in range(len(terms))] + ["need"]
    for values in product((False, True), repeat=len(names)):
        truth = dict(zip(names, values))
        assert _holds(after.expr, truth) == (_holds(before.expr, truth) and truth["need"]), (terms, joined)
    assert _preferred(after.expr) == _preferred(before.expr)
    assert [(t.name, w) for t, w in after.soft] == [(t.name, w) for t, w in before.soft]


def test_the_spec_s_own_grouping_is_kept() -> None:
    # (Processors 12) Or (Processors 16 And Memory 512 And Node ...), And the unenveloped Feature
    text = (FIXTURES / "elaborate.xml").read_text().replace(
        "<NodeCount>4</NodeCount>", "<NodeCount>4</NodeCount><Feature>ib</Feature>")
    _, second = jobs_of(text)
    job, names = read_needs(second)
    assert names == ("TaskGroup Master: Memory", "TaskGroup Master: Resource License", "TaskGroup Master: Feature",
                     "TaskGroup Slave: Feature")
    expr = requirement(job.task_groups[1].properties.requested).expr
    assert isinstance(expr, And) and isinstance(expr.operands[0], Or)
    assert isinstance(expr.operands[-1], Leaf) and expr.operands[-1].term.name == "Feature"


def test_a_list_that_cannot_take_them_is_refused_with_a_way_out() -> None:
    with pytest.raises(DocumentError, match="write it inside Requested"):
        read("<Job><Id>j</Id><Feature>ib</Feature><Requested><Memory group='-1'>1</Memory>"
             "<Memory conj='Or' group='1' preference='2'>2</Memory></Requested></Job>")
