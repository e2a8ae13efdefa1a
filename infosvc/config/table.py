"""Reading the site config's TOML: `TomlTable`, typed getters that name the key and refuse leftovers;
`Setting`, one plain key with its default and bounds; `ConfigNodeSet`, a config NodeSet whose
membership test is a set lookup; `ConfigError`. infosvc.config.site builds the config with them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Final

from ClusterShell.NodeSet import NodeSet, NodeSetException, NodeSetParseError

from infosvc.model.glue import directory_key
from infosvc.model.nodeset import NO_GROUPS


class ConfigError(ValueError):
    pass


#: The most a `*_seconds` timeout or interval may be: a day (a longer one is a typo or "never").
DAY_SECONDS: Final = 86_400


@dataclass(frozen=True, slots=True)
class Setting:
    """One key of a table of plain values: its default, its bounds and what it means, declared once
    in infosvc.config.site's SETTINGS (its dataclasses take their defaults from it, parse_config its bounds), as
    docs/configuration.md says at more length; a test checks the docs list every one."""

    key: str
    #: a tuple is a list of strings in the TOML
    default: str | int | float | bool | tuple[str, ...]
    help: str
    minimum: int | float | None = None
    maximum: int | float | None = None
    #: the values a text setting may take
    choices: tuple[str, ...] = ()
    #: what the type cannot say of a value: raises ValueError, its message after the key's name
    check: Callable[[Any], None] | None = None


#: A config NodeSet of at most this many names is written out once, at load.
MAX_EXPANDED_NAMES: Final = 200_000


class ConfigNodeSet(NodeSet):  # type: ignore[misc]  # ClusterShell ships no type information
    """A NodeSet of the config, never changed after load, whose membership test is a set lookup.

    ClusterShell parses the host name on every `in` (~25 µs); the roll-up asks once per report and
    once per host at start, three times (cluster, benchmark, software).
    """

    def __init__(self, text: str) -> None:
        if "@" in text:  # see infosvc.model.nodeset: groups could run shell commands
            raise NodeSetParseError(text.strip(), "NodeSet groups (@name) are not supported")
        # Lower case: host Ids are kept so (infosvc.model.hostid), and `Node[01-04]` must still name them.
        super().__init__(text.lower(), resolver=NO_GROUPS)
        self._names = frozenset(self) if len(self) <= MAX_EXPANDED_NAMES else None

    def __contains__(self, host: object) -> bool:
        if self._names is not None:
            return host in self._names
        return bool(super().__contains__(host))



class TomlTable:
    """A TOML table being read: typed getters that name the key, and a check for leftovers."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a table")
        self.data = dict(data)
        self.where = where

    def _take(self, key: str, kinds: tuple[type, ...], default: Any, what: str) -> Any:
        if key not in self.data:
            return default
        value = self.data.pop(key)
        # bool is an int in Python; a TOML `true` is no number here.
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ConfigError(f"{self.where}.{key}: expected {what}, got {value!r}")
        return value

    def text(self, key: str, default: str | None = None) -> Any:
        return self._take(key, (str,), default, "a string")

    def integer(self, key: str, default: int, minimum: int = 0, maximum: int = (1 << 63) - 1) -> int:
        value: int = self._take(key, (int,), default, "an integer")
        if value < minimum:
            raise ConfigError(f"{self.where}.{key}: must be at least {minimum}, got {value}")
        if value > maximum:
            raise ConfigError(f"{self.where}.{key}: must be at most {maximum}, got {value}")
        return value

    def number(self, key: str, default: float, minimum: float = 0.0, maximum: float = math.inf) -> float:
        """A finite number greater than `minimum` and at most `maximum` (TOML's inf and nan are no
        number of seconds: an infinite timeout is none)."""
        value = float(self._take(key, (int, float), default, "a number"))
        if not value > minimum:
            raise ConfigError(f"{self.where}.{key}: must be greater than {minimum:g}, got {value:g}")
        if not math.isfinite(value):
            raise ConfigError(f"{self.where}.{key}: must be a finite number, got {value:g}")
        if value > maximum:
            raise ConfigError(f"{self.where}.{key}: must be at most {maximum:g}, got {value:g}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        return bool(self._take(key, (bool,), default, "true or false"))

    def strings(self, key: str) -> tuple[str, ...]:
        value = self._take(key, (list,), [], "a list of strings")
        if not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{self.where}.{key}: expected a list of strings")
        return tuple(value)

    def table(self, key: str) -> TomlTable:
        return TomlTable(self.data.pop(key, {}), f"{self.where}.{key}" if self.where else key)

    def tables(self, key: str) -> list[TomlTable]:
        value = self.data.pop(key, [])
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected an array of tables ([[{key}]])")
        where = f"{self.where}.{key}" if self.where else key  # [[federation.upstreams]] names its parent
        return [TomlTable(item, f"{where}[{i}]") for i, item in enumerate(value)]

    def nodeset(self, key: str, required: bool = True) -> NodeSet | None:
        text = self.text(key)
        if text is None:
            if required:
                raise ConfigError(f"{self.where}.{key}: required (a NodeSet such as node[001-128])")
            return None
        try:
            return ConfigNodeSet(text)
        except NodeSetException as exc:
            raise ConfigError(f"{self.where}.{key}: not a NodeSet: {exc}") from None

    def settings(self, settings: tuple[Setting, ...]) -> dict[str, Any]:
        """The keys of `settings` (a table's in infosvc.config.site's SETTINGS), each read by the type
        of its default and within its bounds; any other key is an error (done())."""
        values: dict[str, Any] = {}
        for setting in settings:
            key, value = setting.key, setting.default
            if isinstance(value, bool):
                values[key] = self.flag(key, value)
            elif isinstance(value, int):
                most = int(setting.maximum) if setting.maximum is not None else (1 << 63) - 1
                values[key] = self.integer(key, value, minimum=int(setting.minimum or 0), maximum=most)
            elif isinstance(value, float):
                values[key] = self.number(key, value, minimum=float(setting.minimum or 0.0),
                                          maximum=math.inf if setting.maximum is None else float(setting.maximum))
            elif isinstance(value, tuple):
                values[key] = self.strings(key)
            else:
                values[key] = self.text(key, value)
                if setting.choices and values[key] not in setting.choices:
                    raise ConfigError(f"{self.where}.{key}: one of {', '.join(setting.choices)}, got {values[key]!r}")
            if setting.check is not None:
                try:
                    setting.check(values[key])
                except ValueError as exc:
                    raise ConfigError(f"{self.where}.{key}: {exc}") from None
        self.done()
        return values

    def done(self) -> None:
        if self.data:
            where = f"{self.where}: " if self.where else ""
            raise ConfigError(f"{where}unknown key(s): {', '.join(sorted(self.data))}")


#: The longest cluster or CE id: a subcluster's id is its cluster's and 41 more, and a top level
#: refuses any id of a site's past 255 (infosvc.codec.glue_checks.MAX_ID_CHARS)
MAX_ID_CHARS = 200


def unique_ids(what: str, ids: list[str]) -> None:
    """ConfigError when an id of `ids` is used twice, or two differ only in case or runs of spaces
    (`what` says where). GLUE 1.3 publishes cluster and CE ids as UniqueIDs, which a directory
    compares ignoring both (caseIgnoreIA5Match): clusters `C` and `c` were one entry to a BDII,
    the second cluster and its CE refused by ldapadd."""
    seen: dict[str, str] = {}
    for i in ids:
        if len(i) > MAX_ID_CHARS:
            raise ConfigError(f"{what}: id {i[:40]!r}... is {len(i):,} characters long, more than the {MAX_ID_CHARS} "
                              "an id may have (a top level refuses a site's longer ids)")
        key = directory_key(i)
        other = seen.get(key)
        if other == i:
            raise ConfigError(f"{what}: id {i!r} is used twice")
        if other is not None:
            raise ConfigError(f"{what}: ids {other!r} and {i!r} differ only in case or spaces: a directory (a BDII) "
                              "compares GLUE ids ignoring both, and would refuse the second one's entries")
        seen[key] = i


def known_clusters(where: str, names: tuple[str, ...], cluster_ids: set[str]) -> None:
    """ConfigError when one of `names` (what a CE or a `[[resources]]` entry serves) is no cluster
    of `cluster_ids`; they are matched as written, and the message names an id that differs only in
    case or spaces (a configured `Default` is the cluster a CE's `default` meant)."""
    for name in names:
        if name not in cluster_ids:
            twin = next((c for c in cluster_ids if directory_key(c) == directory_key(name)), None)
            raise ConfigError(f"{where}: no cluster {name!r} is configured" + (
                f" (ids are matched as written: the configured one is {twin!r})" if twin else ""))
