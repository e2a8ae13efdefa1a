"""The regular expression guard: op Match and Pattern terms compiled with RE2 (linear time),
bounded in pattern and subject length (docs/matching.md, "Regular expressions")."""

from __future__ import annotations

import re
from typing import Protocol, cast

import re2

from infosvc.matching.errors import MatchError

__all__ = ["MAX_PATTERN", "MAX_SUBJECT", "Regex", "guarded_regex", "fullmatch"]

#: Longest regular expression accepted (characters), and longest text one is matched against.
MAX_PATTERN = 256
MAX_SUBJECT = 255


class Regex(Protocol):
    """A compiled pattern, as the matcher uses it."""

    def fullmatch(self, text: str) -> object | None: ...


def guarded_regex(pattern: str, what: str = "pattern") -> Regex:
    """`pattern` compiled with RE2, which matches in time linear in the subject; MatchError when
    it is longer than MAX_PATTERN characters or not a pattern RE2 accepts.

    Patterns come from anyone who may POST /v1/match. Python's `re` backtracks: `(a+)+$`, and
    subtler forms such as `(?:.?){27}_`, take exponential time on a few dozen characters, and a
    match cannot be stopped (it holds the GIL). Guarding `re` by the pattern's structure was tried
    and still let exponential and high-polynomial patterns through (found in review); RE2 has no
    backtracking at all. It is Perl syntax without backreferences and lookarounds, which are
    refused by name.
    """
    if len(pattern) > MAX_PATTERN:
        raise MatchError(f"{what} is {len(pattern)} characters long; at most {MAX_PATTERN} are accepted")
    if _OPEN_LOW_BOUND.search(pattern):
        # Python (3.11+) reads a{,3} as 0 to 3 a's; RE2 as the text "a{,3}": refused, not reread.
        raise MatchError(f"{what} {pattern!r} writes a repeat as {{,n}}; write {{0,n}}")
    try:
        return cast(Regex, re2.compile(pattern, _RE2_OPTIONS))
    except UnicodeEncodeError:
        raise MatchError(f"{what} {pattern!r} holds a character that is not Unicode text") from None
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise MatchError(f"{what} {pattern!r} is not a regular expression this matcher accepts: {reason} "
                         "(Perl syntax without backreferences or lookarounds)") from None


#: `{,n}` not escaped: Python's re (3.11+) reads it as {0,n}, RE2 as text. (Python's re here: a
#: fixed pattern over at most MAX_PATTERN characters of the submitter's.)
_OPEN_LOW_BOUND = re.compile(r"(?:^|[^\\])\{,\d+\}")
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is the submitter's 400, not a line on stderr


def fullmatch(regex: Regex, text: str | None) -> bool:
    """Whether `regex` matches the whole of `text`; never for no text, one past MAX_SUBJECT
    characters, or one RE2 cannot take."""
    if text is None or len(text) > MAX_SUBJECT:
        return False
    try:
        return regex.fullmatch(text) is not None
    except UnicodeEncodeError:  # a lone surrogate (no XML or JSON we read carries one): no match
        return False
