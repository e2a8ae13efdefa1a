"""Ranges bounded before anything is expanded: each Node or Feature Range of a job at most
MAX_RANGE names, and all the Ranges of one request together within one budget (docs/security.md)."""

from __future__ import annotations

from typing import Iterable, Iterator

from ClusterShell.NodeSet import NodeSetParseError

from infosvc.errors import excerpt
from infosvc.matching.errors import MatchError
from infosvc.model.job import Feature, Job, Task, TaskGroup
from infosvc.model.noderef import Aggregation, NodeRef

__all__ = ["MAX_RANGE", "check_range_budget", "bound_range"]

#: Most names a Range may expand to, and all the Ranges of one request together (check_range_budget).
MAX_RANGE = 100_000


def bound_range(what: str, expression: str) -> None:
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
                    bound_range(term.name, item.value)
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
