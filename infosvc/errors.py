"""The one error type for bad input documents: what is wrong, and where."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The most characters of someone's input an error message quotes.
EXCERPT_CHARS = 40


#: The longest message an error answer carries: a backstop for any message that quotes more of
#: its input than it should.
MESSAGE_CHARS = 500


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """`text` as an error message quotes it: at most `limit` characters, and its length when cut,
    so that an answer to a hostile input is not the size of that input."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


@dataclass(slots=True)
class Problem:
    """One thing wrong with a document, located as precisely as is known."""

    message: str
    line: int | None = None
    element: str | None = None
    attribute: str | None = None
    path: str | None = None

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.element:
            where.append(f"element {self.element}")
        if self.attribute:
            where.append(f"attribute {self.attribute}")
        return f"{self.message} ({', '.join(where)})" if where else self.message


class DocumentError(ValueError):
    """A document that cannot be accepted. `problems` lists what is wrong, the first first."""

    def __init__(self, message: str | Problem, *, line: int | None = None, element: str | None = None,
                 attribute: str | None = None, path: str | None = None,
                 more: list[Problem] | None = None) -> None:
        first = message if isinstance(message, Problem) else Problem(message, line, element, attribute, path)
        self.problems: list[Problem] = [first, *(more or [])]
        ValueError.__init__(self, str(first))

    @property
    def first(self) -> Problem:
        return self.problems[0]

    @property
    def line(self) -> int | None:
        return self.first.line

    @property
    def element(self) -> str | None:
        return self.first.element

    @property
    def attribute(self) -> str | None:
        return self.first.attribute

    def __str__(self) -> str:
        return str(self.first)

    def as_json(self) -> dict[str, Any]:
        """The body of an HTTP 4xx answer: {"error": ..., "detail": ...}."""
        return {
            "error": excerpt(self.first.message, MESSAGE_CHARS),
            "detail": [
                {k: excerpt(v, MESSAGE_CHARS) if isinstance(v, str) else v
                 for k, v in (("message", p.message), ("line", p.line), ("element", p.element),
                              ("attribute", p.attribute), ("path", p.path)) if v is not None}
                for p in self.problems
            ],
        }


# --- refusals: what the service refuses, by kind; the HTTP layer (infosvc/web/errors.py) gives each its status
class Refused(Exception):
    """A request the site refuses for who sent it or what it asks; `detail` says what would do."""

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class Forbidden(Refused):
    """The caller is known, but may not do this (another host's report, a token bound elsewhere)."""


class NotFound(Refused):
    """What the request names is not there."""


class Invalid(Refused):
    """The request is understood but cannot be done as written."""


class Unavailable(Refused):
    """The request is valid but cannot be taken now (every computing element closed or full)."""


class Conflict(Refused):
    """The request builds on a state the service does not hold (a delta report of a sample it has not)."""


class TooLarge(Refused):
    """What the request carries is past what the site takes of it (a report past a [reports] cap)."""
