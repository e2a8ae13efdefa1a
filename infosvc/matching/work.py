"""The work budget of one match (`WorkBudget`): the seconds its matching and explaining may take,
charged where the work is. A match checks it before each subcluster and each host (every 128th for
a job of a few terms: a host then costs a microsecond or two), its answer before each rejected host
it explains, and a Feature pattern before each host of many features it is tested on (each feature
one RE2 call): past the budget a request stops within one host's terms, or one such term, of it.
`Requirements.spend` and `start_budget` read it; the checks compiled for those requirements hold it."""

from __future__ import annotations

import time

from infosvc.matching.errors import MatchError

__all__ = ["MatchTooCostly", "WorkBudget"]


class MatchTooCostly(MatchError):
    """The work budget of a match (Requirements.start_budget) ran out."""


class WorkBudget:
    """The seconds left to one request's matching (none bound until `start`)."""

    __slots__ = ("seconds", "deadline")

    def __init__(self) -> None:
        #: the most seconds the work may take (None: no bound)
        self.seconds: float | None = None
        self.deadline: float | None = None

    def start(self, seconds: float) -> None:
        """Bound the work from now: past `seconds`, `spend` raises MatchTooCostly."""
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def spend(self) -> None:
        """MatchTooCostly when the budget is spent."""
        deadline = self.deadline
        if deadline is not None and time.monotonic() > deadline:
            raise MatchTooCostly(f"matching this job against this site takes more than {self.seconds:g} s; "
                                 "ask with fewer terms, or match fewer jobs at once")
