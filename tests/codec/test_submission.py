"""The three submission formats through parse_submission: detection, every mapped field, round trips."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infosvc.codec.ccsjob_xml import parse_ccs_job
from infosvc.codec.gridjob_json import parse_grid_job
from infosvc.codec.job_xml import job_to_xml, parse_job
from infosvc.errors import DocumentError
from infosvc.model.ccsjob import CcsJob, CcsPriority, CcsTask, JobState
from infosvc.model.gridjob import Constraints, GridJob, Requirements, admits
from infosvc.model.job import (
    Condition, Consumable, Dependency, Designator, Extension, Job, JobGroup, Op, Simple, StreamFile, Task, Term,
    Variable, requirement, resolve,
)
from infosvc.model.noderef import Aggregation, NodeRef
from infosvc.codec.submission import ccs_to_job, grid_requested, grid_to_job, parse_submission, split_command_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
XML = "application/xml"
JSON = "application/json"


def fixture(path: str) -> bytes:
    return (FIXTURES / path).read_bytes()


def extensions(task_or_job: Task | Job) -> dict[tuple[str, str | None], str]:
    return {(ext.name, ext.type): ext.value for ext in task_or_job.properties.extensions}


def round_trips(job: Job | JobGroup) -> None:
    assert parse_job(job_to_xml(job)).job == job


def terms(items: list[Term]) -> list[tuple[str, Op, str]]:
    """(name, op, value) of each Requested term, for compact assertions."""
    out = []
    for term in items:
        item = term.item
        if isinstance(item, Simple):
            value = item.value
        elif isinstance(item, Consumable):
            value = f"{item.name}:{item.type}={item.value:g}" if item.kind == "Resource" else f"{item.value:g}"
        else:
            assert isinstance(item, NodeRef)
            value = f"{item.aggregation}:{item.value}"
        out.append((term.name, term.effective_op, value))
    return out


# --- SSS ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["simple", "moderate", "elaborate"])
def test_sss_documents_come_through_as_parse_job_reads_them(name: str) -> None:
    body = fixture(f"sss-job-examples/{name}.xml")
    job, warnings = parse_submission(body, XML)
    parsed = parse_job(body)
    assert job == parsed.job
    assert warnings == [str(problem) for problem in parsed.warnings]
    round_trips(job)


def test_sss_job_group_and_its_warnings() -> None:
    job, warnings = parse_submission(fixture("sss-job-examples/elaborate.xml"), "text/xml; charset=utf-8")
    assert isinstance(job, JobGroup) and job.id == "workflow1"
    assert len(warnings) == 1 and "group counts do not nest" in warnings[0] and "line 76" in warnings[0]


def test_sss_by_body_alone() -> None:
    job, _ = parse_submission(b"\n  " + fixture("sss-job-examples/simple.xml"), "")
    assert isinstance(job, Job) and job.id == "PBS.1234.0"


def test_sss_refusals_are_parse_jobs() -> None:
    with pytest.raises(DocumentError, match="not well-formed"):
        parse_submission(fixture("sss-job-examples/elaborate-as-printed.xml"), XML)
    with pytest.raises(DocumentError, match="not supported"):
        parse_submission(b"<Job><Id>1</Id><Gpu>2</Gpu></Job>", XML)


# --- grid ---------------------------------------------------------------------------------------

def test_grid_every_field() -> None:
    job, warnings = parse_submission(fixture("gridjob/all-fields.json"), JSON)
    assert warnings == []
    assert isinstance(job, Job)
    assert job.id.startswith("grid-") and len(job.id) == len("grid-") + 16
    assert extensions(job) == {("default_storage_base", "GridJob"): "gsiftp://example.org/base/"}
    assert job.properties.requested == []  # requirements are per task, merged
    [group] = job.task_groups
    assert group.properties.simple == {"TaskCount": "3"}
    mpi, fork, plain = group.tasks

    simple = mpi.properties.simple
    assert simple["Id"] == "mpi"
    assert simple["Executable"] == "/opt/sim/bin/sim"
    assert shlex.split(simple["Arguments"]) == ["--steps", "100", "two words", "it's"]
    assert simple["Type"] == "MPI"
    assert mpi.properties.environment is not None
    assert mpi.properties.environment.variables == [Variable("OMP_NUM_THREADS", "4"), Variable("MODE", "fast")]
    assert mpi.properties.input_file == StreamFile("gsiftp://example.org/base/in.dat")
    assert mpi.properties.output_file == StreamFile("gsiftp://example.org/results/out.txt")
    assert mpi.properties.error_file == StreamFile("gsiftp://example.org/base/err.txt")
    assert terms(mpi.properties.requested) == [
        ("Processors", Op.EQ, "8"),
        ("Node", Op.EQ, "List:ce1.example.org,ce2.example.org"),  # the job's hostname
        ("ResourceManagerType", Op.EQ, "PBS"),
        ("Queue", Op.EQ, "long"),  # the task's queue over the job's
    ]
    assert extensions(mpi) == {
        ("max_success_code", "GridJob"): "2",
        ("input_files", "GridJob"): '{"model.cfg":"gsiftp://example.org/base/cfg/model.cfg"}',
        ("output_files", "GridJob"): '{"result.h5":"gsiftp://example.org/base/results/result.h5"}',
        ("description", "GridJob"): "the simulation",
        ("meta", "GridJob"): '{"owner":"lab","tags":["a","b"]}',
    }
    assert json.loads(extensions(mpi)[("meta", "GridJob")]) == {"owner": "lab", "tags": ["a", "b"]}

    assert "Type" not in fork.properties.simple and "Arguments" not in fork.properties.simple
    assert fork.properties.environment is None and fork.properties.input_file is None
    assert terms(fork.properties.requested) == [
        ("Processors", Op.EQ, "1"), ("Node", Op.EQ, "List:head.example.org"), ("Queue", Op.EQ, "short")]
    assert extensions(fork) == {("fork", "GridJob"): "true",
                                ("default_storage_base", "GridJob"): "gsiftp://other.example.org/data/"}

    assert terms(plain.properties.requested) == [
        ("Processors", Op.EQ, "1"), ("Node", Op.EQ, "List:ce1.example.org,ce2.example.org"),
        ("ResourceManagerType", Op.NE, "Fork"), ("Queue", Op.EQ, "short")]
    assert extensions(plain) == {("fork", "GridJob"): "false"}
    round_trips(job)


def test_grid_fixtures_of_the_seed() -> None:
    job, _ = parse_submission(fixture("gridjob/files-corrected.json"), JSON)
    assert isinstance(job, Job)
    a, b = job.task_groups[0].tasks
    assert a.properties.simple["Executable"] == "/bin/cp"
    assert json.loads(extensions(a)[("input_files", "GridJob")]) == {
        "hello.txt": "gsiftp://example.org/my/files/hello.txt", "foo.txt": "gsiftp://example.org/bar.txt",
        "qux": "gsiftp://example.org/my/directory/qux/"}
    assert json.loads(extensions(b)[("input_files", "GridJob")])["hello.txt"] == \
        "gsiftp://example.org/other/files/hello.txt"
    round_trips(job)

    for name in ("requirements-job-level-corrected.json", "requirements-task-level-corrected.json"):
        job, _ = parse_submission(fixture(f"gridjob/{name}"), "application/json; charset=utf-8")
        assert isinstance(job, Job)
        assert terms(job.task_groups[0].tasks[0].properties.requested) == [
            ("Processors", Op.EQ, "1"), ("ResourceManagerType", Op.EQ, "Cleo"), ("Queue", Op.EQ, "long")]

    job, _ = parse_submission(fixture("gridjob/environment.json"), "")  # a lone task description, by body
    assert isinstance(job, Job)
    [task] = job.task_groups[0].tasks
    assert task.properties.simple["Id"] == "1"
    assert task.properties.environment is not None
    assert task.properties.environment.as_dict() == {"FOO": "bar", "QUX": "XyZzy"}


def test_grid_refusals_are_the_codecs() -> None:
    with pytest.raises(DocumentError, match="did you mean 'output_files'"):
        parse_submission(fixture("gridjob/files-as-published.json"), JSON)


def test_grid_ignored_paths_become_warnings() -> None:
    body = json.dumps({"version": 2, "tasks": [{"id": "t", "definition": {
        "version": 2, "executable": "/bin/cat", "stdin": "in.txt", "input_files": {"a": "a.txt"}}}]}).encode()
    job, warnings = parse_submission(body, JSON)
    assert warnings == ["task t: input_files a: 'a.txt' is a path and no default_storage_base is given",
                        "task t: stdin: 'in.txt' is a path and no default_storage_base is given"]
    assert isinstance(job, Job) and job.task_groups[0].tasks[0].properties.input_file is None


def test_grid_count_zero_is_one_processor_and_not_mpi() -> None:
    grid = parse_grid_job(b'{"version": 2, "executable": "/bin/true", "count": 0}')
    task = grid_to_job(grid, job_id="j1").task_groups[0].tasks[0]
    assert "Type" not in task.properties.simple
    assert terms(task.properties.requested)[0] == ("Processors", Op.EQ, "1")


def test_grid_id_is_stable_and_can_be_given() -> None:
    body = fixture("gridjob/files-corrected.json")
    assert parse_submission(body, JSON)[0] == parse_submission(body, JSON)[0]
    assert grid_to_job(parse_grid_job(body), job_id="mine").id == "mine"


def _evaluate(terms_: list[Term], lrms: str, queue: str, host: str) -> bool:
    """The CE part of a grid task's requirement, evaluated as the matcher should (docs/job-formats.md)."""
    expr = requirement(terms_).expr
    assert expr is not None
    ok = True
    for term in terms_:
        item = term.item
        if term.name == "ResourceManagerType":
            assert isinstance(item, Simple)
            equal = item.value.casefold() == lrms.casefold()
            ok &= equal if term.effective_op is Op.EQ else not equal
        elif term.name == "Queue":
            assert isinstance(item, Simple)
            ok &= item.value == queue
        elif term.name == "Node":
            assert isinstance(item, NodeRef)
            ok &= host.rstrip(".").casefold() in {name.rstrip(".").casefold() for name in item.names()}
    return ok


@pytest.mark.parametrize("lrms", [None, "Fork", "PBS", "pbs"])
@pytest.mark.parametrize("fork", [None, False, True])
@pytest.mark.parametrize("queue", [None, "long"])
@pytest.mark.parametrize("hostname", [None, ("CE1.example.org.",)])
def test_grid_requested_terms_admit_what_admits_admits(lrms: str | None, fork: bool | None, queue: str | None,
                                                        hostname: tuple[str, ...] | None) -> None:
    grid = parse_grid_job(b'{"version": 2, "executable": "/bin/true"}')
    task = grid.tasks[0]
    task.requirements = Requirements(hostname=hostname, lrms=lrms, fork=fork, queue=queue)
    requested = grid_requested(task)
    constraints: Constraints = task.constraints
    for ce_lrms in ("Fork", "fork", "PBS", "Cleo"):
        for ce_queue in ("long", "short"):
            for host in ("ce1.example.org", "other.example.org"):
                assert _evaluate(requested, ce_lrms, ce_queue, host) == \
                    (admits(constraints, ce_lrms, ce_queue, host) == []), (ce_lrms, ce_queue, host)


@pytest.mark.parametrize("lrms", [None, "Fork", "PBS", "pbs"])
@pytest.mark.parametrize("fork", [None, False, True])
@pytest.mark.parametrize("queue", [None, "long", "Long"])
@pytest.mark.parametrize("hostname", [None, ("CE1.example.org.",), ("ce1.EXAMPLE.org", "x")])
def test_the_matcher_admits_what_admits_admits(lrms: str | None, fork: bool | None, queue: str | None,
                                               hostname: tuple[str, ...] | None) -> None:
    """infosvc.matching itself, on the mapped job, against gridjob.admits over CEs and hosts; and a
    cluster of two CEs fits when one of them would (the task's terms go to one CE)."""
    from support.documents import make_node

    from infosvc.matching import CE, Site, compile_requirements, evaluate
    from infosvc.hosts.rollup import host_from_node
    from infosvc.config.site import SiteConfig

    grid = parse_grid_job(b'{"version": 2, "executable": "/bin/true"}')
    task = grid.tasks[0]
    task.requirements = Requirements(hostname=hostname, lrms=lrms, fork=fork, queue=queue)
    constraints: Constraints = task.constraints
    required = compile_requirements(resolve(grid_to_job(grid))[0])
    ces = [CE(f"ce-{ce_lrms}-{ce_queue}", ce_lrms, ce_queue) for ce_lrms in ("Fork", "fork", "PBS", "Cleo")
           for ce_queue in ("long", "short")]
    for host in ("ce1.example.org", "other.example.org"):
        node = make_node(host, processors=1)
        glue_host = host_from_node(node, "Ready", SiteConfig(), "2026-01-01T00:00:00Z")
        for ce in ces:
            verdict = evaluate(required, node, glue_host, site=Site({"default": (ce,)}))
            assert verdict.ok == (admits(constraints, ce.lrms_type, ce.queue, host) == []), (ce, host, verdict)
        for pair in zip(ces, ces[1:] + ces[:1]):
            either = any(admits(constraints, ce.lrms_type, ce.queue, host) == [] for ce in pair)
            assert evaluate(required, node, glue_host, site=Site({"default": pair})).ok == either, (pair, host)


# --- CCS ----------------------------------------------------------------------------------------

def test_ccs_every_field() -> None:
    job, warnings = parse_submission(fixture("ccs/full.xml"), XML)
    assert warnings == []
    assert isinstance(job, Job)
    assert job.properties.simple == {
        "Id": "42", "Name": "Protein fold", "Project": "Chemistry", "User": "LAB\\alice",
        "StatusMessage": "waiting for licenses", "State": "Queued", "Priority": "3"}
    assert terms(job.properties.requested) == [
        ("Processors", Op.GE, "4"), ("Processors", Op.LE, "16"),
        ("Duration", Op.EQ, str((26 * 60 + 30) * 60)),
        ("Node", Op.EQ, "List:NODE01,NODE02,NODE03"),
        ("Resource", Op.EQ, "License:matlab=2"), ("Resource", Op.EQ, "License:fluent=10"),
    ]
    assert job.properties.delivered == [Term(NodeRef("NODE01,NODE02", Aggregation.LIST))]
    assert extensions(job) == {
        ("IsExclusive", "CCS"): "false", ("IsBackfill", "CCS"): "true", ("RuntillCancelled", "CCS"): "true",
        ("SubmittedBy", "CCS"): "LAB\\bob", ("Department", "ExtendedTerm"): "Biology"}

    [group] = job.task_groups
    assert group.properties.simple == {"TaskCount": "2"}
    prepare, fold = group.tasks
    assert prepare.properties.simple == {
        "Id": "7", "Name": "prepare", "StatusMessage": "done", "State": "Finished", "Executable": "prep.exe",
        "Arguments": "/in:data.txt", "Restartable": "true",
        "InitialWorkingDirectory": "\\\\head\\share\\%USERNAME%"}
    assert prepare.properties.dependencies == []
    assert prepare.properties.input_file == StreamFile("in.txt")
    assert prepare.properties.output_file == StreamFile("out.txt")
    assert prepare.properties.error_file == StreamFile("err.txt")
    assert prepare.properties.environment is not None
    assert prepare.properties.environment.as_dict() == {"OMP_NUM_THREADS": "2", "SCRATCH": "D:\\scratch"}
    assert terms(prepare.properties.requested) == [
        ("Processors", Op.GE, "1"), ("Processors", Op.LE, "2"), ("Duration", Op.EQ, "1800"),
        ("Node", Op.EQ, "List:NODE01")]
    assert extensions(prepare) == {("IsExclusive", "CCS"): "true", ("Stage", "ExtendedTerm"): "1"}

    assert fold.properties.simple == {
        "Id": "8", "Name": "fold", "State": "Running", "Executable": "mpiexec", "Arguments": "fold.exe",
        "ExitCode": "-1", "Restartable": "false"}
    assert fold.properties.dependencies == [Dependency("prepare", Condition.ON_SUCCESS, None, Designator.JOB_NAME)]
    assert terms(fold.properties.requested) == [
        ("Processors", Op.GE, "4"), ("Processors", Op.LE, "16"), ("Duration", Op.EQ, "7200")]
    assert fold.properties.extensions == [] and fold.properties.environment is None
    round_trips(job)


@pytest.mark.parametrize("name", ["full", "sweep", "taskflow"])
def test_ccs_fixtures_round_trip(name: str) -> None:
    job, _ = parse_submission(fixture(f"ccs/{name}.xml"), "")
    assert isinstance(job, Job)
    round_trips(job)
    assert len(resolve(job)) == 1


def test_ccs_sweep_and_defaults() -> None:
    job, _ = parse_submission(fixture("ccs/sweep.xml"), XML)  # the http namespace
    assert isinstance(job, Job)
    assert job.id.startswith("ccs-")  # no Id assigned
    assert job.properties.simple == {"Id": job.id, "Name": "sweep", "Priority": "2"}
    assert extensions(job) == {("IsExclusive", "CCS"): "false"}
    assert terms(job.properties.requested) == [("Processors", Op.GE, "1"), ("Processors", Op.LE, "4")]
    tasks = job.task_groups[0].tasks
    assert [t.properties.simple.get("Name") for t in tasks] == ["sweep"] * 4 + ["collect"]
    assert [t.properties.input_file for t in tasks[:4]] == [StreamFile(f"in{i}.txt") for i in range(1, 5)]
    assert tasks[4].properties.dependencies == [Dependency("sweep", Condition.ON_SUCCESS, None, Designator.JOB_NAME)]
    assert tasks[4].properties.simple["Arguments"] == "out*.txt"
    assert all(t.properties.simple["Restartable"] == "false" for t in tasks)


def test_ccs_taskflow_dependencies() -> None:
    job, _ = parse_submission(fixture("ccs/taskflow.xml"), XML)
    assert isinstance(job, Job)
    deps = {t.properties.simple["Name"]: [d.job for d in t.properties.dependencies] for t in job.task_groups[0].tasks}
    assert deps == {"task1": [], "task2": ["task1"], "task3": ["task1"], "task4": ["task2", "task3"]}


def test_ccs_priorities_and_no_tasks() -> None:
    ns = "https://www.microsoft.com/ComputeCluster/"
    for rank, level in enumerate(["Lowest", "BelowNormal", "Normal", "AboveNormal", "Highest"]):
        body = f'<Job xmlns="{ns}" Id="5" Priority="{level}" Runtime="Infinite"/>'.encode()
        job, _ = parse_submission(body, XML)
        assert isinstance(job, Job)
        assert job.id == "5" and job.properties.simple["Priority"] == str(rank)
        assert job.task_groups == []
        assert extensions(job) == {("IsExclusive", "CCS"): "true"}  # the job's default
        assert [t.name for t in job.properties.requested] == ["Processors", "Processors"]  # no Duration
        round_trips(job)


def test_ccs_refusals_are_the_codecs() -> None:
    with pytest.raises(DocumentError, match="cycle"):
        parse_submission(fixture("ccs/cycle.xml"), XML)
    with pytest.raises(DocumentError, match="DOCTYPE"):
        parse_submission(fixture("ccs/entity.xml"), XML)


def test_ccs_id_can_be_given() -> None:
    assert ccs_to_job(parse_ccs_job(fixture("ccs/full.xml")), job_id="x").id == "x"


@pytest.mark.parametrize(("line", "executable", "arguments"), [
    ("prep.exe /in:data.txt", "prep.exe", "/in:data.txt"),
    ("  model.exe  ", "model.exe", ""),
    ('"C:\\Program Files\\x.exe" /a "b c"', "C:\\Program Files\\x.exe", '/a "b c"'),
    ("tool.exe\t-x  -y", "tool.exe", "-x  -y"),
    ('"unclosed x', '"unclosed', "x"),
])
def test_split_command_line(line: str, executable: str, arguments: str) -> None:
    assert split_command_line(line) == (executable, arguments)


# --- detection ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "content_type", "message"), [
    (b"", XML, "empty"),
    (b"  \n ", "", "empty"),
    (b"\xef\xbb\xbf", JSON, "empty"),
    (b"[1, 2]", JSON, "JSON array"),
    (b'[{"version": 2}]', "", "JSON array"),
    (b'"job"', JSON, "not a JSON object"),
    (b"<Job><Id>1</Id></Job>", JSON, "content type says JSON but the body is XML"),
    (b'{"version": 2}', XML, "content type says XML but the body is JSON"),
    (b'{"version": 2}', "image/png", "content type 'image/png' is not a job format"),
    (b"hello", "", "neither XML nor a JSON object"),
    (b"<Task/>", XML, "root element is Task with no namespace"),
    (b'<Job xmlns="urn:other"/>', XML, "root element is Job in namespace urn:other"),
    (b'<JobGroup xmlns="https://www.microsoft.com/ComputeCluster/"/>', XML, "root element is JobGroup in namespace"),
    (b"<Job>", XML, "not well-formed"),
])
def test_detection_refusals(body: bytes, content_type: str, message: str) -> None:
    with pytest.raises(DocumentError, match=message) as caught:
        parse_submission(body, content_type)
    assert "expected" in str(caught.value) or message == "not well-formed"


def test_unknown_root_says_what_was_expected() -> None:
    with pytest.raises(DocumentError) as caught:
        parse_submission(b"<?xml version='1.0'?>\n<Node/>", XML)
    assert caught.value.line == 2 and caught.value.element == "Node"
    assert "SSS Job or JobGroup" in caught.value.first.message and "CCS Job" in caught.value.first.message
    assert "grid job" in caught.value.first.message


def test_content_type_parameters_and_suffixes() -> None:
    body = fixture("gridjob/environment.json")
    assert isinstance(parse_submission(body, "Application/JSON; charset=UTF-8")[0], Job)
    assert isinstance(parse_submission(body, "application/vnd.gridjob+json")[0], Job)
    assert isinstance(parse_submission(body, "application/octet-stream")[0], Job)
    xml = fixture("ccs/taskflow.xml")
    assert isinstance(parse_submission(xml, "application/vnd.ccs+xml")[0], Job)
    assert isinstance(parse_submission(xml, "text/plain")[0], Job)


def test_kept_extensions_are_not_requirements() -> None:
    job, _ = parse_submission(fixture("ccs/full.xml"), XML)
    assert isinstance(job, Job)
    assert Extension("IsExclusive", "false", "CCS") in job.properties.extensions
    assert all(term.name != "Extension" for term in job.properties.requested)


def test_grid_text_that_xml_cannot_hold_is_refused() -> None:
    body = b'{"version": 2, "executable": "/bin/echo", "arguments": ["\\u0001"]}'
    with pytest.raises(DocumentError, match="cannot be written in XML"):
        parse_submission(body, JSON)


def test_ccs_text_values_lose_only_insignificant_white_space() -> None:
    ns = "https://www.microsoft.com/ComputeCluster/"
    body = (f'<Job xmlns="{ns}" Name=" padded " SubmittedBy=" me "><Tasks>'
            '<Task CommandLine="  x.exe   a  b " WorkDirectory=" C:\\w " Stdout=" o.txt "/></Tasks></Job>').encode()
    job, _ = parse_submission(body, XML)
    assert isinstance(job, Job)
    assert job.properties.simple["Name"] == "padded"
    assert extensions(job)[("SubmittedBy", "CCS")] == "me"
    task = job.task_groups[0].tasks[0]
    assert task.properties.simple["Executable"] == "x.exe" and task.properties.simple["Arguments"] == "a  b"
    assert task.properties.simple["InitialWorkingDirectory"] == "C:\\w"
    assert task.properties.output_file == StreamFile("o.txt")
    round_trips(job)


# --- round trips of generated jobs --------------------------------------------------------------

_word = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Cn", "Co", "Zs", "Zl", "Zp")), min_size=1,
                max_size=12)
_phrase = st.lists(_word, min_size=1, max_size=3).map(" ".join)
_program = _phrase.filter(lambda text: not text.startswith("#"))  # "#id" is an attached File to SSS


@st.composite
def _ccs_jobs(draw: st.DrawFn) -> CcsJob:
    least = draw(st.integers(1, 64))
    names = draw(st.lists(_word.filter(lambda w: "," not in w), max_size=4))
    tasks = [CcsTask(
        command_line=draw(_program), name=name, id=draw(st.integers(0, 1000)),
        depend=names[:index], is_rerunnable=draw(st.booleans()), is_exclusive=draw(st.booleans()),
        min_processors=least, max_processors=least + draw(st.integers(0, 8)),
        runtime=draw(st.none() | st.integers(1, 1000).map(lambda m: m * 60)),
        asked_nodes=draw(st.lists(st.from_regex(r"[A-Z][A-Z0-9-]{0,8}", fullmatch=True), max_size=3, unique=True)),
        work_directory=draw(st.none() | _phrase), stdin=draw(st.none() | _word), stdout=draw(st.none() | _word),
        environment=draw(st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True), _phrase, max_size=3)),
        extended_terms=draw(st.dictionaries(_word, _phrase, max_size=2)),
    ) for index, name in enumerate(names)]
    return CcsJob(
        id=draw(st.integers(0, 1000)), name=draw(st.just("") | _phrase), project=draw(st.just("") | _phrase),
        priority=draw(st.sampled_from(CcsPriority)), status=draw(st.sampled_from(JobState)),
        is_exclusive=draw(st.booleans()), is_backfill=draw(st.booleans()),
        min_processors=least, max_processors=least + draw(st.integers(0, 64)),
        run_until_cancelled=draw(st.booleans()),
        licenses=draw(st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.integers(1, 99), max_size=3)),
        tasks=tasks)


@settings(max_examples=50, deadline=None)
@given(_ccs_jobs())
def test_generated_ccs_jobs_round_trip(ccs: CcsJob) -> None:
    job = ccs_to_job(ccs)
    round_trips(job)
    assert len(job.task_groups[0].tasks if job.task_groups else []) == len(ccs.tasks)


@st.composite
def _grid_jobs(draw: st.DrawFn) -> GridJob:
    ids = draw(st.lists(st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True), min_size=1, max_size=3, unique=True))
    tasks = []
    for task_id in ids:
        tasks.append({"id": task_id, "definition": {
            "version": 2, "executable": draw(_program), "arguments": draw(st.lists(_phrase | st.just(""), max_size=3)),
            "environment": draw(st.dictionaries(st.from_regex(r"[A-Z][A-Z0-9_]{0,6}", fullmatch=True), _word,
                                                max_size=2)),
            **({"count": draw(st.integers(-1, 64))} if draw(st.booleans()) else {}),
            "max_success_code": draw(st.integers(0, 255)),
            "requirements": {key: value for key, value in (
                ("lrms", draw(st.none() | st.sampled_from(["PBS", "Fork", "Cleo"]))),
                ("fork", draw(st.none() | st.booleans())),
                ("queue", draw(st.none() | _word)),
                ("hostname", draw(st.none() | st.lists(st.from_regex(r"[a-z]{1,6}\.example\.org", fullmatch=True),
                                                       min_size=1, max_size=3))),
            ) if value is not None},
        }})
    return parse_grid_job(json.dumps({"version": 2, "default_storage_base": "gsiftp://h/d/", "tasks": tasks}))


@settings(max_examples=50, deadline=None)
@given(_grid_jobs())
def test_generated_grid_jobs_round_trip(grid: GridJob) -> None:
    job = grid_to_job(grid)
    round_trips(job)
    for task, mapped in zip(grid.tasks, job.task_groups[0].tasks):
        assert shlex.split(mapped.properties.simple.get("Arguments", "")) == list(task.arguments)


def test_an_executable_sss_would_read_as_a_file_reference_is_refused() -> None:
    with pytest.raises(DocumentError, match="grid job: task 1: executable '#x' starts with '#'"):
        parse_submission(b'{"version": 2, "executable": "#x"}', JSON)
    body = (b'<Job xmlns="https://www.microsoft.com/ComputeCluster/">'
            b'<Tasks><Task Name="t" CommandLine="#x y"/></Tasks></Job>')
    with pytest.raises(DocumentError, match="CCS job: task t: executable '#x'"):
        parse_submission(body, XML)


@pytest.mark.parametrize("command_line", ['"" x.exe', '""'])
def test_a_ccs_command_line_that_names_no_program_is_refused(command_line: str) -> None:
    body = (b'<Job xmlns="https://www.microsoft.com/ComputeCluster/">'
            b'<Tasks><Task Name="t" CommandLine=\'' + command_line.encode() + b'\'/></Tasks></Job>')
    with pytest.raises(DocumentError, match="names no program"):
        parse_submission(body, XML)
