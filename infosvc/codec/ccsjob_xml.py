"""CCS (Windows Compute Cluster Server 2003) job XML to a CcsJob, validated with schemas/ccs-job.xsd.

parse_ccs_job(document) -> CcsJob reads the document through safexml (size bound, UTF-8, no DOCTYPE,
no entities), checks it against the schema, and only then builds the model, checking what a
schema cannot say: minimum <= maximum processors, run times within their job's, dependencies
that name tasks of the job and form no cycle, task ids given once, environment variables named
once. Every problem is a DocumentError with its line, element and attribute; the checks after
validation report what they find (up to ten): the job, each task, then across tasks.
docs/ccs-job.md gives the decisions.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable, Final, TypeVar

from infosvc.errors import DocumentError, Problem
from infosvc.model.ccsjob import (
    CcsJob, CcsPriority, CcsTask, JobState, format_runtime, parse_depend, parse_licenses, parse_nodes,
    parse_runtime,
)

if TYPE_CHECKING:
    from lxml import etree

SCHEMA_FILE: Final = "ccs-job.xsd"
#: The seed's namespace, the schema's target namespace.
NAMESPACE: Final = "https://www.microsoft.com/ComputeCluster/"
#: What CCS 2003 most likely wrote (the seed's page shows every namespace with https); read as NAMESPACE.
HTTP_NAMESPACE: Final = "http://www.microsoft.com/ComputeCluster/"
MAX_CCS_JOB_BYTES: Final = 1 << 20

_XSI_NIL: Final = "{http://www.w3.org/2001/XMLSchema-instance}nil"
_TAG: Final = "{" + NAMESPACE + "}"
_T = TypeVar("_T")
_MAX_PROBLEMS: Final = 10


def parse_ccs_job(document: bytes | str, *, max_bytes: int = MAX_CCS_JOB_BYTES) -> CcsJob:
    """The CcsJob in a CCS job XML document; DocumentError if it is unsafe, invalid or inconsistent."""
    from infosvc.codec import safexml

    root = safexml.parse(document, max_bytes=max_bytes, what="CCS job document")
    _check_namespace(root)
    try:
        safexml.validate(root, safexml.schema(SCHEMA_FILE))
    except DocumentError as exc:
        problems = [_plain_value_problem(p) for p in exc.problems]
        raise DocumentError(problems[0], more=problems[1:]) from None
    return ccs_job_from_element(root)


def _check_namespace(root: etree._Element) -> None:
    from lxml import etree

    qname = etree.QName(root)
    if qname.namespace == HTTP_NAMESPACE:
        for element in root.iter():
            if isinstance(element.tag, str) and element.tag.startswith("{" + HTTP_NAMESPACE + "}"):
                element.tag = _TAG + etree.QName(element).localname
        return
    if qname.namespace != NAMESPACE:
        where = f"namespace {qname.namespace}" if qname.namespace else "no namespace"
        raise DocumentError(f"{qname.localname} is in {where}; a CCS job is a Job element in namespace {NAMESPACE}",
                            line=root.sourceline, element=qname.localname, path=f"/{qname.localname}")


_PATTERN_VALUE: Final = re.compile(r"\[facet 'pattern'\] The value '([^']*)'")
_VALUE_PARSERS: Final[dict[str, Callable[[str], object]]] = {"Runtime": parse_runtime,
                                                             "SoftwareLicense": parse_licenses}
_VALUE_FORMS: Final = {
    "Runtime": "[[dd:]hh:]mm (days 0-99, hours 0-23, minutes 0-59) or Infinite",
    "SoftwareLicense": "feature:amount,... (amounts 1 to 999999999)",
}


def _plain_value_problem(problem: Problem) -> Problem:
    # libxml2 quotes the pattern at length; say what the value should be, and why this one is not.
    match = _PATTERN_VALUE.search(problem.message)
    if match is None or problem.attribute not in _VALUE_FORMS:
        return problem
    attribute, value = problem.attribute, match[1]
    try:
        _VALUE_PARSERS[attribute](value)
    except ValueError as exc:
        problem.message = f"{attribute}: {exc}; the form is {_VALUE_FORMS[attribute]}"
    else:  # what the schema alone refuses (a leading zero in a license amount)
        problem.message = f"{attribute} {value!r} is not {_VALUE_FORMS[attribute]}"
    return problem


# --- building the model from a valid tree -----------------------------------------------------

class _Reader:
    """Collects the problems found while building the model, each located."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def problem(self, message: str, element: etree._Element, attribute: str | None = None) -> None:
        if len(self.problems) == _MAX_PROBLEMS:  # as safexml.validate: ten are enough to act on
            return
        self.problems.append(Problem(message, element.sourceline, _local(element), attribute, _path(element)))

    def value(self, element: etree._Element, attribute: str, parse: Callable[[str], _T], default: _T) -> _T:
        text = element.get(attribute)
        if text is None:
            return default
        try:
            return parse(text)
        except ValueError as exc:
            self.problem(f"{attribute}: {exc}", element, attribute)
            return default


def _local(element: etree._Element) -> str:
    tag = element.tag
    assert isinstance(tag, str)
    return tag.rpartition("}")[2]


def _path(element: etree._Element) -> str:
    steps = []
    node: etree._Element | None = element
    while node is not None:
        parent = node.getparent()
        step = _local(node)
        if parent is not None:
            same = [sibling for sibling in parent if sibling.tag == node.tag]
            if len(same) > 1:
                step += f"[{same.index(node) + 1}]"
        steps.append(step)
        node = parent
    return "/" + "/".join(reversed(steps))


def _boolean(text: str) -> bool:
    return text.strip() in ("true", "1")  # the schema admits true, false, 1, 0


def _int(text: str) -> int:
    return int(text.strip())


def _text(text: str) -> str:
    return text


def _stripped(text: str) -> str:
    return text.strip()


def _optional(text: str) -> str | None:
    return text if text.strip() else None


def _nil(element: etree._Element) -> bool:
    return element.get(_XSI_NIL, "").strip() in ("true", "1")


def ccs_job_from_element(root: etree._Element) -> CcsJob:
    """Build a CcsJob from a Job element that has passed schema validation, checking what the schema cannot."""
    read = _Reader()
    job = CcsJob(
        id=read.value(root, "Id", _int, 0),
        name=read.value(root, "Name", _text, ""),
        project=read.value(root, "Project", _text, ""),
        user=read.value(root, "User", _text, ""),
        submitted_by=read.value(root, "SubmittedBy", _text, ""),
        message=read.value(root, "Message", _text, ""),
        status=read.value(root, "Status", JobState.from_text, JobState.NOT_SUBMITTED),
        priority=read.value(root, "Priority", CcsPriority, CcsPriority.NORMAL),
        is_exclusive=read.value(root, "IsExclusive", _boolean, True),
        is_backfill=read.value(root, "IsBackfill", _boolean, False),
        min_processors=read.value(root, "MinimumNumberOfProcessors", _int, 1),
        max_processors=read.value(root, "MaximumNumberOfProcessors", _int, 1),
        runtime=read.value(root, "Runtime", parse_runtime, None),
        run_until_cancelled=read.value(root, "RuntillCancelled", _boolean, False),
        asked_nodes=read.value(root, "AskedNodes", parse_nodes, []),
        allocated_nodes=read.value(root, "AllocatedNodes", parse_nodes, []),
        licenses=read.value(root, "SoftwareLicense", parse_licenses, {}),
    )
    _check_processors(read, root, job.min_processors, job.max_processors)
    task_elements: list[etree._Element] = []
    for child in root:
        tag = _local(child)
        if tag == "ExtendedTerms":
            job.extended_terms = _pairs(read, child, "Term")
        elif tag == "Tasks":
            for element in child:
                job.tasks.append(_task(read, element, job))
                task_elements.append(element)
    _check_tasks(read, job, task_elements)
    if read.problems:
        raise DocumentError(read.problems[0], more=read.problems[1:])
    return job


def _check_processors(read: _Reader, element: etree._Element, least: int, most: int) -> None:
    if least > most:
        read.problem(f"MinimumNumberOfProcessors {least} is more than MaximumNumberOfProcessors {most}",
                     element, "MinimumNumberOfProcessors")


def _task(read: _Reader, element: etree._Element, job: CcsJob) -> CcsTask:
    task = CcsTask(
        command_line=element.get("CommandLine", ""),
        name=read.value(element, "Name", _stripped, ""),
        id=read.value(element, "Id", _int, 0),
        parent_job_id=read.value(element, "ParentJobId", _int, 0),
        status=read.value(element, "Status", JobState.from_text, JobState.NOT_SUBMITTED),
        exit_code=read.value(element, "ExitCode", _int, 0),
        message=read.value(element, "Message", _text, ""),
        depend=read.value(element, "Depend", parse_depend, []),
        is_rerunnable=read.value(element, "IsRerunnable", _boolean, False),
        is_exclusive=read.value(element, "IsExclusive", _boolean, False),
        min_processors=read.value(element, "MinimumNumberOfProcessors", _int, 1),
        max_processors=read.value(element, "MaximumNumberOfProcessors", _int, 1),
        runtime=read.value(element, "Runtime", parse_runtime, None),
        asked_nodes=read.value(element, "AskedNodes", parse_nodes, []),
        work_directory=read.value(element, "WorkDirectory", _optional, None),
        stdin=read.value(element, "Stdin", _optional, None),
        stdout=read.value(element, "Stdout", _optional, None),
        stderr=read.value(element, "Stderr", _optional, None),
    )
    if not task.command_line.strip():
        read.problem("Task has a blank CommandLine: a task is a call to a program", element, "CommandLine")
    _check_processors(read, element, task.min_processors, task.max_processors)
    if task.min_processors > job.max_processors:
        read.problem(f"the task needs at least {task.min_processors} processors, more than its job's "
                     f"MaximumNumberOfProcessors {job.max_processors}", element, "MinimumNumberOfProcessors")
    if task.runtime is not None and job.runtime is not None and task.runtime > job.runtime:
        read.problem(f"Runtime {format_runtime(task.runtime)} is longer than its job's Runtime "
                     f"{format_runtime(job.runtime)}", element, "Runtime")
    if task.parent_job_id and job.id and task.parent_job_id != job.id:
        read.problem(f"ParentJobId {task.parent_job_id} is not the Id of its job, {job.id}", element, "ParentJobId")
    for child in element:
        tag = _local(child)
        if tag == "EnvironmentVariables":
            task.environment = _pairs(read, child, "Variable")
        elif tag == "ExtendedTerms":
            task.extended_terms = _pairs(read, child, "Term")
    return task


def _pairs(read: _Reader, collection: etree._Element, what: str) -> dict[str, str]:
    """Name/Value pairs: Terms by exact name, environment Variables by name in any case (Windows)."""
    pairs: dict[str, str] = {}
    seen: set[str] = set()
    for entry in collection:
        if _nil(entry):
            continue
        name = value = None
        for part in entry:
            if _local(part) == "Name":
                name = (part.text or "").strip()
            elif not _nil(part):
                value = part.text or ""
        if not name:
            read.problem(f"{what} has no Name", entry)
            continue
        if what == "Variable" and "=" in name:
            read.problem(f"environment variable name {name!r} contains '='", entry)
            continue
        key = name.casefold() if what == "Variable" else name
        if key in seen:
            read.problem(f"{what} {name!r} is given twice", entry)
            continue
        seen.add(key)
        pairs[name] = value if value is not None else ""
    return pairs


def _check_tasks(read: _Reader, job: CcsJob, elements: list[etree._Element]) -> None:
    # Task ids: 0 is "not assigned"; any other id names one task.
    first_with_id: dict[int, int] = {}
    for index, task in enumerate(job.tasks):
        if task.id:
            if task.id in first_with_id:
                read.problem(f"task Id {task.id} is given twice (first on line "
                             f"{elements[first_with_id[task.id]].sourceline})", elements[index], "Id")
            else:
                first_with_id[task.id] = index
    # Dependencies by name. CCS allows several tasks of one name ("all tasks by this name must
    # complete before the focal task can be run"), so the graph is over names: a name depends on
    # every name its tasks depend on. Its edges are the Depend items themselves, never tasks x
    # tasks (a sweep of thousands of tasks of one name stays small).
    order: dict[str, int] = {}  # name -> its number, in order of first appearance
    for task in job.tasks:
        if task.name:
            order.setdefault(task.name, len(order))
    edges: list[list[int]] = [[] for _ in order]
    for index, task in enumerate(job.tasks):
        for name in task.depend:
            if name not in order:
                read.problem(f"Depend names {name!r}, which is no task of this job", elements[index], "Depend")
            elif task.name:
                edges[order[task.name]].append(order[name])
    if cycle := _find_cycle(edges):
        names = list(order)
        first, second = names[cycle[0]], names[cycle[1]]
        index = next(i for i, task in enumerate(job.tasks) if task.name == first and second in task.depend)
        read.problem(f"task dependencies form a cycle: {' -> '.join(names[n] for n in cycle)}",
                     elements[index], "Depend")


def _find_cycle(edges: list[list[int]]) -> list[int] | None:
    """One cycle of the graph (its nodes, the first repeated at the end), or None; iterative DFS."""
    white, grey, black = 0, 1, 2
    colour = [white] * len(edges)
    for start in range(len(edges)):
        if colour[start] != white:
            continue
        stack: list[tuple[int, int]] = [(start, 0)]
        colour[start] = grey
        while stack:
            node, next_edge = stack[-1]
            if next_edge < len(edges[node]):
                stack[-1] = (node, next_edge + 1)
                target = edges[node][next_edge]
                if colour[target] == grey:
                    path = [entry[0] for entry in stack]
                    cycle = path[path.index(target):]
                    first = cycle.index(min(cycle))  # told from the task that comes first
                    cycle = cycle[first:] + cycle[:first]
                    return [*cycle, cycle[0]]
                if colour[target] == white:
                    colour[target] = grey
                    stack.append((target, 0))
            else:
                colour[node] = black
                stack.pop()
    return None
