"""What a submitted job asks of the scheduler, read once from the SSS Job model (whichever of the
three formats it came in): priority, processors (minimum and maximum), run time limit, memory per
host, exclusive use, asked and required nodes, run until cancelled, its tasks with their own
processors, dependencies and rerunnability, and the jobs it depends on. `JobRequest` is all the
scheduler and the queue read of a job; the document itself is kept beside it for people.

The rules, with docs/scheduling.md:

- Priority: the CCS names (Lowest .. Highest) or their ranks 0 .. 4 (ccs_to_job writes the rank);
  Normal when absent. Any other value is refused: the five groups are the policy.
- Processors: the job's Requested `Processors` (EQ n: exactly n; GE / LE: the range CCS's Minimum
  and Maximum give); else the sum of its tasks' processors, all at once. A task's processors are
  its own Requested Processors (EQ or GE), else 1. The job's minimum is at least its largest task.
- Run time limit: Requested `Duration` (seconds or xsd:duration), the smallest of the job's and
  its tasks'; none is Infinite (math.inf), which EASY never backfills past a reservation.
- Memory: the largest Requested `Memory` (Available / Dedicated) of the job and its tasks, per host,
  in MB.
- Licenses: the job's own Requested `Resource name="License" type=`feature amounts (CCS
  SoftwareLicense): what it draws from the site's license pools while it runs.
- Exclusive: a job has its nodes to itself unless it says `IsExclusive` false (the CCS attribute,
  kept as an Extension; an SSS job may write the same Extension). A task is non-exclusive unless
  it says `IsExclusive` true.
- Asked nodes: a Requested `Node` List or Range: the job runs only on those. Required nodes: the
  Extension `RequiredNodes` (a list or NodeSet): the allocation must include every one of them.
- Dependencies: an SSS `Dependency` on a job (JobId or JobName, OnSuccess / OnFailure / OnExit
  with a code); a CCS task's `depend` list names tasks of the same job.
- Holds, EligibleTime, Deadline: the SSS Job's own controls (infosvc/sched/holds.py).
- Requested includes what a level writes outside Requested and needs (infosvc.model.jobneeds:
  the spec's simple example's `<Processors>16</Processors>` directly under Job asks 16); the
  request names what was read so (`read_as_requested`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from ClusterShell.NodeSet import NodeSetException

from infosvc.errors import DocumentError, excerpt
from infosvc.model.durations import seconds
from infosvc.model.glue import GPU, LICENSE
from infosvc.sched.holds import read_holds
from infosvc.model.job import Condition, Consumable, Context, Designator, Job, Op, Properties, Simple, Task, Term
from infosvc.model.jobneeds import NeedsRead
from infosvc.model.nodeset import expand_names, names_upper_bound
from infosvc.model.noderef import Aggregation, NodeRef, NodeRefError
from infosvc.model.units import DEFAULT_UNITS, UnitError, convert

__all__ = ["MAX_TASKS", "PRIORITIES", "After", "JobRequest", "TaskRequest", "priority_rank", "read_request"]

#: The five CCS priorities, lowest first: the rank is the index.
PRIORITIES: Final = ("Lowest", "BelowNormal", "Normal", "AboveNormal", "Highest")
NORMAL: Final = 2
#: Most tasks one job may have: bounds the work of scheduling and storing one submission.
MAX_TASKS: Final = 10_000
#: Most processors one job may ask for (a bound on arithmetic, far above any site).
MAX_PROCESSORS: Final = 10_000_000
#: Most names a job may list as asked or required nodes.
MAX_NODES: Final = 100_000


@dataclass(frozen=True, slots=True)
class After:
    """This job waits for `job` (an id or a name, per `by_name`) to end as `condition` says."""

    job: str
    condition: Condition = Condition.ON_SUCCESS
    code: int | None = None  # OnExit: the exit code that releases it; None: any
    by_name: bool = False
    #: as the document named it (the queue replaces `job` with its own id)
    label: str = ""

    def released_by(self, state: str, exit_code: int | None) -> bool:
        """Whether the other job ending in `state` (Finished / Failed / Canceled) releases this one."""
        match self.condition:
            case Condition.ON_SUCCESS:
                return state == "Finished"
            case Condition.ON_FAILURE:
                return state in ("Failed", "Canceled")
            case _:
                return self.code is None or exit_code == self.code

    def describe(self) -> str:
        what = {Condition.ON_SUCCESS: "completed", Condition.ON_FAILURE: "failed",
                Condition.ON_EXIT: "exited" if self.code is None else f"exited with code {self.code}"}
        return f"{self.label or self.job} {what[self.condition]}"

    def unmet(self) -> str:
        """What a job held on this dependency waits for: `dependency fat.1 not completed`."""
        what = {Condition.ON_SUCCESS: "not completed", Condition.ON_FAILURE: "not ended (it must fail)",
                Condition.ON_EXIT: "not ended" if self.code is None else f"not ended (it must exit with code {self.code})"}
        return f"dependency {self.label or self.job} {what[self.condition]}"


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """One task: what to run and what it needs within the job's allocation."""

    index: int
    name: str
    processors: int = 1
    executable: str = ""
    arguments: str = ""
    environment: tuple[tuple[str, str], ...] = ()
    workdir: str | None = None
    stdin: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    exclusive: bool = False
    rerunnable: bool = True
    #: indices of tasks of the same job that must finish first
    after: tuple[int, ...] = ()
    estimate: float = math.inf


@dataclass(frozen=True, slots=True)
class JobRequest:
    """What the scheduler reads of one job."""

    name: str
    owner: str
    priority: int = NORMAL
    min_processors: int = 1
    max_processors: int = 1
    estimate: float = math.inf
    memory_mb: float = 0.0
    exclusive: bool = True
    asked_nodes: tuple[str, ...] | None = None
    required_nodes: tuple[str, ...] = ()
    #: software licenses it draws from the site's pools while it runs: (feature, count)
    licenses: tuple[tuple[str, int], ...] = ()
    run_until_cancelled: bool = False
    tasks: tuple[TaskRequest, ...] = ()
    after: tuple[After, ...] = ()
    #: whether its Requested terms ask more of a host than processors and memory (the matcher's part)
    asks_hosts: bool = False
    #: what the job wrote outside Requested and was read as Requested (infosvc.model.jobneeds)
    read_as_requested: tuple[str, ...] = ()
    #: its Project (SSS; CCS Project maps there): for a grid site, the VO it runs for ("": none said)
    project: str = ""
    #: the holds on it (SSS Hold: User, System), in HOLDS order: it starts only once none is left
    holds: tuple[str, ...] = ()
    #: SSS EligibleTime: it starts no earlier (seconds since the epoch; None: any time)
    eligible: float | None = None
    #: SSS Deadline: it is ended then, whatever it is doing (None: no deadline)
    deadline: float | None = None
    #: GPUs it takes on each of its hosts while it runs (Requested `Resource name="GPU"`): a
    #: consumable the scheduler counts, as processors and memory
    gpus: int = 0

    def __post_init__(self) -> None:
        # read back from the store's JSON as lists
        object.__setattr__(self, "read_as_requested", tuple(self.read_as_requested))
        object.__setattr__(self, "holds", tuple(self.holds))

    @property
    def priority_name(self) -> str:
        return PRIORITIES[self.priority]


def read_request(needs: NeedsRead, owner: str) -> JobRequest:
    """The scheduling request of a resolved SSS Job, its needs read (infosvc.model.jobneeds), owned
    by `owner` (decided from the token that filed it, never read here from the document:
    infosvc.queue.submissions.owner_of); DocumentError for a value the scheduler cannot honour (an
    unknown priority, a processor range that is empty, too many tasks)."""
    job, read = needs
    props = job.properties
    priority = _priority(props.get("Priority"))
    tasks = _tasks(job)
    job_least, job_most = _processors(props.requested, "the job")
    task_largest = max((task.processors for task in tasks), default=1)
    if job_least is None:
        least = max(sum(task.processors for task in tasks), 1)
        most = least if job_most is None else max(job_most, least)
    else:
        least = max(job_least, task_largest)
        most = job_most if job_most is not None else least
        if most < least:
            raise DocumentError(f"the job asks for at least {least} processors and at most {most}")
    if least > MAX_PROCESSORS:
        raise DocumentError(f"the job asks for {least} processors; at most {MAX_PROCESSORS} are accepted")
    most = min(most, MAX_PROCESSORS)
    estimates = [_duration(props.requested)] + [task.estimate for task in tasks]
    groups = job.effective_task_groups()
    memory = max([_memory(props.requested)] + [_memory(g.properties.requested) for g in groups]
                 + [_memory(t.properties.requested) for g in groups for t in g.tasks])
    asked = _asked_nodes(props.requested)
    required = _node_list(_extension(props, "RequiredNodes") or "", "RequiredNodes")
    if asked is not None and required:
        missing = sorted(set(required) - set(asked))
        if missing:
            raise DocumentError(f"required nodes {', '.join(missing[:5])} are not among the asked nodes")
    after = tuple(After(dep.job, dep.effective_condition, dep.code,
                        dep.effective_designator is Designator.JOB_NAME) for dep in props.dependencies)
    holds, eligible, deadline = read_holds(props)
    return JobRequest(
        name=props.get("Name") or "", owner=owner, priority=priority,
        min_processors=least, max_processors=most, estimate=min(estimates), memory_mb=memory,
        exclusive=_flag(props, "IsExclusive", True), asked_nodes=asked, required_nodes=tuple(required),
        licenses=_licenses(props.requested), gpus=_gpus(props.requested),
        run_until_cancelled=_flag(props, "RuntillCancelled", False) or _flag(props, "RunUntilCanceled", False),
        tasks=tasks, after=after, read_as_requested=read, project=(props.get("Project") or "").strip(),
        holds=holds, eligible=eligible, deadline=deadline)


def _priority(text: str | None) -> int:
    if text is None or not text.strip():
        return NORMAL
    rank = priority_rank(text)
    if rank is None:
        raise DocumentError(f"Priority {excerpt(text.strip())!r} is not one of {', '.join(PRIORITIES)} (or 0 to 4)")
    return rank


def priority_rank(text: str) -> int | None:
    """The rank of a CCS priority, by name (any case) or rank ("0" to "4"); None for anything else."""
    value = text.strip()
    for rank, name in enumerate(PRIORITIES):
        if value.lower() == name.lower() or value == str(rank):
            return rank
    return None


def _tasks(job: Job) -> tuple[TaskRequest, ...]:
    tasks: list[TaskRequest] = []
    names: dict[str, int] = {}
    pending: list[list[str]] = []
    for group in job.effective_task_groups():
        count = group.properties.integer("TaskCount") if group.properties.get("TaskCount") else None
        written: list[Task | None] = list(group.tasks) or [None]
        total = max(count or len(written), len(written))
        if len(tasks) + total > MAX_TASKS:
            raise DocumentError(f"the job has more than {MAX_TASKS} tasks")
        for number in range(total):
            task = written[number] if number < len(written) else None
            props = task.properties if task is not None else Properties()
            merged = _merged(job.properties, group.properties, props)
            index = len(tasks)
            name = props.get("Name") or props.get("Id") or str(index + 1)
            least, _ = _processors(props.requested, f"task {name}")
            if least is None:
                least, _ = _processors(group.properties.requested, f"task {name}")
            env = merged.environment.as_dict() if merged.environment is not None else {}
            tasks.append(TaskRequest(
                index=index, name=name, processors=least or 1,
                executable=merged.get("Executable") or "", arguments=merged.get("Arguments") or "",
                environment=tuple(env.items()), workdir=merged.get("InitialWorkingDirectory"),
                stdin=merged.input_file.path if merged.input_file else None,
                stdout=merged.output_file.path if merged.output_file else None,
                stderr=merged.error_file.path if merged.error_file else None,
                exclusive=_flag(props, "IsExclusive", False),
                # the task's own Restartable, else its group's, else the job's: a job that says it
                # must run once is not run twice because its tasks did not repeat it
                rerunnable=(merged.boolean("Restartable") if merged.get("Restartable") else True) is not False,
                estimate=min(_duration(props.requested), _duration(group.properties.requested))))
            names.setdefault(name, index)
            names.setdefault(str(index + 1), index)
            pending.append([dep.job for dep in props.dependencies])
    resolved: list[list[int]] = []
    for made, wanted in zip(tasks, pending):
        indices = []
        for other in wanted:
            if other not in names:
                raise DocumentError(f"task {made.name} depends on {excerpt(other)!r}, which is no task of this job")
            indices.append(names[other])
        resolved.append(indices)
    _no_cycle(tasks, resolved)
    return tuple(TaskRequest(**{**{f: getattr(t, f) for f in TaskRequest.__slots__}, "after": tuple(after)})
                 for t, after in zip(tasks, resolved))


def _merged(job: Properties, group: Properties, task: Properties) -> Properties:
    """The properties a task runs with: its own, else its group's, else the job's."""
    merged = Properties()
    merged.simple = {**job.simple, **group.simple, **task.simple}
    for attribute in ("environment", "input_file", "output_file", "error_file"):
        value = getattr(task, attribute) or getattr(group, attribute) or getattr(job, attribute)
        setattr(merged, attribute, value)
    return merged


def _no_cycle(tasks: list[TaskRequest], after: list[list[int]]) -> None:
    state = [0] * len(tasks)  # 0 new, 1 on the path, 2 done
    for start in range(len(tasks)):
        if state[start]:
            continue
        stack = [(start, iter(after[start]))]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            for child in children:
                if state[child] == 1:
                    raise DocumentError(f"task dependencies form a cycle through task {tasks[child].name}")
                if state[child] == 0:
                    state[child] = 1
                    stack.append((child, iter(after[child])))
                    break
            else:
                state[node] = 2
                stack.pop()


def _consumables(terms: list[Term], kind: str) -> list[tuple[Op, Consumable]]:
    return [(term.effective_op, term.item) for term in terms
            if isinstance(term.item, Consumable) and term.item.kind == kind
            and term.item.effective_context in (Context.AVAILABLE, Context.DEDICATED)]


def _processors(terms: list[Term], who: str) -> tuple[int | None, int | None]:
    least = most = None
    for op, item in _consumables(terms, "Processors"):
        value = int(item.value)
        if value < 0:
            raise DocumentError(f"{who} asks for {value} processors")
        if op in (Op.EQ, Op.GE):
            least = max(least or 0, value)
        elif op is Op.GT:
            least = max(least or 0, value + 1)
        elif op is Op.LE:
            most = value if most is None else min(most, value)
        elif op is Op.LT:
            most = value - 1 if most is None else min(most, value - 1)
        if op is Op.EQ:
            most = value if most is None else min(most, value)
    if least is not None and least < 1:
        least = 1
    return least, most


def _duration(terms: list[Term]) -> float:
    limit = math.inf
    for term in terms:
        if isinstance(term.item, Simple) and term.item.name == "Duration" and term.effective_op in (Op.EQ, Op.LE, Op.LT):
            try:
                value = seconds(term.item.value)
            except ValueError:
                raise DocumentError(f"Duration {excerpt(term.item.value)!r} is not a duration") from None
            if value <= 0:
                raise DocumentError(f"Duration {excerpt(term.item.value)!r}: a run time limit must be positive")
            limit = min(limit, value)
    return limit


def _memory(terms: list[Term]) -> float:
    largest = 0.0
    for op, item in _consumables(terms, "Memory"):
        if op not in (Op.EQ, Op.GE, Op.GT):
            continue
        try:
            largest = max(largest, convert(float(item.value), item.units or DEFAULT_UNITS["Memory"], "MB"))
        except (UnitError, OverflowError) as exc:
            raise DocumentError(f"Memory: {exc}") from None
    return largest


def _licenses(terms: list[Term]) -> tuple[tuple[str, int], ...]:
    """The job's own Requested `Resource name="License" type=feature` amounts (CCS SoftwareLicense
    is mapped so), the largest per feature: what it draws from a license pool while it runs."""
    found: dict[str, int] = {}
    for op, item in _consumables(terms, "Resource"):
        if item.name == LICENSE and item.type and op in (Op.EQ, Op.GE, Op.GT):
            try:
                value = float(item.value)
                count = math.floor(value) + 1 if op is Op.GT else math.ceil(value)
            except (OverflowError, ValueError):
                raise DocumentError(f"License {excerpt(item.type)}: {str(item.value)[:20]} is no count") from None
            found[item.type] = max(found.get(item.type, 0), count)
    return tuple((feature, count) for feature, count in found.items() if count > 0)


#: The most GPUs a job may take on one host
MAX_GPUS_PER_HOST = 1024


def _gpus(terms: list[Term]) -> int:
    """The GPUs the job takes on each host: its Requested `Resource name="GPU"` (of any type: the
    type asks for a model, which the matcher checks), the largest when it says more than once."""
    most = 0
    for op, item in _consumables(terms, "Resource"):
        if item.name == GPU and op in (Op.EQ, Op.GE, Op.GT):
            try:
                value = float(item.value)
                count = math.floor(value) + 1 if op is Op.GT else math.ceil(value)
            except (OverflowError, ValueError):
                raise DocumentError(f"GPU: {str(item.value)[:20]} is no count") from None
            if count > MAX_GPUS_PER_HOST:
                raise DocumentError(f"GPU: {count} on a host; at most {MAX_GPUS_PER_HOST} are accepted")
            most = max(most, count)
    return most


def _asked_nodes(terms: list[Term]) -> tuple[str, ...] | None:
    asked: set[str] | None = None
    for term in terms:
        item = term.item
        if not isinstance(item, NodeRef) or term.effective_op is not Op.EQ:
            continue
        if item.aggregation not in (None, Aggregation.LIST, Aggregation.RANGE):
            continue  # a Pattern is the matcher's to test against the hosts it knows
        names = {name.lower().rstrip(".") for name in _names(item)}
        asked = names if asked is None else asked & names
    return None if asked is None else tuple(sorted(asked))


def _names(ref: NodeRef) -> list[str]:
    try:
        if ref.aggregation is Aggregation.RANGE and names_upper_bound(ref.value.strip()) > MAX_NODES:
            raise DocumentError(f"Node: more than {MAX_NODES} names")
        if ref.aggregation is Aggregation.LIST and len(ref.value) > MAX_NODES * 256:
            raise DocumentError(f"Node: more than {MAX_NODES} names")
        names = ref.names()
    except (NodeRefError, NodeSetException) as exc:
        raise DocumentError(f"Node: {exc}") from None
    if len(names) > MAX_NODES:
        raise DocumentError(f"Node: {len(names)} names; at most {MAX_NODES}")
    return names


def _node_list(text: str, what: str) -> list[str]:
    text = text.strip()
    if not text:
        return []
    expression = ",".join(text.replace(",", " ").split())
    try:
        if names_upper_bound(expression) > MAX_NODES:
            raise DocumentError(f"{what}: more than {MAX_NODES} names")
        nodes = expand_names(expression)
    except NodeSetException as exc:
        raise DocumentError(f"{what}: {exc}") from None
    return sorted({name.lower().rstrip(".") for name in nodes})


def _extension(props: Properties, name: str) -> str | None:
    for item in props.extensions:
        if item.name == name:
            return item.value
    return None


def _flag(props: Properties, name: str, default: bool) -> bool:
    text = _extension(props, name) or props.get(name)
    if text is None:
        return default
    return text.strip().lower() in ("true", "1")
