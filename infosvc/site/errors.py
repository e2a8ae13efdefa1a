"""What the site refuses, by kind; the HTTP layer (infosvc/web/errors.py) gives each its status."""

from __future__ import annotations


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


class TooLarge(Refused):
    """What the request carries is past what the site takes of it (a report past a [reports] cap)."""
