"""The store's past view (Store.reports_at, behind GET /v1/glue?at=): every host published at the
instant, however many removed hosts the history keeps, and a refusal naming the bound rather
than a view cut short."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Iterator

import pytest

from infosvc.store import HostEvent, PastViewTooLarge, Report, Store

REMOVED = 1001


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "infosvc.sqlite", history_per_host=3)
    yield s
    s.close()


def ids(store: Store, at: float, limit: int) -> list[str]:
    return [row[0] for row in store.reports_at(at, limit)]


def test_removed_hosts_do_not_crowd_out_the_hosts_published_then(store: Store) -> None:
    async def write() -> None:
        # the real host first (the lowest number), then many that are decommissioned later
        await store.add_report(Report("zz-real", b"<real 1/>", 100.0, True))
        await asyncio.gather(*(store.add_report(Report(f"a{i:05d}", b"<junk/>", 200.0 + i / 1e4, True))
                               for i in range(REMOVED)))
        await store.add_report(Report("zz-real", b"<real 2/>", 300.0, True))
        await asyncio.gather(*(store.remove_host(HostEvent(f"a{i:05d}", 400.0, "remove", None))
                               for i in range(REMOVED)))
        # one removed host reports again: it is back from then on
        await store.add_report(Report("a00007", b"<back/>", 500.0, True))

    asyncio.run(write())
    # after the removals: the real host alone, its newest report then
    assert ids(store, 450.0, 1000) == ["zz-real"]
    assert [row[2] for row in store.reports_at(450.0, 1000)] == [b"<real 2/>"]
    assert ids(store, 400.0, 1000) == ["zz-real"]  # removed at that instant: gone
    assert sorted(ids(store, 600.0, 1000)) == ["a00007", "zz-real"]
    # before the removals every host was published: all of them, when the bound allows
    before = ids(store, 350.0, 2000)
    assert len(before) == REMOVED + 1 and "zz-real" in before
    assert [row[2] for row in store.reports_at(150.0, 2000)] == [b"<real 1/>"]
    assert ids(store, 50.0, 1000) == []
    # past the bound: refused, naming how many and the bound, not cut short
    with pytest.raises(PastViewTooLarge) as refused:
        ids(store, 350.0, 1000)
    assert (refused.value.hosts, refused.value.limit) == (REMOVED + 1, 1000)
    assert "1002" in str(refused.value) and "1000" in str(refused.value)
    # exactly at the bound: answered
    assert len(ids(store, 350.0, REMOVED + 1)) == REMOVED + 1


def test_a_delta_comes_with_its_base(store: Store) -> None:
    async def write() -> None:
        seq = await store.add_report(Report("cn01", b"<whole/>", 10.0, True))
        await store.add_report(Report("cn01", b"<delta/>", 20.0, True, base=seq))

    asyncio.run(write())
    assert list(store.reports_at(15.0, 10)) == [("cn01", 10.0, b"<whole/>", None)]
    assert list(store.reports_at(25.0, 10)) == [("cn01", 20.0, b"<delta/>", b"<whole/>")]


def test_the_view_is_chosen_through_an_index(store: Store) -> None:
    """The hosts are chosen from the reports' index, not by reading every stored document, and
    their documents are read one row at a time, not gathered (sorted) all at once."""
    from infosvc.store import connect
    from infosvc.store.hosts import REPORTS_AT

    plan = connect(store.path).conn.execute("EXPLAIN QUERY PLAN " + REPORTS_AT, {"at": 1.0, "limit": 10}).fetchall()
    assert any("COVERING INDEX reports_time" in step[-1] for step in plan), plan
    assert not any(step[1] == 0 and "TEMP B-TREE" in step[-1] for step in plan), plan
