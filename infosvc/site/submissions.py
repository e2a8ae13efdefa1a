"""A submitted document read into the jobs the queue takes: the three formats through
infosvc.codec.submission, each job's scheduling request (infosvc.sched.request) and its host
requirements compiled by the matcher, and a JobGroup's dependencies checked for names that exist
and for cycles. CPU-bound: the queue runs it off the event loop."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace

from infosvc.codec.submission import parse_submission
from infosvc.errors import DocumentError, excerpt
from infosvc.matching import MatchError, Requirements
from infosvc.model.job import Job, JobGroup, resolve
from infosvc.model.jobneeds import read_needs
from infosvc.sched.jobs import JobRecord
from infosvc.sched.request import JobRequest, read_request
from infosvc.site.eligibility import requirements_of

__all__ = ["MAX_GROUP_JOBS", "Prepared", "prepare", "requirements_again"]

log = logging.getLogger("infosvc.queue")

#: Most jobs one submission (a JobGroup) may hold.
MAX_GROUP_JOBS = 1000
#: compiled requirements kept by signature: a site's submissions mostly ask alike, and compiling
#: was a third of reading a small one (prepare, on the event loop for small documents)
COMPILED_KEPT = 1024
_compiled: dict[str, Requirements | None] = {}
_compiled_lock = threading.Lock()  # prepare also runs in worker threads (large documents)


@dataclass(slots=True)
class Prepared:
    """One job of a submission, read and checked off the event loop."""

    request: JobRequest
    requirements: Requirements | None
    name: str
    #: the job's Requested terms as text: jobs that ask the same share one compiled Requirements
    signature: str = ""


def prepare(body: bytes, content_type: str, owner: str) -> tuple[list[Prepared], list[str]]:
    """The jobs of a submitted document (a JobGroup gives several), or DocumentError. CPU-bound."""
    parsed, warnings = parse_submission(body, content_type)
    jobs = resolve(parsed)
    if len(jobs) > MAX_GROUP_JOBS:
        raise DocumentError(f"the job group has {len(jobs)} jobs; at most {MAX_GROUP_JOBS}")
    prepared = []
    for written in jobs:
        # what a level needs but wrote outside Requested is Requested for the matcher too;
        # read_request reads it so itself, and says what it read
        job, _ = read_needs(written)
        signature = repr([job.properties.requested] + [(g.properties.requested, [t.properties.requested for t in g.tasks])
                                                       for g in job.effective_task_groups()])
        requirements = _requirements(job, signature)
        request = replace(read_request(written, owner), asks_hosts=requirements is not None)
        prepared.append(Prepared(request, requirements, job.id, signature))
    _check_group(parsed, prepared)
    return prepared, warnings


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


def _check_group(parsed: Job | JobGroup, prepared: list[Prepared]) -> None:
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


def requirements_again(job: JobRecord, stored: tuple[bytes, str] | None) -> Requirements | None:
    """A stored job's host requirements, compiled again from its document at start."""
    if stored is None:
        return None
    try:
        prepared, _ = prepare(stored[0], stored[1], job.owner)
    except DocumentError as exc:  # accepted by an earlier version that read it otherwise
        log.warning("job %s: its document no longer reads (%s); scheduled without its host requirements",
                    job.id, exc)
        return None
    position = int(job.id) - int(job.group) if job.group is not None else 0
    return prepared[position].requirements if 0 <= position < len(prepared) else None
