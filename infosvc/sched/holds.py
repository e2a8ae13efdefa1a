"""The SSS Job's own controls as a job asks them of the scheduler (Table 2): its `Hold`s, and the
times it may run between, `EligibleTime` ("date and time that a job must start after") and
`Deadline` ("must end by"), read from the SSS model whichever format the job came in (only SSS
has them: docs/job-formats.md).

- Hold: User (its owner's) or System (an administrator's), any case; each once, in that order;
  any other name is refused. A job with a hold is not started until every hold is released.
- EligibleTime, Deadline: SSS DateTime, whole seconds since the epoch (the codec checked), at most
  the end of the year 9999. A Deadline at or before the EligibleTime is refused: no start could
  meet it. The queue starts the job no earlier than EligibleTime and ends it at its Deadline.
"""

from __future__ import annotations

from typing import Final

from infosvc.errors import DocumentError, excerpt
from infosvc.model.job import Properties

__all__ = ["HOLDS", "LATEST_TIME", "hold_name", "read_holds"]

#: The holds a job may carry (SSS Hold): its owner's, and an administrator's.
HOLDS: Final = ("User", "System")
#: The latest EligibleTime or Deadline taken: the end of the year 9999 (a date can still be written).
LATEST_TIME: Final = 253_402_300_799.0


def hold_name(text: str) -> str | None:
    """A hold's name as HOLDS spells it (`user` is User), or None for no hold this service knows."""
    value = text.strip().lower()
    return next((name for name in HOLDS if name.lower() == value), None)


def read_holds(props: Properties) -> tuple[tuple[str, ...], float | None, float | None]:
    """A resolved job's (holds, EligibleTime, Deadline); DocumentError for what no job could honour."""
    names = set()
    for text in props.holds:
        name = hold_name(text)
        if name is None:
            raise DocumentError(f"Hold {excerpt(text)!r} is not one of {', '.join(HOLDS)}")
        names.add(name)
    eligible, deadline = _time(props, "EligibleTime"), _time(props, "Deadline")
    if eligible is not None and deadline is not None and deadline <= eligible:
        raise DocumentError(f"the job's Deadline ({deadline:.0f}) is not after its EligibleTime ({eligible:.0f}): "
                            "no start could meet it")
    return tuple(name for name in HOLDS if name in names), eligible, deadline


def _time(props: Properties, name: str) -> float | None:
    text = props.get(name)
    if text is None:
        return None
    value = float(int(text))
    if value > LATEST_TIME:
        raise DocumentError(f"{name} {excerpt(text)} is after the year 9999")
    return value
