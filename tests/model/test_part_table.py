"""model.node.PartTable: parts alike are one object, 1 and 1.0 are not alike, and the table stays
within its bound."""

from __future__ import annotations

from infosvc.model.node import Consumable, Extension, PartTable, consumable_key


def test_parts_alike_are_one_object_and_ints_and_floats_stay_apart() -> None:
    table = PartTable()
    first = table.get(consumable_key(("Memory", 1, "MB", None, None, None, None, None)), Consumable,
                      "Memory", 1, "MB")
    again = table.get(consumable_key(("Memory", 1, "MB", None, None, None, None, None)), Consumable,
                      "Memory", 1, "MB")
    as_float = table.get(consumable_key(("Memory", 1.0, "MB", None, None, None, None, None)), Consumable,
                         "Memory", 1.0, "MB")
    assert again is first
    assert as_float is not first and type(as_float.value) is float and type(first.value) is int
    rate = table.get(consumable_key(("Processors", 2, None, None, None, 1, None, None)), Consumable,
                     "Processors", 2, None, None, None, 1)
    rate_float = table.get(consumable_key(("Processors", 2, None, None, None, 1.0, None, None)), Consumable,
                           "Processors", 2, None, None, None, 1.0)
    assert type(rate.consumption_rate) is int and type(rate_float.consumption_rate) is float


def test_the_table_is_bounded() -> None:
    table = PartTable(limit=8)
    made = [table.get((str(i), "v", None), Extension, str(i), "v") for i in range(20)]
    assert len(table) <= 8
    assert table.get(("19", "v", None), Extension, "19", "v") is made[19]  # the newest still there
    assert table.get(("0", "v", None), Extension, "0", "v") == made[0]  # made again, equal
