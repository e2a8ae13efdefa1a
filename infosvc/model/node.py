"""The SSS Node object (Scalable Systems Software Node spec 3.1) as plain dataclasses.

Names follow the spec: a Node has uncategorized properties (Id, Name, Feature, Opsys, Arch,
Description, State, Extension) and categorized ones: consumable resources (Processors, Memory,
Disk, Swap, Network, Resource) inside Configured, Available and Utilized.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable, Iterator, TypeVar

from infosvc.model.units import DEFAULT_UNITS, convert


class Category(StrEnum):
    """Property categories (spec 4.2)."""

    CONFIGURED = "Configured"
    AVAILABLE = "Available"
    UTILIZED = "Utilized"


#: The simple consumable resources of Table 2; `Resource` is the extensible one.
CONSUMABLES: tuple[str, ...] = ("Processors", "Memory", "Disk", "Swap", "Network")
RESOURCE = "Resource"


Part = TypeVar("Part")


@dataclass(slots=True, frozen=True)
class Extension:
    """A named extension property (spec 4.1): name required, type a context hint.

    Frozen, as Consumable is: a parsed node shares the ones equal to another report's (most of a
    host's are its kind's), so one is replaced, never changed in place."""

    name: str
    value: str
    type: str | None = None


@dataclass(slots=True, frozen=True)
class Consumable:
    """One consumable resource of a category (spec 4.3).

    `kind` is the element: one of CONSUMABLES or "Resource". Processors carries an int, every
    other kind a float. `name` and `type` belong to Resource only. `wall_duration` is kept as
    written (an xsd:duration such as PT3576S, or plain seconds as in the spec's examples);
    see infosvc.model.durations for its value in seconds. Frozen: see Extension.
    """

    kind: str
    value: int | float
    units: str | None = None
    metric: str | None = None
    wall_duration: str | None = None
    consumption_rate: float | None = None
    name: str | None = None
    type: str | None = None

    def amount(self, units: str) -> float:
        """The value in `units`; a missing units attribute means MB for Memory, Swap, Disk."""
        own = self.units or DEFAULT_UNITS.get(self.kind)
        if own is None:
            raise ValueError(f"{self.kind} has no units to convert from")
        return convert(self.value, own, units)


class PartTable:
    """Parts (Extensions, Consumables) made lately, by what they were made from, so that the parts
    alike on many hosts or in many samples are one object (they are frozen, so sharing is safe):
    less memory, no construction, and equal parts that are the same object compare at once.
    Bounded: at `limit` entries the table is emptied, and the parts alike are shared again from
    then on (what is unique to a sample, a counter say, comes and goes)."""

    __slots__ = ("_parts", "limit", "lookup")

    def __init__(self, limit: int = 1 << 14) -> None:
        self._parts: dict[Any, Any] = {}
        self.limit = limit
        #: the part kept under a key, or None (the dict's own get: no call of ours on a hot path)
        self.lookup: Callable[[Any], Any] = self._parts.get

    def keep(self, key: Any, part: Any) -> None:
        """Keep `part` under `key`, the table emptied first when full."""
        if len(self._parts) >= self.limit:
            self._parts.clear()
        self._parts[key] = part

    def get(self, key: Any, make: Callable[..., Part], *fields: Any) -> Part:
        """The part made before from `key`, else `make(*fields)`, kept under it."""
        part: Part | None = self.lookup(key)
        if part is None:
            part = make(*fields)
            self.keep(key, part)
        return part

    def __len__(self) -> int:
        return len(self._parts)


def consumable_key(fields: tuple[Any, ...]) -> tuple[Any, ...]:
    """What a Consumable made of `fields` (its eight fields in order) is kept under in a PartTable:
    the fields and the types of its two numbers, since 1 and 1.0 are equal keys but not equal values."""
    return fields, type(fields[1]), type(fields[5])


@dataclass(slots=True)
class Properties:
    """The consumable resources inside one Configured, Available or Utilized element."""

    items: list[Consumable] = field(default_factory=list)

    def __iter__(self) -> Iterator[Consumable]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def add(self, item: Consumable) -> Consumable:
        self.items.append(item)
        return item

    def get(self, kind: str, *, name: str | None = None, type: str | None = None,
            metric: str | None = None) -> Consumable | None:
        """The first resource of `kind` matching the given name / type / metric, if any."""
        for item in self.items:
            if (item.kind == kind and (name is None or item.name == name)
                    and (type is None or item.type == type)
                    and (metric is None or item.metric == metric)):
                return item
        return None

    def resources(self, name: str) -> list[Consumable]:
        return [item for item in self.items if item.kind == RESOURCE and item.name == name]


@dataclass(slots=True)
class Node:
    """An SSS Node object. `id` is the one required property."""

    id: str
    name: str | None = None
    features: list[str] = field(default_factory=list)
    opsys: str | None = None
    arch: str | None = None
    description: str | None = None
    state: str | None = None
    extensions: list[Extension] = field(default_factory=list)
    configured: Properties = field(default_factory=Properties)
    available: Properties = field(default_factory=Properties)
    utilized: Properties = field(default_factory=Properties)

    def category(self, category: Category | str) -> Properties:
        match Category(category):
            case Category.CONFIGURED:
                return self.configured
            case Category.AVAILABLE:
                return self.available
            case Category.UTILIZED:
                return self.utilized

    def extension(self, name: str, type: str | None = None) -> str | None:
        """The value of the first Extension with this name (and type, when given)."""
        for ext in self.extensions:
            if ext.name == name and (type is None or ext.type == type):
                return ext.value
        return None

    def extensions_of(self, type: str) -> dict[str, str]:
        """name -> value of the Extensions whose type (context) is `type`; first one wins."""
        found: dict[str, str] = {}
        for ext in self.extensions:
            if ext.type == type:
                found.setdefault(ext.name, ext.value)
        return found


def split_features(text: str, delimiter: str = ",") -> list[str]:
    """The features of one Feature element: the comma-delimited form, blanks dropped."""
    return [part.strip() for part in text.split(delimiter) if part.strip()]
