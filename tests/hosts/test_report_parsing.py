"""Where an agent's report is parsed: on the event loop when it is small (a few milliseconds), in
a worker thread when it is large (~0.16 ms a KB: a 256 KB report held the loop 42 ms, and one
unbound agent token could have 256 in flight). A real Aggregator and SQLite store."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from infosvc.config.site import parse_config
from infosvc.hosts import aggregator
from infosvc.hosts.aggregator import Aggregator
from infosvc.hosts.tokens import Role, Tokens, new_token
from infosvc.store import Store

from support.documents import node_document


def test_a_large_agent_report_is_parsed_off_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "r.sqlite")
    tokens = Tokens()
    agg = Aggregator(parse_config({}), store, tokens)
    on_loop: list[bool] = []
    real = aggregator.parse_node

    def where(*args: Any, **kwargs: Any) -> Any:
        on_loop.append(threading.current_thread() is threading.main_thread())  # asyncio.run's loop runs here
        return real(*args, **kwargs)
    monkeypatch.setattr(aggregator, "parse_node", where)

    async def report(name: str) -> None:
        await agg.ingest(tokens.add(new_token(), Role.AGENT), node_document(name))
    try:
        small = node_document("h1")
        assert len(small) <= aggregator.INLINE_REPORT_BYTES
        asyncio.run(report("h1"))
        monkeypatch.setattr(aggregator, "INLINE_REPORT_BYTES", len(small) // 2)  # as a large one is read
        asyncio.run(report("h2"))
        assert on_loop == [True, False]
        assert {"h1", "h2"} <= set(agg.table.entries)
    finally:
        store.close()
