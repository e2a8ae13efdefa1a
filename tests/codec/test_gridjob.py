"""Grid JSON job description v2: the seed's examples, each rule of the
description, the fork rule, every kind of bad input, and task records with their history.

The seed's examples are kept as written in tests/fixtures/gridjob/ (*-corrected.json are the
same examples with the one mistake each mended); docs/gridjob.md gives the decisions tested here.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from itertools import product
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker

from infosvc.codec.gridjob_json import (
    MAX_DOCUMENT_BYTES,
    is_url,
    parse_grid_job,
    record_from_json,
    record_to_json,
    resolve,
)
from infosvc.errors import DocumentError
from infosvc.model.gridjob import (
    TRANSITIONS,
    Constraints,
    GridJob,
    Requirements,
    TaskState,
    TransitionError,
    admits,
    new_record,
    transition,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "gridjob"
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)

# jsonschema checks "date-time" and "uri" only with optional packages; check them here instead.
FORMATS = FormatChecker(formats=())
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)\Z")
FORMATS.checks("date-time")(lambda v: not isinstance(v, str) or bool(_RFC3339.match(v)))
FORMATS.checks("uri")(lambda v: not isinstance(v, str) or bool(re.match(r"[A-Za-z][A-Za-z0-9+.-]*:\S+\Z", v)))


def schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / "schemas" / name).read_text())
    Draft202012Validator.check_schema(loaded)
    return loaded


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def job(*definitions: dict[str, Any], **top: Any) -> str:
    """A job of tasks t0, t1, ... with these definitions (version 2 added unless given)."""
    tasks = [{"id": f"t{i}", "definition": {"version": 2, **d}} for i, d in enumerate(definitions)]
    return json.dumps({"version": 2, "tasks": tasks, **top})


def one(definition: dict[str, Any], **top: Any) -> Any:
    return parse_grid_job(job({"executable": "/bin/true", **definition}, **top)).tasks[0]


def refused(document: str | bytes, **kwargs: Any) -> DocumentError:
    with pytest.raises(DocumentError) as caught:
        parse_grid_job(document, **kwargs)
    return caught.value


# --- the schemas ---------------------------------------------------------------------------------


def _objects(node: Any, where: str = "") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append((where, node))
        for key, value in node.items():
            found.extend(_objects(value, f"{where}/{key}"))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.extend(_objects(value, f"{where}/{i}"))
    return found


def test_schemas_are_2020_12_and_closed_where_the_spec_says_so() -> None:
    gridjob = schema("gridjob-v2.schema.json")
    record = schema("gridjob-task-record.schema.json")
    assert gridjob["$schema"] == record["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    # Every object with named attributes takes no others; the free-form ones are the maps
    # (environment, file lists: names are the user's) and meta (anything at all).
    for where, node in _objects(gridjob):
        if "properties" in node:
            assert node.get("additionalProperties") is False, where
        else:
            assert where.endswith(("/environment", "/Files", "/meta")), where
    closed = {w for w, n in _objects(record) if n.get("additionalProperties") is False}
    assert closed == {""}  # the record itself; a state entry may carry more, as in the seed
    assert record["required"] == ["created", "job", "definition", "state"]
    assert record["properties"]["state"]["items"]["properties"]["s"]["enum"] == [s.value for s in TaskState]


def test_the_corrected_seed_examples_are_valid_against_the_schema_as_published() -> None:
    validator = Draft202012Validator(schema("gridjob-v2.schema.json"), format_checker=FORMATS)
    for name in ("files-corrected.json", "requirements-job-level-corrected.json",
                 "requirements-task-level-corrected.json"):
        assert list(validator.iter_errors(json.loads(fixture(name)))) == [], name
    assert not validator.is_valid(json.loads(fixture("files-as-published.json")))


# --- the seed's examples -------------------------------------------------------------------------


def test_environment_example_is_a_lone_task_with_upper_cased_names() -> None:
    parsed = parse_grid_job(fixture("environment.json"))
    (task,) = parsed.tasks
    assert task.id == "1"
    assert task.executable == "/usr/bin/env"
    assert task.environment == {"FOO": "bar", "QUX": "XyZzy"}  # values as written
    assert not task.mpi and task.max_success_code == 0
    assert json.loads(task.definition) == json.loads(fixture("environment.json"))


def test_files_example_as_published_is_refused_naming_the_misspelling() -> None:
    error = refused(fixture("files-as-published.json"))
    assert error.attribute == "ouput_files"
    assert error.first.path == "/tasks/0/definition/ouput_files"
    assert "unknown attribute 'ouput_files'" in str(error)
    assert "did you mean 'output_files'" in str(error)
    assert len(error.problems) == 1
    assert error.as_json()["detail"][0]["path"] == "/tasks/0/definition/ouput_files"


def test_files_example_corrected_resolves_against_the_right_base() -> None:
    parsed = parse_grid_job(fixture("files-corrected.json"))
    a, b = parsed.tasks
    assert parsed.default_storage_base == "gsiftp://example.org/my/files/"
    assert a.input_files == {
        "hello.txt": "gsiftp://example.org/my/files/hello.txt",
        "foo.txt": "gsiftp://example.org/bar.txt",  # an absolute path: from the root of the base's host
        "qux": "gsiftp://example.org/my/directory/qux/",  # a URL as it is
    }
    assert a.output_files == {"qux/test.txt": "gsiftp://example.org/my/output/117/test.txt"}
    assert a.arguments == ("hello.txt", "qux/test.txt")
    # b's own base wins over the job's.
    assert b.default_storage_base == "gsiftp://example.org/other/files/"
    assert b.input_files == {"hello.txt": "gsiftp://example.org/other/files/hello.txt",
                             "foo.txt": "gsiftp://example.org/bar.txt"}
    assert a.ignored == b.ignored == ()


@pytest.mark.parametrize("name", ["requirements-job-level.json", "requirements-task-level.json"])
def test_task_entry_with_the_description_on_it_is_refused(name: str) -> None:
    # The requirements examples put executable / requirements on the task entry, not under
    # definition: refused, naming the first attribute that is out of place (docs/gridjob.md).
    error = refused(fixture(name))
    assert error.attribute == "executable"
    assert all("goes under" not in str(p) for p in refused(job({"executable": "e"}).replace(
        '"definition"', '"name": "x", "definition"')).problems)
    assert error.first.path == "/tasks/0/executable"
    assert "goes under 'definition'" in str(error)
    named = {p.attribute: p.path for p in error.problems}
    assert named == {"executable": "/tasks/0/executable", "requirements": "/tasks/0/requirements",
                     "definition": "/tasks/0/definition"}


def test_requirements_examples_corrected_give_the_same_requirements() -> None:
    from_job = parse_grid_job(fixture("requirements-job-level-corrected.json")).tasks[0]
    from_task = parse_grid_job(fixture("requirements-task-level-corrected.json")).tasks[0]
    assert from_job.requirements == from_task.requirements == Requirements(lrms="Cleo", queue="long")
    assert from_job.constraints == Constraints(lrms="Cleo", queue="long", fork=False)


# --- the rules of the description ----------------------------------------------------------------


def test_environment_names_upper_cased_and_collisions_refused() -> None:
    assert one({"environment": {"path_extra": "/x", "Mixed_Case": "v", "ALREADY": "A"}}).environment == {
        "PATH_EXTRA": "/x", "MIXED_CASE": "v", "ALREADY": "A"}
    error = refused(job({"executable": "e", "environment": {"foo": "1", "FOO": "2"}}))
    assert error.attribute == "FOO" and error.first.path == "/tasks/0/definition/environment/FOO"
    assert "'foo' and 'FOO' are both FOO" in str(error)
    for bad, why in (("A=B", "may not hold '='"), ("", "an empty name"), ("NUL\u0000", "or NUL")):
        error = refused(job({"executable": "e", "environment": {bad: "x"}}))
        assert error.attribute == bad and error.first.path == f"/tasks/0/definition/environment/{bad}"
        assert f"name {bad!r} in 'environment' is not allowed" in str(error) and why in str(error)
    error = refused(job({"executable": "e", "input_files": {"": "x"}}))
    assert "name '' in 'input_files' is not allowed: an empty name" in str(error)


@pytest.mark.parametrize(("count", "mpi", "processors"),
                         [(None, False, 1), (1, False, 1), (0, False, 1), (-3, False, 1), (2, True, 2),
                          (64, True, 64), (2.0, True, 2)])
def test_count_above_one_is_mpi(count: int | None, mpi: bool, processors: int) -> None:
    task = one({} if count is None else {"count": count})
    assert task.mpi is mpi and task.processors == processors
    assert task.count is None or type(task.count) is int


def test_max_success_code_default_and_unsigned_exit_codes() -> None:
    assert one({}).max_success_code == 0
    assert one({}).succeeded(0) and not one({}).succeeded(1)
    lenient = one({"max_success_code": 3})
    assert lenient.succeeded(3) and not lenient.succeeded(4)
    assert not lenient.succeeded(-1)  # -1 read unsigned is 2^32 - 1
    assert one({"max_success_code": 4294967295}).succeeded(-1)
    for bad in (-1, 4294967296, 1.5, "0", True):
        error = refused(job({"executable": "e", "max_success_code": bad}))
        assert error.attribute == "max_success_code" and error.first.path == "/tasks/0/definition/max_success_code"


def test_stream_and_file_resolution() -> None:
    base = "gsiftp://se.example.org:2811/data/run"  # no final slash: still a directory
    task = one({"stdin": "in.txt", "stdout": "/abs/out.txt", "stderr": "https://h.example/err",
                "input_files": {"a": "./x/../y.dat", "b": "../../../../up.dat", "c": "sub/"},
                "default_storage_base": base})
    assert task.stdin == "gsiftp://se.example.org:2811/data/run/in.txt"
    assert task.stdout == "gsiftp://se.example.org:2811/abs/out.txt"
    assert task.stderr == "https://h.example/err"
    assert task.input_files == {"a": "gsiftp://se.example.org:2811/data/run/y.dat",
                                "b": "gsiftp://se.example.org:2811/up.dat",  # never above the root
                                "c": "gsiftp://se.example.org:2811/data/run/sub/"}


def test_paths_are_ignored_without_any_base_urls_are_not() -> None:
    task = one({"stdin": "in.txt", "stdout": "srm://se/out", "input_files": {"a": "a.txt", "b": "file:/b"},
                "output_files": {"c": "/c.txt"}})
    assert task.stdin is None and task.stdout == "srm://se/out"
    assert task.input_files == {"b": "file:/b"} and task.output_files == {}
    assert len(task.ignored) == 3 and all("no default_storage_base" in note for note in task.ignored)
    assert any("input_files a" in note for note in task.ignored)


def test_job_base_applies_where_the_task_has_none() -> None:
    parsed = parse_grid_job(job({"executable": "e", "stdin": "i"},
                                {"executable": "e", "stdin": "i", "default_storage_base": "http://b/"},
                                default_storage_base="http://a/x/"))
    assert [t.stdin for t in parsed.tasks] == ["http://a/x/i", "http://b/i"]


@pytest.mark.parametrize(("value", "url"), [
    ("gsiftp://h/p", True), ("file:/x", True), ("urn:x:y", True), ("HTTP://H/", True),
    ("hello.txt", False), ("/bar.txt", False), ("C:/data/x", False), ("dir/a:b", False),
    ("a b://x", False), ("", False), ("gsiftp://h/my file", True),
])
def test_what_counts_as_a_url(value: str, url: bool) -> None:
    assert is_url(value) is url


def test_resolve_edge_cases() -> None:
    assert resolve("x", None) is None
    assert resolve("s3://b/k", None) == "s3://b/k"
    assert resolve("x", "urn:store:") == "urn:store:/x"  # no authority: the path after the scheme
    assert resolve("x", "http://h") == "http://h/x"  # a base with no path at all
    assert resolve("x", "http://h/d/?q=1") == "http://h/d/x"  # a base's query is not a directory
    assert resolve("x", "http://h/d?q=1#f") == "http://h/d/x"
    assert resolve(".", "http://h/d/") == "http://h/d/"
    assert resolve("a/./b/..", "http://h/d/") == "http://h/d/a/"


def test_bad_storage_base_refused() -> None:
    for where in ("job", "task"):
        document = (job({"executable": "e"}, default_storage_base="relative/dir") if where == "job"
                    else job({"executable": "e", "default_storage_base": "relative/dir"}))
        error = refused(document)
        assert error.attribute == "default_storage_base" and "absolute URI" in str(error)
    assert "absolute URI" in str(refused(job({"executable": "e"}, default_storage_base="http://h/a dir/")))


# --- requirements and constraints ----------------------------------------------------------------


def test_requirements_merge_task_over_job_key_by_key() -> None:
    job_level = {"hostname": ["a", "b"], "lrms": "PBS", "fork": True, "queue": "short"}
    parsed = parse_grid_job(job({"executable": "e"},
                                {"executable": "e", "requirements": {"queue": "long", "fork": False}},
                                {"executable": "e", "requirements": {"hostname": ["c"]}},
                                requirements=job_level))
    whole, queue_fork, hosts = (t.requirements for t in parsed.tasks)
    assert whole == Requirements(hostname=("a", "b"), lrms="PBS", fork=True, queue="short")
    assert queue_fork == Requirements(hostname=("a", "b"), lrms="PBS", fork=False, queue="long")
    assert hosts == Requirements(hostname=("c",), lrms="PBS", fork=True, queue="short")  # the list is replaced
    assert parsed.requirements == whole
    assert Requirements().merged(Requirements()).constraints() == Constraints()


_FORK_TABLE = {
    # (lrms, fork, CE's LRMS) -> admitted
    (None, None, "Fork"): False, (None, False, "Fork"): False, (None, True, "Fork"): True,
    ("Fork", None, "Fork"): True, ("Fork", False, "Fork"): True, ("Fork", True, "Fork"): True,
    ("PBS", None, "Fork"): False, ("PBS", False, "Fork"): False, ("PBS", True, "Fork"): False,
    (None, None, "PBS"): True, (None, False, "PBS"): True, (None, True, "PBS"): True,
    ("Fork", None, "PBS"): False, ("Fork", False, "PBS"): False, ("Fork", True, "PBS"): False,
    ("PBS", None, "PBS"): True, ("PBS", False, "PBS"): True, ("PBS", True, "PBS"): True,
}


@pytest.mark.parametrize(("lrms", "fork", "ce"), list(product([None, "Fork", "PBS"], [None, False, True],
                                                               ["Fork", "PBS"])))
def test_fork_rule_truth_table(lrms: str | None, fork: bool | None, ce: str) -> None:
    requirements: dict[str, Any] = {}
    if lrms is not None:
        requirements["lrms"] = lrms
    if fork is not None:
        requirements["fork"] = fork
    task = one({"requirements": requirements} if requirements else {})
    reasons = admits(task.constraints, ce, "batch", "node1")
    assert (reasons == []) is _FORK_TABLE[(lrms, fork, ce)], reasons
    assert len(reasons) <= 1  # one reason, not the fork rule and the lrms mismatch both


def test_admits_says_why_in_user_words() -> None:
    constraints = Requirements(hostname=("node1.example.org", "node2"), lrms="pbs", queue="long").constraints()
    assert admits(constraints, "PBS", "long", "NODE1.example.org.") == []  # host names and LRMS types: no case
    reasons = admits(constraints, "Cleo", "short", "node3")
    assert reasons == [
        "host node3 is not among the hosts the task may run on (node1.example.org, node2)",
        "the task asks for LRMS pbs; this CE's LRMS is Cleo",
        "the task asks for queue long; this CE's queue is short",
    ]
    assert admits(constraints, "PBS", "Long", "node2") == ["the task asks for queue long; this CE's queue is Long"]
    assert "fork to true" in admits(Constraints(), "fork", "q", "h")[0]
    assert admits(Constraints(), "Cleo", "q", "h") == []


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("document", "attribute", "path"), [
    ({"version": 2, "tasks": [], "colour": 1}, "colour", "/colour"),
    ({"version": 2, "tasks": [{"id": "a", "definition": {"version": 2, "executable": "e"}, "name": "x"}]},
     "name", "/tasks/0/name"),
    ({"version": 2, "tasks": [{"id": "a", "definition": {"version": 2, "executable": "e", "cont": 2}}]},
     "cont", "/tasks/0/definition/cont"),
    ({"version": 2, "tasks": [{"id": "a", "definition": {"version": 2, "executable": "e",
                                                          "requirements": {"memory": 4}}}]},
     "memory", "/tasks/0/definition/requirements/memory"),
    ({"version": 2, "requirements": {"queues": "x"}, "tasks": [{"id": "a", "definition": {"version": 2,
                                                                                          "executable": "e"}}]},
     "queues", "/requirements/queues"),
])
def test_unknown_attribute_refused_by_name_at_each_level(document: dict[str, Any], attribute: str,
                                                         path: str) -> None:
    error = refused(json.dumps(document))
    assert error.attribute == attribute and error.first.path == path
    assert f"unknown attribute '{attribute}'" in str(error)


def test_unknown_attribute_in_a_lone_task_description() -> None:
    error = refused(json.dumps({"version": 2, "executable": "e", "ouput_files": {}}))
    assert error.attribute == "ouput_files" and error.first.path == "/ouput_files"
    assert str(error).startswith("task description: unknown attribute 'ouput_files'")


@pytest.mark.parametrize(("definition", "attribute", "words"), [
    ({"executable": 1}, "executable", "must be a string, not an integer"),
    ({"executable": ""}, "executable", "must not be empty"),
    ({"executable": "e", "arguments": "a b"}, "arguments", "must be a list, not a string"),
    ({"executable": "e", "arguments": ["a", 1]}, None, "must be a string, not an integer"),
    ({"executable": "e", "environment": ["A=1"]}, "environment", "must be an object, not a list"),
    ({"executable": "e", "environment": {"A": 1}}, "A", "must be a string, not an integer"),
    ({"executable": "e", "count": "2"}, "count", "must be an integer, not a string"),
    ({"executable": "e", "count": 1.5}, "count", "must be an integer, not a number"),
    ({"executable": "e", "input_files": {"a": 7}}, "a", "must be a string"),
    ({"executable": "e", "input_files": {"a": ""}}, "a", "must not be empty"),
    ({"executable": "e", "stdout": None}, "stdout", "must be a string, not null"),
    ({"executable": "e", "meta": []}, "meta", "must be an object, not a list"),
    ({"executable": "e", "description": 5}, "description", "must be a string"),
    ({"executable": "e", "requirements": {"hostname": "node1"}}, "hostname", "must be a list, not a string"),
    ({"executable": "e", "requirements": {"hostname": []}}, "hostname", "must not be empty"),
    ({"executable": "e", "requirements": {"fork": "yes"}}, "fork", "must be true or false, not a string"),
    ({"executable": "e", "requirements": {"lrms": 1}}, "lrms", "must be a string"),
    ({"executable": "e", "requirements": []}, "requirements", "must be an object, not a list"),
    ({"executable": "e", "version": 1}, "version", "must be 2, not 1"),
    ({"executable": "e", "version": "2"}, "version", 'must be 2, not "2"'),
    ({}, "executable", "missing attribute 'executable'"),
])
def test_wrong_values_in_a_task_description(definition: dict[str, Any], attribute: str | None,
                                            words: str) -> None:
    error = refused(job(definition))
    assert words in str(error), str(error)
    assert error.attribute == attribute
    assert error.first.path is not None and error.first.path.startswith("/tasks/0/definition")


@pytest.mark.parametrize(("document", "path", "words"), [
    ({"tasks": [{"id": "a", "definition": {"version": 2, "executable": "e"}}]}, "/version",
     "missing attribute 'version'"),
    ({"version": 3, "tasks": [{"id": "a", "definition": {"version": 2, "executable": "e"}}]}, "/version",
     "must be 2, not 3"),
    ({"version": 2}, "/tasks", "missing attribute 'tasks'"),
    ({"version": 2, "tasks": []}, "/tasks", "'tasks' must not be empty"),
    ({"version": 2, "tasks": {"a": {}}}, "/tasks", "must be a list, not an object"),
    ({"version": 2, "tasks": ["a"]}, "/tasks/0", "must be an object, not a string"),
    ({"version": 2, "tasks": [{"id": 1, "definition": {"version": 2, "executable": "e"}}]}, "/tasks/0/id",
     "must be a string, not an integer"),
    ({"version": 2, "tasks": [{"id": "", "definition": {"version": 2, "executable": "e"}}]}, "/tasks/0/id",
     "must not be empty"),
    ({"version": 2, "tasks": [{"id": "a", "definition": "{}"}]}, "/tasks/0/definition",
     "must be an object, not a string"),
    ({"version": 2, "tasks": [{"definition": {"version": 2, "executable": "e"}}]}, "/tasks/0/id",
     "missing attribute 'id'"),
    ({"version": 2, "tasks": [{"id": "a", "definition": {"version": 2, "executable": "e"}}],
      "requirements": "PBS"}, "/requirements", "must be an object, not a string"),
    ([1, 2], "", "the document must be an object, not a list"),
    ("job", "", "the document must be an object, not a string"),
])
def test_wrong_values_in_a_job(document: Any, path: str, words: str) -> None:
    error = refused(json.dumps(document))
    assert words in str(error), str(error)
    assert error.first.path == path


def test_every_problem_is_listed_in_document_order() -> None:
    error = refused(json.dumps({"version": 3, "tasks": [
        {"id": "a", "definition": {"version": 2, "executable": 1, "x": 1}},
        {"id": "b", "definition": {"version": 2, "count": "n"}}]}))
    assert [p.path for p in error.problems] == [
        "/tasks/0/definition/x", "/tasks/0/definition/executable", "/tasks/1/definition/executable",
        "/tasks/1/definition/count", "/version"]


def test_duplicate_task_ids_refused() -> None:
    error = refused(job({"executable": "e"}, {"executable": "e"}, {"executable": "e"}).replace('"t2"', '"t0"'))
    assert error.first.path == "/tasks/2/id" and error.attribute == "id"
    assert "task id 't0' is given twice (tasks 0 and 2)" in str(error)


def test_not_json_names_line_and_column() -> None:
    error = refused('{"version": 2,\n "tasks": [\n  {"id": "a",, }]}')
    assert error.line == 3 and str(error).endswith("at column 14 (line 3)") and "not valid JSON" in str(error)
    assert "empty" in str(refused(b"  \n"))
    assert "not UTF-8" in str(refused(b'{"version": 2, "x": "\xff"}'))
    assert "NaN is not a JSON number" in str(refused('{"version": 2, "tasks": [], "count": NaN}'))
    assert "Infinity" in str(refused('{"version": 2, "executable": "e", "count": -Infinity}'))


def test_an_attribute_given_twice_in_one_object_is_refused() -> None:
    error = refused('{"version": 2, "executable": "/bin/a", "executable": "/bin/b"}')
    assert error.attribute == "executable" and "given twice" in str(error)


def test_huge_documents_refused_before_parsing() -> None:
    padding = "x" * MAX_DOCUMENT_BYTES
    error = refused(json.dumps({"version": 2, "executable": "e", "description": padding}))
    assert "over the limit of 1048576 bytes" in str(error)
    small = job({"executable": "e"})
    assert "over the limit of 10 bytes" in str(refused(small, max_bytes=10))
    assert parse_grid_job(small.encode(), max_bytes=len(small)).tasks[0].executable == "e"
    # Within the size bound but built to hurt: deep nesting, and a number of 10,000 digits.
    deep = '{"version": 2, "executable": "e", "meta": ' + '{"a": ' * 5000 + "1" + "}" * 5001
    assert "more than 64 deep" in str(refused(deep))
    assert "more than 64 deep" in str(refused("[" * 200_000 + "]" * 200_000))
    assert "cannot be read" in str(refused('{"version": 2, "executable": "e", "count": ' + "9" * 10_000 + "}"))
    assert "lone surrogate" in str(refused('{"version": 2, "executable": "e", "arguments": ["\\ud800"]}'))
    assert "lone surrogate" in str(refused('{"version": 2, "executable": "e", "meta": {"\\udfff": 1}}'))
    # A pair of surrogate escapes is one character, and fine.
    assert one({"arguments": ["\U0001d50a"]}).arguments == ("\U0001d50a",)


def test_many_tasks_within_the_bound_parse() -> None:
    definitions = [{"executable": "/bin/true", "stdin": f"in/{i}"} for i in range(2000)]
    parsed = parse_grid_job(job(*definitions, default_storage_base="gsiftp://se/base/"))
    assert len(parsed.tasks) == 2000 and parsed.task("t1999").stdin == "gsiftp://se/base/in/1999"
    with pytest.raises(KeyError):
        parsed.task("nope")


def test_many_problems_are_capped() -> None:
    definitions = [{"executable": i} for i in range(200)]
    error = refused(job(*definitions))
    assert len(error.problems) == 50


def test_meta_keeps_anything() -> None:
    meta = {"owner": "ann", "nested": {"list": [1, None, True], "x": 1.5}}
    assert one({"meta": meta, "description": "a test"}).meta == meta


# --- task records --------------------------------------------------------------------------------


def record_validator() -> Draft202012Validator:
    return Draft202012Validator(schema("gridjob-task-record.schema.json"), format_checker=FORMATS)


def test_task_record_life_valid_at_every_step() -> None:
    task = parse_grid_job(fixture("files-corrected.json")).tasks[0]
    record = new_record("https://infosvc.example/v1/jobs/42", task.definition, T0)
    assert record.current is TaskState.NEW and record.modified is None
    steps = ["pending", "running", "paused", "running", "finished"]
    validator = record_validator()
    out = record_to_json(record)
    assert out == {"created": "2026-11-22T12:00:00Z", "job": "https://infosvc.example/v1/jobs/42",
                   "definition": task.definition, "state": [{"s": "new", "ts": "2026-11-22T12:00:00Z"}]}
    for minutes, state in enumerate(steps, start=1):
        record = transition(record, state, T0 + timedelta(minutes=minutes, microseconds=5))
        out = record_to_json(record)
        assert list(validator.iter_errors(out)) == []
    assert [entry["s"] for entry in out["state"]] == ["new", *steps]
    assert out["modified"] == "2026-11-22T12:05:00.000005Z" == out["state"][-1]["ts"]
    assert record_from_json(json.dumps(out)) == record
    assert json.loads(out["definition"])["executable"] == "/bin/cp"


def test_times_in_other_zones_are_written_in_utc() -> None:
    moscow = timezone(timedelta(hours=3))
    record = new_record("urn:job:1", "{}", datetime(2026, 11, 22, 15, 0, tzinfo=moscow))
    assert record_to_json(record)["created"] == "2026-11-22T12:00:00Z"
    with pytest.raises(ValueError, match="time zone"):
        new_record("urn:job:1", "{}", datetime(2026, 11, 22, 12, 0))


@pytest.mark.parametrize(("source", "target"), [
    (s, t) for s in TaskState for t in TaskState if t not in TRANSITIONS[s]])
def test_transitions_not_allowed(source: TaskState, target: TaskState) -> None:
    record = new_record("urn:job:1", "{}", T0)
    path = {TaskState.NEW: [], TaskState.PENDING: ["pending"], TaskState.RUNNING: ["pending", "running"],
            TaskState.PAUSED: ["pending", "paused"], TaskState.FINISHED: ["pending", "running", "finished"],
            TaskState.ABORTED: ["aborted"]}[source]
    for state in path:
        record = transition(record, state, T0)
    assert record.current is source
    with pytest.raises(TransitionError, match=f"a {source.value} task cannot become {target.value}"):
        transition(record, target, T0)


def test_every_state_can_be_aborted_until_final() -> None:
    for state, allowed in TRANSITIONS.items():
        assert (TaskState.ABORTED in allowed) is (state not in (TaskState.FINISHED, TaskState.ABORTED))


def test_transition_refuses_unknown_states_and_going_back_in_time() -> None:
    record = transition(new_record("urn:job:1", "{}", T0), "pending", T0 + timedelta(seconds=10))
    with pytest.raises(TransitionError, match="is before the task became pending"):
        transition(record, "running", T0 + timedelta(seconds=9))
    with pytest.raises(TransitionError, match="'done' is not a task state"):
        transition(record, "done", T0 + timedelta(seconds=11))


def test_record_schema_keeps_the_seeds_constraints() -> None:
    good = record_to_json(new_record("urn:job:1", "{}", T0))
    validator = record_validator()
    assert validator.is_valid({**good, "state": [{"s": "new", "ts": good["created"], "by": "admin"}]})
    for bad in ({**good, "owner": "x"}, {k: v for k, v in good.items() if k != "job"},
                {**good, "state": [{"s": "done", "ts": good["created"]}]},
                {**good, "state": [{"s": "new"}]}, {**good, "created": "yesterday"},
                {**good, "definition": {"version": 2}}, {**good, "job": "not a uri"}):
        assert not validator.is_valid(bad), bad
        with pytest.raises(DocumentError):
            record_from_json(bad)
    precise = record_from_json({**good, "created": "2026-11-22t12:00:00.123456789z"})
    assert precise.created == T0.replace(microsecond=123456)
    assert record_from_json({**good, "created": "2026-11-22T15:00:00+03:00"}).created == T0
    late = pytest.raises(DocumentError, record_from_json, {**good, "created": "2026-13-40T12:00:00Z"}).value
    assert late.first.path == "/created"
    error = pytest.raises(DocumentError, record_from_json, {**good, "owner": "x"}).value
    assert error.attribute == "owner" and error.first.path == "/owner"


def test_parse_accepts_bytes_and_text_alike() -> None:
    text = fixture("files-corrected.json").decode()
    assert parse_grid_job(text) == parse_grid_job(text.encode()) == parse_grid_job(b"\xef\xbb\xbf" + text.encode())
    assert isinstance(parse_grid_job(text), GridJob)


_KEYS = st.sampled_from(["version", "tasks", "id", "definition", "executable", "arguments", "environment",
                         "count", "input_files", "output_files", "stdin", "stdout", "stderr", "meta",
                         "default_storage_base", "max_success_code", "requirements", "hostname", "lrms",
                         "fork", "queue", "a", ""])
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([2, "2", "x", "/p", "gsiftp://h/", "", "a=b"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_KEYS, children, max_size=5),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_any_json_is_a_job_or_a_document_error(value: Any) -> None:
    # Never anything but a GridJob or a DocumentError: no KeyError, TypeError, ... (a 5xx).
    try:
        parsed = parse_grid_job(json.dumps(value))
    except DocumentError as error:
        assert error.problems and all(p.message for p in error.problems)
    else:
        assert parsed.tasks and all(t.executable for t in parsed.tasks)


@pytest.mark.parametrize("name", ["vm,zzz", "vm zzz", "vm\tzzz", "vm.example\n"])
def test_a_hostname_is_one_name(name: str) -> None:
    # Host names went into one comma-delimited Node List, so "vm,zzz" let the job run on vm as
    # well (found in review); no host name holds a comma or white space.
    document = {"version": 2, "executable": "/bin/x", "requirements": {"hostname": [name]}}
    with pytest.raises(DocumentError, match="hostname"):
        parse_grid_job(json.dumps(document))


def test_admits_ignores_one_final_dot_as_the_matcher_does() -> None:
    from infosvc.model.gridjob import Constraints, admits

    assert admits(Constraints(hostnames=("vm.example.",)), "PBS", "q", "VM.example") == []
    assert admits(Constraints(hostnames=("vm.example..",)), "PBS", "q", "vm.example")  # one dot only
