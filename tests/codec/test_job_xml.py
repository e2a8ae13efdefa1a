"""The SSS Job XML codec against the spec: its examples, inheritance, Requested expressions,
awarenessPolicy, bad documents, and round trips."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.codec import job_xml
from infosvc.codec.job_xml import job_to_xml, parse_job
from infosvc.errors import DocumentError, Problem
from infosvc.model.job import (
    And, AwarenessPolicy, Conj, Condition, Consumable, Context, Dependency, Designator, Environment,
    Extension, Feature, File, Job, JobGroup, Leaf, Not, NotificationList, Op, Or, Preferred, Properties,
    ResourceLimit, Simple, StreamFile, Task, TaskDistribution, TaskGroup, Term, Variable, implicit_groups,
    requirement, resolve,
)
from infosvc.model.noderef import Aggregation, NodeRef

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tests" / "fixtures" / "sss-job-examples"


def example(name: str) -> str:
    return (EXAMPLES / f"{name}.xml").read_text(encoding="utf-8")


def parsed(document: str) -> Job | JobGroup:
    result = parse_job(document)
    assert result.warnings == []
    return result.job


def job(body: str, attrs: str = "") -> Job:
    obj = parsed(f"<Job{attrs}><Id>j1</Id>{body}</Job>")
    assert isinstance(obj, Job)
    return obj


def rejected(document: str) -> DocumentError:
    with pytest.raises(DocumentError) as caught:
        parse_job(document)
    return caught.value


def leaf_values(expr: object) -> object:
    """An expression with each leaf shown as 'Name=value', for readable assertions."""
    if isinstance(expr, Leaf):
        item = expr.term.item
        value = item.value
        return f"{expr.term.name}={value}"
    if isinstance(expr, Not):
        return ("not", leaf_values(expr.operand))
    if isinstance(expr, And):
        return ("and", *map(leaf_values, expr.operands))
    if isinstance(expr, Or):
        return ("or", *map(leaf_values, expr.operands))
    if isinstance(expr, Preferred):
        return ("preferred", *map(leaf_values, expr.alternatives))
    return expr


# --- the spec's three examples (section 1.3, quotes made straight) -------------------------

def test_simple_example() -> None:
    obj = parsed(example("simple"))
    assert isinstance(obj, Job)
    props = obj.properties
    assert obj.id == "PBS.1234.0"
    assert (props.get("State"), props.get("User"), props.get("Executable")) == ("Idle", "scottmo", "/bin/hostname")
    processors = props.consumable("Processors")
    assert processors is not None and processors.value == 16 and processors.effective_context is Context.AVAILABLE
    assert props.seconds("Duration") == 3600
    assert len(obj.effective_task_groups()) == 1 and len(obj.effective_task_groups()[0].effective_tasks()) == 1


def test_moderate_example() -> None:
    obj = parsed(example("moderate"))
    assert isinstance(obj, Job)
    props = obj.properties
    assert props.get("Name") == "Heavy Water" and props.get("Project") == "nwchemdev"
    assert props.number("Charge") == 25410 and props.integer("StartTime") == 1051557713
    requested = {term.name: term for term in props.requested}
    assert requested["Processors"].effective_op is Op.GE and requested["Processors"].item.value == 12
    memory = requested["Memory"].item
    assert isinstance(memory, Consumable) and memory.units == "GB" and memory.value == 2
    assert requested["Duration"].effective_op is Op.EQ
    delivered = {term.name: term.item for term in props.delivered}
    assert isinstance(delivered["Memory"], Consumable) and delivered["Memory"].metric == "Average"
    assert props.environment is not None and props.environment.as_dict() == {"PATH": "/usr/bin:/home/peterk"}


def test_elaborate_example_as_printed_is_refused_as_not_well_formed() -> None:
    # The spec prints `<Environment>` where `</Environment>` is meant and `<Memory>2048<Memory>`
    # for `<Memory>2048</Memory>`. No repair is guessed: the document is refused, at the first.
    error = rejected(example("elaborate-as-printed"))
    assert "not well-formed" in error.first.message
    assert error.line == 16 and "Environment" in error.first.message


def test_elaborate_example_memory_defect_alone_is_refused_too() -> None:
    text = example("elaborate").replace("<Memory>2048</Memory>", "<Memory>2048<Memory>")
    error = rejected(text)
    assert "not well-formed" in error.first.message and "Memory" in error.first.message


def test_elaborate_example_corrected() -> None:
    result = parse_job(example("elaborate"))
    group = result.job
    assert isinstance(group, JobGroup)
    assert group.id == "workflow1" and group.properties.get("State") == "Active"
    assert group.job_defaults is not None and group.job_defaults.id == ""
    first, second = group.jobs
    assert first.properties.get("Charge") == "12.75" and first.properties.units == {"Charge": "USD"}
    used = {term.name: term.item for term in first.properties.delivered}
    assert isinstance(used["Processors"], Consumable) and used["Processors"].consumption_rate == 0.78
    tasks = first.task_groups[0].tasks
    assert [(t.properties.nodes[0].value, t.properties.integer("Process")) for t in tasks] == [
        ("node1", 99353), ("node12", 80209)]
    assert first.task_groups[0].properties.task_distribution == TaskDistribution("1", "TasksPerNode")
    assert second.properties.holds == ["System"]
    master, slave = second.task_groups
    assert master.properties.consumable("Resource", name="License") == Consumable("Resource", 1.0, name="License",
                                                                                  type="ESSL2")
    assert master.properties.features == [Feature("Jumbo-Frame")]
    assert slave.properties.integer("NodeCount") == 4
    # The example's Requested group counts close before they open: read literally, with a warning.
    assert len(result.warnings) == 1 and result.warnings[0].element == "Requested"
    assert result.warnings[0].line == 76
    expr = requirement(slave.properties.requested).expr
    assert leaf_values(expr) == ("or", "Processors=12",
                                 ("and", "Processors=16", "Memory=512.0", "Node=fr15n.*"))
    # JobDefaults resolved: user and environment come from the defaults
    for effective in resolve(group):
        assert effective.properties.get("User") == "keith"
        assert effective.properties.get("Project") == "GrandChallenge18"
        assert effective.properties.environment is not None
        assert effective.properties.environment.as_dict()["LD_LIBRARY_PATH"] == "/usr/lib"


@pytest.mark.parametrize("name", ["simple", "moderate", "elaborate"])
def test_examples_round_trip(name: str) -> None:
    first = parse_job(example(name)).job
    assert parse_job(job_to_xml(first)).job == first
    assert parse_job(job_to_xml(first, pretty=True)).job == first


# --- inheritance -------------------------------------------------------------------------------

def test_job_properties_override_job_defaults() -> None:
    group = parsed("""<JobGroup><Id>g</Id>
      <JobDefaults>
        <User>keith</User><Queue>batch</Queue><Memory>1024</Memory><Processors>2</Processors>
        <Feature>a</Feature>
        <Environment export="true"><Variable name="A">1</Variable><Variable name="B">2</Variable></Environment>
        <Requested><Duration>60</Duration></Requested>
      </JobDefaults>
      <Job><Id>j1</Id><User>amy</User><Memory>2048</Memory>
        <Environment><Variable name="B">20</Variable><Variable name="C">3</Variable></Environment>
        <Requested><Processors>4</Processors></Requested>
      </Job>
      <Job><Id>j2</Id></Job>
    </JobGroup>""")
    assert isinstance(group, JobGroup)
    one, two = resolve(group)
    assert one.properties.get("User") == "amy" and one.properties.get("Queue") == "batch"
    memory = one.properties.consumable("Memory")
    assert memory is not None and memory.value == 2048
    processors = one.properties.consumable("Processors")
    assert processors is not None and processors.value == 2
    assert one.properties.environment == Environment(
        [Variable("A", "1"), Variable("B", "20"), Variable("C", "3")], True)
    # a Requested list is one expression: the job's replaces the defaults' whole
    assert [term.name for term in one.properties.requested] == ["Processors"]
    assert one.properties.features == [Feature("a")]
    assert two.properties.get("User") == "keith" and [t.name for t in two.properties.requested] == ["Duration"]
    # the document's own structure is kept as written
    assert group.jobs[1].properties.simple == {"Id": "j2"}


def test_task_group_defaults_and_task_defaults() -> None:
    obj = job("""
      <TaskGroupDefaults><Executable>/bin/a</Executable><Memory>100</Memory>
        <TaskDefaults><Node>n0</Node><Session>7</Session></TaskDefaults>
      </TaskGroupDefaults>
      <TaskGroup><Name>Master</Name><TaskCount>1</TaskCount></TaskGroup>
      <TaskGroup><Name>Slave</Name><Executable>/bin/b</Executable>
        <TaskDefaults><Session>9</Session></TaskDefaults>
        <Task><Node>n1</Node></Task><Task><Id>2</Id></Task>
      </TaskGroup>""")
    (effective,) = resolve(obj)
    assert effective.task_group_defaults is None
    master, slave = effective.task_groups
    assert master.properties.get("Executable") == "/bin/a" and master.properties.get("Name") == "Master"
    assert slave.properties.get("Executable") == "/bin/b"
    assert master.properties.consumable("Memory") is not None
    assert [(t.properties.nodes[0].value if t.properties.nodes else None, t.properties.get("Session"))
            for t in slave.tasks] == [("n1", "9"), ("n0", "9")]
    assert master.tasks == []  # no explicit task: one implicit task
    assert len(master.effective_tasks()) == 1


# --- Requested / Delivered ---------------------------------------------------------------------

def test_spec_requested_examples() -> None:
    ranged = job('<Requested><Processors op="GE">8</Processors><Processors op="LE">16</Processors>'
                 "<Duration>3600</Duration></Requested>")
    assert leaf_values(requirement(ranged.properties.requested).expr) == (
        "and", "Processors=8", "Processors=16", "Duration=3600")
    assert [t.effective_op for t in ranged.properties.requested] == [Op.GE, Op.LE, Op.EQ]

    grouped = job("""<Requested>
        <User group="1">scottmo</User><Account group="-1">mscfops</Account>
        <User conj="Or" group="1">amy</User><Account group="-1">chemistry</Account>
      </Requested>""")
    terms = grouped.properties.requested
    assert implicit_groups(terms) == (0, 0)
    assert leaf_values(requirement(terms).expr) == (
        "or", ("and", "User=scottmo", "Account=mscfops"), ("and", "User=amy", "Account=chemistry"))

    preferred = job('<Requested><Memory preference="2">1024</Memory><Memory preference="1">512</Memory></Requested>')
    result = requirement(preferred.properties.requested)
    assert isinstance(result.expr, Preferred)
    assert result.expr.weights == pytest.approx((2 / 3, 1 / 3))
    assert result.soft == ()


def test_negative_preferences_are_soft_and_nand_nor_negate() -> None:
    obj = job('<Requested><Processors>4</Processors><Memory preference="-3">1024</Memory>'
              '<Memory preference="-1">512</Memory><Feature conj="Nand">slow</Feature>'
              '<Node conj="Nor">n9</Node></Requested>')
    result = requirement(obj.properties.requested)
    assert leaf_values(result.expr) == ("or", ("and", "Processors=4", ("not", "Feature=slow")), ("not", "Node=n9"))
    assert [(term.item.value, share) for term, share in result.soft] == [(1024.0, 0.75), (512.0, 0.25)]


def test_nested_groups() -> None:
    # A And Not((B Or C) And D), then Or E
    obj = job('<Requested><User>a</User><User conj="Nand" group="2">b</User><User conj="Or" group="-1">c</User>'
              '<User group="-1">d</User><User conj="Or">e</User></Requested>')
    assert leaf_values(requirement(obj.properties.requested).expr) == (
        "or", ("and", "User=a", ("not", ("and", ("or", "User=b", "User=c"), "User=d"))), "User=e")


def test_requested_term_attributes() -> None:
    obj = job('<Requested><Processors dynamic="True" op="LE" performanceFactor="1.5" context="Dedicated" '
              'duration="PT10M" units="count">64</Processors><User op="Match">sc.*</User></Requested>')
    processors, user = obj.properties.requested
    assert isinstance(processors.item, Consumable)
    assert processors.item.dynamic is True and processors.item.context is Context.DEDICATED
    assert processors.item.duration_seconds == 600 and processors.performance_factor == 1.5
    assert user.item == Simple("User", "sc.*") and user.effective_op is Op.MATCH


def test_delivered_allows_group_only() -> None:
    obj = job('<Delivered><Node group="1">a</Node><Node group="-1">b</Node></Delivered>')
    assert [t.group for t in obj.properties.delivered] == [1, -1]
    error = rejected('<Job><Id>j</Id><Delivered><Processors op="GE">4</Processors></Delivered></Job>')
    assert error.element == "Processors" and error.attribute == "op"


def test_requested_refuses_a_property_that_cannot_be_requested() -> None:
    error = rejected("<Job><Id>j</Id><Requested><Executable>/bin/x</Executable></Requested></Job>")
    assert error.element == "Executable" and "not supported" in error.first.message


def test_category_attributes_outside_a_category_are_not_supported() -> None:
    error = rejected('<Job><Id>j</Id><Processors op="GE">4</Processors></Job>')
    assert error.attribute == "op"


# --- Feature, Node, Dependency, consumables ---------------------------------------------------

def test_feature_and_node_aggregation() -> None:
    obj = job('<Feature aggregation="List">feature1,feature2</Feature>'
              '<Feature aggregation="List" delimiter=":">a:b</Feature>'
              '<Feature aggregation="Pattern">big.*</Feature>'
              '<Node aggregation="Range" count="2">node[1-3]</Node>'
              '<Node aggregation="List" delimiter=";">a;b</Node><Node aggregation="Pattern">fr15.*</Node>')
    one, two, three = obj.properties.features
    assert one.names() == ["feature1", "feature2"] and two.names() == ["a", "b"]
    assert three.aggregation is Aggregation.PATTERN
    ranged, listed, pattern = obj.properties.nodes
    assert ranged.names() == ["node1", "node2", "node3"] and ranged.count == 2
    assert listed.names() == ["a", "b"]
    assert pattern.names(["fr15n01", "x"]) == ["fr15n01"]


def test_feature_has_no_range_aggregation() -> None:
    error = rejected('<Job><Id>j</Id><Feature aggregation="Range">f[1-2]</Feature></Job>')
    assert error.attribute == "aggregation"


def test_dependency() -> None:
    obj = job('<Dependency>PBS.1</Dependency><Dependency condition="OnExit" code="3">PBS.2</Dependency>'
              '<Dependency condition="OnFailure" designator="JobName">prep</Dependency>')
    plain, on_exit, by_name = obj.properties.dependencies
    assert plain == Dependency("PBS.1")
    assert plain.effective_condition is Condition.ON_SUCCESS and plain.effective_designator is Designator.JOB_ID
    assert on_exit == Dependency("PBS.2", Condition.ON_EXIT, 3)
    assert by_name.effective_designator is Designator.JOB_NAME
    error = rejected('<Job><Id>j</Id><Dependency condition="OnSuccess" code="1">x</Dependency></Job>')
    assert error.attribute == "code"


def test_consumable_attributes() -> None:
    obj = job('<Memory metric="Max" units="GB">483</Memory>'
              '<Processors duration="1234" consumptionRate="0.63" context="Used">4</Processors>'
              '<Resource name="Telescope" type="Zoom2000" duration="750" metric="KX">10</Resource>')
    memory, processors, telescope = obj.properties.consumables
    assert (memory.metric, memory.units, memory.value) == ("Max", "GB", 483.0)
    assert processors.context is Context.USED and processors.duration_seconds == 1234
    assert telescope.name == "Telescope" and telescope.type == "Zoom2000"


# --- files, notifications, limits, credentials ------------------------------------------------

def test_stream_files_notifications_limits() -> None:
    obj = job('<InputFile redirectList="Close"></InputFile><OutputFile redirectList="Append,Flush">~/o</OutputFile>'
              '<ErrorFile redirectList="Merge"/><NotificationList uri="a@b.org">JobStart,JobEnd</NotificationList>'
              '<ResourceLimit name="CPUTime">1000000</ResourceLimit><ResourceLimit name="Stack" type="Soft">8</ResourceLimit>'
              '<Extension type="Scheduler" name="Restartable">true</Extension>'
              "<GlobalUser>CN=x</GlobalUser><Group>chem</Group><User>u</User><Project>p</Project>")
    props = obj.properties
    assert props.input_file == StreamFile("", ["Close"])
    assert props.output_file == StreamFile("~/o", ["Append", "Flush"])
    assert props.error_file == StreamFile("", ["Merge"])
    assert props.notification_list == NotificationList(["JobStart", "JobEnd"], "a@b.org")
    assert props.resource_limits == [ResourceLimit("CPUTime", "1000000"), ResourceLimit("Stack", "8", "Soft")]
    assert props.extensions == [Extension("Restartable", "true", "Scheduler")]
    assert [props.get(k) for k in ("GlobalUser", "Group", "User", "Project")] == ["CN=x", "chem", "u", "p"]


def test_unknown_redirect_and_notification_values() -> None:
    error = rejected('<Job><Id>j</Id><InputFile redirectList="Append">in</InputFile></Job>')
    assert error.attribute == "redirectList" and "Append" in error.first.message
    result = parse_job('<Job awarenessPolicy="Warn"><Id>j</Id><NotificationList>JobStart,OnFire</NotificationList></Job>')
    assert isinstance(result.job, Job)
    assert result.job.properties.notification_list == NotificationList(["JobStart"])
    assert "OnFire" in result.warnings[0].message


def test_executable_refers_to_attached_file() -> None:
    obj = job('<Executable>#Script</Executable><File id="Script">echo hello world</File>')
    assert obj.executable_file() == File("Script", "echo hello world")
    error = rejected("<Job><Id>j</Id><Executable>#Missing</Executable></Job>")
    assert "Missing" in error.first.message and error.element == "Executable"


# --- awarenessPolicy ---------------------------------------------------------------------------

def test_unsupported_element_is_rejected_by_default() -> None:
    error = rejected("<Job><Id>j</Id>\n<Frobnicate>1</Frobnicate></Job>")
    assert error.element == "Frobnicate" and error.line == 2 and "Reject" in error.first.message
    assert error.first.path == "/Job/Frobnicate"


def test_reject_names_every_unsupported_part() -> None:
    error = rejected('<Job awarenessPolicy="Reject"><Id>j</Id><A/><Memory color="red">1</Memory></Job>')
    assert [(p.element, p.attribute) for p in error.problems] == [("A", None), ("Memory", "color")]


def test_warn_accepts_and_reports() -> None:
    result = parse_job('<Job awarenessPolicy="Warn"><Id>j</Id><Frobnicate>1</Frobnicate>'
                       '<Memory color="red">1</Memory><Processors op="Approx">2</Processors></Job>')
    assert isinstance(result.job, Job)
    assert [(w.element, w.attribute) for w in result.warnings] == [  # in document order
        ("Frobnicate", None), ("Memory", "color"), ("Processors", "op")]
    assert all("Warn" in w.message for w in result.warnings)
    assert result.job.properties.consumable("Memory") == Consumable("Memory", 1.0)
    assert result.job.awareness_policy is AwarenessPolicy.WARN


def test_ignore_accepts_silently() -> None:
    result = parse_job('<Job awarenessPolicy="Ignore"><Id>j</Id><Frobnicate><Deep/></Frobnicate>'
                       '<Memory color="red">1</Memory></Job>')
    assert result.warnings == []
    assert isinstance(result.job, Job) and result.job.properties.simple == {"Id": "j"}


def test_policy_is_inherited_and_overridable() -> None:
    # Ignore at the root, Reject on one element: that element's unknown attribute is refused
    error = rejected('<Job awarenessPolicy="Ignore"><Id>j</Id><Memory awarenessPolicy="Reject" color="red">1</Memory></Job>')
    assert error.attribute == "color"
    # Reject at the root (default), Warn on an unknown element itself: accepted with a warning
    result = parse_job('<Job><Id>j</Id><Frobnicate awarenessPolicy="Warn"/></Job>')
    assert [w.element for w in result.warnings] == ["Frobnicate"]
    # inherited down the tree: TaskGroup Warn reaches into its Tasks
    result = parse_job(
        '<Job><Id>j</Id><TaskGroup awarenessPolicy="Warn"><Name>m</Name><Task><Gpu>2</Gpu></Task></TaskGroup></Job>')
    assert [w.path for w in result.warnings] == ["/Job/TaskGroup/Task/Gpu"]
    # ... but not to its siblings
    error = rejected('<Job><Id>j</Id><TaskGroup awarenessPolicy="Warn"/><TaskGroup><Gpu>2</Gpu></TaskGroup></Job>')
    assert error.element == "Gpu"


def test_unknown_text_around_a_removed_element_is_kept() -> None:
    result = parse_job('<Job awarenessPolicy="Ignore"><Id>j</Id><Memory>20<X/>48</Memory></Job>')
    assert isinstance(result.job, Job)
    memory = result.job.properties.consumable("Memory")
    assert memory is not None and memory.value == 2048


def test_namespaced_extension_elements_follow_the_policy() -> None:
    doc = '<Job xmlns:x="urn:x" awarenessPolicy="{}"><Id>j</Id><x:Gpu>2</x:Gpu></Job>'
    assert rejected(doc.format("Reject")).element == "{urn:x}Gpu"
    assert [w.element for w in parse_job(doc.format("Warn")).warnings] == ["{urn:x}Gpu"]


def test_bad_awareness_policy_value_is_refused() -> None:
    error = rejected('<Job awarenessPolicy="Maybe"><Id>j</Id></Job>')
    assert error.attribute == "awarenessPolicy"


# --- bad documents -----------------------------------------------------------------------------

@pytest.mark.parametrize("document, element", [
    ("<Job><Name>x</Name></Job>", "Job"),
    ("<Job><Id>a</Id><Name>x</Name><Name>y</Name></Job>", "Name"),
    ("<JobGroup><Id>g</Id></JobGroup>", "JobGroup"),
    ("<JobGroup><Job><Id>a</Id></Job></JobGroup>", "JobGroup"),
    ("<Job><Id>a</Id><Processors>lots</Processors></Job>", "Processors"),
    ("<Job><Id>a</Id><Memory>-1</Memory></Job>", "Memory"),
    ("<Job><Id>a</Id><Interactive>maybe</Interactive></Job>", "Interactive"),
    ("<Job><Id>a</Id><StartTime>yesterday</StartTime></Job>", "StartTime"),
    ("<Job><Id>a</Id><Resource>1</Resource></Job>", "Resource"),
    ("<Job><Id>a</Id><Environment><Variable>1</Variable></Environment></Job>", "Variable"),
    ("<Job><Id>a</Id><Requested><Processors group=\"x\">1</Processors></Requested></Job>", "Processors"),
    ("<Job><Id>a</Id><TaskGroup><Name>t</Name><TaskDefaults/><TaskDefaults/></TaskGroup></Job>", "TaskDefaults"),
    ("<Job><Id>a</Id><TaskGroup><Executable>/bin/x</Executable></TaskGroup></Job>", "TaskGroup"),
])
def test_invalid_documents_name_the_element(document: str, element: str) -> None:
    assert rejected(document).element == element


@pytest.mark.parametrize("body, element", [
    ('<Requested><Processors group="101">1</Processors></Requested>', "Processors"),
    ('<Requested><Processors preference="1' + "0" * 30 + '">1</Processors></Requested>', "Processors"),
    ("<Processors>1" + "0" * 5000 + "</Processors>", "Processors"),
    ("<Priority>9" * 1 + "9" * 5000 + "</Priority>", "Priority"),
    ("<Memory>1e400</Memory>", "Memory"),
    ('<Memory consumptionRate="1e400">1</Memory>', "Memory"),
    ('<Requested><Memory performanceFactor="-1e400">1</Memory></Requested>', "Memory"),
])
def test_numbers_beyond_any_real_job_are_refused(body: str, element: str) -> None:
    assert rejected(f"<Job><Id>j</Id>{body}</Job>").element == element


def test_files_of_a_job_group_reach_its_jobs() -> None:
    group = parsed('<JobGroup><Id>g</Id><Job><Id>a</Id><Executable>#s</Executable></Job>'
                   '<File id="s">run</File></JobGroup>')
    assert isinstance(group, JobGroup)
    assert resolve(group)[0].executable_file() == File("s", "run")


def test_unsafe_and_foreign_documents() -> None:
    assert "DOCTYPE" in rejected('<!DOCTYPE Job [<!ENTITY x "y">]><Job><Id>&x;</Id></Job>').first.message
    assert "not Job or JobGroup" in rejected("<Node><Id>n</Id></Node>").first.message
    with pytest.raises(DocumentError):
        parse_job("<Job><Id>j</Id></Job>", max_bytes=10)


def test_every_supported_element_is_in_the_schema() -> None:
    schema = (ROOT / "schemas" / job_xml.SCHEMA_FILE).read_text(encoding="utf-8")
    declared = set(re.findall(r'<xs:element name="(\w+)"', schema))
    supported = set().union(*job_xml._CHILDREN.values())
    assert supported - declared == set()
    assert declared - supported - {"Job", "JobGroup"} == set()


# --- round trips -------------------------------------------------------------------------------

# printable text with the characters XML escapes, and some beyond ASCII; no edge white space
_text = st.text(st.sampled_from("ab Z09&<>\"'/#:,;.é€中"), min_size=1, max_size=8).map(str.strip).filter(bool)
_token = st.builds(lambda head, rest: head + rest, st.sampled_from("aZ09"),
                   st.text(st.sampled_from("abXY19._-"), max_size=6))
_count = st.integers(0, 10**6)
_amount = st.floats(0, 1e9, allow_nan=False, allow_infinity=False)
_SIMPLE_VALUES = {
    "String": _text, "Integer": st.integers(-10**6, 10**6).map(str), "Float": st.sampled_from(["1.5", "-2", "0"]),
    "Boolean": st.sampled_from(["true", "false", "True", "0"]), "DateTime": _count.map(str),
    "Duration": st.sampled_from(["3600", "PT1H", "0"]),
}
_COUNT_NAMES = {"NodeCount", "StartCount", "SuspendDuration", "TaskCount", "Session", "Process"}


def _simple_value(name: str) -> st.SearchStrategy[str]:
    from infosvc.model.job import JOB_SIMPLE

    if name == "Id":
        return _token
    if name in _COUNT_NAMES:
        return _count.map(str)
    if name == "Executable":  # "#id" names an attached File, which these objects do not have
        return _text.filter(lambda text: not text.startswith("#"))
    return _SIMPLE_VALUES[JOB_SIMPLE[name]]


@st.composite
def _simple(draw: st.DrawFn) -> dict[str, str]:
    from infosvc.model.job import JOB_SIMPLE

    names = draw(st.lists(st.sampled_from(sorted(set(JOB_SIMPLE) - {"Hold", "Id"})), max_size=4, unique=True))
    return {name: draw(_simple_value(name)) for name in names}


_consumable = st.builds(
    lambda kind, value, context, units, metric, rate, dynamic, name, type_: Consumable(
        kind, int(value) if kind == "Processors" else value, context, units, metric, None, rate, dynamic,
        name if kind == "Resource" else None, type_ if kind == "Resource" else None),
    st.sampled_from(["Processors", "Memory", "Disk", "Network", "Swap", "Resource"]), _amount,
    st.none() | st.sampled_from(list(Context)), st.none() | _token, st.none() | _token,
    st.none() | _amount, st.none() | st.booleans(), _token, st.none() | _token)
_feature = st.builds(Feature, _text, st.none() | st.sampled_from([Aggregation.LIST, Aggregation.PATTERN]),
                     st.none() | st.sampled_from([",", ":", ";"]))
_node = st.builds(NodeRef, _text, st.none() | st.sampled_from(list(Aggregation)), st.none() | st.just(";"),
                  st.none() | _count)
_item = _consumable | _feature | _node | st.builds(
    Simple, st.sampled_from(["User", "Queue", "Machine", "Account"]), _text)
_term = st.builds(Term, _item, st.none() | st.sampled_from(list(Op)), st.none() | st.sampled_from(list(Conj)),
                  st.integers(-2, 2), st.none() | st.integers(-5, 5), st.none() | _amount)


@st.composite
def _properties(draw: st.DrawFn, with_id: bool = False) -> Properties:
    simple = draw(_simple())
    if with_id:
        simple = {"Id": draw(_token), **simple}
    dependencies = draw(st.lists(st.builds(
        lambda job, condition, code, designator: Dependency(
            job, condition, code if condition is Condition.ON_EXIT else None, designator),
        _token, st.none() | st.sampled_from(list(Condition)), st.none() | st.integers(-3, 300),
        st.none() | st.sampled_from(list(Designator))), max_size=2))
    delivered = draw(st.lists(_term.map(lambda t: Term(t.item, group=t.group)), max_size=2))
    return Properties(
        simple=simple,
        holds=draw(st.lists(_text, max_size=2)),
        consumables=draw(st.lists(_consumable, max_size=3)),
        features=draw(st.lists(_feature, max_size=2)),
        nodes=draw(st.lists(_node, max_size=2)),
        dependencies=dependencies,
        environment=draw(st.none() | st.builds(Environment, st.lists(st.builds(Variable, _token, _text), max_size=3),
                                               st.none() | st.booleans())),
        extensions=draw(st.lists(st.builds(Extension, _token, _text, st.none() | _token), max_size=2)),
        input_file=draw(st.none() | st.builds(StreamFile, _text, st.lists(st.just("Close"), max_size=1))),
        output_file=draw(st.none() | st.builds(StreamFile, _text, st.lists(st.sampled_from(["Append", "Keep"]),
                                                                            max_size=2))),
        notification_list=draw(st.none() | st.builds(NotificationList, st.lists(st.sampled_from(
            ["JobStart", "JobEnd", "All"]), max_size=2), st.none() | _token)),
        resource_limits=draw(st.lists(st.builds(ResourceLimit, _token, _text,
                                                st.none() | st.sampled_from(["Hard", "Soft"])), max_size=2)),
        task_distribution=draw(st.none() | st.builds(TaskDistribution, _text, st.none() | _token)),
        requested=draw(st.lists(_term, max_size=4)),
        delivered=delivered,
    )


_policy = st.none() | st.sampled_from(list(AwarenessPolicy))
# the lower levels draw a lighter set of properties: the full set is drawn for jobs
_light = st.builds(lambda simple, consumables, nodes: Properties(simple=simple, consumables=consumables, nodes=nodes),
                   _simple(), st.lists(_consumable, max_size=2), st.lists(_node, max_size=1))
_task = st.builds(Task, _light, _policy)
_named = st.builds(lambda props, name: replace(props, simple={**props.simple, "Name": name}), _light, _text)
_task_group = st.builds(TaskGroup, _named, st.lists(_task, max_size=2), st.none() | _task, _policy)
_task_group_defaults = st.builds(TaskGroup, _light, st.lists(_task, max_size=1), st.none() | _task, _policy)


@st.composite
def _job(draw: st.DrawFn, with_id: bool = True) -> Job:
    return Job(draw(_properties(with_id=with_id)), draw(st.lists(_task_group, max_size=1)),
               draw(st.none() | _task_group_defaults), [], draw(_policy))


@st.composite
def _job_group(draw: st.DrawFn) -> JobGroup:
    simple = {"Id": draw(_token)}
    if draw(st.booleans()):
        simple["Name"] = draw(_text)
    return JobGroup(Properties(simple=simple), draw(st.lists(_job(), min_size=1, max_size=2)),
                    draw(st.none() | _job(with_id=False)), [], draw(_policy))


@settings(max_examples=50, deadline=None)
@given(_job() | _job_group())
def test_serialize_parse_round_trip(obj: Job | JobGroup) -> None:
    document = job_to_xml(obj)
    again = parse_job(document).job
    assert again == obj
    assert job_to_xml(again) == document  # parse -> serialize -> parse is stable


def test_problem_shape_of_warnings() -> None:
    result = parse_job('<Job awarenessPolicy="Warn"><Id>j</Id><X/></Job>')
    assert isinstance(result.warnings[0], Problem) and result.warnings[0].path == "/Job/X"
