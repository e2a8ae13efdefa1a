"""Delta reports: a host's sample said as what changed since a full report the server holds.

Between two samples of a host its processors, memory size, file systems, adapters and operating
system rarely change; its load, free memory, free space and counters do. A delta is itself an
SSS Node (valid against the same schema): the host's Id, the Agent extensions of its own sample
(SampleTime, SampleId) and BaseSample, the SampleId of the full report it builds on; the State
when it differs from the base's; and, in Available and Utilized, the items whose values differ
from the base's, each naming the base item it replaces by its element and its name, type and
metric attributes. Everything else is the base's. docs/api.md describes the exchange (409 when
the server does not hold the base).

`delta_of` is the sender's side (None when the sample cannot be said as a delta of that base:
a static fact changed, an item came or went), `apply_delta` the receiver's; the node that
`apply_delta` makes shares the base's unchanged parts, so neither may be changed in place
afterwards.
"""

from __future__ import annotations

from typing import Any, Final

from infosvc.errors import DocumentError
from infosvc.model.node import Consumable, Extension, Node, Properties

AGENT: Final = "Agent"
BASE_SAMPLE: Final = "BaseSample"
SAMPLE_ID: Final = "SampleId"
SAMPLE_TIME: Final = "SampleTime"
#: the Agent extensions each sample has its own of (not facts of the host)
PER_SAMPLE: Final = frozenset({SAMPLE_TIME, SAMPLE_ID, BASE_SAMPLE})
#: the categories a delta may update
VOLATILE: Final = ("available", "utilized")

Key = tuple[str, str | None, str | None, str | None]


def key_of(item: Consumable) -> Key:
    return item.kind, item.name, item.type, item.metric


def base_sample(node: Node) -> str | None:
    """The full report a report builds on (None: it is a full report)."""
    return node.extension(BASE_SAMPLE, AGENT)


def _per_sample(ext: Extension) -> bool:
    return ext.type == AGENT and ext.name in PER_SAMPLE


def _same(a: list[Any], b: list[Any]) -> bool:
    """Equal lists, the parts that are one object (model.node.PartTable) not compared further."""
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b))


def _facts(node: Node) -> list[Extension]:
    return [ext for ext in node.extensions if not _per_sample(ext)]


def _static_alike(node: Node, base: Node) -> bool:
    return (node.id == base.id and node.name == base.name and node.features == base.features
            and node.opsys == base.opsys and node.arch == base.arch and node.description == base.description
            and _same(node.configured.items, base.configured.items) and _same(_facts(node), _facts(base)))


def delta_of(base: Node, node: Node, index: BaseIndex | None = None) -> Node | None:
    """`node` as a delta of the full sample `base` (which must carry its SampleId), or None when
    it cannot be one: a fact outside Available, Utilized and State differs, an item came or went,
    the base names an item twice, or the state would have to be taken away. `index`: the base's
    BaseIndex, when one is kept (a base serves many deltas)."""
    base_id = base.extension(SAMPLE_ID, AGENT)
    if base_id is None or (node.state is None and base.state is not None) or not _static_alike(node, base):
        return None
    if not (index if index is not None else BaseIndex(base)).unique:
        return None
    delta = Node(id=node.id, state=node.state if node.state != base.state else None)
    delta.extensions = [ext for ext in node.extensions if ext.type == AGENT and ext.name in (SAMPLE_TIME, SAMPLE_ID)]
    delta.extensions.append(Extension(BASE_SAMPLE, base_id, AGENT))
    for field in VOLATILE:
        now: list[Consumable] = getattr(node, field).items
        before: list[Consumable] = getattr(base, field).items
        if len(now) != len(before):
            return None
        changed = []
        for item, old in zip(now, before):
            if item is old:
                continue
            if key_of(item) != key_of(old):
                return None  # an item came, went or moved
            if item != old:
                changed.append(item)
        getattr(delta, field).items = changed
    return delta


def _refuse(message: str, element: str) -> DocumentError:
    return DocumentError(f"{message}; a delta report updates only its base's Available and Utilized items and "
                         "State: send the whole document", element=element)


def _check(delta: Node) -> None:
    """DocumentError unless `delta` holds only what a delta may."""
    for field, element in (("name", "Name"), ("opsys", "Opsys"), ("arch", "Arch"), ("description", "Description")):
        if getattr(delta, field) is not None:
            raise _refuse(f"a delta report carries {element}", element)
    if delta.features:
        raise _refuse("a delta report carries Feature", "Feature")
    if delta.configured.items:
        raise _refuse("a delta report carries Configured", "Configured")
    for ext in delta.extensions:
        if not _per_sample(ext):
            raise _refuse(f"a delta report carries the Extension {ext.name!r} (type {ext.type!r})", "Extension")
    if delta.extension(SAMPLE_ID, AGENT) is None:
        raise DocumentError("a delta report must name its own sample (an Agent Extension SampleId)",
                            element="Extension")


class BaseIndex:
    """Where a base's parts are, for every delta of it (a base serves many: built once, kept
    beside it): each Available and Utilized item's place by its key (-1: the base names it
    twice), and the places of its per-sample Agent extensions."""

    __slots__ = ("places", "per_sample", "unique")

    def __init__(self, base: Node) -> None:
        self.places: dict[str, dict[Key, int]] = {}
        for field in VOLATILE:
            where: dict[Key, int] = {}
            for index, item in enumerate(getattr(base, field).items):
                key = key_of(item)
                where[key] = -1 if key in where else index
            self.places[field] = where
        self.per_sample = [index for index, ext in enumerate(base.extensions) if _per_sample(ext)]
        #: whether the base names each item once (a delta can only name items so named)
        self.unique = all(place >= 0 for where in self.places.values() for place in where.values())


def apply_delta(base: Node, delta: Node, index: BaseIndex | None = None) -> Node:
    """The host's sample that the delta says: `base` with the delta's State, its own sample's
    Agent extensions and its Available and Utilized items in place of the base's of the same
    key. DocumentError when the delta carries anything else, or names an item the base has not
    (or has twice). `index`: the base's BaseIndex, when one is kept."""
    _check(delta)
    if index is None:
        index = BaseIndex(base)
    extensions = list(base.extensions)
    own = {ext.name: ext for ext in delta.extensions if ext.name != BASE_SAMPLE}
    for place in reversed(index.per_sample):
        mine = own.pop(extensions[place].name, None)
        if mine is not None:
            extensions[place] = mine
        else:
            del extensions[place]
    extensions.extend(own.values())
    merged = Node(id=base.id, name=base.name, features=base.features, opsys=base.opsys, arch=base.arch,
                  description=base.description, state=delta.state if delta.state is not None else base.state,
                  extensions=extensions, configured=base.configured, available=base.available,
                  utilized=base.utilized)
    for field, element in (("available", "Available"), ("utilized", "Utilized")):
        updates: list[Consumable] = getattr(delta, field).items
        if not updates:
            continue
        items = list(getattr(base, field).items)
        where = index.places[field]
        for item in updates:
            at = where.get(key_of(item))
            if at is None or at < 0:
                said = "twice in" if at is not None else "not in"
                raise _refuse(f"{element} {_words(item)} is {said} the base sample", element)
            items[at] = item
        setattr(merged, field, Properties(items))
    return merged


def _words(item: Consumable) -> str:
    attributes = [f'{name}="{value}"' for name, value in (("name", item.name), ("type", item.type),
                                                          ("metric", item.metric)) if value is not None]
    return f"<{item.kind}{' ' if attributes else ''}{' '.join(attributes)}>"
