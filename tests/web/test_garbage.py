"""The server's schedule for the cyclic garbage collector (infosvc/web/garbage.py): young passes
by the clock, a full one every period, CPython's own trigger off while the app runs and back on
after. The stall it prevents (a middle-generation pass over every host object built since the
last one, 0.45 s at 10,000 agents) is measured by bench/soak.py, not here; this holds the
mechanism: replaced host objects do not pile up in the young generations."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from support.documents import node_document
from infosvc.site.config import parse_config
from infosvc.site.tokens import Role, Tokens, new_token
from infosvc.web.app import make_app
from infosvc.web.garbage import YOUNG_SECONDS, CollectionSchedule

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


def test_replaced_host_objects_do_not_pile_up_in_the_young_generations(tmp_path: Path) -> None:
    """Each report replaces its host's objects (~100 tracked): allocations minus deallocations,
    CPython's trigger, hardly move, so without the schedule the young generations keep every one
    built since their last pass."""
    tokens = Tokens()
    agents = [new_token() for _ in range(HOSTS)]
    for i, token in enumerate(agents):
        tokens.add(token, Role.AGENT, host=f"gc{i:02d}")
    young_after: list[int] = []

    async def run() -> None:
        app = make_app(parse_config({}), db=tmp_path / "db.sqlite", tokens=tokens)
        async with TestClient(TestServer(app)) as client:
            assert not gc.isenabled(), "CPython's own trigger is off while the app runs"
            for sequence in range(ROUNDS):
                for i, token in enumerate(agents):
                    response = await client.post("/v1/nodes", data=node_document(f"gc{i:02d}", sequence=sequence),
                                                 headers={"Authorization": f"Bearer {token}",
                                                          "Content-Type": "application/xml"})
                    assert response.status == 200, await response.text()
            await asyncio.sleep(YOUNG_SECONDS * 3)  # at least two young passes
            young_after.append(len(gc.get_objects(0)) + len(gc.get_objects(1)))

    was_enabled = gc.isenabled()
    gc.enable()
    try:
        asyncio.run(run())
        assert gc.isenabled(), "the trigger is back on once the app has stopped"
    finally:
        if not was_enabled:
            gc.disable()
    assert young_after[0] < 1_000, young_after  # 11 here; 2,890 with CPython's default trigger, 8,988 with the 50,000 it had
