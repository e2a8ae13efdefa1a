"""The fixtures shared by the tests; what they are built from is in tests/support/.

`serve(...)` starts the real aggregator (support.server.Server) on a free loopback port with its
own files under tmp_path and stops it at the end, failing the test if the server logged a bug.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pytest
from hypothesis import settings

from support.configspy import Accepted, record_accepted
from support.server import InProcessServer, Server, ServerFactory, stop_and_check

# CI runs the property tests on a fixed seed and without per-example deadlines: a landing must not
# depend on the draw, nor on how loaded the shared machine is. Locally they explore anew each run.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


@contextlib.contextmanager
def _servers(kind: type[Server], directory: Callable[[int], Path]) -> Iterator[ServerFactory]:
    """A factory of servers of `kind`, each in directory(n); all stopped and checked at the end."""
    servers: list[Server] = []

    def start(config: Mapping[str, Mapping[str, Any]] | None = None, *, start: bool = True,
              **kwargs: Any) -> Server:
        server = kind(directory(len(servers)), config or {}, **kwargs)
        servers.append(server)
        return server.start() if start else server

    try:
        yield start
    finally:
        stop_and_check(servers)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[ServerFactory]:
    """serve(config={...}, agents=N, bound={...}) -> a started Server; all are stopped at the end."""
    with _servers(Server, lambda n: tmp_path / f"server{n}") as factory:
        yield factory


@pytest.fixture
def serve_app(tmp_path: Path) -> Iterator[ServerFactory]:
    """As `serve`, with the app served in this process (support.server.InProcessServer): for tests
    of what the handlers answer, where the process itself does not matter."""
    with _servers(InProcessServer, lambda n: tmp_path / f"app{n}") as factory:
        yield factory


@pytest.fixture(scope="module")
def module_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerFactory]:
    """As `serve`, for servers shared by the tests of one module."""
    with _servers(Server, lambda n: tmp_path_factory.mktemp("server")) as factory:
        yield factory


@pytest.fixture(scope="module")
def module_serve_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerFactory]:
    """As `serve_app`, for in-process servers shared by the tests of one module."""
    with _servers(InProcessServer, lambda n: tmp_path_factory.mktemp("app")) as factory:
        yield factory


@pytest.fixture
def accepted(monkeypatch: pytest.MonkeyPatch) -> Accepted:
    """Every key parse_config accepts, recorded as it reads them."""
    return record_accepted(monkeypatch)
