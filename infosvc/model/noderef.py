"""Node references (SSS Node spec 4.4): `<Node aggregation="Range">node[5-23,77]</Node>`.

A reference names one node, or many through an aggregation: List (delimited names),
Pattern (a regular expression over known node names) or Range (a prefix with bracketed
ranges, expanded with ClusterShell's NodeSet). `count` is the instance count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Iterable

from infosvc.errors import excerpt


class Aggregation(StrEnum):
    LIST = "List"
    PATTERN = "Pattern"
    RANGE = "Range"


class NodeRefError(ValueError):
    """A node reference that cannot be expanded (bad range, bad pattern, no universe)."""


@dataclass(slots=True)
class NodeRef:
    value: str
    aggregation: Aggregation | None = None
    delimiter: str | None = None
    count: int | None = None

    def names(self, universe: Iterable[str] | None = None) -> list[str]:
        """The node names this reference stands for, in order, without duplicates.

        A Pattern matches against `universe` (the known node names) and needs it; the other
        forms expand on their own.
        """
        match self.aggregation:
            case None:
                return [self.value.strip()]
            case Aggregation.LIST:
                delimiter = self.delimiter or ","
                seen: dict[str, None] = {}
                for part in self.value.split(delimiter):
                    if part.strip():
                        seen.setdefault(part.strip())
                return list(seen)
            case Aggregation.RANGE:
                return expand_range(self.value)
            case Aggregation.PATTERN:
                if universe is None:
                    raise NodeRefError("a Pattern reference needs the known node names to match against")
                try:
                    regex = re.compile(self.value.strip())
                except re.error as exc:
                    raise NodeRefError(f"bad Pattern {excerpt(self.value)!r}: {exc}") from None
                # perl5 semantics: the pattern must match the whole name, not a substring.
                return [name for name in universe if regex.fullmatch(name)]


def expand_range(expression: str) -> list[str]:
    """`node[5-23,77]` -> node5 ... node23, node77 (ClusterShell NodeSet syntax, zero padding kept)."""
    from ClusterShell.NodeSet import NodeSetParseError, RangeSetParseError

    from infosvc.model.nodeset import expand_names

    try:
        return expand_names(expression.strip())
    except (NodeSetParseError, RangeSetParseError) as exc:
        raise NodeRefError(f"bad Range {excerpt(expression.strip())!r}: {exc}") from None
