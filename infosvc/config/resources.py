"""Software licenses and generic consumable resources the site config gives its hosts
(`[[resources]]`, docs/configuration.md), and which of them each host has.

An entry names hosts by a NodeSet (`nodes`), by clusters (`clusters`), or, with neither, every
host of the site. Its `licenses` are floating: one pool per feature, shared by every host the
entry names, so a job on any of them draws from the same count (the job queue holds what running
jobs draw: infosvc.sched.hosts). Its `consumables` are per host: each host it names has that much
of its own. A host takes each license feature, and each consumable, from the first entry that
names it and gives that name, so that a later, broader entry is a default for what an earlier one
does not say.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Final, Iterable, Mapping

from ClusterShell.NodeSet import NodeSet, NodeSetException

from infosvc.config.table import ConfigError, TomlTable, known_clusters, unique_ids
from infosvc.model.ccsjob import MAX_LICENSE_AMOUNT
from infosvc.model.glue import LICENSE, Resources

__all__ = ["MAX_CONSUMABLE", "LicensePools", "ResourceEntry", "cluster_licenses", "consumables_of",
           "license_pools", "licenses_of", "resource_entry", "resources_of"]

#: A license feature as CCS writes one in SoftwareLicense (`feature:amount,...`): no `:`, `,` or
#: white space; bounded so that a published document stays small.
_FEATURE: Final = re.compile(r"[^:,\s]{1,64}")
#: A consumable's name: what an SSS job's `<Resource name="...">` asks for.
_NAME: Final = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
#: Resource names that already mean something (a license; what the agent reports as FileSystem,
#: NetworkAdapter and Load): a consumable so named would be read as that.
_RESERVED: Final = frozenset(name.casefold() for name in (LICENSE, "FileSystem", "NetworkAdapter", "Load"))
#: The largest consumable amount: past 2^53 a float no longer holds every integer.
MAX_CONSUMABLE: Final = 2**53
#: Names per entry: a config is read by people, and every host's documents carry what it has.
MAX_NAMES: Final = 64


@dataclass(frozen=True, slots=True)
class ResourceEntry:
    """One `[[resources]]` entry: the hosts it names and what it gives them."""

    #: a NodeSet naming the hosts; None: by `clusters`, or every host when that is empty too
    nodes: NodeSet | None = None
    #: the ids of the clusters whose hosts it names
    clusters: tuple[str, ...] = ()
    #: license feature -> licenses in the pool its hosts share
    licenses: dict[str, int] = field(default_factory=dict)
    #: consumable name -> the amount each host it names has
    consumables: dict[str, int | float] = field(default_factory=dict)

    def names(self, host: str, cluster: str) -> bool:
        """Whether the entry names `host` (of cluster `cluster`)."""
        if self.nodes is not None:
            try:
                return host in self.nodes
            except NodeSetException:
                return False
        return not self.clusters or cluster in self.clusters


# --- reading the config's values ----------------------------------------------------------------

def licenses_of(value: Mapping[str, object]) -> dict[str, int]:
    """`{feature = count, ...}` checked: ValueError naming the feature for a bad name or count."""
    _few(value)
    found: dict[str, int] = {}
    for feature, count in value.items():
        if not _FEATURE.fullmatch(feature):
            raise ValueError(f"license feature {feature!r} is not a CCS feature name (1 to 64 characters, "
                             "no ':', ',' or white space)")
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_LICENSE_AMOUNT:
            raise ValueError(f"{feature}: a license count is an integer 1 .. {MAX_LICENSE_AMOUNT}, got {count!r}")
        found[feature] = count
    return found


def consumables_of(value: Mapping[str, object]) -> dict[str, int | float]:
    """`{name = amount, ...}` checked: ValueError naming the consumable for a bad name or amount."""
    _few(value)
    found: dict[str, int | float] = {}
    for name, amount in value.items():
        if not _NAME.fullmatch(name):
            raise ValueError(f"consumable {name!r} is not a name of 1 to 64 letters, digits and _ . + -")
        if name.casefold() in _RESERVED:
            raise ValueError(f"consumable {name!r}: the name is taken (licenses go in `licenses`; FileSystem, "
                             "NetworkAdapter and Load are what agents report)")
        if (not isinstance(amount, (int, float)) or isinstance(amount, bool) or not math.isfinite(amount)
                or not 0 < amount <= MAX_CONSUMABLE):
            raise ValueError(f"{name}: an amount is a number greater than 0 and at most 2^53, got {amount!r}")
        found[name] = amount
    return found


def _few(value: Mapping[str, object]) -> None:
    if len(value) > MAX_NAMES:
        raise ValueError(f"{len(value)} names; at most {MAX_NAMES} per entry")


# --- what a host has ----------------------------------------------------------------------------

def license_pools(entries: Iterable[ResourceEntry], host: str, cluster: str) -> tuple[tuple[str, int], ...]:
    """(feature, the index of the entry whose pool it draws from) for each license `host` has."""
    found: dict[str, int] = {}
    for index, entry in enumerate(entries):
        if entry.licenses and entry.names(host, cluster):
            for feature in entry.licenses:
                found.setdefault(feature, index)
    return tuple(found.items())


def resources_of(entries: tuple[ResourceEntry, ...], host: str, cluster: str) -> Resources | None:
    """What the config gives `host`: each license feature with its pool's count, each consumable
    with its amount; None when it gives nothing."""
    if not entries:
        return None
    licenses: dict[str, int] = {}
    consumables: dict[str, int | float] = {}
    for entry in entries:
        if entry.names(host, cluster):
            for feature, count in entry.licenses.items():
                licenses.setdefault(feature, count)
            for name, amount in entry.consumables.items():
                consumables.setdefault(name, amount)
    if not licenses and not consumables:
        return None
    return Resources(tuple(licenses.items()), tuple(consumables.items()))


def cluster_licenses(entries: Iterable[ResourceEntry], cluster: str) -> tuple[tuple[str, int], ...]:
    """The license pools a cluster's hosts share by the config's `clusters` (or site-wide) entries:
    what the cluster publishes. Pools of hosts named by a NodeSet are published by those hosts."""
    found: dict[str, int] = {}
    for entry in entries:
        if entry.nodes is None and (not entry.clusters or cluster in entry.clusters):
            for feature, count in entry.licenses.items():
                found.setdefault(feature, count)
    return tuple(found.items())


class LicensePools:
    """The config's license pools numbered for the scheduler (infosvc.sched.hosts.HostPool): one
    per entry and feature, `sizes` their licenses; `of` gives what a host draws from which."""

    def __init__(self, entries: tuple[ResourceEntry, ...]) -> None:
        self.entries = entries
        self._number: dict[tuple[int, str], int] = {}
        self.sizes: list[int] = []
        for index, entry in enumerate(entries):
            for feature, count in entry.licenses.items():
                self._number[index, feature] = len(self.sizes)
                self.sizes.append(count)

    def of(self, host: str, cluster: str) -> tuple[tuple[str, int], ...]:
        """(feature, pool number) for each license `host` has."""
        if not self.sizes:
            return ()
        return tuple((feature, self._number[index, feature])
                     for feature, index in license_pools(self.entries, host, cluster))


def resource_entry(t: TomlTable, cluster_ids: set[str]) -> ResourceEntry:
    """One `[[resources]]` table read (`cluster_ids`: the clusters configured)."""
    nodes, clusters = t.nodeset("nodes", required=False), t.strings("clusters")
    if nodes is not None and clusters:
        raise ConfigError(f"{t.where}: nodes or clusters, not both (neither: every host)")
    unique_ids(f"{t.where}.clusters", list(clusters))
    known_clusters(f"{t.where}.clusters", clusters, cluster_ids)
    amounts: dict[str, Any] = {}
    for key, read in (("licenses", licenses_of), ("consumables", consumables_of)):
        value = t._take(key, (dict,), {}, "a table of name = amount")
        try:
            amounts[key] = read(value)
        except ValueError as exc:
            raise ConfigError(f"{t.where}.{key}: {exc}") from None
    t.done()
    return ResourceEntry(nodes, clusters, amounts["licenses"], amounts["consumables"])
