"""A submitted document read into the jobs the queue takes: the three formats through
infosvc.codec.submission, resolved and their needs read once (`read_document`, which POST /v1/match
reads its documents with too: infosvc.queue.dryrun), each job's owner (from the token that files it, docs/security.md), its
scheduling request (infosvc.sched.request) and its host requirements compiled by the matcher, and
a JobGroup's dependencies checked for names that exist and for cycles. CPU-bound: the queue runs
it off the event loop for large documents."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from typing import Callable

from infosvc.codec.submission import parse_submission
from infosvc.errors import DocumentError, excerpt
from infosvc.matching import MatchError, Requirements
from infosvc.model.job import Job, JobGroup, Op, Properties, Simple, resolve
from infosvc.model.jobneeds import NeedsRead, read_needs
from infosvc.sched.jobs import JobRecord
from infosvc.sched.request import Budget, JobRequest, read_request
from infosvc.queue.eligibility import requirements_of
from infosvc.queue.upkeep import held_reason
from infosvc.model.ccsjob import JobState
from infosvc.errors import Forbidden

__all__ = ["INLINE_BYTES", "MAX_GROUP_JOBS", "Document", "Filer", "Prepared", "check_group", "owner_of", "prepare",
           "read_document", "read_inline", "requirements_again"]

log = logging.getLogger("infosvc.queue")

#: Most jobs one submission (a JobGroup) may hold.
MAX_GROUP_JOBS = 1000
#: compiled requirements kept by signature: a site's submissions mostly ask alike, and compiling
#: was a third of reading a small one (prepare, on the event loop for small documents)
COMPILED_KEPT = 1024
_compiled: dict[str, Requirements | None] = {}
_compiled_lock = threading.Lock()  # prepare also runs in worker threads (large documents)


@dataclass(frozen=True, slots=True)
class Filer:
    """Who files a submission: the owner its token gives (its USER, else `token-` and its digest's
    start) and whether the document may name another owner: only a token bound to no user (a
    portal's, which files for its own users) or an admin token may."""

    user: str
    may_name_owner: bool = False


#: The owner written by the filer or by no one: an offline check, or a stored job read again.
TRUSTED = Filer("", may_name_owner=True)


@dataclass(slots=True)
class Prepared:
    """One job of a submission, read and checked off the event loop."""

    request: JobRequest
    requirements: Requirements | None
    name: str
    #: the job's Requested terms as text: jobs that ask the same share one compiled Requirements
    signature: str = ""


@dataclass(frozen=True, slots=True)
class Document:
    """A job document read: as written (a Job or a JobGroup), its jobs resolved (defaults applied),
    each with its needs read into Requested, and the warnings owed to the sender."""

    parsed: Job | JobGroup
    written: list[Job]
    needs: list[NeedsRead]
    warnings: list[str]

    def budget(self) -> Budget:
        """What its jobs may expand to, together (infosvc/sched/budget.py)."""
        return Budget(group=isinstance(self.parsed, JobGroup))


def read_document(body: bytes, content_type: str, most: int, too_many: Callable[[int], Exception]) -> Document:
    """A document in any of the three formats read into resolved jobs, their needs read once (what
    a level needs but wrote outside Requested is Requested for the matcher and the scheduler
    alike); `too_many(count)` is raised for more than `most` jobs, before their needs are read."""
    parsed, warnings = parse_submission(body, content_type)
    written = resolve(parsed)
    if len(written) > most:
        raise too_many(len(written))
    return Document(parsed, written, [read_needs(job) for job in written], warnings)


#: A document at most this long is read on the event loop (a thread's hand-off costs as much as
#: reading it), unless it names one of these elements: a TaskCount makes tasks and a Node range
#: host names of a line, and a JobGroup's JobDefaults copy both into each job (~0.2 s for 10,000).
#: XML is read as UTF-8 only (codec/safexml.py) and an element's name cannot be written with a
#: character reference, so the bytes show them; a grid job (JSON) makes no task or name it does
#: not list.
INLINE_BYTES = 4096
_EXPANDING = (b"TaskCount", b"Node", b"JobGroup")


def read_inline(body: bytes) -> bool:
    """Whether a submitted document is cheap enough to read on the event loop: small, and naming no
    element that makes more of it."""
    return len(body) <= INLINE_BYTES and not any(word in body for word in _EXPANDING)


def _too_many_jobs(count: int) -> DocumentError:
    return DocumentError(f"the job group has {count} jobs; at most {MAX_GROUP_JOBS}")


def prepare(body: bytes, content_type: str, filer: Filer, exclusive_default: bool = True) -> tuple[list[Prepared], list[str]]:
    """The jobs of a submitted document (a JobGroup gives several), or DocumentError; Forbidden
    when the document names an owner the filer may not file for; a job that says nothing of
    exclusive use is as `exclusive_default` says. CPU-bound."""
    document = read_document(body, content_type, MAX_GROUP_JOBS, _too_many_jobs)
    prepared = []
    owners = [owner_of(written, filer) for written in document.written]  # refused before the rest
    budget = document.budget()
    for needs, owner in zip(document.needs, owners):
        job = needs.job
        signature = repr([job.properties.requested] + [(g.properties.requested, [t.properties.requested for t in g.tasks])
                                                       for g in job.effective_task_groups()])
        requirements = _requirements(job, signature)
        request = replace(read_request(needs, owner, exclusive_default, budget), asks_hosts=requirements is not None)
        prepared.append(Prepared(request, requirements, job.id, signature))
    check_group(document.parsed, prepared)
    return prepared, document.warnings


def owner_of(job: Job, filer: Filer) -> str:
    """The owner of a resolved job: the filer's user; a filer that may name the owner names it in
    the job's `User` (a CCS job's User is mapped there). A token bound to a user may write only its
    own name in any of the formats' owner fields: SSS `User` at every level and as a Requested or
    Delivered term, CCS `User` and `SubmittedBy` (a grid job has no owner field: its schema refuses
    one)."""
    if filer.may_name_owner:
        return job.properties.get("User") or filer.user
    for where, value in _named_users(job):
        if value != filer.user:
            raise Forbidden(f"the job names {excerpt(value)!r} in {where}; this token files jobs as "
                            f"{filer.user!r} only",
                            "a token bound to a user submits that user's jobs; a token bound to no user "
                            "(a portal's) or an admin token may name the owner")
    return filer.user


def _named_users(job: Job) -> list[tuple[str, str]]:
    """(where, the user named) for each owner field of a resolved job, defaults applied."""
    levels: list[tuple[str, Properties]] = [("its User", job.properties)]
    for group in job.effective_task_groups():
        levels.append(("a task group's User", group.properties))
        levels.extend(("a task's User", task.properties) for task in group.tasks)
    named = []
    for where, props in levels:
        if "User" in props.simple:
            named.append((where, props.simple["User"]))
        for category, terms in (("Requested", props.requested), ("Delivered", props.delivered)):
            for term in terms:
                if isinstance(term.item, Simple) and term.item.name == "User":
                    # a pattern or an exclusion names no one user: only the filer's own name is taken
                    value = term.item.value if term.effective_op is Op.EQ else f"{term.effective_op.value} {term.item.value}"
                    named.append((f"{category} User", value))
        named.extend(("SubmittedBy", item.value) for item in props.extensions if item.name == "SubmittedBy")
    return named


def _requirements(job: Job, signature: str) -> Requirements | None:
    """requirements_of(job), compiled once for the jobs whose Requested terms read `signature`
    (the queue shares the compiled object between them the same way)."""
    with _compiled_lock:
        if signature in _compiled:
            return _compiled[signature]
    try:
        requirements = requirements_of(job)
    except MatchError as exc:
        raise DocumentError(f"job {excerpt(job.id)!r}: {exc}") from None
    with _compiled_lock:
        if len(_compiled) >= COMPILED_KEPT:
            del _compiled[next(iter(_compiled))]  # the oldest
        _compiled[signature] = requirements
    return requirements


def check_group(parsed: Job | JobGroup, prepared: list[Prepared]) -> None:
    """Dependencies inside a JobGroup name jobs of the group (by Id or Name) and form no cycle."""
    if not isinstance(parsed, JobGroup):
        return
    index: dict[str, int] = {}
    for number, item in enumerate(prepared):
        index.setdefault(item.name, number)
        if item.request.name:
            index.setdefault(item.request.name, number)
    edges = [[index[after.job] for after in item.request.after if after.job in index] for item in prepared]
    state = [0] * len(prepared)

    def visit(node: int) -> None:
        stack = [(node, iter(edges[node]))]
        state[node] = 1
        while stack:
            current, children = stack[-1]
            for child in children:
                if state[child] == 1:
                    raise DocumentError(f"the job group's dependencies form a cycle through job "
                                        f"{excerpt(prepared[child].name)!r}")
                if state[child] == 0:
                    state[child] = 1
                    stack.append((child, iter(edges[child])))
                    break
            else:
                state[current] = 2
                stack.pop()

    for node in range(len(prepared)):
        if state[node] == 0:
            visit(node)


def requirements_again(job: JobRecord, stored: Callable[[], tuple[bytes, str] | None],
                       groups: dict[str, list[Prepared] | None]) -> Requirements | None:
    """A stored job's host requirements, compiled again at start from its document (`stored()`
    reads it). A JobGroup's document is read once for all its jobs, kept in `groups` meanwhile.
    None when they cannot be (a document this version reads otherwise, or gone): a queued job is
    then given a System hold, and never run without what it asked of its hosts (it was); an
    admin cancels it, or releases it to run it so."""
    if job.group is None:
        prepared = _prepared_again(job, stored())
    elif job.group in groups:
        prepared = groups[job.group]
    else:
        prepared = groups[job.group] = _prepared_again(job, stored())
    position = int(job.id) - int(job.group) if job.group is not None else 0
    if prepared is not None and 0 <= position < len(prepared) and prepared[position].requirements is not None:
        return prepared[position].requirements
    if job.state is JobState.QUEUED and "System" not in job.request.holds:
        job.request = replace(job.request, holds=(*job.request.holds, "System"))
        job.reason = held_reason(job.request.holds)
    return None


def _prepared_again(job: JobRecord, stored: tuple[bytes, str] | None) -> list[Prepared] | None:
    if stored is None:
        return None
    try:
        prepared, _ = prepare(stored[0], stored[1], TRUSTED)  # accepted once: its owner is stored
    except DocumentError as exc:  # accepted by an earlier version that read it otherwise
        log.warning("job %s: its document no longer reads (%s): its host requirements are not known, and it is "
                    "held (System) until an admin cancels or releases it", job.id, exc)
        return None
    return prepared
