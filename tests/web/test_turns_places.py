"""`Turns` (infosvc/web/turns.py): the places of anonymous readers and of readers with a token are
counted apart, and each place is given back however its work ends, cancelled before its first
step included (a review: the count stayed taken, and the queue shrank by one for good)."""

from __future__ import annotations

import asyncio

import pytest

from infosvc.web.errors import HttpError
from infosvc.web.turns import Turns


def test_a_place_is_given_back_when_its_work_is_cancelled_before_it_began() -> None:
    async def run() -> dict[bool, int]:
        turns = Turns("busy", 1)
        task = turns.start(lambda: (lambda: None))
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)
        return dict(turns._taken)

    assert asyncio.run(run()) == {False: 0, True: 0}


def test_the_places_of_readers_with_a_token_are_their_own() -> None:
    async def run() -> tuple[int, int]:
        turns = Turns("busy", 1)
        release = asyncio.Event()
        loop = asyncio.get_running_loop()

        def blocked() -> None:
            asyncio.run_coroutine_threadsafe(release.wait(), loop).result(10)

        anonymous = [turns.start(lambda: blocked) for _ in range(2)]  # the one under way and one waiting
        with pytest.raises(HttpError) as refused:
            turns.start(lambda: (lambda: None))
        known = turns.start(lambda: (lambda: 7), known=True)
        release.set()
        await asyncio.gather(*anonymous)
        return refused.value.status, await known

    assert asyncio.run(run()) == (503, 7)
