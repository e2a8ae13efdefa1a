"""A replay's queue as bytes, two a job in queue order (its width and its estimate, coded), so that
a backfill scan reads only the jobs that may start, found in C, where it read the whole queue in
Python.

After an end, `predictive`'s pass is made whole, and its backfill scan reads the queue from the
head: on a loaded machine most of it is wider than what is free, or too long to end by the
reserved start and wider than the extra processors (a 100,000-job Lublin replay: about 390 jobs
read a pass, 100 of them narrow enough; the scan was two thirds of the replay's time). A job may
start in the scan only if its width w is at most the free processors and either its estimate e
ends by the reserved start or w is at most the extra processors (policy.py's `_backfill`). Each
job is coded in two bytes by order-keeping codes (x <= y gives code(x) <= code(y)): its width in
0-127 (exact under 64, then in steps of an eighth of a power of two, all from 15,360 up in 127),
its estimate's whole seconds in 128-252 (exact under 16 s, then in steps of a quarter of a power
of two, all from 2**31 s and the infinite in 252). A byte class of the codes up to a bound is a
superset of the jobs under it, and a width byte (under 128) only ever starts a match, so one
regular expression finds the jobs that may start: every one, and a few near the bounds that the
scan then refuses by its own exact checks. The scan decides as before, on fewer jobs.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from itertools import repeat
from typing import TYPE_CHECKING, Container, Iterator, Protocol, Sequence, TypeVar

__all__ = ["code", "narrow"]

if TYPE_CHECKING:  # a class made at import costs `infosvc simulate`'s start; this one only types
    class _Job(Protocol):
        @property
        def id(self) -> str: ...

Q = TypeVar("Q", bound="_Job")


def _width(width: int) -> int:
    if width < 64:
        return width if width > 0 else 0
    bits = width.bit_length()  # 7 or more
    return 64 + min(63, (bits - 7) << 3 | (width >> (bits - 4)) & 7)


def _length(seconds: float) -> int:
    if not seconds < 2.0 ** 31:  # and the infinite, and NaN: the code after 2**31 - 1's, so the codes run on
        return 252
    whole = int(seconds) if seconds > 0 else 0
    if whole < 16:
        return 128 + whole
    bits = whole.bit_length()  # 5 or more
    return 144 + min(111, (bits - 5) << 2 | (whole >> (bits - 3)) & 3)


def code(processors: int, estimate: float) -> bytes:
    """A job of `processors` and `estimate` seconds in two bytes: its width's code, its length's."""
    return bytes((_width(processors), _length(estimate)))


@functools.lru_cache(maxsize=1 << 14)  # a long replay's bounds take a few thousand values; each compiled once
def _pattern(wide: int, long: int, spare: int) -> re.Pattern[bytes]:
    """The jobs' codes of width at most `wide` and length at most `long`, or of width at most
    `spare` (none when negative): one class first (the engine skips to where it matches), then the
    second byte, short enough, or any if the first was narrow enough for the extra processors."""
    either = b"|(?<=[\\x00-\\x%02x])[\\x80-\\xff]" % spare if spare >= 0 else b""
    return re.compile(b"[\\x00-\\x%02x](?:[\\x80-\\x%02x]%s)" % (wide, long, either))


def narrow(jobs: Sequence[Q], shapes: bytes | bytearray, room: int, now: float, at: float, extra: int,
           passed: Container[str]) -> Iterator[Q]:
    """The jobs of `jobs` (`shapes` their codes, in the same order) that may fit on `room`
    processors and either end by `at` when started at `now` (now + estimate <= at, in floats) or
    fit on `extra` processors, in order, but those of `passed` (ids): a superset of them, never
    missing one. Read as the scan asks (it stops once nothing more fits), not all at once."""
    wide = _width(room)
    within = at - now
    # now + estimate rounds, and so do at - now and this sum: an estimate a few last bits more
    # than `within` may still end by `at` (a second or more where the clock passes 2**52)
    long = _length(within + 4 * max(math.ulp(at), math.ulp(within)))
    spare = _width(min(extra, room)) if extra > 0 else -1
    pattern = _pattern(wide, long, spare)
    places = map(operator.rshift, map(_START, pattern.finditer(shapes)), repeat(1))  # a job is two bytes
    return (job for job in map(jobs.__getitem__, places) if job.id not in passed)


_START = re.Match.start
