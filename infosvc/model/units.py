"""Units of measure of SSS consumable resources (SSS Node spec 3.1, Appendix A).

Every unit is a power of two bytes, from byte to Doggabyte. The spec spells the 2^70 unit
"Aettabyte"; the usual "Zettabyte" is accepted as the same unit. Names are matched without
regard to case; the usual abbreviations (KB, MiB, ...) are accepted too.
"""

from __future__ import annotations

from math import ldexp
from typing import Final

#: Canonical unit name -> exponent of two.
UNITS: Final[dict[str, int]] = {
    "byte": 0,
    "Kilobyte": 10,
    "Megabyte": 20,
    "Gigabyte": 30,
    "Terabyte": 40,
    "Petabyte": 50,
    "Exabyte": 60,
    "Aettabyte": 70,
    "Yottabyte": 80,
    "Nonabyte": 90,
    "Doggabyte": 100,
}

_ABBREVIATIONS: Final[dict[str, int]] = {
    "b": 0, "bytes": 0,
    "kb": 10, "kib": 10, "k": 10,
    "mb": 20, "mib": 20, "m": 20,
    "gb": 30, "gib": 30, "g": 30,
    "tb": 40, "tib": 40, "t": 40,
    "pb": 50, "pib": 50,
    "eb": 60, "eib": 60,
    "zb": 70, "zib": 70, "ab": 70, "zettabyte": 70,
    "yb": 80, "yib": 80,
    "nb": 90,
    "db": 100,
}

_EXPONENTS: Final[dict[str, int]] = {name.lower(): exp for name, exp in UNITS.items()} | _ABBREVIATIONS

#: The unit implied when Memory, Swap or Disk carries no units attribute.
DEFAULT_UNITS: Final[dict[str, str]] = {"Memory": "MB", "Swap": "MB", "Disk": "MB"}


class UnitError(ValueError):
    """A units string that names no unit of Appendix A."""


def exponent(units: str) -> int:
    """The power of two of one unit of `units`; raises UnitError for an unknown unit."""
    try:
        return _EXPONENTS[units.strip().lower()]
    except KeyError:
        raise UnitError(f"unknown unit {units!r}; expected one of Appendix A: {', '.join(UNITS)}") from None


def is_byte_unit(units: str) -> bool:
    return units.strip().lower() in _EXPONENTS


def convert(value: float, from_units: str, to_units: str) -> float:
    """`value` in `from_units` expressed in `to_units` (exact for powers of two)."""
    shift = exponent(from_units) - exponent(to_units)
    # ldexp scales by a power of two without rounding, unlike multiplying by a huge float.
    return ldexp(float(value), shift)
