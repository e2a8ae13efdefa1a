"""The Standard Workload Format (Feitelson's Parallel Workloads Archive): a trace of jobs, one line
each of 18 whitespace-separated numbers, after a header of `; Key: value` comments.

`read_swf` reads a trace (plain or gzipped, by its first bytes) into its header and its records,
all 18 fields kept; a line of fewer than 18 numbers is reported with its line number and left out,
never a crash. Fields past the 18th (the MetaCentrum archive appends each job's node list, queue
and properties) are not SWF's: the 18 are read, the rest dropped and counted (`extra_fields`), to
be said once, as other simulators (Alea) do. A trace is read up to MAX_LINES lines and MAX_CHARS characters, blank and comment
lines included (a gzip of nothing but newlines unpacks to billions of them, read one by one):
past either, `parse_swf` stops and says so in `too_large`, and `read_swf` refuses the file as
unreadable. The caps are hundreds of times the project's real traces, and ten times a trace of a
million jobs. What a simulation makes of the fields (processors, estimate, run time, the jobs it
skips) is the simulation's convention (docs/simulation.md), in infosvc.sched.simulation.
"""

from __future__ import annotations

import gzip
import io
import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final, Iterator, NamedTuple

__all__ = ["FIELDS", "MAX_CHARS", "MAX_LINES", "SwfRecord", "SwfTrace", "parse_swf", "read_swf"]

#: The 18 fields, in order (SWF 2.2).
FIELDS: Final = ("job", "submit", "wait", "run_time", "allocated_processors", "average_cpu_time", "used_memory",
                 "requested_processors", "requested_time", "requested_memory", "status", "user", "group",
                 "executable", "queue", "partition", "preceding_job", "think_time")
#: Malformed lines kept for the report (the count is exact).
MAX_REPORTED: Final = 50
#: A longer line is malformed, and is read in pieces of this size rather than held whole (18
#: numbers take a few hundred characters; a gzipped trace may unpack to one line of gigabytes).
MAX_LINE: Final = 64 * 1024
#: The most lines a trace may have, blank and comment lines included (NASA iPSC: 18,239).
MAX_LINES: Final = 10_000_000
#: The most characters a trace may unpack to (NASA iPSC: 1.7 MB; a million jobs: about 100 MB).
MAX_CHARS: Final = 1 << 30


class SwfRecord(NamedTuple):
    """One job line: the 18 fields (-1: unknown), and the line it came from. A tuple: a trace's
    records are made by the hundred thousand, and a tuple is made in one call where a frozen
    dataclass sets each of its 19 fields in turn."""

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
_INTEGER_AT: Final = tuple(at for at, name in enumerate(FIELDS) if name in _INTEGER_FIELDS)


@dataclass(slots=True)
class SwfTrace:
    """A trace: its header (`; Key: value`, continuation lines joined, a repeated key's values one a
    line), its records in file order, and the lines that were not records."""

    header: dict[str, str] = field(default_factory=dict)
    records: list[SwfRecord] = field(default_factory=list)
    malformed: int = 0
    problems: list[str] = field(default_factory=list)
    #: job lines that had fields past the 18th, dropped (the first such line's number, for the warning)
    extra_fields: int = 0
    first_extra_line: int | None = None
    #: Why reading stopped before the end (a cap), else None.
    too_large: str | None = None

    def header_int(self, key: str) -> int | None:
        """A header value as a whole number (MaxProcs, MaxNodes), None when absent or not one."""
        text = self.header.get(key, "").split()
        try:
            return int(text[0]) if text else None
        except ValueError:
            return None


def read_swf(path: str | Path, *, max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS) -> SwfTrace:
    """The trace in file `path`, gzipped or not; OSError when it cannot be read, or is past the caps."""
    with open(path, "rb") as raw:
        start = raw.read(2)
        raw.seek(0)
        stream: IO[bytes] = gzip.GzipFile(fileobj=raw) if start == b"\x1f\x8b" else raw  # type: ignore[assignment]
        try:
            trace = parse_swf(io.TextIOWrapper(stream, encoding="utf-8", errors="replace"), max_lines=max_lines,
                              max_chars=max_chars)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:  # zlib.error: damaged compressed data
            raise OSError(f"{path}: not a readable gzip file: {exc}") from None
    if trace.too_large is not None:
        raise OSError(trace.too_large)
    return trace


class _TooLarge(Exception):
    """Past a cap: the reason, for SwfTrace.too_large."""


def _bounded_lines(lines: Iterator[str] | IO[str], max_lines: int, max_chars: int) -> Iterator[tuple[int, str | None]]:
    """(number, line) of each line; None for a line longer than MAX_LINE, skipped in pieces.
    _TooLarge past `max_lines` lines or `max_chars` characters, every piece of every line counted."""
    chars = 0

    def count(number: int, text: str) -> None:
        nonlocal chars
        chars += len(text)
        if number > max_lines:
            raise _TooLarge(f"more than {max_lines:,} lines (blank and comment lines count): larger than any "
                            "workload trace this reader takes")
        if chars > max_chars:
            raise _TooLarge(f"more than {max_chars:,} characters: larger than any workload trace this reader "
                            "takes")

    if not hasattr(lines, "readline"):
        for number, line in enumerate(lines, 1):
            count(number, line)
            yield number, (line if len(line) <= MAX_LINE else None)
        return
    number = 0
    while line := lines.readline(MAX_LINE):
        number += 1
        count(number, line)
        if len(line) < MAX_LINE or line.endswith("\n"):
            yield number, line
            continue
        while (rest := lines.readline(MAX_LINE)):
            count(number, rest)
            if rest.endswith("\n"):
                break
        yield number, None


def parse_swf(lines: Iterator[str] | IO[str], *, max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS) -> SwfTrace:
    """The trace of `lines`; never raises: a bad line is counted and reported, and reading stops
    past the caps with the reason in `too_large` (the records so far kept)."""
    trace = SwfTrace()
    try:
        _parse(trace, _bounded_lines(lines, max_lines, max_chars))
    except _TooLarge as exc:
        trace.too_large = str(exc)
    return trace


def _parse(trace: SwfTrace, lines: Iterator[tuple[int, str | None]]) -> None:
    key: str | None = None
    for number, line in lines:
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
        record, extra = _record(text, number)
        if extra:
            trace.extra_fields += 1
            if trace.first_extra_line is None:
                trace.first_extra_line = number
        if isinstance(record, str):
            trace.malformed += 1
            if len(trace.problems) < MAX_REPORTED:
                trace.problems.append(f"line {number}: {record}")
            continue
        trace.records.append(record)


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


def _record(text: str, number: int) -> tuple[SwfRecord | str, int]:
    """The record, or what is wrong with the line; and how many fields past the 18th it had, dropped."""
    words = text.split()
    if len(words) < len(FIELDS):
        return f"{len(words)} fields, not {len(FIELDS)}: {text[:80]!r}", 0
    return _fields(words[:len(FIELDS)], number), len(words) - len(FIELDS)


def _fields(words: list[str], number: int) -> SwfRecord | str:
    try:
        values: list[float | int] = list(map(float, words))
    except ValueError:
        return _not_a_number(words)
    total = sum(values)
    if total - total != 0.0:  # a NaN or an infinity among them (or finite ones summing past the largest float)
        for at, value in enumerate(values):
            if value != value or value in (math.inf, -math.inf):
                return f"field {at + 1} ({FIELDS[at]}) is not a finite number: {words[at][:20]!r}"
    for at in _INTEGER_AT:
        values[at] = int(values[at])
    values.append(number)
    return SwfRecord._make(values)


def _not_a_number(words: list[str]) -> str:
    for at, word in enumerate(words):
        try:
            float(word)
        except ValueError:
            return f"field {at + 1} ({FIELDS[at]}) is not a number: {word[:20]!r}"
    raise AssertionError("every field is a number")  # pragma: no cover - called only when one is not
