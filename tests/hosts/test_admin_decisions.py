"""Two admin decisions on one host at once (a remove racing a pause, a remove, a drain): each is
whole or answered NotFound (404), never half made, never an AssertionError (500). A real
Aggregator and SQLite store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from infosvc.config.site import parse_config
from infosvc.errors import NotFound
from infosvc.hosts.aggregator import Aggregator
from infosvc.hosts.tokens import Role, Tokens, new_token
from infosvc.store import Store

from support.documents import node_document

HOST = "h1"
DECISIONS: dict[str, Callable[[Aggregator], Awaitable[Any]]] = {
    "pause": lambda agg: agg.set_flags(HOST, paused=True, action="pause"),
    "remove": lambda agg: agg.remove(HOST),
    "purge": lambda agg: agg.remove(HOST, purge=True),
    "drain": lambda agg: agg.drain(HOST, "a launch failed"),
}


@pytest.mark.parametrize("second", sorted(DECISIONS))
@pytest.mark.parametrize("first", ["remove", "purge"])
def test_a_decision_racing_a_removal_is_whole_or_not_found(tmp_path: Path, first: str, second: str) -> None:
    store = Store(tmp_path / "d.sqlite")
    tokens = Tokens()
    agg = Aggregator(parse_config({}), store, tokens)

    async def race() -> list[Any]:
        await agg.ingest(tokens.add(new_token(), Role.AGENT), node_document(HOST))
        # both pass the check before either has written: the second finds the host gone
        return await asyncio.gather(DECISIONS[first](agg), DECISIONS[second](agg), return_exceptions=True)

    try:
        removed, other = asyncio.run(race())
        assert not isinstance(removed, BaseException), removed
        assert isinstance(other, NotFound), other
        assert agg.table.get(HOST) is None
    finally:
        store.close()
