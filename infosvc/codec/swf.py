"""The Standard Workload Format (Feitelson's Parallel Workloads Archive): a trace of jobs, one line
each of 18 whitespace-separated numbers, after a header of `; Key: value` comments.

`read_swf` reads a trace (plain or gzipped, by its first bytes) into its header and its records,
all 18 fields kept; a line that is not 18 numbers is reported with its line number and left out,
never a crash. What a simulation makes of the fields (processors, estimate, run time, the jobs it
skips) is the simulation's convention (docs/simulation.md), in infosvc.sched.simulation.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final, Iterator

__all__ = ["FIELDS", "SwfRecord", "SwfTrace", "parse_swf", "read_swf"]

#: The 18 fields, in order (SWF 2.2).
FIELDS: Final = ("job", "submit", "wait", "run_time", "allocated_processors", "average_cpu_time", "used_memory",
                 "requested_processors", "requested_time", "requested_memory", "status", "user", "group",
                 "executable", "queue", "partition", "preceding_job", "think_time")
#: Malformed lines kept for the report (the count is exact).
MAX_REPORTED: Final = 50
#: A longer line is malformed, and is read in pieces of this size rather than held whole (18
#: numbers take a few hundred characters; a gzipped trace may unpack to one line of gigabytes).
MAX_LINE: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class SwfRecord:
    """One job line: the 18 fields (-1: unknown), and the line it came from."""

    job: int
    submit: float
    wait: float
    run_time: float
    allocated_processors: int
    average_cpu_time: float
    used_memory: float
    requested_processors: int
    requested_time: float
    requested_memory: float
    status: int
    user: int
    group: int
    executable: int
    queue: int
    partition: int
    preceding_job: int
    think_time: float
    line: int = 0


#: `Key:` then a space or nothing: "http://..." on a continuation line is no key.
_KEY: Final = re.compile(r"([A-Za-z][A-Za-z0-9_]*):(?=\s|$)")
_INTEGER_FIELDS: Final = frozenset({"job", "allocated_processors", "requested_processors", "status", "user", "group",
                                    "executable", "queue", "partition", "preceding_job"})


@dataclass(slots=True)
class SwfTrace:
    """A trace: its header (`; Key: value`, continuation lines joined, a repeated key's values one a
    line), its records in file order, and the lines that were not records."""

    header: dict[str, str] = field(default_factory=dict)
    records: list[SwfRecord] = field(default_factory=list)
    malformed: int = 0
    problems: list[str] = field(default_factory=list)

    def header_int(self, key: str) -> int | None:
        """A header value as a whole number (MaxProcs, MaxNodes), None when absent or not one."""
        text = self.header.get(key, "").split()
        try:
            return int(text[0]) if text else None
        except ValueError:
            return None


def read_swf(path: str | Path) -> SwfTrace:
    """The trace in file `path`, gzipped or not; OSError when it cannot be read."""
    with open(path, "rb") as raw:
        start = raw.read(2)
        raw.seek(0)
        stream: IO[bytes] = gzip.GzipFile(fileobj=raw) if start == b"\x1f\x8b" else raw  # type: ignore[assignment]
        try:
            return parse_swf(io.TextIOWrapper(stream, encoding="utf-8", errors="replace"))
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:  # zlib.error: damaged compressed data
            raise OSError(f"{path}: not a readable gzip file: {exc}") from None


def _bounded_lines(lines: Iterator[str] | IO[str]) -> Iterator[tuple[int, str | None]]:
    """(number, line) of each line; None for a line longer than MAX_LINE, skipped in pieces."""
    if not hasattr(lines, "readline"):
        for number, line in enumerate(lines, 1):
            yield number, (line if len(line) <= MAX_LINE else None)
        return
    number = 0
    while line := lines.readline(MAX_LINE):
        number += 1
        if len(line) < MAX_LINE or line.endswith("\n"):
            yield number, line
            continue
        while (rest := lines.readline(MAX_LINE)) and not rest.endswith("\n"):
            pass
        yield number, None


def parse_swf(lines: Iterator[str] | IO[str]) -> SwfTrace:
    trace = SwfTrace()
    key: str | None = None
    for number, line in _bounded_lines(lines):
        if line is None:
            key = None
            trace.malformed += 1
            if len(trace.problems) < MAX_REPORTED:
                trace.problems.append(f"line {number}: longer than {MAX_LINE} characters")
            continue
        text = line.strip()
        if not text:
            continue
        if text.startswith(";"):
            key = _header_line(trace.header, text[1:].strip(), key)
            continue
        key = None
        record = _record(text, number)
        if isinstance(record, str):
            trace.malformed += 1
            if len(trace.problems) < MAX_REPORTED:
                trace.problems.append(f"line {number}: {record}")
            continue
        trace.records.append(record)
    return trace


def _header_line(header: dict[str, str], text: str, key: str | None) -> str | None:
    found = _KEY.match(text)
    if found is not None:
        name, value = found.group(1), text[found.end():].strip()
        header[name] = f"{header[name]}\n{value}" if name in header else value
        return name
    if key is not None and text:  # a continuation of the key above
        header[key] = f"{header[key]}\n{text}"
        return key
    return None


def _record(text: str, number: int) -> SwfRecord | str:
    words = text.split()
    if len(words) != len(FIELDS):
        return f"{len(words)} fields, not {len(FIELDS)}: {text[:80]!r}"
    values: dict[str, float | int] = {}
    for name, word in zip(FIELDS, words):
        try:
            value = float(word)
        except ValueError:
            return f"field {FIELDS.index(name) + 1} ({name}) is not a number: {word[:20]!r}"
        if value != value or value in (float("inf"), float("-inf")):
            return f"field {FIELDS.index(name) + 1} ({name}) is not a finite number: {word[:20]!r}"
        values[name] = int(value) if name in _INTEGER_FIELDS else value
    return SwfRecord(**values, line=number)  # type: ignore[arg-type]
