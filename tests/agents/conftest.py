"""Fixtures of the agent's tests."""

from __future__ import annotations

from typing import Iterator

import pytest

from support.scripted import ScriptedFactory, scripted_servers


@pytest.fixture
def scripted() -> Iterator[ScriptedFactory]:
    """scripted(statuses, refusal_headers=None): a server answering each POST with the next
    status of its script, then 200 (support/scripted.py); closed after the test."""
    yield from scripted_servers()
