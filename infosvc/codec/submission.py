"""One way in for the three job formats: SSS Job XML, grid JSON job description v2, CCS job XML.

`parse_submission(body, content_type)` tells the format from the content type and the body (the
root element, for XML), reads the document with that format's codec, and returns the SSS Job
model object (infosvc/model/job.py) with the warnings owed to the submitter. `grid_to_job` and
`ccs_to_job` map the other two models onto the SSS one; docs/job-formats.md has the tables.

What a matcher evaluates is the Requested lists alone: a mapped job's requirements on the
computing element and host (processors, run time, hosts, LRMS type, queue, licenses) are written
as Requested terms; everything that has no SSS counterpart is kept as an Extension whose `type`
names the source format ("GridJob", "CCS", "ExtendedTerm") and whose `name` is the source's own
attribute name, for people and for writing the job back, never for matching.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from typing import Final

from infosvc.codec.ccsjob_xml import HTTP_NAMESPACE as CCS_HTTP_NAMESPACE
from infosvc.codec.ccsjob_xml import NAMESPACE as CCS_NAMESPACE
from infosvc.codec.ccsjob_xml import parse_ccs_job
from infosvc.codec.gridjob_json import parse_grid_job
from infosvc.codec.job_xml import job_to_xml, parse_job
from infosvc.errors import DocumentError
from infosvc.model.ccsjob import CcsJob, CcsTask, JobState
from infosvc.model.gridjob import FORK, GridJob, GridTask
from infosvc.model.job import (
    Condition, Consumable, Dependency, Designator, Environment, Extension, Job, JobGroup, Op,
    Properties, Simple, StreamFile, Task, TaskGroup, Term, Variable,
)
from infosvc.model.noderef import Aggregation, NodeRef

__all__ = [
    "CCS_TYPE", "EXTENDED_TERM_TYPE", "GRID_TYPE", "LICENSE", "MPI", "ccs_to_job", "grid_requested", "grid_to_job",
    "parse_submission", "split_command_line",
]

#: Extension types: where a kept value came from.
GRID_TYPE: Final = "GridJob"
CCS_TYPE: Final = "CCS"
EXTENDED_TERM_TYPE: Final = "ExtendedTerm"
#: The SSS `Type` of a grid task whose count is above 1.
MPI: Final = "MPI"
#: Resource name of a CCS software license (the SSS spec's own example: name="License" type=feature).
LICENSE: Final = "License"

_JSON_TYPES: Final = frozenset({"application/json", "text/json"})
_XML_TYPES: Final = frozenset({"application/xml", "text/xml"})
#: Content types that say nothing of the format: the body decides.
_NEUTRAL_TYPES: Final = frozenset({"", "application/octet-stream", "text/plain"})
_EXPECTED: Final = ("an SSS Job or JobGroup (XML, no namespace), a CCS Job (XML, namespace "
                    f"{CCS_NAMESPACE}) or a grid job (JSON object, version 2)")


# --- detection --------------------------------------------------------------------------------

def _declared(content_type: str) -> str | None:
    """"json", "xml" or None (the body decides) from a Content-Type; DocumentError for another type."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media in _JSON_TYPES or media.endswith("+json"):
        return "json"
    if media in _XML_TYPES or media.endswith("+xml"):
        return "xml"
    if media in _NEUTRAL_TYPES:
        return None
    raise DocumentError(f"content type {media!r} is not a job format; expected application/json (grid job) "
                        "or application/xml (SSS Job, JobGroup, CCS job)")


def _first_character(body: bytes) -> str:
    text = body[3:] if body.startswith(b"\xef\xbb\xbf") else body
    stripped = text.lstrip(b" \t\r\n")
    return chr(stripped[0]) if stripped else ""


def _foreign_xml(body: bytes) -> bool:
    from infosvc.codec import safexml

    return safexml.foreign_encoding(body) is not None


def parse_submission(body: bytes, content_type: str) -> tuple[Job | JobGroup, list[str]]:
    """The job in a submitted document, in the SSS model, and the warnings owed to the submitter.

    JSON (application/json, or a body starting with `{`): a grid job v2, mapped by grid_to_job.
    XML (application/xml, text/xml, or a body starting with `<`): by the root element, an SSS
    `Job` / `JobGroup` without a namespace (parse_job, as written) or a CCS `Job` in the CCS
    namespace (mapped by ccs_to_job). Anything else is a DocumentError saying what was expected.
    A content type that names one format while the body is the other is refused, not guessed at.
    """
    declared = _declared(content_type)
    first = _first_character(body)
    if not first:
        raise DocumentError(f"the submission is empty; expected {_EXPECTED}")
    found = {"{": "json", "[": "json", "<": "xml"}.get(first)
    if found is None and declared != "json" and _foreign_xml(body):
        found = "xml"  # UTF-16, UTF-32 or EBCDIC: safexml refuses it, naming the encoding
    if declared is not None and found is not None and found != declared:
        raise DocumentError(f"the content type says {declared.upper()} but the body is {found.upper()}; "
                            f"expected {_EXPECTED}")
    kind = declared or found
    if kind is None:
        raise DocumentError(f"the submission is neither XML nor a JSON object (it starts with {first!r}); "
                            f"expected {_EXPECTED}")
    if kind == "json":
        if first != "{":
            what = "a JSON array" if first == "[" else "not a JSON object"
            raise DocumentError(f"the submission is {what}; a grid job is a JSON object (expected {_EXPECTED})")
        grid = parse_grid_job(body)
        warnings = [f"task {task.id}: {note}" for task in grid.tasks for note in task.ignored]
        job = grid_to_job(grid)
        try:  # JSON strings may hold characters that XML 1.0 cannot (U+0001): the job could not be kept
            job_to_xml(job)
        except ValueError as exc:
            raise DocumentError(f"grid job: {exc}; an SSS Job cannot hold it") from None
        return job, warnings
    return _parse_xml(body)


def _parse_xml(body: bytes) -> tuple[Job | JobGroup, list[str]]:
    from lxml import etree

    from infosvc.codec import safexml

    root = safexml.parse(body, what="job document")
    qname = etree.QName(root)
    if qname.namespace is None and qname.localname in ("Job", "JobGroup"):
        parsed = parse_job(body)
        return parsed.job, [str(problem) for problem in parsed.warnings]
    if qname.namespace in (CCS_NAMESPACE, CCS_HTTP_NAMESPACE) and qname.localname == "Job":
        return ccs_to_job(parse_ccs_job(body)), []
    where = f"in namespace {qname.namespace}" if qname.namespace else "with no namespace"
    raise DocumentError(f"the root element is {qname.localname} {where}; expected {_EXPECTED}",
                        line=root.sourceline, element=qname.localname, path=f"/{qname.localname}")


# --- helpers ----------------------------------------------------------------------------------

def _requested(item: Simple | Consumable | NodeRef, op: Op | None = None) -> Term:
    return Term(item, op)


def _node_list(names: tuple[str, ...] | list[str]) -> NodeRef:
    """Host names as one Node List (comma-delimited: no host name holds a comma)."""
    return NodeRef(",".join(names), Aggregation.LIST)


def _content_id(prefix: str, source: GridJob | CcsJob) -> str:
    """An Id for a job whose document gives none: `prefix-` and a digest of what was read."""
    digest = hashlib.sha256(repr(source).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{prefix}-{digest}"


def _with_id(job: Job, job_id: str) -> Job:
    job.properties.simple = {"Id": job_id, **job.properties.simple}
    return job


def _executable(value: str, where: str) -> str:
    """An Executable for SSS, which reads `#id` as "the attached File id": a program named so is
    refused, and so is none at all (a command line such as `"" x`)."""
    if not value.strip():
        raise DocumentError(f"{where}: the command line names no program")
    if value.startswith("#"):
        raise DocumentError(f"{where}: executable {value!r} starts with '#', which an SSS Job reads as a "
                            "reference to an attached file; name the program by a path")
    return value


def _processors(least: int, most: int) -> list[Term]:
    return [_requested(Consumable("Processors", least), Op.GE), _requested(Consumable("Processors", most), Op.LE)]


# --- grid jobs ----------------------------------------------------------------------------------

def grid_to_job(grid: GridJob, *, job_id: str | None = None) -> Job:
    """The grid job as an SSS Job: one TaskGroup (TaskCount = the number of tasks), one Task per grid
    task, in order, each with its merged requirements as Requested terms (docs/job-formats.md).

    The grid description has no job id: `job_id`, else `grid-` and a digest of the mapped job.
    """
    job = Job()
    if grid.default_storage_base is not None:
        job.properties.extensions.append(Extension("default_storage_base", grid.default_storage_base, GRID_TYPE))
    group = TaskGroup()
    group.properties.simple["TaskCount"] = str(len(grid.tasks))
    group.tasks = [_grid_task(task, grid.default_storage_base) for task in grid.tasks]
    job.task_groups.append(group)
    return _with_id(job, job_id if job_id is not None else _content_id("grid", grid))


def grid_requested(task: GridTask) -> list[Term]:
    """A grid task's merged requirements as Requested terms, all joined with And.

    Processors EQ the task's processors; hostname: Node List; lrms: ResourceManagerType EQ lrms;
    no lrms and no fork: ResourceManagerType NE Fork (the fork rule); queue: Queue EQ queue.
    """
    constraints = task.constraints
    terms = [_requested(Consumable("Processors", task.processors))]
    if constraints.hostnames is not None:
        terms.append(_requested(_node_list(constraints.hostnames)))
    if constraints.lrms is not None:
        terms.append(_requested(Simple("ResourceManagerType", constraints.lrms)))
    elif not constraints.fork:
        terms.append(_requested(Simple("ResourceManagerType", FORK), Op.NE))
    if constraints.queue is not None:
        terms.append(_requested(Simple("Queue", constraints.queue)))
    return terms


def _grid_task(task: GridTask, job_base: str | None) -> Task:
    props = Properties()
    simple = props.simple
    simple["Id"] = task.id
    simple["Executable"] = _executable(task.executable, f"grid job: task {task.id}")
    if task.arguments:
        simple["Arguments"] = shlex.join(task.arguments)
    if task.mpi:
        simple["Type"] = MPI
    if task.environment:
        props.environment = Environment([Variable(name, value) for name, value in task.environment.items()])
    if task.stdin is not None:
        props.input_file = StreamFile(task.stdin)
    if task.stdout is not None:
        props.output_file = StreamFile(task.stdout)
    if task.stderr is not None:
        props.error_file = StreamFile(task.stderr)
    props.requested = grid_requested(task)
    kept = props.extensions
    if task.max_success_code:
        kept.append(Extension("max_success_code", str(task.max_success_code), GRID_TYPE))
    if task.requirements.fork is not None:
        kept.append(Extension("fork", "true" if task.requirements.fork else "false", GRID_TYPE))
    for name, files in (("input_files", task.input_files), ("output_files", task.output_files)):
        if files:
            kept.append(Extension(name, _compact(files), GRID_TYPE))
    if task.default_storage_base is not None and task.default_storage_base != job_base:
        kept.append(Extension("default_storage_base", task.default_storage_base, GRID_TYPE))
    if task.description is not None:
        kept.append(Extension("description", task.description, GRID_TYPE))
    if task.meta is not None:
        kept.append(Extension("meta", _compact(task.meta), GRID_TYPE))
    return Task(props)


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- CCS jobs -----------------------------------------------------------------------------------

def split_command_line(command_line: str) -> tuple[str, str]:
    """A Windows command line as (executable, arguments): the first word, or the quoted first part
    (`"C:\\Program Files\\x.exe" /a` gives `C:\\Program Files\\x.exe`); the arguments are the rest as
    written (Windows programs parse their own), without the white space that separates them."""
    text = command_line.strip()
    if text.startswith('"'):
        end = text.find('"', 1)
        if end > 0:
            return text[1:end], text[end + 1:].strip()
    executable, *rest = re.split(r"\s+", text, maxsplit=1)
    return executable, rest[0] if rest else ""


def ccs_to_job(ccs: CcsJob, *, job_id: str | None = None) -> Job:
    """The CCS job as an SSS Job: the job's attributes on the Job, its tasks as the Tasks of one
    TaskGroup (TaskCount = the number of tasks; no TaskGroup when there are none), in order.

    Id: `job_id`, else the CCS Id when it is assigned (non-zero), else `ccs-` and a digest.
    """
    job = Job()
    props = job.properties
    simple = props.simple
    _text_properties(simple, ccs.name, ccs.project, ccs.user, ccs.message, ccs.status)
    simple["Priority"] = str(ccs.priority.rank)
    props.requested = _ccs_requested(ccs.min_processors, ccs.max_processors, ccs.runtime, ccs.asked_nodes)
    props.requested.extend(_requested(Consumable("Resource", float(amount), name=LICENSE, type=feature))
                           for feature, amount in ccs.licenses.items())
    if ccs.allocated_nodes:
        props.delivered.append(Term(_node_list(ccs.allocated_nodes)))
    kept = props.extensions
    kept.append(Extension("IsExclusive", "true" if ccs.is_exclusive else "false", CCS_TYPE))
    if ccs.is_backfill:
        kept.append(Extension("IsBackfill", "true", CCS_TYPE))
    if ccs.run_until_cancelled:
        kept.append(Extension("RuntillCancelled", "true", CCS_TYPE))
    if ccs.submitted_by.strip():
        kept.append(Extension("SubmittedBy", ccs.submitted_by.strip(), CCS_TYPE))
    kept.extend(Extension(name, value, EXTENDED_TERM_TYPE) for name, value in ccs.extended_terms.items())
    if ccs.tasks:
        group = TaskGroup()
        group.properties.simple["TaskCount"] = str(len(ccs.tasks))
        group.tasks = [_ccs_task(task) for task in ccs.tasks]
        job.task_groups.append(group)
    if job_id is None:
        job_id = str(ccs.id) if ccs.id else _content_id("ccs", ccs)
    return _with_id(job, job_id)


def _text_properties(simple: dict[str, str], name: str, project: str | None, user: str | None, message: str,
                     status: JobState) -> None:
    for key, value in (("Name", name), ("Project", project), ("User", user), ("StatusMessage", message)):
        if value and value.strip():
            simple[key] = value.strip()
    if status is not JobState.NOT_SUBMITTED:
        simple["State"] = status.value


def _ccs_requested(least: int, most: int, runtime: int | None, nodes: list[str]) -> list[Term]:
    terms = _processors(least, most)
    if runtime is not None:
        terms.append(_requested(Simple("Duration", str(runtime))))
    if nodes:
        terms.append(_requested(_node_list(nodes)))
    return terms


def _ccs_task(task: CcsTask) -> Task:
    props = Properties()
    simple = props.simple
    if task.id:
        simple["Id"] = str(task.id)
    _text_properties(simple, task.name, None, None, task.message, task.status)
    executable, arguments = split_command_line(task.command_line)
    simple["Executable"] = _executable(executable, f"CCS job: task {task.name or task.id or ''}".rstrip())
    if arguments:
        simple["Arguments"] = arguments
    if task.exit_code:
        simple["ExitCode"] = str(task.exit_code)
    simple["Restartable"] = "true" if task.is_rerunnable else "false"
    if task.work_directory is not None:
        simple["InitialWorkingDirectory"] = task.work_directory.strip()
    props.dependencies = [Dependency(name, Condition.ON_SUCCESS, designator=Designator.JOB_NAME)
                          for name in task.depend]
    if task.environment:
        props.environment = Environment([Variable(name, value) for name, value in task.environment.items()])
    for attribute, stream in (("input_file", task.stdin), ("output_file", task.stdout), ("error_file", task.stderr)):
        if stream is not None:
            setattr(props, attribute, StreamFile(stream.strip()))
    props.requested = _ccs_requested(task.min_processors, task.max_processors, task.runtime, task.asked_nodes)
    if task.is_exclusive:
        props.extensions.append(Extension("IsExclusive", "true", CCS_TYPE))
    props.extensions.extend(Extension(name, value, EXTENDED_TERM_TYPE) for name, value in task.extended_terms.items())
    return Task(props)
