"""Which keys the site config's parser accepts, recorded as it reads them: what the tests of the
config's documentation and of deploy/'s example config compare against."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from infosvc.config import site as siteconfig
from infosvc.config.site import parse_config

#: A config with one of each array table, so that parse_config, reading it, reads every key it
#: knows (each getter runs whether the key is present or not).
ONE_OF_EACH = {"clusters": [{"id": "c"}], "computing_elements": [{"id": "ce"}],
               "benchmarks": [{"nodes": "n1"}], "software": [{"nodes": "n1"}], "resources": [{}],
               "federation": {"upstreams": [{"url": "http://site.example.org:8080"}]}}
#: Tables whose keys are names the site chooses (license features, consumables), not config keys.
NAMED_BY_THE_SITE = {"resources.licenses", "resources.consumables", "lrms.accounts"}


@dataclasses.dataclass
class Accepted:
    scalars: dict[str, set[str]]  # table ("" for the top, "clusters" for [[clusters]]) -> its keys
    tables: set[str]  # the tables, by dotted path


def path_of(where: str, key: str = "") -> str:
    where = re.sub(r"\[\d+\]", "", where)
    return f"{where}.{key}" if where and key else where or key


def record_accepted(monkeypatch: pytest.MonkeyPatch) -> Accepted:
    """Every key parse_config accepts, recorded as it reads them."""
    found = Accepted({}, set())
    table_class = siteconfig.TomlTable
    take, table, tables = table_class._take, table_class.table, table_class.tables

    def spy_take(self: Any, key: str, *args: Any) -> Any:
        found.scalars.setdefault(path_of(self.where), set()).add(key)
        return take(self, key, *args)

    def spy_table(self: Any, key: str) -> Any:
        found.tables.add(path_of(self.where, key))
        return table(self, key)

    def spy_tables(self: Any, key: str) -> Any:
        found.tables.add(path_of(self.where, key))
        return tables(self, key)

    monkeypatch.setattr(table_class, "_take", spy_take)
    monkeypatch.setattr(table_class, "table", spy_table)
    monkeypatch.setattr(table_class, "tables", spy_tables)
    parse_config(ONE_OF_EACH)
    monkeypatch.undo()
    return found


def keys_of(data: dict[str, Any], where: str = "") -> set[str]:
    found = set()
    for key, value in data.items():
        path = path_of(where, key)
        found.add(path)
        if path in NAMED_BY_THE_SITE:
            continue
        items = value if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) else [value]
        for item in items:
            if isinstance(item, dict):
                found |= keys_of(item, path)
    return found
