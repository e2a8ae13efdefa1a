"""Durations of SSS attributes such as wallDuration.

The spec types them xsd:duration (PnYnMnDTnHnMnS) while its own examples write plain seconds
("3576"); both are read. A month is taken as 30 days and a year as 365, as a duration with no
anchor date must be.
"""

from __future__ import annotations

import re

_DURATION = re.compile(
    r"(?P<sign>-)?P(?:(?P<years>\d+)Y)?(?:(?P<months>\d+)M)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d*)?|\.\d+)S)?)?"
)
_SECONDS = {"years": 365 * 86400, "months": 30 * 86400, "days": 86400, "hours": 3600, "minutes": 60}


def seconds(text: str) -> float:
    """Seconds in an xsd:duration or a plain number of seconds; ValueError otherwise."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    match = _DURATION.fullmatch(text)
    if not match or text in ("P", "-P") or text.endswith("T"):
        raise ValueError(f"{text!r} is neither an xsd:duration nor a number of seconds")
    total = float(match["seconds"] or 0)
    for unit, factor in _SECONDS.items():
        total += int(match[unit] or 0) * factor
    return -total if match["sign"] else total


def format_seconds(value: float) -> str:
    """Seconds as an xsd:duration, e.g. 90.5 -> PT90.5S."""
    sign = "-" if value < 0 else ""
    text = repr(abs(float(value)))
    if text.endswith(".0"):
        text = text[:-2]
    return f"{sign}PT{text}S"
