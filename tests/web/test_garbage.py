"""The server's schedule for the cyclic garbage collector (infosvc/web/garbage.py): young passes
by the clock and by a low allocation trigger, full passes only by the clock, at an interval that
grows with their cost; the thresholds given back when the last app stops. The stall it prevents (a
middle-generation pass over every host object built since the last one, 0.45 s at 10,000 agents)
is measured by bench/soak.py, not here; this holds the mechanism: replaced host objects do not
pile up in the young generations, nor do the objects a burst builds between two ticks."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from support.documents import node_document
from infosvc.config.site import parse_config
from infosvc.hosts.tokens import Role, Tokens, new_token
from infosvc.web.app import make_app
from infosvc.web.garbage import FULL_COST_RATIO, MAX_FULL_SECONDS, THRESHOLDS, YOUNG_SECONDS, CollectionSchedule

HOSTS = 40
ROUNDS = 10


def test_the_schedule_makes_young_passes_and_a_full_one_each_period() -> None:
    now = [0.0]
    collected: list[int] = []
    schedule = CollectionSchedule(full=10.0, clock=lambda: now[0], collect=lambda g: collected.append(g) or 0)
    for at in (0.5, 1.0, 9.99, 10.0, 10.5, 19.99, 20.0, 45.0, 45.5):
        now[0] = at
        schedule.tick()
    # a full pass at 10 and 20; at 45 (a loop late by more than a period) one, not several
    assert collected == [1, 1, 1, 2, 1, 1, 2, 2, 1]
    assert schedule.passes == {1: 6, 2: 3}


def test_a_costly_full_pass_puts_the_next_one_further_off() -> None:
    """A full pass runs at most once per FULL_COST_RATIO times its duration, up to an hour apart."""
    now = [0.0]

    def collect(generation: int, seconds: float) -> int:
        if generation == 2:
            now[0] += seconds  # the pass takes this long
        return 0

    for seconds, interval in ((0.5, 600.0), (3.0, 3.0 * FULL_COST_RATIO), (60.0, MAX_FULL_SECONDS)):
        now[0] = 0.0
        schedule = CollectionSchedule(full=600.0, clock=lambda: now[0], collect=lambda g, s=seconds: collect(g, s))
        now[0] = 600.0
        assert schedule.tick() == 2
        assert schedule.full_interval == interval
        now[0] = 600.0 + interval - 1
        assert schedule.tick() == 1
        now[0] = 600.0 + interval
        assert schedule.tick() == 2


def test_replaced_host_objects_do_not_pile_up_in_the_young_generations(tmp_path: Path) -> None:
    """Each report replaces its host's objects (~100 tracked): allocations minus deallocations,
    CPython's trigger, hardly move, so without the schedule the young generations keep every one
    built since their last pass."""
    tokens = Tokens()
    agents = [new_token() for _ in range(HOSTS)]
    for i, token in enumerate(agents):
        tokens.add(token, Role.AGENT, host=f"gc{i:02d}")
    young_after: list[int] = []
    young_burst: list[int] = []

    async def run() -> None:
        app = make_app(parse_config({}), db=tmp_path / "db.sqlite", tokens=tokens)
        async with TestClient(TestServer(app)) as client:
            assert gc.get_threshold() == THRESHOLDS
            # A burst between two ticks (nothing awaited here: no tick can run) is walked in steps
            # by the allocation trigger, not left for one long pass.
            burst = [[i] for i in range(200_000)]
            young_burst.append(len(gc.get_objects(0)) + len(gc.get_objects(1)))
            del burst
            for sequence in range(ROUNDS):
                for i, token in enumerate(agents):
                    response = await client.post("/v1/nodes", data=node_document(f"gc{i:02d}", sequence=sequence),
                                                 headers={"Authorization": f"Bearer {token}",
                                                          "Content-Type": "application/xml"})
                    assert response.status == 200, await response.text()
            await asyncio.sleep(YOUNG_SECONDS * 3)  # at least two young passes
            young_after.append(len(gc.get_objects(0)) + len(gc.get_objects(1)))

    before = gc.get_threshold()
    asyncio.run(run())
    assert gc.get_threshold() == before, "the thresholds are given back once the app has stopped"
    assert young_burst[0] < 40_000, young_burst  # 200,000 with the trigger off
    assert young_after[0] < 1_000, young_after  # 11 here; 2,890 with CPython's default trigger, 8,988 with the 50,000 it had


def test_apps_that_overlap_keep_the_thresholds_until_the_last_stops(tmp_path: Path) -> None:
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []

    async def run() -> None:
        first = TestClient(TestServer(make_app(parse_config({}), db=tmp_path / "a.sqlite")))
        second = TestClient(TestServer(make_app(parse_config({}), db=tmp_path / "b.sqlite")))
        await first.start_server()
        await second.start_server()
        await first.close()
        seen.append(gc.get_threshold())  # the second still runs
        await second.close()
        seen.append(gc.get_threshold())

    asyncio.run(run())
    assert seen == [THRESHOLDS, before]


def test_a_start_that_fails_gives_the_thresholds_back(tmp_path: Path) -> None:
    """The store cannot be opened (its path is a directory): `infosvc serve`'s runner leaves the
    contexts the start entered, the collector's schedule among them."""
    import sqlite3

    from infosvc.store import StoreError
    from infosvc.web import server
    from infosvc.web.connections import Policy

    before = gc.get_threshold()
    (tmp_path / "db").mkdir()
    config = parse_config({})
    app = make_app(config, db=tmp_path / "db")
    with pytest.raises((StoreError, sqlite3.Error)):  # as `infosvc serve` reports them
        server.run(app, host="127.0.0.1", port=0, ssl_context=None, policy=Policy.of(config.service))
    assert gc.get_threshold() == before
