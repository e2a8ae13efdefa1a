"""Grid jobs from the grid JSON job description v2, validated with schemas/gridjob-v2.schema.json;
task records to JSON, valid against schemas/gridjob-task-record.schema.json.

`parse_grid_job` takes a job ({"version": 2, "tasks": [{"id", "definition"}], ...}) or a lone
task description (an object with "executable" and no "tasks": a job of one task, id "1").
Every way a document can be wrong is a DocumentError whose problems carry a JSON pointer
(`path`) and, for an attribute that is unknown, missing or wrong, its name (`attribute`); an
unknown attribute is refused by name, with the attribute it was probably meant to be. The rules
of the description are applied while the model is built (docs/gridjob.md).
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from datetime import datetime, timezone
from functools import cache
from typing import Any, Iterable

from jsonschema import Draft202012Validator, FormatChecker  # type: ignore[import-untyped]

from infosvc.codec.safexml import SCHEMA_DIR
from infosvc.errors import DocumentError, Problem
from infosvc.model.gridjob import (
    GridJob,
    GridTask,
    Requirements,
    StateChange,
    TaskRecord,
    TaskState,
)

#: Default bound on one document's size.
MAX_DOCUMENT_BYTES = 1 << 20
#: Bound on how deeply objects and arrays nest (a job needs 5 levels plus what meta holds).
MAX_DEPTH = 64
#: At most this many problems are reported for one document.
MAX_PROBLEMS = 50
#: The id a lone task description gets as the one task of its job.
LONE_TASK_ID = "1"

JOB_SCHEMA = "gridjob-v2.schema.json"
RECORD_SCHEMA = "gridjob-task-record.schema.json"

# A URL starts with a scheme (RFC 3986: a letter, then letters, digits, + - .) and a colon. One
# letter is not taken for a scheme, so that a drive letter (C:/data) stays a path.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)\Z")

FORMATS = FormatChecker(formats=())


def _date_time(value: object) -> bool:
    return not isinstance(value, str) or bool(_RFC3339.match(value))


def _uri(value: object) -> bool:
    return not isinstance(value, str) or (is_url(value) and not any(c.isspace() for c in value))


FORMATS.checks("date-time")(_date_time)
FORMATS.checks("uri")(_uri)


def is_url(value: str) -> bool:
    """Whether `value` is a URL (starts with a scheme of two or more characters) rather than a path."""
    return bool(_URL.match(value))


@cache
def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
    return schema


@cache
def _validator(name: str, definition: str | None = None) -> Any:
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    schema = _schema(name)
    registry: Any = Registry().with_resource(schema["$id"], DRAFT202012.create_resource(schema))
    target = schema if definition is None else {"$ref": f"{schema['$id']}#/$defs/{definition}"}
    return Draft202012Validator(target, registry=registry, format_checker=FORMATS)


# --- reading -----------------------------------------------------------------------------------


def _pointer(parts: Iterable[object]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DocumentError(f"attribute '{key}' is given twice in one object", attribute=key)
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise DocumentError(f"{name} is not a JSON number")


def _tree_problem(value: Any, limit: int) -> str | None:
    """What is wrong with a parsed document that the parser let through: nesting deeper than
    `limit`, or a string holding a lone surrogate (JSON's \\ud800 escapes, which are not text).
    Iterative: no recursion to exhaust."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"holds a string with a lone surrogate ({item[:40]!r}), which is not text"
        elif isinstance(item, (dict, list)):
            if depth > limit:
                return f"nests objects and arrays more than {limit} deep"
            if isinstance(item, dict):
                stack.extend((key, depth) for key in item)
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)
    return None


def load_json(data: bytes | str, *, max_bytes: int = MAX_DOCUMENT_BYTES, what: str = "grid job") -> Any:
    """`data` parsed as JSON (UTF-8), or DocumentError: too big, not UTF-8, not JSON (with its
    line and column), an attribute given twice in one object, NaN / Infinity, too deeply nested."""
    size = len(data.encode("utf-8") if isinstance(data, str) else data)
    if size > max_bytes:
        raise DocumentError(f"{what} is {size} bytes, over the limit of {max_bytes} bytes")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DocumentError(f"{what} is not UTF-8: byte {exc.start} cannot be read") from None
    if not data.strip():
        raise DocumentError(f"{what} is empty")
    try:
        value = json.loads(data, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except DocumentError as exc:  # from the hooks: say what the document is
        raise DocumentError(f"{what}: {exc.first.message}", attribute=exc.first.attribute) from None
    except json.JSONDecodeError as exc:
        raise DocumentError(f"{what} is not valid JSON: {exc.msg} at column {exc.colno}",
                            line=exc.lineno) from None
    except RecursionError:
        raise DocumentError(f"{what} nests objects and arrays more than {MAX_DEPTH} deep") from None
    except ValueError as exc:  # an integer with more digits than Python converts: said in the client's terms
        digits = sys.get_int_max_str_digits()
        said = f"a number has more than {digits} digits" if "digits" in str(exc) else str(exc)
        raise DocumentError(f"{what} cannot be read: {said}") from None
    if (problem := _tree_problem(value, MAX_DEPTH)) is not None:
        raise DocumentError(f"{what} {problem}")
    return value


_TYPE_WORDS = {"object": "an object", "array": "a list", "string": "a string", "integer": "an integer",
               "number": "a number", "boolean": "true or false", "null": "null"}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _problems(error: Any) -> list[Problem]:
    """One jsonschema error as Problems in the user's terms."""
    parts = list(error.absolute_path)
    path = _pointer(parts)
    name = str(parts[-1]) if parts and isinstance(parts[-1], str) else None
    where = f"'{name}'" if name else ("the document" if not parts else f"item {path}")
    kind = error.validator
    if "propertyNames" in error.absolute_schema_path:  # a name in a map: environment, input_files, ...
        bad = str(error.instance)
        why = "an empty name" if not bad else "a name may not hold '=' or NUL"
        return [Problem(f"name {bad!r} in {where} is not allowed: {why}", attribute=bad,
                        path=_pointer([*parts, bad]))]
    if kind == "additionalProperties" and isinstance(error.instance, dict):
        known = sorted(error.schema.get("properties", {}))
        out = []
        for key in error.instance:
            if key in known:
                continue
            hint = difflib.get_close_matches(key, known, n=1)
            message = f"unknown attribute '{key}'" + (f" (did you mean '{hint[0]}'?)" if hint else "")
            if "definition" in known and key in _schema(JOB_SCHEMA)["$defs"]["TaskDescription"]["properties"]:
                message += "; a task's description goes under 'definition'"
            out.append(Problem(message, attribute=key, path=_pointer([*parts, key])))
        return out
    if kind == "required":
        return [Problem(f"missing attribute '{key}'" + (f" in {path}" if path else ""), attribute=key,
                        path=_pointer([*parts, key]))
                for key in error.validator_value if isinstance(error.instance, dict) and key not in error.instance]
    if kind == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        words = " or ".join(_TYPE_WORDS.get(str(w), str(w)) for w in wanted)
        got = _TYPE_WORDS[_json_type(error.instance)]
        return [Problem(f"{where} must be {words}, not {got}", attribute=name, path=path)]
    if kind == "const":
        return [Problem(f"{where} must be {json.dumps(error.validator_value)}, not {json.dumps(error.instance)}",
                        attribute=name, path=path)]
    if kind == "minItems" and error.validator_value == 1:
        return [Problem(f"{where} must not be empty", attribute=name, path=path)]
    if kind in ("minLength",) and error.validator_value == 1:
        return [Problem(f"{where} must not be empty", attribute=name, path=path)]
    if kind == "format" and error.validator_value == "uri":
        return [Problem(f"{where} must be an absolute URI (with a scheme), not {error.instance!r}",
                        attribute=name, path=path)]
    return [Problem(f"{where}: {error.message}", attribute=name, path=path)]


def _order(error: Any) -> tuple[list[tuple[int, str]], int]:
    # Document order; within one object, unknown attributes first (they explain what is missing).
    return ([(0, f"{p:012d}") if isinstance(p, int) else (1, p) for p in error.absolute_path],
            0 if error.validator == "additionalProperties" else 1)


def validate(value: Any, validator: Any, what: str) -> None:
    """DocumentError listing every problem jsonschema finds with `value`, in document order."""
    problems: list[Problem] = []
    for error in sorted(validator.iter_errors(value), key=_order):
        problems.extend(_problems(error))
        if len(problems) >= MAX_PROBLEMS:
            break
    if problems:
        first, *more = problems[:MAX_PROBLEMS]
        first = Problem(f"{what}: {first.message}", first.line, first.element, first.attribute, first.path)
        raise DocumentError(first, more=more)


def parse_grid_job(data: bytes | str, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> GridJob:
    """A GridJob from a grid JSON job description v2 (a job, or a lone task description)."""
    value = load_json(data, max_bytes=max_bytes)
    if isinstance(value, dict) and "tasks" not in value and "executable" in value:
        validate(value, _validator(JOB_SCHEMA, "TaskDescription"), "task description")
        return job_from_json({"version": value["version"], "tasks": [{"id": LONE_TASK_ID, "definition": value}]},
                             lone=True)
    validate(value, _validator(JOB_SCHEMA), "grid job")
    return job_from_json(value)


def _requirements(value: dict[str, Any] | None) -> Requirements:
    if not value:
        return Requirements()
    hostname = value.get("hostname")
    return Requirements(hostname=tuple(hostname) if hostname is not None else None, lrms=value.get("lrms"),
                        fork=value.get("fork"), queue=value.get("queue"))


def storage_base(value: str) -> str:
    """A default_storage_base as a directory: with a final '/'."""
    return value if value.endswith("/") else value + "/"


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4: '.' and '..' segments taken out (never above the root)."""
    out: list[str] = []
    segments = path.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == ".":
            if last:
                out.append("")
        elif segment == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/".join(out)


def resolve(location: str, base: str | None) -> str | None:
    """`location` as a URL: itself if it is one, else the path resolved against `base` (RFC 3986
    reference resolution, `base` taken as a directory: 'a.txt' goes under it, '/a.txt' to the root
    of its authority); None if it is a path and there is no base."""
    if is_url(location):
        return location
    if base is None:
        return None
    # The base's query and fragment are no part of a directory.
    base = storage_base(re.split(r"[?#]", base, maxsplit=1)[0])
    scheme, _, rest = base.partition(":")
    if rest.startswith("//"):
        slash = rest.find("/", 2)
        authority, base_path = (rest, "/") if slash < 0 else (rest[:slash], rest[slash:])
    else:
        authority, base_path = "", rest
    if location.startswith("/"):
        path = location
    else:
        path = base_path[: base_path.rfind("/") + 1] + location
    return f"{scheme}:{authority}{_remove_dot_segments(path)}"


def _task(task_id: str, definition: dict[str, Any], job_base: str | None, job_requirements: Requirements,
          pointer: str) -> GridTask:
    environment: dict[str, str] = {}
    written: dict[str, str] = {}
    for name, value in definition.get("environment", {}).items():
        upper = name.upper()
        if upper in written:
            raise DocumentError(f"grid job: environment variables '{written[upper]}' and '{name}' are both {upper} "
                                "once upper-cased", attribute=name, path=f"{pointer}/environment{_pointer([name])}")
        written[upper] = name
        environment[upper] = value
    base = definition.get("default_storage_base", job_base)
    ignored: list[str] = []

    def located(where: str, value: str) -> str | None:
        url = resolve(value, base)
        if url is None:
            ignored.append(f"{where}: {value!r} is a path and no default_storage_base is given")
        return url

    files: dict[str, dict[str, str]] = {"input_files": {}, "output_files": {}}
    for attribute, out in files.items():
        for node_path, value in definition.get(attribute, {}).items():
            if (url := located(f"{attribute} {node_path}", value)) is not None:
                out[node_path] = url
    streams = {name: located(name, definition[name]) if name in definition else None
               for name in ("stdin", "stdout", "stderr")}
    return GridTask(
        id=task_id,
        executable=definition["executable"],
        arguments=tuple(definition.get("arguments", ())),
        environment=environment,
        count=int(definition["count"]) if "count" in definition else None,  # 2.0 is an integer to JSON Schema
        stdin=streams["stdin"], stdout=streams["stdout"], stderr=streams["stderr"],
        input_files=files["input_files"], output_files=files["output_files"],
        default_storage_base=base,
        max_success_code=int(definition.get("max_success_code", 0)),
        requirements=job_requirements.merged(_requirements(definition.get("requirements"))),
        description=definition.get("description"),
        meta=definition.get("meta"),
        ignored=tuple(ignored),
        definition=json.dumps(definition, ensure_ascii=False, separators=(",", ":")),
    )


def job_from_json(value: dict[str, Any], *, lone: bool = False) -> GridJob:
    """The model of a job that is valid against the schema; DocumentError for what the schema
    cannot say (a task id given twice, environment names that collide once upper-cased)."""
    job_base = value.get("default_storage_base")
    job_requirements = _requirements(value.get("requirements"))
    seen: dict[str, int] = {}
    for index, entry in enumerate(value["tasks"]):
        if entry["id"] in seen:
            raise DocumentError(f"grid job: task id '{entry['id']}' is given twice (tasks {seen[entry['id']]} "
                                f"and {index})", attribute="id", path=f"/tasks/{index}/id")
        seen[entry["id"]] = index
    tasks: list[GridTask] = []
    for index, entry in enumerate(value["tasks"]):
        pointer = "" if lone else f"/tasks/{index}/definition"
        tasks.append(_task(entry["id"], entry["definition"], job_base, job_requirements, pointer))
    return GridJob(tasks=tuple(tasks), default_storage_base=job_base, requirements=job_requirements,
                   version=int(value["version"]))


# --- task records ------------------------------------------------------------------------------


def _timestamp(when: datetime) -> str:
    """RFC 3339, in UTC with a Z, to the microsecond when there is one."""
    text = when.astimezone(timezone.utc).isoformat()
    return text.replace("+00:00", "Z")


def record_to_json(record: TaskRecord) -> dict[str, Any]:
    """`record` as the record schema describes it; checked against schemas/gridjob-task-record.schema.json
    (a failure there is a bug here, so it raises ValueError, not DocumentError)."""
    out: dict[str, Any] = {"created": _timestamp(record.created)}
    if record.modified is not None:
        out["modified"] = _timestamp(record.modified)
    out["job"] = record.job
    out["definition"] = record.definition
    out["state"] = [{"s": change.s.value, "ts": _timestamp(change.ts)} for change in record.state]
    errors = list(_validator(RECORD_SCHEMA).iter_errors(out))
    if errors:
        raise ValueError(f"task record does not match its schema: {errors[0].message}")
    return out


def _parse_time(text: str, path: str) -> datetime:
    # RFC 3339 allows any number of fractional digits; Python reads up to six.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text.replace("Z", "+00:00").replace("z", "+00:00"))
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise DocumentError(f"task record: {text!r} is not a time that can be read", path=path) from None


def record_from_json(data: bytes | str | dict[str, Any]) -> TaskRecord:
    """A TaskRecord from its JSON, validated with the record schema (DocumentError if it is not valid)."""
    value = data if isinstance(data, dict) else load_json(data, what="task record")
    validate(value, _validator(RECORD_SCHEMA), "task record")
    return TaskRecord(
        job=value["job"], definition=value["definition"], created=_parse_time(value["created"], "/created"),
        modified=_parse_time(value["modified"], "/modified") if "modified" in value else None,
        state=tuple(StateChange(TaskState(item["s"]), _parse_time(item["ts"], f"/state/{i}/ts"))
                    for i, item in enumerate(value["state"])),
    )
