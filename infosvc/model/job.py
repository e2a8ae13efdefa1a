"""The SSS Job object (Scalable Systems Software Job Object Specification 3.1) as plain dataclasses.

Names follow the spec. A JobGroup holds Jobs and an optional JobDefaults; a Job holds TaskGroups
and an optional TaskGroupDefaults; a TaskGroup holds Tasks and an optional TaskDefaults. Every
level carries one `Properties`: the simple properties of the spec's tables (by element name),
credentials, consumable resources, Feature, Node, Dependency, Environment, the stream files,
NotificationList, ResourceLimit, TaskDistribution, Extension, and the Requested and Delivered
categories as flat lists of `Term`s.

The model is kept as written (so that it serializes back to the same document); `resolve()`
gives the effective view with the defaults applied: "properties in Job elements override any
properties found in a sibling JobDefaults element", and likewise for task groups and tasks.

A Requested list is a boolean expression written flat: each term has a conj (its relation to the
previous term), a group count (positive: parentheses opened before it; negative: closed after
it) and perhaps a preference. `requirement(terms)` builds the nested expression a matcher
evaluates. This module knows no XML (see infosvc/codec/job_xml.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from infosvc.model import durations
from infosvc.model.node import Extension
from infosvc.model.noderef import Aggregation, NodeRef

__all__ = [
    "Aggregation", "AwarenessPolicy", "Conj", "Condition", "Consumable", "Context", "Dependency",
    "Designator", "Environment", "Extension", "Feature", "File", "Job", "JobGroup", "NodeRef",
    "NotificationList", "Op", "Properties", "ResourceLimit", "Simple", "StreamFile", "Task",
    "TaskDistribution", "TaskGroup", "Term", "Variable", "Requirement", "And", "Or", "Not", "Leaf",
    "Preferred", "Expr", "implicit_groups", "requirement", "resolve", "resolve_job",
]


class AwarenessPolicy(StrEnum):
    """What to do with an element or attribute the implementation does not support (spec 9.0)."""

    REJECT = "Reject"
    WARN = "Warn"
    IGNORE = "Ignore"


class Op(StrEnum):
    EQ = "EQ"
    NE = "NE"
    LT = "LT"
    GT = "GT"
    LE = "LE"
    GE = "GE"
    MATCH = "Match"


class Conj(StrEnum):
    AND = "And"
    OR = "Or"
    NAND = "Nand"  # and not
    NOR = "Nor"  # or not


class Condition(StrEnum):
    ON_SUCCESS = "OnSuccess"
    ON_FAILURE = "OnFailure"
    ON_EXIT = "OnExit"


class Designator(StrEnum):
    JOB_ID = "JobId"
    JOB_NAME = "JobName"


class Context(StrEnum):
    """The sense in which a consumable resource is meant; Available when absent."""

    CONFIGURED = "Configured"
    AVAILABLE = "Available"
    USED = "Used"
    DEDICATED = "Dedicated"


# --- vocabulary ------------------------------------------------------------------------------

#: Simple properties by element name -> value type ("String", "Integer", "Float", "Boolean",
#: "DateTime", "Duration"), from Tables 1, 2, 3, 6 and 7. Hold may repeat; the others appear once.
JOB_GROUP_SIMPLE: dict[str, str] = {
    "CreationTime": "DateTime", "Description": "String", "Id": "String", "Name": "String",
    "State": "String",
}
JOB_SIMPLE: dict[str, str] = {
    "Application": "String", "Architecture": "String", "Arguments": "String", "Charge": "Float",
    "Checkpointable": "Boolean", "CpuDuration": "Duration", "Deadline": "DateTime",
    "EligibleTime": "DateTime", "EndTime": "DateTime", "Executable": "String", "ExitCode": "Integer",
    "GlobalId": "String", "Hold": "String", "InitialWorkingDirectory": "String",
    "Interactive": "Boolean", "Id": "String", "Name": "String", "State": "String", "Type": "String",
    "Machine": "String", "NodeCount": "Integer", "OperatingSystem": "String", "Partition": "String",
    "Priority": "Integer", "QualityOfService": "String", "Queue": "String", "Quote": "String",
    "Reservation": "String", "ReservationTime": "DateTime", "ResourceManagerType": "String",
    "Restartable": "Boolean", "Shell": "String", "StagedTime": "DateTime", "StartCount": "Integer",
    "StartTime": "DateTime", "StatusMessage": "String", "SubmitTime": "DateTime",
    "SubmitHost": "String", "Suspendable": "Boolean", "SuspendDuration": "Integer",
    "TimeCategory": "String", "Duration": "Duration",
    # Table 3, credentials; Account as the spec's own Requested example writes it
    "Project": "String", "GlobalUser": "String", "Group": "String", "User": "String",
    "Account": "String",
    # Table 6 (task group) and Table 7 (task); Process as the spec's elaborate example writes it
    "TaskCount": "Integer", "Session": "Integer", "Process": "Integer",
}
#: Table 4 and the extensible Resource.
CONSUMABLES: tuple[str, ...] = ("Processors", "Memory", "Disk", "Network", "Swap")
RESOURCE = "Resource"
#: Properties that the spec marks R / D (may appear in Requested and Delivered).
CATEGORIZABLE: frozenset[str] = frozenset({
    "Architecture", "Machine", "NodeCount", "OperatingSystem", "Partition", "QualityOfService",
    "Queue", "Reservation", "ResourceManagerType", "Duration", "Project", "GlobalUser", "Group",
    "User", "Account", *CONSUMABLES, RESOURCE, "Node", "Feature",
})
#: Allowed redirectList values per stream file element.
REDIRECTS: dict[str, frozenset[str]] = {
    "OutputFile": frozenset({"Append", "Close", "Flush", "Keep", "Merge"}),
    "ErrorFile": frozenset({"Append", "Close", "Flush", "Keep", "Merge"}),
    "InputFile": frozenset({"Close"}),
}
NOTIFICATION_EVENTS: frozenset[str] = frozenset({"JobStart", "JobEnd", "All", "None"})


# --- properties ------------------------------------------------------------------------------

@dataclass(slots=True)
class Simple:
    """A simple property as a Requested / Delivered term: element name and text value."""

    name: str
    value: str


@dataclass(slots=True)
class Consumable:
    """A consumable resource (Processors, Memory, Disk, Network, Swap, or Resource with name / type).

    Processors is an int, the others floats. `duration` is as written (seconds or xsd:duration).
    `context` None means Available, the spec's default.
    """

    kind: str
    value: int | float
    context: Context | None = None
    units: str | None = None
    metric: str | None = None
    duration: str | None = None
    consumption_rate: float | None = None
    dynamic: bool | None = None
    name: str | None = None
    type: str | None = None

    @property
    def effective_context(self) -> Context:
        return self.context or Context.AVAILABLE

    @property
    def duration_seconds(self) -> float | None:
        return None if self.duration is None else durations.seconds(self.duration)

    def key(self) -> tuple[str, str | None, str | None, Context]:
        """What a job-level consumable overrides in its defaults: kind, name, type, context."""
        return (self.kind, self.name, self.type, self.effective_context)


@dataclass(slots=True)
class Feature:
    """A node feature; List (with a delimiter, comma by default) or Pattern aggregation."""

    value: str
    aggregation: Aggregation | None = None
    delimiter: str | None = None

    def names(self) -> list[str]:
        """The features named (a Pattern is returned as written: it is matched, not expanded)."""
        if self.aggregation is Aggregation.LIST:
            return [part.strip() for part in self.value.split(self.delimiter or ",") if part.strip()]
        return [self.value]


Item = Simple | Consumable | Feature | NodeRef


@dataclass(slots=True)
class Term:
    """One property inside Requested or Delivered, with the attributes the category adds."""

    item: Item
    op: Op | None = None  # None: EQ
    conj: Conj | None = None  # None: And
    group: int = 0
    preference: int | None = None
    performance_factor: float | None = None

    @property
    def name(self) -> str:
        """The element name: Processors, Memory, Resource, Node, Feature, User, ..."""
        item = self.item
        if isinstance(item, Simple):
            return item.name
        if isinstance(item, Consumable):
            return item.kind
        return "Feature" if isinstance(item, Feature) else "Node"

    @property
    def effective_op(self) -> Op:
        return self.op or Op.EQ

    @property
    def effective_conj(self) -> Conj:
        return self.conj or Conj.AND


@dataclass(slots=True)
class Dependency:
    """This job runs after `job` (a JobId, or a JobName with that designator) per `condition`."""

    job: str
    condition: Condition | None = None  # None: OnSuccess
    code: int | None = None  # OnExit only; None: any exit status
    designator: Designator | None = None  # None: JobId

    @property
    def effective_condition(self) -> Condition:
        return self.condition or Condition.ON_SUCCESS

    @property
    def effective_designator(self) -> Designator:
        return self.designator or Designator.JOB_ID


@dataclass(slots=True)
class Variable:
    name: str
    value: str


@dataclass(slots=True)
class Environment:
    variables: list[Variable] = field(default_factory=list)
    export: bool | None = None

    def as_dict(self) -> dict[str, str]:
        return {v.name: v.value for v in self.variables}


@dataclass(slots=True)
class StreamFile:
    """InputFile, OutputFile or ErrorFile: a path (empty: the queuing system chooses) and redirects."""

    path: str = ""
    redirect_list: list[str] = field(default_factory=list)


@dataclass(slots=True)
class NotificationList:
    events: list[str] = field(default_factory=list)
    uri: str | None = None


@dataclass(slots=True)
class ResourceLimit:
    name: str
    value: str
    type: str | None = None  # Hard, Soft; None: both


@dataclass(slots=True)
class TaskDistribution:
    value: str
    type: str | None = None  # Rule, TasksPerNode, ProcessorsPerTask, Geometry, ...


@dataclass(slots=True)
class File:
    """A file passed with the job (SSSRMAP File object), referred to as `#id` by Executable."""

    id: str
    content: str


@dataclass(slots=True)
class Properties:
    """The properties of one level (job group, job, task group, task or one of their defaults)."""

    simple: dict[str, str] = field(default_factory=dict)
    #: units of a simple property, by name: the spec's elaborate example writes Charge units="USD"
    units: dict[str, str] = field(default_factory=dict)
    holds: list[str] = field(default_factory=list)
    consumables: list[Consumable] = field(default_factory=list)
    features: list[Feature] = field(default_factory=list)
    nodes: list[NodeRef] = field(default_factory=list)
    dependencies: list[Dependency] = field(default_factory=list)
    environment: Environment | None = None
    extensions: list[Extension] = field(default_factory=list)
    input_file: StreamFile | None = None
    output_file: StreamFile | None = None
    error_file: StreamFile | None = None
    notification_list: NotificationList | None = None
    resource_limits: list[ResourceLimit] = field(default_factory=list)
    task_distribution: TaskDistribution | None = None
    requested: list[Term] = field(default_factory=list)
    delivered: list[Term] = field(default_factory=list)

    def get(self, name: str) -> str | None:
        return self.simple.get(name)

    def integer(self, name: str) -> int | None:
        text = self.simple.get(name)
        return None if text is None else int(text)

    def number(self, name: str) -> float | None:
        text = self.simple.get(name)
        return None if text is None else float(text)

    def boolean(self, name: str) -> bool | None:
        text = self.simple.get(name)
        return None if text is None else text.strip().lower() in ("true", "1")

    def seconds(self, name: str) -> float | None:
        """A Duration property (plain seconds or xsd:duration) in seconds."""
        text = self.simple.get(name)
        return None if text is None else durations.seconds(text)

    def consumable(self, kind: str, *, name: str | None = None,
                   context: Context | None = None) -> Consumable | None:
        for item in self.consumables:
            if (item.kind == kind and (name is None or item.name == name)
                    and (context is None or item.effective_context is context)):
                return item
        return None


@dataclass(slots=True)
class Task:
    """A Task or TaskDefaults."""

    properties: Properties = field(default_factory=Properties)
    awareness_policy: AwarenessPolicy | None = None


@dataclass(slots=True)
class TaskGroup:
    """A TaskGroup or TaskGroupDefaults."""

    properties: Properties = field(default_factory=Properties)
    tasks: list[Task] = field(default_factory=list)
    task_defaults: Task | None = None
    awareness_policy: AwarenessPolicy | None = None

    def effective_tasks(self) -> list[Task]:
        """The tasks; a task group with none has one implicit task (spec 3.0)."""
        return self.tasks or [Task()]


@dataclass(slots=True)
class Job:
    """A Job or JobDefaults. A Job has an Id (`properties.simple["Id"]`); defaults need not."""

    properties: Properties = field(default_factory=Properties)
    task_groups: list[TaskGroup] = field(default_factory=list)
    task_group_defaults: TaskGroup | None = None
    files: list[File] = field(default_factory=list)  # attached to a standalone Job document
    awareness_policy: AwarenessPolicy | None = None

    @property
    def id(self) -> str:
        return self.properties.simple.get("Id", "")

    @property
    def name(self) -> str | None:
        return self.properties.simple.get("Name")

    def effective_task_groups(self) -> list[TaskGroup]:
        """The task groups; a job with none has one implicit task group (spec 3.0)."""
        return self.task_groups or [TaskGroup()]

    def executable_file(self) -> File | None:
        """The attached File that Executable refers to as `#id`, if it does."""
        executable = self.properties.simple.get("Executable", "")
        if executable.startswith("#"):
            for item in self.files:
                if item.id == executable[1:]:
                    return item
        return None


@dataclass(slots=True)
class JobGroup:
    properties: Properties = field(default_factory=Properties)  # Table 1 properties only
    jobs: list[Job] = field(default_factory=list)
    job_defaults: Job | None = None
    files: list[File] = field(default_factory=list)
    awareness_policy: AwarenessPolicy | None = None

    @property
    def id(self) -> str:
        return self.properties.simple.get("Id", "")


# --- inheritance -----------------------------------------------------------------------------

def inherit(own: Properties, defaults: Properties) -> Properties:
    """`own` over `defaults`, property by property.

    Simple properties override by name. Consumables override by (kind, name, type, context).
    Environment variables override by name (export: own when set). Every other repeatable
    property (Hold, Feature, Node, Dependency, Extension, ResourceLimit) and each of Requested and
    Delivered is one property: present in `own`, it replaces the default's whole; a Requested
    list is one expression and is not spliced.
    """
    simple = {**defaults.simple, **own.simple}
    units = {name: unit for name, unit in defaults.units.items() if name not in own.simple} | own.units
    keys = {item.key() for item in own.consumables}
    consumables = [item for item in defaults.consumables if item.key() not in keys] + own.consumables
    environment = own.environment or defaults.environment
    if own.environment is not None and defaults.environment is not None:
        merged = defaults.environment.as_dict() | own.environment.as_dict()
        export = own.environment.export if own.environment.export is not None else defaults.environment.export
        environment = Environment([Variable(k, v) for k, v in merged.items()], export)
    return Properties(
        simple=simple, units=units, holds=own.holds or defaults.holds, consumables=consumables,
        features=own.features or defaults.features, nodes=own.nodes or defaults.nodes,
        dependencies=own.dependencies or defaults.dependencies, environment=environment,
        extensions=own.extensions or defaults.extensions,
        input_file=own.input_file or defaults.input_file,
        output_file=own.output_file or defaults.output_file,
        error_file=own.error_file or defaults.error_file,
        notification_list=own.notification_list or defaults.notification_list,
        resource_limits=own.resource_limits or defaults.resource_limits,
        task_distribution=own.task_distribution or defaults.task_distribution,
        requested=own.requested or defaults.requested, delivered=own.delivered or defaults.delivered,
    )


def _policy(own: AwarenessPolicy | None, default: AwarenessPolicy | None) -> AwarenessPolicy | None:
    return own if own is not None else default


def resolve_task_group(group: TaskGroup, defaults: TaskGroup | None = None) -> TaskGroup:
    """The task group with its defaults applied, and its tasks with their TaskDefaults applied."""
    if defaults is not None:
        task_defaults = group.task_defaults
        if defaults.task_defaults is not None:
            task_defaults = (defaults.task_defaults if task_defaults is None
                             else Task(inherit(task_defaults.properties, defaults.task_defaults.properties)))
        group = TaskGroup(inherit(group.properties, defaults.properties), group.tasks or defaults.tasks,
                          task_defaults, _policy(group.awareness_policy, defaults.awareness_policy))
    tasks = group.tasks
    if group.task_defaults is not None:
        base = group.task_defaults
        tasks = [Task(inherit(task.properties, base.properties), _policy(task.awareness_policy, base.awareness_policy))
                 for task in tasks]
    return replace(group, tasks=tasks, task_defaults=None)


def resolve_job(job: Job, defaults: Job | None = None) -> Job:
    """The job with its JobDefaults and TaskGroupDefaults applied (defaults removed)."""
    if defaults is not None:
        tg_defaults = job.task_group_defaults
        if defaults.task_group_defaults is not None:
            tg_defaults = (defaults.task_group_defaults if tg_defaults is None
                           else resolve_task_group(tg_defaults, defaults.task_group_defaults))
        job = Job(inherit(job.properties, defaults.properties), job.task_groups or defaults.task_groups,
                  tg_defaults, job.files, _policy(job.awareness_policy, defaults.awareness_policy))
    groups = [resolve_task_group(group, job.task_group_defaults) for group in job.task_groups]
    return replace(job, task_groups=groups, task_group_defaults=None)


def resolve(obj: Job | JobGroup) -> list[Job]:
    """The effective jobs of a Job or JobGroup, every level of defaults applied."""
    if isinstance(obj, Job):
        return [resolve_job(obj)]
    return [replace(resolve_job(job, obj.job_defaults), files=obj.files + job.files) for job in obj.jobs]


# --- the requirement expression --------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Leaf:
    term: Term


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr


@dataclass(frozen=True, slots=True)
class And:
    operands: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Or:
    operands: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Preferred:
    """Positive-preference alternatives of one group: at least one must hold; the best ranks first.

    `weights` are each term's share of the group's weights (they sum to 1).
    """

    alternatives: tuple[Leaf, ...]
    weights: tuple[float, ...]


Expr = Leaf | Not | And | Or | Preferred


@dataclass(frozen=True, slots=True)
class Requirement:
    """A Requested list as a matcher needs it: the hard expression, and the soft preferences.

    `expr` is None when nothing is required. `soft` holds the negative-preference terms, each with its
    share of the list's negative weights (they sum to 1): tried best first, never required.
    """

    expr: Expr | None
    soft: tuple[tuple[Term, float], ...] = ()


def implicit_groups(terms: list[Term]) -> tuple[int, int]:
    """Group counts that do not nest, as (groups opened before the first term, closed after the last).

    A close with no open group closes one opened implicitly at the start of the list; a group left
    open is closed at its end. The spec's own elaborate example needs the first: it writes
    `<Processors group="-1">12</Processors> <Processors conj="Or" group="1">16</Processors>`,
    read as (Processors 12) Or (Processors 16). (0, 0) means the counts nest.
    """
    depth = lowest = 0
    for term in terms:
        depth += term.group
        lowest = min(lowest, depth)
    return -lowest, depth - lowest


def requirement(terms: list[Term]) -> Requirement:
    """The nested boolean expression of a flat Requested list.

    Each term's positive group opens that many parentheses before it, a negative one closes that
    many after it (see implicit_groups for counts that do not nest). Within a parenthesis, terms
    combine left to right by each one's conj with what precedes it (And, Or, Nand = and not,
    Nor = or not); no conj binds tighter than another: the groups say the precedence. Terms with a
    positive preference in one parenthesis form one `Preferred` alternative set (joined with And
    where the first of them stands); terms with a negative preference are soft and leave the hard
    expression.
    """
    opens, _ = implicit_groups(terms)
    soft: list[tuple[Term, float]] = []
    # A stack of open parentheses; each holds (conj that joins it to what precedes, items).
    stack: list[tuple[Conj, list[tuple[Conj, Expr | _Prefs]]]] = [(Conj.AND, [])]
    stack.extend((Conj.AND, []) for _ in range(opens))

    for term in terms:
        for opened in range(max(term.group, 0)):
            # the term's conj joins the outermost parenthesis it opens to what precedes it;
            # each inner one is the first thing in its parent
            stack.append((term.effective_conj if opened == 0 else Conj.AND, []))
        opened_here = term.group > 0
        items = stack[-1][1]
        conj = Conj.AND if opened_here else term.effective_conj
        if term.preference is not None and term.preference < 0:
            soft.append((term, float(term.preference)))
        elif term.preference is not None and term.preference > 0:
            prefs = next((item for _, item in items if isinstance(item, _Prefs)), None)
            if prefs is None:
                prefs = _Prefs([])
                items.append((Conj.AND, prefs))
            prefs.leaves.append(Leaf(term))
        else:
            items.append((conj, Leaf(term)))
        for _ in range(max(-term.group, 0)):
            group_conj, group_items = stack.pop()
            folded = _fold(group_items)
            if folded is not None:
                stack[-1][1].append((group_conj, folded))
    while len(stack) > 1:
        group_conj, group_items = stack.pop()
        folded = _fold(group_items)
        if folded is not None:
            stack[-1][1].append((group_conj, folded))
    expr = _fold(stack[0][1])
    # soft weights as shares of the sum of the soft weights (per whole list: ranking only)
    total = sum(-weight for _, weight in soft)
    shares = tuple(sorted(((term, -weight / total) for term, weight in soft), key=lambda pair: -pair[1])) \
        if total else ()
    return Requirement(expr, shares)


@dataclass(slots=True)
class _Prefs:
    leaves: list[Leaf]

    def expr(self) -> Preferred:
        weights = [float(leaf.term.preference or 0) for leaf in self.leaves]
        total = sum(weights)
        return Preferred(tuple(self.leaves), tuple(w / total for w in weights))


def _fold(items: list[tuple[Conj, Expr | _Prefs]]) -> Expr | None:
    result: Expr | None = None
    for conj, item in items:
        expr = item.expr() if isinstance(item, _Prefs) else item
        if result is None:
            result = Not(expr) if conj in (Conj.NAND, Conj.NOR) else expr
            continue
        match conj:
            case Conj.AND:
                result = And((*result.operands, expr)) if isinstance(result, And) else And((result, expr))
            case Conj.OR:
                result = Or((*result.operands, expr)) if isinstance(result, Or) else Or((result, expr))
            case Conj.NAND:
                result = And((*result.operands, Not(expr))) if isinstance(result, And) else And((result, Not(expr)))
            case Conj.NOR:
                result = Or((*result.operands, Not(expr))) if isinstance(result, Or) else Or((result, Not(expr)))
    return result
