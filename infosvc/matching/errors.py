"""The matcher's refusal: a job that cannot be matched as written (the HTTP layer makes it a 400)."""

from __future__ import annotations

__all__ = ["MatchError"]


class MatchError(ValueError):
    """A job that cannot be matched as written (a refused pattern, an op that does not apply)."""
