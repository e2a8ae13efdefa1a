"""What an SSS job writes outside Requested and Delivered, read as what it needs (docs/sss-job.md).

The SSS Job spec (8.0) recommends leaving a property out of Requested and Delivered "when no such
distinction is necessary", and its own simple example writes `<Processors>16</Processors>`
directly under Job. Such a job needs 16 processors; reading only Requested would match it to any
host. So each level of a resolved job (the job, each task group, each task) reads as Requested:

- its consumables (Processors, Memory, Disk, Network, Swap, and Resource), in any context but
  Used, which the spec likens to a Delivered property ("the task used the indicated resources");
- its Features ("an arbitrary named feature of a node": the elaborate example's master task group
  writes `<Feature>Jumbo-Frame</Feature>` beside its Memory and license, all of them needs);

unless that level's Requested list has a term of the same kind (of the same name, for Resource):
what is written in Requested takes precedence. Node is not read so: a Task's Node is "the node
this task ran on" (Table 7), and the elaborate example lists them for a completed job. Nor are
the other simple properties that may be categorized (Machine, Queue, Duration, Architecture, ...):
the spec's examples write them outside Requested for what a job was given as much as for what it
asks. A job asks for those inside Requested.

The properties read are joined to the Requested list with And (`conjoined`), so the scheduler,
the matcher and everything else that reads Requested read them too; `read_needs` says which.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from infosvc.errors import DocumentError
from infosvc.model.job import (
    RESOURCE, Conj, Consumable, Context, Job, Properties, TaskGroup, Term, implicit_groups,
)

__all__ = ["conjoined", "needs", "read_needs"]


def _kind(term: Term) -> tuple[str, str | None]:
    """What precedence compares: the element name, and a Resource's name."""
    item = term.item
    if isinstance(item, Consumable) and item.kind == RESOURCE:
        return (RESOURCE, item.name)
    return (term.name, None)


def needs(props: Properties) -> list[Term]:
    """The unenveloped consumables and Features of one level that it needs, as Requested terms
    (op EQ, conj And), in the order written; none of a kind its Requested list already has."""
    asked = {_kind(term) for term in props.requested}
    found: list[Term] = []
    for consumable in props.consumables:
        if consumable.effective_context is not Context.USED:
            found.append(Term(consumable))
    found.extend(Term(feature) for feature in props.features)
    return [term for term in found if _kind(term) not in asked]


def _label(term: Term) -> str:
    item = term.item
    if isinstance(item, Consumable) and item.kind == RESOURCE and item.name:
        return f"{RESOURCE} {item.name}"
    return term.name


def conjoined(terms: list[Term], extra: list[Term]) -> list[Term]:
    """One flat Requested list meaning `terms` And each of `extra`.

    A Requested list is read left to right, its groups as written; a group left open closes at
    the end of the list, and a close with no open group closes one opened at its start
    (model.job.implicit_groups). So `extra` goes after every group of `terms` is closed: the last
    term closes them (a last term that opens groups holds nothing else in them, and without them
    means the same). A last term with a positive preference that opens its own group is the one
    case where that would change its meaning: then `terms` is wrapped in a group after `extra`,
    where its first term allows (it opens groups or none, with And or Or); else DocumentError asks
    for the property inside Requested.
    """
    if not extra:
        return list(terms)
    if not terms:
        return list(extra)
    opens, still_open = implicit_groups(terms)
    last = terms[-1]
    if still_open == 0:
        return [*terms, *extra]
    if last.group <= 0:
        return [*terms[:-1], replace(last, group=last.group - still_open), *extra]
    if last.preference is None or last.preference < 0:
        return [*terms[:-1], replace(last, group=-(still_open - last.group)), *extra]
    first = terms[0]
    if first.group >= 0 and first.effective_conj in (Conj.AND, Conj.OR):
        # The groups opened at the start of the list are opened by its first term instead, in a
        # group of their own after `extra`; And and Or mean the same for a first term.
        return [*extra, replace(first, group=first.group + opens + 1, conj=None), *terms[1:]]
    named = ", ".join(dict.fromkeys(_label(term) for term in extra))
    raise DocumentError(f"{named}, written outside Requested, cannot be joined to this Requested list "
                        "(its first term closes a group or says Nand / Nor, its last opens a preferred group "
                        "of its own): write it inside Requested")


def _read(props: Properties, where: str, read: list[str]) -> Properties:
    extra = needs(props)
    if not extra:
        return props
    read.extend(where + label for label in dict.fromkeys(_label(term) for term in extra))
    return replace(props, requested=conjoined(props.requested, extra))


def _name(props: Properties, number: int) -> str:
    return props.get("Name") or props.get("Id") or str(number)


class NeedsRead(NamedTuple):
    """A resolved job whose needs are read into Requested (read_needs), and what was read so: what
    the scheduler's request (infosvc.sched.request) and the matcher read, read once."""

    job: Job
    read_as_requested: tuple[str, ...]


def read_needs(job: Job) -> NeedsRead:
    """A resolved job (model.job.resolve) whose levels' Requested lists hold what they need
    written outside Requested, and what was read so: "Processors" for the job itself,
    "TaskGroup Master: Memory", "TaskGroup 1, Task 2: Resource License" for the levels below (a
    task group or task by its Name, else its Id, else its number from 1). Reading the result again
    reads nothing more: its Requested lists have every kind it needs."""
    read: list[str] = []
    props = _read(job.properties, "", read)
    groups: list[TaskGroup] = []
    for number, group in enumerate(job.task_groups, 1):
        where = f"TaskGroup {_name(group.properties, number)}"
        own = _read(group.properties, f"{where}: ", read)
        tasks = [replace(task, properties=_read(task.properties, f"{where}, Task {_name(task.properties, index)}: ",
                                                read))
                 for index, task in enumerate(group.tasks, 1)]
        groups.append(replace(group, properties=own, tasks=tasks))
    if not read:
        return NeedsRead(job, ())
    return NeedsRead(replace(job, properties=props, task_groups=groups), tuple(read))
