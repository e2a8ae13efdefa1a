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

import functools
import gzip
import io
import math
import operator
import re
import zlib
from itertools import chain
from pathlib import Path
from typing import IO, Final, Iterator, NamedTuple, cast

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
#: The most characters of header values kept (the archive's headers take a few KB); the header
#: lines past it are counted as one problem and otherwise ignored.
MAX_HEADER_CHARS: Final = 1 << 20


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


class SwfTrace:
    """A trace: its header (`; Key: value`, continuation lines joined, a repeated key's values one a
    line), its records in file order, and the lines that were not records. A plain class, not a
    dataclass: `infosvc simulate` imports no dataclass (infosvc/sched/policy.py says why)."""

    __slots__ = ("header", "records", "malformed", "problems", "extra_fields", "first_extra_line", "too_large")

    def __init__(self) -> None:
        self.header: dict[str, str] = {}
        self.records: list[SwfRecord] = []
        self.malformed = 0
        self.problems: list[str] = []
        #: job lines that had fields past the 18th, dropped (the first such line's number, for the warning)
        self.extra_fields = 0
        self.first_extra_line: int | None = None
        #: Why reading stopped before the end (a cap), else None.
        self.too_large: str | None = None

    def __repr__(self) -> str:
        return (f"SwfTrace({len(self.records)} records, {self.malformed} malformed, header={self.header!r}, "
                f"too_large={self.too_large!r})")

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


def _bounded_lines(lines: Iterator[str] | IO[str], max_lines: int,
                   max_chars: int) -> Iterator[tuple[int, list[str | None]]]:
    """The lines in batches: (the number of the first, the lines), None for a line longer than
    MAX_LINE, skipped in pieces. _TooLarge past `max_lines` lines or `max_chars` characters,
    every piece of every line counted, once the lines before are given."""
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

    if not hasattr(lines, "read"):
        for number, line in enumerate(lines, 1):
            count(number, line)
            yield number, [line if len(line) <= MAX_LINE else None]
        return
    # A file is read in chunks and cut at its newlines (as readline cuts), a chunk's lines given
    # at once: the cutting, the caps and the long lines are checked a chunk at a time, in C, not a
    # line at a time (a tenth of reading a trace). What follows a chunk's last newline waits for
    # the next; once it reaches MAX_LINE it is dropped, and only the end of its line is looked for.
    number = 0
    carry, long = "", False
    while chunk := lines.read(_CHUNK):
        count(number, chunk)
        pieces = chunk.split("\n")
        ended = cast("list[str | None]", pieces[:-1])  # each ends a line
        if ended:
            first = pieces[0]
            ended[0] = None if long or len(carry) + len(first) >= MAX_LINE else carry + first
            carry, long = "", False
            if max(map(len, pieces[1:-1]), default=0) >= MAX_LINE:
                ended[1:] = [None if len(piece) >= MAX_LINE else piece for piece in pieces[1:-1]]
            if number + len(ended) > max_lines:  # the lines up to the cap, then the cap's reason
                yield number + 1, ended[:max_lines - number]
                count(max_lines + 1, "")
            yield number + 1, ended
            number += len(ended)
        if not long:
            carry += pieces[-1]
            if len(carry) >= MAX_LINE:
                carry, long = "", True
    if carry or long:  # a last line without its newline
        number += 1
        if number > max_lines:
            count(number, "")
        yield number, [None if long else carry]


#: Characters read at once (a line is cut from them as readline would): 64 KiB, as a 1 MiB chunk split
#: into words at once doubled the pages a replay touches (a transient 29.5 MB peak on the NASA trace, 15.9 now)
_CHUNK: Final = 1 << 16


def parse_swf(lines: Iterator[str] | IO[str], *, max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS) -> SwfTrace:
    """The trace of `lines`; never raises: a bad line is counted and reported, and reading stops
    past the caps with the reason in `too_large` (the records so far kept)."""
    trace = SwfTrace()
    try:
        _parse(trace, _bounded_lines(lines, max_lines, max_chars))
    except _TooLarge as exc:
        trace.too_large = str(exc)
    return trace


def _parse(trace: SwfTrace, batches: Iterator[tuple[int, list[str | None]]]) -> None:
    key: str | None = None
    # a key's values (a repeated key, continuation lines) gathered and joined once at the end: each
    # joined as it came made a header of repeated keys quadratic (80,000 lines: 86 s)
    header = _Header()
    # Job lines are converted in batches (`_convert`): their words gathered here, then read as
    # numbers and made records in a few calls, not a dozen per line. A malformed line first
    # converts what is gathered, so that records and problems keep the file's order.
    words: list[str] = []
    numbers: list[int] = []
    try:
        for first, lines in batches:
            at, jobs = _job_lines(lines)
            for number, line in enumerate(lines[:at], first):
                if line is None:
                    key = None
                    _convert(trace, words, numbers)
                    _malformed(trace, number, f"longer than {MAX_LINE} characters")
                    continue
                text = line.strip()
                if not text:
                    continue
                if text.startswith(";"):
                    key = header.line(trace, number, text[1:].strip(), key)
                    continue
                key = None
                fields = text.split()
                if len(fields) != len(FIELDS):
                    if len(fields) < len(FIELDS):
                        _convert(trace, words, numbers)
                        _malformed(trace, number, f"{len(fields)} fields, not {len(FIELDS)}: {text[:80]!r}")
                        continue
                    trace.extra_fields += 1
                    if trace.first_extra_line is None:
                        trace.first_extra_line = number
                    del fields[len(FIELDS):]
                words += fields
                numbers.append(number)
                if len(numbers) >= _BATCH:
                    _convert(trace, words, numbers)
            if jobs:
                key = None
                words += chain.from_iterable(jobs)
                numbers += range(first + at, first + len(lines))
                if len(numbers) >= _BATCH:
                    _convert(trace, words, numbers)
    finally:  # past a cap too: the records so far are kept
        _convert(trace, words, numbers)
        trace.header = {name: "\n".join(values) for name, values in header.values.items()}


def _job_lines(lines: list[str | None]) -> tuple[int, list[list[str]]]:
    """Where the run of plain job lines that ends `lines` begins (each 18 words, the first not a
    comment's), and their words; (len(lines), []) when the last line is not one. Found in C, a
    batch at a time: a trace is its header, then job lines, and reading those one at a time in
    Python was 6 M of the NASA trace's 526 M instructions. The lines before are read one at a
    time (`_parse`)."""
    if None in lines:
        return len(lines), []
    split = list(map(str.split, cast("list[str]", lines)))
    counts = list(map(len, split))
    width = len(FIELDS)
    at = counts.index(width) if width in counts else len(lines)
    jobs = split[at:]
    if counts[at:].count(width) != len(jobs) or ";" in "".join(map(_FIRST, map(_FIRST, jobs))):
        return len(lines), []
    return at, jobs


_FIRST: Final = operator.itemgetter(0)
#: Job lines converted at once (their words held meanwhile: a few hundred kilobytes)
_BATCH: Final = 4096
#: A SwfRecord of a tuple of its fields, made in C (SwfRecord._make is a Python call a record)
_RECORD: Final = functools.partial(tuple.__new__, SwfRecord)


def _convert(trace: SwfTrace, words: list[str], numbers: list[int]) -> None:
    """The records of job lines `numbers`, whose 18 words each are `words`, one line after
    another; emptied. All are read as numbers at once, a field (a column) at a time; where one is
    not a number, or not finite, each line is read alone, to say which is wrong."""
    if not numbers:
        return
    width = len(FIELDS)
    columns: list[list[float] | list[int]] = []
    truncated: list[int] = []  # whole-number fields read as numbers: truncated once known to be finite
    try:
        total = 0.0
        for at in range(width):
            text = words[at::width]
            integral = at in _INTEGER_AT
            integers = _exact_integers(text, integral)
            if integers is not None:
                columns.append(integers if integral else list(map(float, integers)))
                continue
            values = list(map(float, text))
            total += sum(values)
            if not -_EXACT < min(values) <= max(values) < _EXACT:  # (a NaN fails it too)
                raise ValueError("a value out of range")
            columns.append(values)
            if integral:
                truncated.append(at)
        whole = total - total == 0.0  # else a NaN or an infinity among them (or finite ones past the largest float)
    except ValueError:
        whole = False
    if whole:
        for at in truncated:  # float.__trunc__ is int() of a finite float, without int's own dispatch: a third the cost
            columns[at] = list(map(float.__trunc__, columns[at]))
        trace.records.extend(map(_RECORD, zip(*columns, numbers)))
    else:
        width = len(FIELDS)
        for at, number in enumerate(numbers):
            record = _fields(words[at * width:(at + 1) * width], number)
            if isinstance(record, str):
                _malformed(trace, number, record)
            else:
                trace.records.append(record)
    words.clear()
    numbers.clear()


def _exact_integers(words: list[str], truncated: bool) -> list[int] | None:
    """`words` as whole numbers, where every one is written as one and a float holds it exactly
    (then it is what float() reads, truncated or, unless a word is a negative zero, not); else None
    (read them by float()). int() of a short word is half float()'s cost (of its time, not of its
    instructions), and most of a trace's fields are whole numbers."""
    try:
        values = list(map(int, words))
    except ValueError:
        return None
    if values and not -_EXACT < min(values) <= max(values) < _EXACT:
        return None
    if not truncated and 0 in values and " -0" in " " + " ".join(words):  # float("-0") is -0.0: kept
        return None
    return values


#: Whole numbers a float holds exactly are those under 2**53 in magnitude
_EXACT: Final = 1 << 53


def _malformed(trace: SwfTrace, number: int, why: str) -> None:
    trace.malformed += 1
    if len(trace.problems) < MAX_REPORTED:
        trace.problems.append(f"line {number}: {why}")


class _Header:
    """The header's values as read: each key's lines, up to MAX_HEADER_CHARS in all."""

    __slots__ = ("values", "size")

    def __init__(self) -> None:
        self.values: dict[str, list[str]] = {}
        self.size = 0

    def line(self, trace: SwfTrace, number: int, text: str, key: str | None) -> str | None:
        """Take a comment line's `text` (`Key: value`, or a continuation of `key`); the key it
        was of, or None."""
        found = _KEY.match(text)
        if found is not None:
            name, value = found.group(1), text[found.end():].strip()
        elif key is not None and text:  # a continuation of the key above
            name, value = key, text
        else:
            return None
        self.size += len(name) + len(value) + 1
        if self.size > MAX_HEADER_CHARS:
            if self.size - len(name) - len(value) - 1 <= MAX_HEADER_CHARS:  # one malformed line, said once
                _malformed(trace, number, f"the header is past {MAX_HEADER_CHARS} characters: its lines from "
                                          "here on are ignored")
            return name
        self.values.setdefault(name, []).append(value)
        return name


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
    for at, value in enumerate(values):
        if not -_EXACT < value < _EXACT:  # 2**53: a time of 1e308 s made an end time of infinity
            return f"field {at + 1} ({FIELDS[at]}) is out of range (2**53 or more): {words[at][:20]!r}"
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
