"""A replay's figures (`infosvc simulate`'s summary): utilization, mean wait, mean bounded
slowdown, longest wait and makespan of its outcomes, by the design's definitions
(docs/simulation.md): wait = start - submit; bounded slowdown = max(1, (wait + run) / max(run,
10)); utilization = sum(run x processors) / (machine processors x makespan); makespan = last end -
first submit."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, NamedTuple, Sequence

from infosvc.sched.policy import Policy

if TYPE_CHECKING:  # the replay's outcome (infosvc/sched/simulation.py imports this module)
    from infosvc.sched.simulation import Outcome

__all__ = ["BOUND_SECONDS", "Summary", "summarize"]

#: The bounded slowdown's threshold, seconds.
BOUND_SECONDS = 10.0


class Summary(NamedTuple):
    jobs: int
    skipped: int
    utilization: float
    mean_wait_seconds: float
    mean_bounded_slowdown: float
    makespan_seconds: float
    processors: int
    policy: str
    max_wait_seconds: float = 0.0

    def as_json(self) -> dict[str, object]:
        return {"jobs": self.jobs, "utilization": self.utilization, "mean_wait_seconds": self.mean_wait_seconds,
                "mean_bounded_slowdown": self.mean_bounded_slowdown, "max_wait_seconds": self.max_wait_seconds,
                "makespan_seconds": self.makespan_seconds, "skipped": self.skipped, "processors": self.processors,
                "policy": self.policy}


def summarize(outcomes: Sequence[Outcome], skipped: int, processors: int, policy: Policy) -> Summary:
    if not outcomes:
        return Summary(0, skipped, 0.0, 0.0, 0.0, 0.0, processors, policy.value)
    # Column by column, each read in C (map over operator's functions) where a loop in Python
    # read every field of every outcome once per figure; the sums add in the outcomes' order, as
    # before. (Not builtins.max over the columns: its call costs more than a comparison in Python.)
    jobs = list(map(_JOB, outcomes))
    submits, starts, runs = list(map(_SUBMITTED, jobs)), list(map(_START, outcomes)), list(map(_RUN, jobs))
    makespan = max(map(operator.add, starts, runs)) - min(submits)
    work = sum(map(operator.mul, runs, map(_PROCESSORS, jobs)))
    waits = list(map(operator.sub, starts, submits))
    # bounded slowdown: max(1, (wait + run) / max(run, BOUND_SECONDS))
    bounds = [run if run > BOUND_SECONDS else BOUND_SECONDS for run in runs]
    slowdowns = [slowdown if slowdown > 1.0 else 1.0
                 for slowdown in map(operator.truediv, map(operator.add, waits, runs), bounds)]
    return Summary(len(outcomes), skipped, work / (processors * makespan) if makespan > 0 else 0.0,
                   sum(waits) / len(waits), sum(slowdowns) / len(slowdowns), makespan, processors, policy.value,
                   max(waits))


_JOB, _START, _RUN = operator.itemgetter(0), operator.itemgetter(1), operator.attrgetter("run")
_SUBMITTED, _PROCESSORS = operator.attrgetter("submitted"), operator.attrgetter("processors")
