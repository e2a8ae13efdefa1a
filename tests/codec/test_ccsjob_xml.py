"""The CCS job XML codec against the seed's job and task schemas: every attribute, each value space, bad documents."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from infosvc.codec import safexml
from infosvc.codec.ccsjob_xml import NAMESPACE, SCHEMA_FILE, parse_ccs_job
from infosvc.errors import DocumentError
from infosvc.model.ccsjob import (
    MAX_RUNTIME_SECONDS, CcsJob, CcsPriority, JobState, format_licenses, format_runtime, parse_depend,
    parse_licenses, parse_nodes, parse_runtime,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ccs"


def job_doc(attributes: str = "", body: str = "") -> str:
    return f'<Job xmlns="{NAMESPACE}" {attributes}>{body}</Job>'


def tasks_doc(*tasks: str, job: str = "") -> str:
    return job_doc(job, "<Tasks>" + "".join(tasks) + "</Tasks>")


def task(attributes: str, body: str = "") -> str:
    if "CommandLine=" not in attributes:
        attributes += ' CommandLine="run.exe"'
    return f"<Task {attributes}>{body}</Task>"


def rejected(document: str | bytes, **limits: int) -> DocumentError:
    with pytest.raises(DocumentError) as caught:
        parse_ccs_job(document, **limits)
    return caught.value


# --- a job with every attribute ------------------------------------------------------------

def test_job_with_every_attribute() -> None:
    job = parse_ccs_job((FIXTURES / "full.xml").read_bytes())
    assert (job.id, job.name, job.project) == (42, "Protein fold", "Chemistry")
    assert (job.user, job.submitted_by, job.message) == ("LAB\\alice", "LAB\\bob", "waiting for licenses")
    assert job.status is JobState.QUEUED and job.priority is CcsPriority.ABOVE_NORMAL
    assert (job.is_exclusive, job.is_backfill, job.run_until_cancelled) == (False, True, True)
    assert (job.min_processors, job.max_processors) == (4, 16)
    assert job.runtime == ((1 * 24 + 2) * 60 + 30) * 60
    assert job.asked_nodes == ["NODE01", "NODE02", "NODE03"]
    assert job.allocated_nodes == ["NODE01", "NODE02"]
    assert job.licenses == {"matlab": 2, "fluent": 10} and list(job.licenses) == ["matlab", "fluent"]
    assert job.extended_terms == {"Department": "Biology"}

    prepare, fold = job.tasks
    assert (prepare.id, prepare.parent_job_id, prepare.name) == (7, 42, "prepare")
    assert prepare.command_line == "prep.exe /in:data.txt"
    assert prepare.status is JobState.FINISHED  # the schema's Completed
    assert (prepare.exit_code, prepare.message) == (0, "done")
    assert (prepare.is_rerunnable, prepare.is_exclusive) == (True, True)
    assert (prepare.min_processors, prepare.max_processors, prepare.runtime) == (1, 2, 30 * 60)
    assert prepare.asked_nodes == ["NODE01"]
    assert prepare.work_directory == "\\\\head\\share\\%USERNAME%"
    assert (prepare.stdin, prepare.stdout, prepare.stderr) == ("in.txt", "out.txt", "err.txt")
    assert prepare.environment == {"OMP_NUM_THREADS": "2", "SCRATCH": "D:\\scratch"}
    assert prepare.extended_terms == {"Stage": "1"}
    assert prepare.depend == []

    assert fold.depend == ["prepare"] and job.task_named("prepare") == [prepare]
    assert (fold.status, fold.exit_code, fold.runtime) == (JobState.RUNNING, -1, 2 * 3600)
    assert (fold.is_rerunnable, fold.is_exclusive) == (False, False)  # the schema's defaults
    assert (fold.stdin, fold.work_directory, fold.environment) == (None, None, {})


def test_defaults_are_the_schemas() -> None:
    job = parse_ccs_job(tasks_doc(task("")))
    assert job == CcsJob(tasks=job.tasks)
    assert (job.priority, job.is_exclusive, job.runtime, job.status) == (
        CcsPriority.NORMAL, True, None, JobState.NOT_SUBMITTED)
    only = job.tasks[0]
    assert (only.is_rerunnable, only.is_exclusive, only.runtime, only.min_processors) == (False, False, None, 1)
    assert parse_ccs_job(job_doc()).tasks == []  # a job may be created before its tasks


def test_seed_task_flow() -> None:
    job = parse_ccs_job((FIXTURES / "taskflow.xml").read_bytes())
    assert [t.depend for t in job.tasks] == [[], ["task1"], ["task1"], ["task2", "task3"]]


def test_sweep_of_tasks_of_one_name_in_the_http_namespace() -> None:
    job = parse_ccs_job((FIXTURES / "sweep.xml").read_bytes())
    assert len(job.task_named("sweep")) == 4 and job.tasks[-1].depend == ["sweep"]
    assert job.is_exclusive is False and job.extended_terms == {}  # "0", and a nil collection


# --- value spaces ---------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "seconds"), [
    ("1", 60), ("59", 59 * 60), ("05", 5 * 60),                          # mm
    ("0:01", 60), ("1:00", 3600), ("23:59", (23 * 60 + 59) * 60),       # hh:mm
    ("1:0:0", 86400), ("99:23:59", MAX_RUNTIME_SECONDS), ("00:00:01", 60),  # dd:hh:mm
    (" 10 ", 600), ("Infinite", None),
])
def test_runtime_forms(text: str, seconds: int | None) -> None:
    assert parse_runtime(text) == seconds
    assert parse_ccs_job(job_doc(f'Runtime="{text}"')).runtime == seconds
    assert parse_ccs_job(tasks_doc(task(f'Runtime="{text}"'), job='Runtime="Infinite"')).tasks[0].runtime == seconds


@pytest.mark.parametrize(("text", "why"), [
    ("25:61", "hours"), ("24:00", "hours"), ("60", "minutes"), ("1:60", "minutes"), ("100:00:00", "not"),
    ("-5", "not"), ("-1:00", "not"), ("1:2:3:4", "not"), ("123", "not"), ("", "not"), ("1h", "not"),
    ("infinite", "not"), ("INFINITE", "not"), ("1.5", "not"), ("١٢", "not"),  # Arabic-Indic digits
])
def test_bad_runtimes_are_refused_by_the_schema(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_runtime(text)
    error = rejected(f'<Job xmlns="{NAMESPACE}"\n Runtime="{text}"/>')
    assert (error.element, error.attribute, error.line) == ("Job", "Runtime", 2)  # libxml2: where the start tag ends
    assert "[[dd:]hh:]mm" in str(error) and "pattern" not in str(error)
    error = rejected(tasks_doc(task(f'Runtime="{text}"')))
    assert (error.element, error.attribute) == ("Task", "Runtime")


@pytest.mark.parametrize("text", ["0", "00", "0:00", "00:00:00"])
def test_zero_runtime_is_refused(text: str) -> None:
    error = rejected(job_doc(f'Runtime="{text}"'))
    assert (error.element, error.attribute) == ("Job", "Runtime") and "zero" in str(error)


def test_task_runtime_within_its_jobs() -> None:
    job = parse_ccs_job(tasks_doc(task('Runtime="1:00"'), task('Runtime="Infinite"'), job='Runtime="1:00"'))
    assert [t.runtime for t in job.tasks] == [3600, None]
    error = rejected(tasks_doc(task('Runtime="1:01"'), job='Runtime="1:00"'))
    assert (error.element, error.attribute) == ("Task", "Runtime")
    assert "00:01:01" in str(error) and "00:01:00" in str(error)


def test_schema_and_parser_agree_on_every_short_runtime() -> None:
    """libxml2's automaton has bugs with counted repeats ({1,2}); the pattern is checked exhaustively."""
    from lxml import etree

    xsd = safexml.schema(SCHEMA_FILE)
    digits = ["", "0", "5", "00", "09", "19", "23", "24", "29", "59", "60", "99", "100"]
    forms = {f"{d}:{h}:{m}" for d in digits for h in digits for m in digits}
    forms |= {f"{h}:{m}" for h in digits for m in digits} | set(digits)
    for text in forms:
        element = etree.fromstring(job_doc(f'Runtime="{text}"'))
        try:
            seconds = parse_runtime(text)
            parser_accepts = True
        except ValueError as exc:
            parser_accepts = "zero" in str(exc)  # the schema's pattern admits 0; the code refuses it
            seconds = None
        assert xsd.validate(element) is parser_accepts, text
        if parser_accepts and seconds is not None:
            assert parse_ccs_job(job_doc(f'Runtime="{text}"')).runtime == seconds


def test_format_runtime() -> None:
    assert format_runtime(None) == "Infinite"
    assert format_runtime(95400) == "01:02:30"
    assert parse_runtime(format_runtime(MAX_RUNTIME_SECONDS)) == MAX_RUNTIME_SECONDS
    for bad in (0, 59, 61, MAX_RUNTIME_SECONDS + 60):
        with pytest.raises(ValueError):
            format_runtime(bad)


@pytest.mark.parametrize("priority", list(CcsPriority))
def test_each_priority(priority: CcsPriority) -> None:
    assert parse_ccs_job(job_doc(f'Priority="{priority.value}"')).priority is priority


def test_priorities_are_ordered_and_nothing_else_is_one() -> None:
    assert [p.rank for p in CcsPriority] == [0, 1, 2, 3, 4]
    assert CcsPriority.HIGHEST.rank > CcsPriority.ABOVE_NORMAL.rank > CcsPriority.NORMAL.rank
    for bad in ("High", "normal", "Normal ", "", "3"):
        error = rejected(job_doc(f'Priority="{bad}"'))
        assert (error.element, error.attribute) == ("Job", "Priority")
        assert "Highest" in str(error)  # libxml2 lists the enumeration


@pytest.mark.parametrize(("text", "licenses"), [
    ("", {}), ("matlab:1", {"matlab": 1}), ("a:1,b:22,c:333", {"a": 1, "b": 22, "c": 333}),
    ("a:1, b:2", {"a": 1, "b": 2}), ("a:1 ,b:2", {"a": 1, "b": 2}), ("x.y-z/1:999999999", {"x.y-z/1": 999999999}),
])
def test_licenses(text: str, licenses: dict[str, int]) -> None:
    assert parse_licenses(text) == licenses
    assert parse_ccs_job(job_doc(f'SoftwareLicense="{text}"')).licenses == licenses
    assert parse_licenses(format_licenses(licenses)) == licenses


@pytest.mark.parametrize("text", [
    "matlab", "matlab:", ":2", "matlab:0", "matlab:-1", "matlab:1.5", "matlab:1,", ",matlab:1",
    "a:1,,b:2", "a:1;b:2", "a b:1", "a:1000000000", "a:1:2", "a:01",
])
def test_bad_licenses(text: str) -> None:
    error = rejected(job_doc(f'SoftwareLicense="{text}"'))
    assert (error.element, error.attribute) == ("Job", "SoftwareLicense")
    assert "feature:amount" in str(error) and "pattern" not in str(error)


def test_license_named_twice() -> None:
    error = rejected(job_doc('SoftwareLicense="matlab:1,fluent:2,matlab:3"'))
    assert (error.element, error.attribute) == ("Job", "SoftwareLicense") and "twice" in str(error)


@pytest.mark.parametrize(("text", "value"), [("true", True), ("1", True), ("false", False), ("0", False),
                                             (" true ", True)])
def test_booleans(text: str, value: bool) -> None:
    job = parse_ccs_job(tasks_doc(task(f'IsRerunnable="{text}" IsExclusive="{text}"'),
                                  job=f'IsExclusive="{text}" IsBackfill="{text}" RuntillCancelled="{text}"'))
    assert job.is_exclusive is job.is_backfill is job.run_until_cancelled is value
    assert job.tasks[0].is_rerunnable is job.tasks[0].is_exclusive is value


@pytest.mark.parametrize("text", ["yes", "True", "FALSE", "", "2"])
def test_bad_booleans(text: str) -> None:
    for attribute in ("IsExclusive", "IsBackfill", "RuntillCancelled"):
        error = rejected(job_doc(f'{attribute}="{text}"'))
        assert (error.element, error.attribute) == ("Job", attribute) and "true or false" in str(error)
    error = rejected(tasks_doc(task(f'IsRerunnable="{text}"')))
    assert (error.element, error.attribute) == ("Task", "IsRerunnable")


def test_nodes() -> None:
    assert parse_nodes("a b\tc\n d") == ["a", "b", "c", "d"]
    assert parse_nodes("a,b, c") == ["a", "b", "c"] and parse_nodes("  ") == []
    error = rejected(job_doc('AskedNodes="NODE1 node1"'))
    assert (error.element, error.attribute) == ("Job", "AskedNodes") and "twice" in str(error)


def test_environment_variables() -> None:
    variables = ("<EnvironmentVariables xmlns:xsi='http://www.w3.org/2001/XMLSchema-instance'>"
                 "<Variable><Name>A</Name><Value>1=2</Value></Variable>"
                 "<Variable><Name>EMPTY</Name></Variable>"
                 "<Variable xsi:nil='true'/>"
                 "<Variable><Name>B</Name><Value/></Variable></EnvironmentVariables>")
    assert parse_ccs_job(tasks_doc(task("", variables))).tasks[0].environment == {"A": "1=2", "EMPTY": "", "B": ""}
    twice = "<EnvironmentVariables><Variable><Name>Path</Name></Variable><Variable><Name>PATH</Name></Variable></EnvironmentVariables>"
    error = rejected(tasks_doc(task("", twice)))
    assert error.element == "Variable" and "'PATH' is given twice" in str(error)
    for bad, why in (("<Variable><Value>1</Value></Variable>", "no Name"),
                     ("<Variable><Name>A=B</Name></Variable>", "'='")):
        error = rejected(tasks_doc(task("", f"<EnvironmentVariables>{bad}</EnvironmentVariables>")))
        assert error.element == "Variable" and why in str(error)


# --- semantic checks ------------------------------------------------------------------------

def test_minimum_processors_not_over_maximum() -> None:
    assert parse_ccs_job(job_doc('MinimumNumberOfProcessors="8" MaximumNumberOfProcessors="8"')).min_processors == 8
    error = rejected(job_doc('MinimumNumberOfProcessors="9" MaximumNumberOfProcessors="8"'))
    assert (error.element, error.attribute) == ("Job", "MinimumNumberOfProcessors")
    error = rejected(tasks_doc(task('MinimumNumberOfProcessors="3" MaximumNumberOfProcessors="2"'),
                               job='MaximumNumberOfProcessors="4"'))
    assert (error.element, error.attribute) == ("Task", "MinimumNumberOfProcessors")
    error = rejected(tasks_doc(task('MinimumNumberOfProcessors="5" MaximumNumberOfProcessors="5"'),
                               job='MaximumNumberOfProcessors="4"'))
    assert "more than its job's" in str(error)


@pytest.mark.parametrize("text", ["0", "-1", "2147483648", "1.0", "two"])
def test_processor_counts(text: str) -> None:
    error = rejected(job_doc(f'MaximumNumberOfProcessors="{text}"'))
    assert (error.element, error.attribute) == ("Job", "MaximumNumberOfProcessors")


def test_largest_counts_and_ids() -> None:
    job = parse_ccs_job(job_doc('Id="2147483647" MaximumNumberOfProcessors="2147483647"'))
    assert (job.id, job.max_processors) == (2147483647, 2147483647)
    assert "Id" == rejected(job_doc('Id="2147483648"')).attribute
    assert "Id" == rejected(job_doc('Id="-1"')).attribute


def test_dependency_on_a_missing_task() -> None:
    error = rejected(tasks_doc(task('Name="a"'), "\n" + task('Name="b" Depend="a,nope"')))
    assert (error.element, error.attribute, error.line) == ("Task", "Depend", 2)
    assert "'nope'" in str(error)
    assert "Depend" == rejected(tasks_doc(task('Name="a"'), task('Depend="a,,a"'))).attribute
    assert "twice" in str(rejected(tasks_doc(task('Name="a"'), task('Depend="a, a"'))))


def test_dependency_cycle_is_reported_with_its_tasks() -> None:
    error = rejected((FIXTURES / "cycle.xml").read_bytes())
    assert (error.element, error.attribute, error.line) == ("Task", "Depend", 5)
    assert "cycle: a -> c -> b -> a" in str(error)
    assert error.first.path == "/Job/Tasks/Task[2]"


def test_self_dependency_is_a_cycle() -> None:
    error = rejected(tasks_doc(task('Name="a" Depend="a"')))
    assert "cycle: a -> a" in str(error)
    # A name stands for every task of that name, so one of a sweep depending on "sweep" is a cycle too.
    error = rejected(tasks_doc(task('Name="sweep"'), task('Name="sweep" Depend="sweep"')))
    assert "cycle" in str(error)


def test_long_chain_is_no_cycle() -> None:
    tasks = [task(f'Name="t{i}"' + (f' Depend="t{i - 1}"' if i else "")) for i in range(5000)]
    assert len(parse_ccs_job(tasks_doc(*tasks)).tasks) == 5000  # iterative: no recursion limit


def test_large_sweep_is_checked_quickly() -> None:
    tasks = [task('Name="sweep"') for _ in range(5000)]
    tasks += [task('Name="collect" Depend="sweep"') for _ in range(5000)]
    started = time.perf_counter()
    job = parse_ccs_job(tasks_doc(*tasks))
    assert len(job.tasks) == 10000 and time.perf_counter() - started < 5.0  # no tasks x tasks graph


def test_task_names_are_compared_without_surrounding_space() -> None:
    job = parse_ccs_job(tasks_doc(task('Name=" a "'), task('Depend=" a"')))
    assert job.tasks[0].name == "a" and job.tasks[1].depend == ["a"]


def test_duplicate_task_ids_but_not_names() -> None:
    error = rejected(tasks_doc(task('Id="3" Name="a"'), "\n" + task('Id="3" Name="b"')))
    assert (error.element, error.attribute, error.line) == ("Task", "Id", 2) and "twice" in str(error)
    job = parse_ccs_job(tasks_doc(task('Id="0" Name="a"'), task('Id="0" Name="a"')))  # 0: not assigned
    assert len(job.task_named("a")) == 2


def test_parent_job_id_is_the_jobs() -> None:
    assert parse_ccs_job(tasks_doc(task('ParentJobId="5"'), job='Id="5"')).tasks[0].parent_job_id == 5
    error = rejected(tasks_doc(task('ParentJobId="6"'), job='Id="5"'))
    assert (error.element, error.attribute) == ("Task", "ParentJobId")


def test_every_semantic_problem_is_reported() -> None:
    error = rejected(tasks_doc(task('Name="a" Depend="zz"'), task('Name="b" Runtime="0"'),
                               job='MinimumNumberOfProcessors="2" MaximumNumberOfProcessors="1"'))
    assert [(p.element, p.attribute) for p in error.problems] == [
        ("Job", "MinimumNumberOfProcessors"), ("Task", "Runtime"), ("Task", "Depend")]


def test_at_most_ten_problems() -> None:
    error = rejected(tasks_doc(*[task('Depend="nope"') for _ in range(5000)]))
    assert len(error.problems) == 10


def test_states_in_either_spelling() -> None:
    for text, state in (("Completed", JobState.FINISHED), ("Finished", JobState.FINISHED),
                        ("Cancelled", JobState.CANCELED), ("Canceled", JobState.CANCELED),
                        ("NotSubmitted", JobState.NOT_SUBMITTED), ("Failed", JobState.FAILED)):
        assert parse_ccs_job(tasks_doc(task(f'Status="{text}"'), job=f'Status="{text}"')).status is state
    assert "Status" == rejected(job_doc('Status="Done"')).attribute


def test_parse_depend() -> None:
    assert parse_depend("") == [] and parse_depend(" a , b ") == ["a", "b"]


# --- bad documents --------------------------------------------------------------------------

def test_unknown_attribute_is_refused_by_name() -> None:
    error = rejected(f'<Job xmlns="{NAMESPACE}"\n  Priorty="High"/>')
    assert (error.element, error.attribute, error.line) == ("Job", "Priorty", 2)
    error = rejected(tasks_doc(task('Stdot="out.txt"')))
    assert (error.element, error.attribute) == ("Task", "Stdot")
    assert "Stdot" in str(error)


def test_unknown_and_misplaced_elements() -> None:
    error = rejected(job_doc("", "<Tasks/><ExtendedTerms/>"))
    assert error.element == "ExtendedTerms" and "not allowed" in str(error)
    assert rejected(job_doc("", "<Queue/>")).element == "Queue"
    assert rejected(job_doc("", f"<Tasks>{task('')}<Task/></Tasks>")).attribute == "CommandLine"


def test_command_line_is_required_and_not_blank() -> None:
    error = rejected(tasks_doc("<Task Name='x'/>"))
    assert (error.element, error.attribute) == ("Task", "CommandLine")
    error = rejected(tasks_doc(task('CommandLine="  "')))
    assert (error.element, error.attribute) == ("Task", "CommandLine") and "blank" in str(error)


def test_namespace() -> None:
    error = rejected("<Job/>")
    assert error.element == "Job" and "no namespace" in str(error) and NAMESPACE in str(error)
    error = rejected('<Job xmlns="urn:other"/>')
    assert "urn:other" in str(error)
    error = rejected(f'<Task xmlns="{NAMESPACE}" CommandLine="x"/>')
    assert error.element == "Task"
    # elements are qualified: a child in no namespace is not the schema's
    assert rejected(f'<j:Job xmlns:j="{NAMESPACE}"><Tasks/></j:Job>').element == "Tasks"
    assert parse_ccs_job(f'<j:Job xmlns:j="{NAMESPACE}" Name="p"><j:Tasks/></j:Job>').name == "p"


def test_doctype_and_entities_are_refused() -> None:
    error = rejected((FIXTURES / "entity.xml").read_bytes())
    assert "DOCTYPE" in str(error) and error.line == 2 and "root:" not in str(error)
    entities = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{i} "{("&lol%d;" % (i - 1)) * 10}">' for i in range(1, 10)]
    document = f'<!DOCTYPE Job [{"".join(entities)}]><Job xmlns="{NAMESPACE}" Name="&lol9;"/>'
    started = time.perf_counter()
    assert "DOCTYPE" in str(rejected(document))
    assert time.perf_counter() - started < 1.0
    # an undeclared entity is not well-formed, and nothing is fetched
    assert "well-formed" in str(rejected(job_doc('Name="&x;"')))


def test_not_xml_empty_and_too_large() -> None:
    assert "well-formed" in str(rejected("<Job"))
    assert "empty" in str(rejected(""))
    document = job_doc(f'Message="{"x" * 5000}"')
    assert "over the limit" in str(rejected(document, max_bytes=4096))
    assert parse_ccs_job(document, max_bytes=len(document)).message == "x" * 5000


def test_error_json_body() -> None:
    body = rejected(job_doc('Runtime="25:61"')).as_json()
    assert set(body) == {"error", "detail"}
    first = body["detail"][0]
    assert (first["line"], first["element"], first["attribute"]) == (1, "Job", "Runtime")
    assert "has 25 hours; hours are 0-23" in body["error"]


def test_schema_file_is_the_published_one() -> None:
    xsd = safexml.schema(SCHEMA_FILE)
    assert (safexml.SCHEMA_DIR / SCHEMA_FILE).is_file()
    assert xsd.validate(safexml.parse((FIXTURES / "full.xml").read_bytes()))
