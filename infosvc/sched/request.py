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
- Exclusive: a job has its nodes to itself when it says `IsExclusive` true (the CCS attribute,
  kept as an Extension; an SSS job may write the same Extension); one that says nothing takes the
  site's `[scheduler] exclusive_default` (true unless set; a CCS job always says: CCS's own default
  is true, which its reading writes). A task is non-exclusive unless it says `IsExclusive` true.
- Asked nodes: a Requested `Node` List or Range: the job runs only on those. Required nodes: the
  Extension `RequiredNodes` (a list or NodeSet): the allocation must include every one of them.
- Queue: the job's own Requested `Queue` EQ term, the CE queue it names (the matcher holds it to
  that; the CEs count a job no host can run on the CE of that queue).
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
from infosvc.sched.budget import MAX_EXPANDED_BYTES, MAX_NODES, MAX_TASKS, Budget
from infosvc.model.durations import seconds
from infosvc.sched.draws import consumable_terms, gpus_per_host, licenses_of
from infosvc.sched.holds import read_holds
from infosvc.model.job import Condition, Consumable, Context, Designator, Job, Op, Properties, Simple, Task, Term
from infosvc.model.jobneeds import NeedsRead
from infosvc.model.nodeset import expand_names, names_upper_bound
from infosvc.model.noderef import Aggregation, NodeRef, NodeRefError
from infosvc.model.units import DEFAULT_UNITS, UnitError, convert

__all__ = ["MAX_EXPANDED_BYTES", "MAX_NODES", "MAX_TASKS", "PRIORITIES", "After", "Budget", "JobRequest", "TaskRequest",
           "priority_rank", "read_request"]

#: The five CCS priorities, lowest first: the rank is the index.
PRIORITIES: Final = ("Lowest", "BelowNormal", "Normal", "AboveNormal", "Highest")
NORMAL: Final = 2
#: Most processors one job may ask for (a bound on arithmetic, far above any site).
MAX_PROCESSORS: Final = 10_000_000


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
    #: the run time limit the job asked, where a start lowered `estimate` to its CE's (None: not
    #: lowered): what its run is a part of, for its owner's next predictions
    asked_estimate: float | None = None
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
    #: whether `exclusive` is the site's default, the job saying nothing of it (`why` and `jobs` tell)
    exclusive_by_default: bool = False
    #: the CE queue its own Requested Queue EQ term names ("": none)
    queue: str = ""

    def __post_init__(self) -> None:
        # read back from the store's JSON as lists
        object.__setattr__(self, "read_as_requested", tuple(self.read_as_requested))
        object.__setattr__(self, "holds", tuple(self.holds))

    @property
    def priority_name(self) -> str:
        return PRIORITIES[self.priority]


def read_request(needs: NeedsRead, owner: str, exclusive_default: bool = True, budget: Budget | None = None) -> JobRequest:
    """The scheduling request of a resolved SSS Job, its needs read (infosvc.model.jobneeds), owned
    by `owner` (decided from the token that filed it, never read here from the document:
    infosvc.queue.submissions.owner_of), exclusive when it says nothing if `exclusive_default`
    (the site's `[scheduler] exclusive_default`); DocumentError for a value the scheduler cannot honour (an
    unknown priority, a processor range that is empty), or past `budget`: what is left to the
    submission's jobs (infosvc/sched/budget.py; a job's own when None)."""
    job, read = needs
    budget = budget if budget is not None else Budget()
    props = job.properties
    priority = _priority(props.get("Priority"))
    name, project = props.get("Name") or "", (props.get("Project") or "").strip()
    budget.take_text(len(name) + len(project) + sum(map(len, read)))
    tasks = _tasks(job, budget)
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
    asked = _asked_nodes(props.requested, budget)
    required = _node_list(_extension(props, "RequiredNodes") or "", "RequiredNodes", budget)
    if asked is not None and required:
        missing = sorted(set(required) - set(asked))
        if missing:
            raise DocumentError(f"required nodes {', '.join(missing[:5])} are not among the asked nodes")
    after = tuple(After(dep.job, dep.effective_condition, dep.code,
                        dep.effective_designator is Designator.JOB_NAME) for dep in props.dependencies)
    holds, eligible, deadline = read_holds(props)
    return JobRequest(
        name=name, owner=owner, priority=priority,
        min_processors=least, max_processors=most, estimate=min(estimates), memory_mb=memory,
        exclusive=_flag(props, "IsExclusive", exclusive_default), asked_nodes=asked, required_nodes=tuple(required),
        exclusive_by_default=_said(props, "IsExclusive") is None, queue=_queue(props.requested),
        licenses=licenses_of(props.requested), gpus=gpus_per_host(props.requested),
        run_until_cancelled=_flag(props, "RuntillCancelled", False) or _flag(props, "RunUntilCanceled", False),
        tasks=tasks, after=after, read_as_requested=read, project=project,
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


def _tasks(job: Job, budget: Budget) -> tuple[TaskRequest, ...]:
    tasks: list[TaskRequest] = []
    names: dict[str, int] = {}
    pending: list[list[str]] = []
    for group in job.effective_task_groups():
        count = group.properties.integer("TaskCount") if group.properties.get("TaskCount") else None
        written: list[Task | None] = list(group.tasks) or [None]
        total = max(count or len(written), len(written))
        budget.take_tasks(total)
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
            budget.take_text(_text_of(tasks[-1]))
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


def _text_of(task: TaskRequest) -> int:
    """The characters a task carries: what storing and answering it costs."""
    return (len(task.name) + len(task.executable) + len(task.arguments) + sum(len(k) + len(v) for k, v in task.environment)
            + sum(len(path or "") for path in (task.workdir, task.stdin, task.stdout, task.stderr)))


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


def _processors(terms: list[Term], who: str) -> tuple[int | None, int | None]:
    least = most = None
    for op, item in consumable_terms(terms, "Processors"):
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
    for op, item in consumable_terms(terms, "Memory"):
        if op not in (Op.EQ, Op.GE, Op.GT):
            continue
        try:
            largest = max(largest, convert(float(item.value), item.units or DEFAULT_UNITS["Memory"], "MB"))
        except (UnitError, OverflowError) as exc:
            raise DocumentError(f"Memory: {exc}") from None
    return largest


def _asked_nodes(terms: list[Term], budget: Budget) -> tuple[str, ...] | None:
    asked: set[str] | None = None
    for term in terms:
        item = term.item
        if not isinstance(item, NodeRef) or term.effective_op is not Op.EQ:
            continue
        if item.aggregation not in (None, Aggregation.LIST, Aggregation.RANGE):
            continue  # a Pattern is the matcher's to test against the hosts it knows
        names = {name.lower().rstrip(".") for name in _names(item, budget)}
        asked = names if asked is None else asked & names
    return None if asked is None else tuple(sorted(asked))


def _names(ref: NodeRef, budget: Budget) -> list[str]:
    """The names a Node term lists, charged to `budget` before they are made (a list by its
    delimiter: counted by commas, a list of another delimiter was charged one name)."""
    try:
        if ref.aggregation is Aggregation.RANGE:
            budget.take_names(names_upper_bound(ref.value.strip()), "Node")
        elif ref.aggregation is Aggregation.LIST:
            budget.take_names(ref.value.count(ref.delimiter or ",") + 1, "Node")
        names = ref.names()
    except (NodeRefError, NodeSetException) as exc:
        raise DocumentError(f"Node: {exc}") from None
    budget.take_text(sum(map(len, names)))
    return names


def _node_list(text: str, what: str, budget: Budget) -> list[str]:
    text = text.strip()
    if not text:
        return []
    expression = ",".join(text.replace(",", " ").split())
    try:
        budget.take_names(names_upper_bound(expression), what)
        nodes = expand_names(expression)
    except NodeSetException as exc:
        raise DocumentError(f"{what}: {exc}") from None
    budget.take_text(sum(map(len, nodes)))
    return sorted({name.lower().rstrip(".") for name in nodes})


def _extension(props: Properties, name: str) -> str | None:
    for item in props.extensions:
        if item.name == name:
            return item.value
    return None


def _said(props: Properties, name: str) -> str | None:
    return _extension(props, name) or props.get(name)


def _flag(props: Properties, name: str, default: bool) -> bool:
    text = _said(props, name)
    if text is None:
        return default
    return text.strip().lower() in ("true", "1")


def _queue(terms: list[Term]) -> str:
    """The queue a job's own Requested `Queue` EQ term names ("" when none does)."""
    for term in terms:
        item = term.item
        if isinstance(item, Simple) and item.name == "Queue" and term.effective_op is Op.EQ:
            return item.value.strip()
    return ""
