"""SSS Job and JobGroup objects to and from XML, validated with schemas/sss-job.xsd.

parse_job(document) -> ParsedJob(job, warnings) reads in four steps:

1. safexml.parse: size bound, UTF-8 only, no DOCTYPE, no entities, no file, no network; a document
   that is not well-formed (the spec's elaborate example as printed, see docs/sss-job.md) is
   refused here.
2. awarenessPolicy (spec 9.0): every element and attribute is checked by name, in its context,
   against what infosvc supports (and enumerated values against the values it knows). One it does
   not support is, per the policy in force there (the element's own awarenessPolicy, else the
   nearest ancestor's, else Reject): refused (DocumentError naming it), removed with a warning
   returned to the submitter (Warn), or removed (Ignore).
3. The schema, on what remains: types, required attributes, enumerations.
4. The model is built from the valid tree, with the checks the schema cannot say (exactly one Id,
   at most one of the single properties, a TaskGroup Property in every TaskGroup, Dependency code only with
   OnExit, an Executable "#id" that names an attached File).

job_to_xml(obj) writes text directly; parse_job of its output gives an equal object. Leading and
trailing white space of text values is not significant. awarenessPolicy is kept on the container
elements (JobGroup, Job, TaskGroup, Task and their defaults); on a property it has done its work
once the document is read, and is not kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

from infosvc.codec.node_xml import format_amount
from infosvc.codec.xmltext import attr as _attr
from infosvc.codec.xmltext import finish
from infosvc.codec.xmltext import text as _text
from infosvc.errors import DocumentError, Problem
from infosvc.model.job import (
    CATEGORIZABLE, CONSUMABLES, JOB_GROUP_SIMPLE, JOB_SIMPLE, NOTIFICATION_EVENTS, REDIRECTS, RESOURCE,
    AwarenessPolicy, Conj, Condition, Consumable, Context, Dependency, Designator, Environment, Extension,
    Feature, File, Job, JobGroup, NotificationList, Op, Properties, ResourceLimit, Simple,
    StreamFile, Task, TaskDistribution, TaskGroup, Term, Variable, implicit_groups,
)
from infosvc.model.noderef import Aggregation, NodeRef

if TYPE_CHECKING:
    from lxml import etree

SCHEMA_FILE: Final = "sss-job.xsd"
MAX_JOB_BYTES: Final = 1 << 20


class ParsedJob(NamedTuple):
    """What parse_job read, and the warnings owed to the submitter (awarenessPolicy Warn)."""

    job: Job | JobGroup
    warnings: list[Problem]


# --- what infosvc supports, by name ---------------------------------------------------------

_STRUCTURED: Final = frozenset({
    *CONSUMABLES, RESOURCE, "Feature", "Node", "Dependency", "Environment", "Extension", "InputFile",
    "OutputFile", "ErrorFile", "NotificationList", "ResourceLimit", "TaskDistribution", "Requested",
    "Delivered",
})
_PROPERTIES: Final = frozenset(JOB_SIMPLE) | _STRUCTURED
#: The children each element may have.
_CHILDREN: Final[dict[str, frozenset[str]]] = {
    "JobGroup": frozenset(JOB_GROUP_SIMPLE) | {"Job", "JobDefaults", "File"},
    "Job": _PROPERTIES | {"TaskGroup", "TaskGroupDefaults", "File"},
    "JobDefaults": _PROPERTIES | {"TaskGroup", "TaskGroupDefaults"},
    "TaskGroup": _PROPERTIES | {"Task", "TaskDefaults"},
    "TaskGroupDefaults": _PROPERTIES | {"Task", "TaskDefaults"},
    "Task": _PROPERTIES,
    "TaskDefaults": _PROPERTIES,
    "Requested": CATEGORIZABLE,
    "Delivered": CATEGORIZABLE,
    "Environment": frozenset({"Variable"}),
}
_CONSUMABLE_ATTRIBUTES: Final = frozenset({"context", "units", "metric", "duration", "consumptionRate", "dynamic"})
#: The attributes of each element (awarenessPolicy aside) outside Requested and Delivered.
_ATTRIBUTES: Final[dict[str, frozenset[str]]] = {
    **{kind: _CONSUMABLE_ATTRIBUTES for kind in CONSUMABLES},
    RESOURCE: _CONSUMABLE_ATTRIBUTES | {"name", "type"},
    "Feature": frozenset({"aggregation", "delimiter"}),
    "Node": frozenset({"aggregation", "delimiter", "count"}),
    "Dependency": frozenset({"condition", "code", "designator"}),
    "Environment": frozenset({"export"}),
    "Variable": frozenset({"name"}),
    "Extension": frozenset({"name", "type"}),
    "InputFile": frozenset({"redirectList"}),
    "OutputFile": frozenset({"redirectList"}),
    "ErrorFile": frozenset({"redirectList"}),
    "NotificationList": frozenset({"uri"}),
    "ResourceLimit": frozenset({"name", "type"}),
    "TaskDistribution": frozenset({"type"}),
    "File": frozenset({"id"}),
    "Charge": frozenset({"units"}),
}
_CATEGORY_ATTRIBUTES: Final = {"Requested": frozenset({"op", "conj", "group", "preference", "performanceFactor"}),
                               "Delivered": frozenset({"group"})}
#: Enumerated attribute values infosvc knows (per element where they differ).
_VALUES: Final[dict[str, frozenset[str]]] = {
    "op": frozenset(Op), "conj": frozenset(Conj), "context": frozenset(Context),
    "condition": frozenset(Condition), "designator": frozenset(Designator),
}
_AGGREGATIONS: Final = {"Feature": frozenset({"List", "Pattern"}), "Node": frozenset(Aggregation)}
_POLICIES: Final = frozenset(AwarenessPolicy)
#: Properties that may appear at most once in one level (outside Requested / Delivered).
_SINGLE: Final = (frozenset(JOB_SIMPLE) - {"Hold"}) | frozenset(JOB_GROUP_SIMPLE) | {
    "Environment", "InputFile", "OutputFile", "ErrorFile", "NotificationList", "TaskDistribution",
    "JobDefaults", "TaskGroupDefaults", "TaskDefaults"}


#: Table 6: a TaskGroup (not TaskGroupDefaults) MUST have at least one of them.
_TASK_GROUP_PROPERTIES: Final = frozenset({"TaskCount", "Id", "Name"})


class _Awareness:
    """Applies awarenessPolicy to what is not supported; collects refusals and warnings."""

    def __init__(self) -> None:
        self.rejected: list[Problem] = []
        self.warnings: list[Problem] = []

    def unsupported(self, element: etree._Element, policy: AwarenessPolicy, what: str,
                    attribute: str | None = None) -> None:
        path = element.getroottree().getpath(element)
        tag = _name(element)
        if policy is AwarenessPolicy.REJECT:
            self.rejected.append(Problem(f"{what} is not supported (awarenessPolicy Reject)", element.sourceline,
                                         tag, attribute, path))
        elif policy is AwarenessPolicy.WARN:
            self.warnings.append(Problem(f"{what} is not supported and was ignored (awarenessPolicy Warn)",
                                         element.sourceline, tag, attribute, path))

    def walk(self, element: etree._Element, policy: AwarenessPolicy, category: str | None) -> None:
        policy = _own_policy(element, policy)
        tag = _name(element)
        allowed = _ATTRIBUTES.get(tag, frozenset())
        if category is not None:
            allowed = allowed | _CATEGORY_ATTRIBUTES[category]
        for key, value in list(element.items()):
            if key == "awarenessPolicy":
                continue
            if key not in allowed:  # a namespace-qualified attribute is named "{namespace}local"
                self.unsupported(element, policy, f"attribute {key} of {tag}", key)
                del element.attrib[key]
                continue
            known = _AGGREGATIONS.get(tag) if key == "aggregation" else _VALUES.get(key)
            if known is not None and value not in known:
                self.unsupported(element, policy, f"{key}={value!r} of {tag}", key)
                del element.attrib[key]
            elif key == "redirectList":
                items = [item.strip() for item in value.split(",") if item.strip()]
                unknown = [item for item in items if item not in REDIRECTS[tag]]
                if unknown:
                    self.unsupported(element, policy, f"redirectList {', '.join(unknown)} of {tag}", key)
                    element.set(key, ",".join(item for item in items if item in REDIRECTS[tag]))
        if tag == "NotificationList":
            events = [item.strip() for item in (element.text or "").split(",") if item.strip()]
            unknown = [item for item in events if item not in NOTIFICATION_EVENTS]
            if unknown:
                self.unsupported(element, policy, f"notification event {', '.join(unknown)}")
                element.text = ",".join(item for item in events if item in NOTIFICATION_EVENTS)
        children = _CHILDREN.get(tag, frozenset())
        child_category = tag if tag in _CATEGORY_ATTRIBUTES else None
        for child in list(element):
            name = _name(child)
            if name not in children:
                child_policy = _own_policy(child, policy, strict=False)
                self.unsupported(child, child_policy, f"element {name}" + (f" in {tag}" if tag else ""))
                _remove(child)
            else:
                self.walk(child, policy, child_category)


def _name(element: etree._Element) -> str:
    tag = element.tag
    return tag if isinstance(tag, str) else str(tag)  # a namespace-qualified one as "{namespace}Local"


def _own_policy(element: etree._Element, inherited: AwarenessPolicy, *, strict: bool = True) -> AwarenessPolicy:
    value = element.get("awarenessPolicy")
    if value is None:
        return inherited
    if value not in _POLICIES:
        if not strict:
            return inherited
        raise DocumentError(f"awarenessPolicy {value!r} is none of Reject, Warn, Ignore",
                            line=element.sourceline, element=_name(element), attribute="awarenessPolicy",
                            path=element.getroottree().getpath(element))
    return AwarenessPolicy(value)


def _remove(child: etree._Element) -> None:
    """Remove `child`, keeping the text that follows it (lxml keeps that text with the element)."""
    parent = child.getparent()
    assert parent is not None
    if child.tail:
        previous = child.getprevious()
        if previous is not None:
            previous.tail = (previous.tail or "") + child.tail
        else:
            parent.text = (parent.text or "") + child.tail
    parent.remove(child)


# --- reading ---------------------------------------------------------------------------------

def parse_job(document: bytes | str, *, max_bytes: int = MAX_JOB_BYTES) -> ParsedJob:
    """The Job or JobGroup of an SSS Job document, with the warnings owed to the submitter."""
    from infosvc.codec import safexml

    root = safexml.parse(document, max_bytes=max_bytes, what="SSS Job document")
    if root.tag not in ("Job", "JobGroup"):
        raise DocumentError(f"the root element is {root.tag}, not Job or JobGroup", line=root.sourceline,
                            element=str(root.tag))
    awareness = _Awareness()
    awareness.walk(root, AwarenessPolicy.REJECT, None)
    if awareness.rejected:
        raise DocumentError(awareness.rejected[0], more=awareness.rejected[1:10])
    safexml.validate(root, safexml.schema(SCHEMA_FILE))
    notes = awareness.warnings
    job: Job | JobGroup = _job_group(root, notes) if root.tag == "JobGroup" else _job(root, notes, standalone=True)
    _check_executables(job)
    return ParsedJob(job, awareness.warnings)


def _error(element: etree._Element, message: str, attribute: str | None = None) -> DocumentError:
    return DocumentError(message, line=element.sourceline, element=_name(element), attribute=attribute,
                         path=element.getroottree().getpath(element))


def _policy_of(element: etree._Element) -> AwarenessPolicy | None:
    value = element.get("awarenessPolicy")
    return AwarenessPolicy(value) if value is not None else None


def _text_of(element: etree._Element) -> str:
    return (element.text or "").strip()


def _check_single(element: etree._Element) -> None:
    seen: set[str] = set()
    for child in element:
        tag = child.tag
        if tag in _SINGLE:
            if tag in seen:
                raise _error(child, f"{element.tag} has more than one {tag}")
            seen.add(tag)


def _check_id(element: etree._Element, required: bool) -> None:
    ids = [child for child in element if child.tag == "Id"]
    if required and not ids:
        raise _error(element, f"{element.tag} has no Id: a {element.tag} MUST have one")


def _job_group(root: etree._Element, notes: list[Problem]) -> JobGroup:
    _check_single(root)
    _check_id(root, True)
    group = JobGroup(awareness_policy=_policy_of(root))
    for child in root:
        tag = child.tag
        if tag == "Job":
            group.jobs.append(_job(child, notes, standalone=True))
        elif tag == "JobDefaults":
            group.job_defaults = _job(child, notes, standalone=False)
        elif tag == "File":
            group.files.append(File(child.get("id", "").strip(), _text_of(child)))
        elif tag in JOB_GROUP_SIMPLE:
            group.properties.simple[tag] = _simple_text(child)
    if not group.jobs:
        raise _error(root, "JobGroup has no Job: a JobGroup MUST contain one or more Jobs")
    return group


def _job(element: etree._Element, notes: list[Problem], *, standalone: bool) -> Job:
    _check_single(element)
    _check_id(element, standalone)
    job = Job(awareness_policy=_policy_of(element))
    for child in element:
        tag = child.tag
        if tag == "TaskGroup":
            job.task_groups.append(_task_group(child, notes))
        elif tag == "TaskGroupDefaults":
            job.task_group_defaults = _task_group(child, notes)
        elif tag == "File":
            job.files.append(File(child.get("id", "").strip(), _text_of(child)))
        else:
            _property(child, job.properties, notes)
    return job


def _task_group(element: etree._Element, notes: list[Problem]) -> TaskGroup:
    _check_single(element)
    if element.tag == "TaskGroup" and not any(child.tag in _TASK_GROUP_PROPERTIES for child in element):
        raise _error(element, "TaskGroup has none of TaskCount, Id, Name: a task group MUST specify "
                              "one or more TaskGroup Properties")
    group = TaskGroup(awareness_policy=_policy_of(element))
    for child in element:
        tag = child.tag
        if tag == "Task":
            group.tasks.append(_task(child, notes))
        elif tag == "TaskDefaults":
            group.task_defaults = _task(child, notes)
        else:
            _property(child, group.properties, notes)
    return group


def _task(element: etree._Element, notes: list[Problem]) -> Task:
    _check_single(element)
    task = Task(awareness_policy=_policy_of(element))
    for child in element:
        _property(child, task.properties, notes)
    return task


def _simple_text(element: etree._Element) -> str:
    text = element.text or ""
    return " ".join(text.split()) if element.tag == "Id" else text.strip()


def _property(child: etree._Element, props: Properties, notes: list[Problem]) -> None:
    tag = child.tag
    if not isinstance(tag, str) or tag.startswith("{"):
        return  # a namespace-qualified extension element kept under awarenessPolicy: not modelled
    if tag == "Hold":
        props.holds.append(_simple_text(child))
    elif tag in JOB_SIMPLE:
        props.simple[tag] = _simple_text(child)
        if (units := child.get("units")) is not None:
            props.units[tag] = units
    elif tag in CONSUMABLES or tag == RESOURCE:
        props.consumables.append(_consumable(child))
    elif tag == "Feature":
        props.features.append(_feature(child))
    elif tag == "Node":
        props.nodes.append(_noderef(child))
    elif tag == "Dependency":
        props.dependencies.append(_dependency(child))
    elif tag == "Environment":
        export = child.get("export")
        props.environment = Environment(
            [Variable(v.get("name", "").strip(), _text_of(v)) for v in child],
            None if export is None else _bool(export))
    elif tag == "Extension":
        props.extensions.append(Extension(child.get("name", "").strip(), _text_of(child), child.get("type")))
    elif tag in ("InputFile", "OutputFile", "ErrorFile"):
        redirects = [item.strip() for item in child.get("redirectList", "").split(",") if item.strip()]
        setattr(props, {"InputFile": "input_file", "OutputFile": "output_file", "ErrorFile": "error_file"}[tag],
                StreamFile(_text_of(child), redirects))
    elif tag == "NotificationList":
        events = [item.strip() for item in _text_of(child).split(",") if item.strip()]
        props.notification_list = NotificationList(events, child.get("uri"))
    elif tag == "ResourceLimit":
        props.resource_limits.append(ResourceLimit(child.get("name", "").strip(), _text_of(child), child.get("type")))
    elif tag == "TaskDistribution":
        props.task_distribution = TaskDistribution(_text_of(child), child.get("type"))
    elif tag in ("Requested", "Delivered"):
        terms = [_term(item) for item in child]
        opens, closes = implicit_groups(terms)
        if opens or closes:
            notes.append(Problem(
                f"{tag}: group counts do not nest; read with {opens} group(s) opened before the first "
                f"property and {closes} closed after the last", child.sourceline, tag, "group",
                child.getroottree().getpath(child)))
        (props.requested if tag == "Requested" else props.delivered).extend(terms)


def _finite(element: etree._Element, attribute: str | None, text: str) -> float:
    """A number the schema let through; xs:double reads 1e400 as infinity, which is refused here."""
    value = float(text)
    if value in (float("inf"), float("-inf")):
        what = f"{element.tag} {attribute}" if attribute else str(element.tag)
        raise _error(element, f"{what} is too large", attribute)
    return value


def _bool(text: str) -> bool:
    return text.strip() in ("true", "True", "1")


def _consumable(element: etree._Element) -> Consumable:
    tag = element.tag
    text = _text_of(element)
    value: int | float = int(text) if tag == "Processors" else _finite(element, None, text)
    context = element.get("context")
    rate = element.get("consumptionRate")
    dynamic = element.get("dynamic")
    duration = element.get("duration")
    name = element.get("name")
    return Consumable(
        tag, value, Context(context) if context is not None else None, element.get("units"), element.get("metric"),
        duration.strip() if duration is not None else None,
        _finite(element, "consumptionRate", rate) if rate is not None else None,
        _bool(dynamic) if dynamic is not None else None, name.strip() if name is not None else None,
        element.get("type"))


def _feature(element: etree._Element) -> Feature:
    aggregation = element.get("aggregation")
    return Feature(_text_of(element), Aggregation(aggregation) if aggregation is not None else None,
                   element.get("delimiter"))


def _noderef(element: etree._Element) -> NodeRef:
    aggregation = element.get("aggregation")
    count = element.get("count")
    return NodeRef(_text_of(element), Aggregation(aggregation) if aggregation is not None else None,
                   element.get("delimiter"), int(count) if count is not None else None)


def _dependency(element: etree._Element) -> Dependency:
    condition = element.get("condition")
    code = element.get("code")
    designator = element.get("designator")
    if code is not None and condition != Condition.ON_EXIT:
        raise _error(element, 'Dependency code is meaningful only with condition="OnExit"', "code")
    return Dependency(" ".join(_text_of(element).split()), Condition(condition) if condition is not None else None,
                      int(code) if code is not None else None,
                      Designator(designator) if designator is not None else None)


def _term(element: etree._Element) -> Term:
    tag = element.tag
    item: Simple | Consumable | Feature | NodeRef
    if tag in CONSUMABLES or tag == RESOURCE:
        item = _consumable(element)
    elif tag == "Feature":
        item = _feature(element)
    elif tag == "Node":
        item = _noderef(element)
    else:
        item = Simple(str(tag), _simple_text(element))
    op = element.get("op")
    conj = element.get("conj")
    group = element.get("group")
    preference = element.get("preference")
    factor = element.get("performanceFactor")
    return Term(item, Op(op) if op is not None else None, Conj(conj) if conj is not None else None,
                int(group) if group is not None else 0, int(preference) if preference is not None else None,
                _finite(element, "performanceFactor", factor) if factor is not None else None)


def _check_executables(obj: Job | JobGroup) -> None:
    """Every Executable "#id" names a File attached to the job (or its job group)."""
    group_files = obj.files if isinstance(obj, JobGroup) else []
    jobs = obj.jobs + ([obj.job_defaults] if obj.job_defaults else []) if isinstance(obj, JobGroup) else [obj]
    for job in jobs:
        ids = {item.id for item in group_files + job.files}
        levels: list[Properties] = [job.properties]
        for group in job.task_groups + ([job.task_group_defaults] if job.task_group_defaults else []):
            levels.append(group.properties)
            levels.extend(task.properties for task in group.tasks)
            if group.task_defaults:
                levels.append(group.task_defaults.properties)
        for props in levels:
            executable = props.simple.get("Executable", "")
            if executable.startswith("#") and executable[1:] not in ids:
                raise DocumentError(f"Executable {executable} refers to no attached File with id "
                                    f"{executable[1:]!r}", element="Executable")


# --- writing ---------------------------------------------------------------------------------

def job_to_xml(obj: Job | JobGroup, *, pretty: bool = False) -> bytes:
    """The Job or JobGroup as an SSS Job XML document (UTF-8, with an XML declaration)."""
    parts = ["<?xml version='1.0' encoding='UTF-8'?>\n"]
    if isinstance(obj, JobGroup):
        _write_job_group(obj, parts)
    else:
        _write_job(obj, "Job", parts)
    parts.append("\n")
    return finish("".join(parts), pretty=pretty)


def _open(tag: str, policy: AwarenessPolicy | None) -> str:
    return f'<{tag} awarenessPolicy="{policy.value}">' if policy is not None else f"<{tag}>"


def _write_job_group(group: JobGroup, out: list[str]) -> None:
    out.append(_open("JobGroup", group.awareness_policy))
    _write_simple(group.properties.simple, out)
    if group.job_defaults is not None:
        _write_job(group.job_defaults, "JobDefaults", out)
    for job in group.jobs:
        _write_job(job, "Job", out)
    _write_files(group.files, out)
    out.append("</JobGroup>")


def _write_job(job: Job, tag: str, out: list[str]) -> None:
    out.append(_open(tag, job.awareness_policy))
    _write_properties(job.properties, out)
    if job.task_group_defaults is not None:
        _write_task_group(job.task_group_defaults, "TaskGroupDefaults", out)
    for group in job.task_groups:
        _write_task_group(group, "TaskGroup", out)
    _write_files(job.files, out)
    out.append(f"</{tag}>")


def _write_task_group(group: TaskGroup, tag: str, out: list[str]) -> None:
    out.append(_open(tag, group.awareness_policy))
    _write_properties(group.properties, out)
    if group.task_defaults is not None:
        _write_task(group.task_defaults, "TaskDefaults", out)
    for task in group.tasks:
        _write_task(task, "Task", out)
    out.append(f"</{tag}>")


def _write_task(task: Task, tag: str, out: list[str]) -> None:
    out.append(_open(tag, task.awareness_policy))
    _write_properties(task.properties, out)
    out.append(f"</{tag}>")


def _write_files(files: list[File], out: list[str]) -> None:
    for item in files:
        out.append(f'<File id="{_attr(item.id)}">{_text(item.content)}</File>')


def _write_simple(simple: dict[str, str], out: list[str], units: dict[str, str] | None = None) -> None:
    if "Id" in simple:
        out.append(f"<Id>{_text(simple['Id'])}</Id>")
    for name, value in simple.items():
        if name != "Id":
            unit = units.get(name) if units else None
            attrs = f' units="{_attr(unit)}"' if unit is not None else ""
            out.append(f"<{name}{attrs}>{_text(value)}</{name}>")


def _attrs(pairs: list[tuple[str, str | None]]) -> str:
    return "".join(f' {key}="{_attr(value)}"' for key, value in pairs if value is not None)


def _consumable_xml(item: Consumable, extra: str = "") -> str:
    if item.kind != RESOURCE and item.kind not in CONSUMABLES:
        raise ValueError(f"{item.kind!r} is not a consumable resource")
    if item.kind == RESOURCE and not (item.name or "").strip():
        raise ValueError("a Resource needs a name")
    attrs = _attrs([
        ("name", item.name if item.kind == RESOURCE else None), ("type", item.type if item.kind == RESOURCE else None),
        ("context", item.context.value if item.context else None), ("units", item.units), ("metric", item.metric),
        ("duration", item.duration),
        ("consumptionRate", format_amount(item.consumption_rate) if item.consumption_rate is not None else None),
        ("dynamic", None if item.dynamic is None else ("true" if item.dynamic else "false")),
    ])
    return f"<{item.kind}{attrs}{extra}>{format_amount(item.value)}</{item.kind}>"


def _feature_xml(item: Feature, extra: str = "") -> str:
    attrs = _attrs([("aggregation", item.aggregation.value if item.aggregation else None),
                    ("delimiter", item.delimiter)])
    return f"<Feature{attrs}{extra}>{_text(item.value)}</Feature>"


def _node_xml(item: NodeRef, extra: str = "") -> str:
    attrs = _attrs([("aggregation", item.aggregation.value if item.aggregation else None),
                    ("delimiter", item.delimiter), ("count", str(item.count) if item.count is not None else None)])
    return f"<Node{attrs}{extra}>{_text(item.value)}</Node>"


def _term_xml(term: Term) -> str:
    extra = _attrs([
        ("op", term.op.value if term.op else None), ("conj", term.conj.value if term.conj else None),
        ("group", str(term.group) if term.group else None),
        ("preference", str(term.preference) if term.preference is not None else None),
        ("performanceFactor", format_amount(term.performance_factor) if term.performance_factor is not None else None),
    ])
    item = term.item
    if isinstance(item, Consumable):
        return _consumable_xml(item, extra)
    if isinstance(item, Feature):
        return _feature_xml(item, extra)
    if isinstance(item, NodeRef):
        return _node_xml(item, extra)
    return f"<{item.name}{extra}>{_text(item.value)}</{item.name}>"


def _write_properties(props: Properties, out: list[str]) -> None:
    add = out.append
    _write_simple(props.simple, out, props.units)
    for hold in props.holds:
        add(f"<Hold>{_text(hold)}</Hold>")
    out.extend(_consumable_xml(item) for item in props.consumables)
    out.extend(_feature_xml(item) for item in props.features)
    out.extend(_node_xml(item) for item in props.nodes)
    for dep in props.dependencies:
        attrs = _attrs([("condition", dep.condition.value if dep.condition else None),
                        ("code", str(dep.code) if dep.code is not None else None),
                        ("designator", dep.designator.value if dep.designator else None)])
        add(f"<Dependency{attrs}>{_text(dep.job)}</Dependency>")
    if props.environment is not None:
        env = props.environment
        export = "" if env.export is None else f' export="{"true" if env.export else "false"}"'
        add(f"<Environment{export}>")
        for var in env.variables:
            add(f'<Variable name="{_attr(var.name)}">{_text(var.value)}</Variable>')
        add("</Environment>")
    for ext in props.extensions:
        add(f"<Extension{_attrs([('name', ext.name), ('type', ext.type)])}>{_text(ext.value)}</Extension>")
    for tag, stream in (("InputFile", props.input_file), ("OutputFile", props.output_file),
                        ("ErrorFile", props.error_file)):
        if stream is not None:
            redirects = _attrs([("redirectList", ",".join(stream.redirect_list) if stream.redirect_list else None)])
            add(f"<{tag}{redirects}>{_text(stream.path)}</{tag}>")
    if props.notification_list is not None:
        notes = props.notification_list
        add(f"<NotificationList{_attrs([('uri', notes.uri)])}>{_text(','.join(notes.events))}</NotificationList>")
    for limit in props.resource_limits:
        add(f"<ResourceLimit{_attrs([('name', limit.name), ('type', limit.type)])}>{_text(limit.value)}</ResourceLimit>")
    if props.task_distribution is not None:
        dist = props.task_distribution
        add(f"<TaskDistribution{_attrs([('type', dist.type)])}>{_text(dist.value)}</TaskDistribution>")
    for tag, terms in (("Requested", props.requested), ("Delivered", props.delivered)):
        if terms:
            add(f"<{tag}>")
            out.extend(_term_xml(term) for term in terms)
            add(f"</{tag}>")
