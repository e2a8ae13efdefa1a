"""The real `infosvc serve` on loopback: a subprocess with its own site config (TOML), tokens file
and SQLite file, started and waited for by polling /healthz (a deadline, never a fixed sleep);
one request over http.client; waiting for a condition."""

from __future__ import annotations

import http.client
import json
import os
import resource
import signal
import socket
import sqlite3
import ssl
import subprocess
from concurrent.futures import ThreadPoolExecutor
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import pytest

from infosvc.hosts.tokens import new_token
from support.documents import node_document

START_TIMEOUT = 30.0


# --- processes -------------------------------------------------------------------------------

def stop_process(process: subprocess.Popen[Any], timeout: float = 15) -> None:
    """SIGTERM, as an operator would; SIGKILL if it has not stopped within `timeout` seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# --- HTTP ------------------------------------------------------------------------------------

@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def is_error(self, status: int) -> bool:
        """A refusal as the API promises it: this status and a JSON {"error", "detail"} body."""
        if self.status != status:
            return False
        data = self.json()
        return isinstance(data, dict) and set(data) == {"error", "detail"} and bool(data["error"])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def request(port: int, method: str, path: str, body: bytes | None = None, *, token: str | None = None,
            headers: Mapping[str, str] | None = None, timeout: float = 15.0,
            tls: ssl.SSLContext | None = None) -> Reply:
    """One request to 127.0.0.1:port; over https, verified with `tls`, when it is given."""
    all_headers = dict(headers or {})
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    if body is not None and method == "POST":
        all_headers.setdefault("Content-Type", "application/xml")
    connection = (http.client.HTTPConnection("127.0.0.1", port, timeout=timeout) if tls is None
                  else http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=tls))
    try:
        connection.request(method, path, body=body, headers=all_headers)
        response = connection.getresponse()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


# --- the server ------------------------------------------------------------------------------

def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):  # an inline table: [lrms] accounts = { atlas_prod = "atlas" }
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def toml(config: Mapping[str, Mapping[str, Any]]) -> str:
    """A site config of plain tables ({"service": {"max_body_bytes": 4096}, ...}) as TOML."""
    lines = []
    for table, keys in config.items():
        lines.append(f"[{table}]")
        lines.extend(f"{key} = {toml_value(value)}" for key, value in keys.items())
        lines.append("")
    return "\n".join(lines)


@dataclass
class Server:
    """One `infosvc serve` subprocess with its files; restartable on the same SQLite file."""

    directory: Path
    config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    agents: int = 8
    bound: Mapping[str, str] = field(default_factory=dict)  # token name -> host, the HOST column
    executors: Mapping[str, str] = field(default_factory=dict)  # executor token name -> its host
    users: Mapping[str, str] = field(default_factory=dict)  # submit token name -> the user it submits as
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    extra_args: tuple[str, ...] = ()  # more `infosvc serve` options, e.g. ("--tls-cert", F, "--tls-key", K)
    ca_file: Path | None = None  # with --tls-cert: the CA to verify it with; the server is then spoken to over https
    open_files: int | None = None  # RLIMIT_NOFILE of the server process (soft and hard), to run it out of files

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.db = self.directory / "infosvc.sqlite"
        self.config_file = self.directory / "site.toml"
        self.config_file.write_text(toml(self.config))
        self.tokens: dict[str, str] = {f"agent{i}": new_token() for i in range(self.agents)}
        self.tokens.update({name: new_token() for name in self.bound})
        self.tokens["admin"] = new_token()
        self.tokens["submit"] = new_token()
        self.tokens.update({name: new_token() for name in [*self.executors, *self.users]})
        lines = []
        for name, token in self.tokens.items():
            role = (name if name in ("admin", "submit") else "executor" if name in self.executors
                    else "submit" if name in self.users else "agent")
            host = self.bound.get(name) or self.executors.get(name) or self.users.get(name)
            lines.append(f"{role} {token}" + (f" {host}" if host else ""))
        self.tokens_file = self.directory / "tokens"
        self.tokens_file.write_text("# written by tests/support/server.py\n" + "\n".join(lines) + "\n")
        self.log = self.directory / "server.log"
        self._unused = [f"agent{i}" for i in range(self.agents)]

    def agent_token(self) -> str:
        """A fresh agent token, not bound to any host yet."""
        return self.tokens[self._unused.pop(0)]

    @property
    def url(self) -> str:
        return f"{'https' if self.ca_file else 'http'}://127.0.0.1:{self.port}"

    @property
    def tls(self) -> ssl.SSLContext | None:
        return None if self.ca_file is None else ssl.create_default_context(cafile=str(self.ca_file))

    def start(self, port: int | None = None) -> Server:
        """Start on `port` (default: the last one, or a free one); returns once /healthz answers."""
        assert self.process is None, "already running"
        fixed = port is not None or self.port != 0
        for _attempt in range(5):
            if port is not None:
                self.port = port
            elif not self.port:
                self.port = free_port()
            with open(self.log, "ab") as log:
                log.write(f"--- start {self.starts} on port {self.port}\n".encode())
                log.flush()
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "infosvc", "serve", "--config", str(self.config_file),
                     "--listen", f"127.0.0.1:{self.port}", "--db", str(self.db), "--tokens", str(self.tokens_file),
                     *self.extra_args],
                    stdout=log, stderr=subprocess.STDOUT, cwd=self.directory,
                    preexec_fn=None if self.open_files is None else self._limit_open_files)
            self.starts += 1
            if self._wait_healthy():
                return self
            self.process = None
            if fixed:
                break
            self.port = 0  # someone else took the port: try another
        raise RuntimeError(f"infosvc serve did not start; its log:\n{self.log.read_text()}")

    def _limit_open_files(self) -> None:
        """In the child, before exec: the limit the service would get from systemd's LimitNOFILE=."""
        assert self.open_files is not None
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))

    def _wait_healthy(self) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                reply = request(self.port, "GET", "/healthz", timeout=2.0, tls=self.tls)
                if reply.status == 200 and reply.json().get("status") == "ok" and self.process.poll() is None:
                    return True
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.02)
        self.process.kill()
        self.process.wait()
        return False

    def stop(self) -> None:
        """SIGTERM, as an operator would; SIGKILL if it does not stop in time."""
        if self.process is None:
            return
        stop_process(self.process)
        self.process = None

    def kill(self) -> None:
        """kill -9."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.process = None

    def restart(self) -> Server:
        self.stop()
        return self.start()

    # --- talking to it ---

    def request(self, method: str, path: str, body: bytes | None = None, *, token: str | None = None,
                headers: Mapping[str, str] | None = None, timeout: float = 15.0) -> Reply:
        return request(self.port, method, path, body, token=token, headers=headers, timeout=timeout, tls=self.tls)

    def get(self, path: str, **kwargs: Any) -> Reply:
        return self.request("GET", path, **kwargs)

    def post_node(self, document: bytes, token: str | None, **kwargs: Any) -> Reply:
        return self.request("POST", "/v1/nodes", document, token=token, **kwargs)

    def report(self, host: str, token: str, **kwargs: Any) -> Reply:
        """POST a synthetic host's document; asserts the server took it."""
        reply = self.post_node(node_document(host, **kwargs), token)
        assert reply.status == 200, (reply.status, reply.body)
        return reply

    def report_hosts(self, names: list[str], **kwargs: Any) -> list[str]:
        """Each of `names` reported (four at a time) with an agent token of its own; the tokens, in
        the order of `names`."""
        tokens = [self.agent_token() for _ in names]
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda n: self.report(names[n], tokens[n], **kwargs), range(len(names))))
        return tokens

    def admin(self, host: str, action: str, token: str | None = None) -> Reply:
        return self.request("POST", f"/v1/admin/hosts/{host}/{action}", b"",
                            token=self.tokens["admin"] if token is None else token)

    def node_ids(self, query: str = "") -> list[str]:
        reply = self.get("/v1/nodes" + (f"?{query}" if query else ""))
        assert reply.status == 200, (reply.status, reply.body)
        return [node["id"] for node in reply.json()]

    def state_of(self, host: str) -> str:
        reply = self.get(f"/v1/nodes/{host}")
        assert reply.status == 200, (reply.status, reply.body)
        return str(reply.json()["life_cycle"])

    # --- its SQLite file, read-only ---

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10)
        try:
            return conn.execute(query, args).fetchall()
        finally:
            conn.close()

    def row_counts(self) -> dict[str, int]:
        return {table: self.sql(f"SELECT count(*) FROM {table}")[0][0]
                for table in ("hosts", "reports", "token_bindings", "jobs", "job_events")}


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02,
             message: str = "condition") -> Any:
    """Poll `predicate` until it returns something true; fails the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)


ServerFactory = Callable[..., Server]


def stop_and_check(servers: list[Server]) -> None:
    """Stop every server; a 5xx is a bug, so any "unhandled error" in a server's log fails the tests."""
    for server in servers:
        server.stop()
    for server in servers:
        if server.log.exists() and "unhandled error" in (text := server.log.read_text()):
            pytest.fail(f"{server.log}: the server logged an unhandled error:\n{text[-4000:]}")


class InProcessServer(Server):
    """The same app (`make_app` with the config and tokens files of a Server) served in this
    process, on an event loop in a thread, on a loopback port: what the handlers do, without a
    process to start (tens of ms instead of a Python start-up and its imports). The app's log goes
    to the same file a subprocess writes. Not for what needs the process itself: kill -9,
    `infosvc serve`'s own options (TLS, the connection policy, open-file limits), its exit codes.
    """

    _loop: Any = None
    _thread: Any = None
    _runner: Any = None
    _log_handler: Any = None

    def start(self, port: int | None = None) -> Server:
        import asyncio
        import logging
        import threading

        from aiohttp import web

        from infosvc.cli.logs import TextFormatter
        from infosvc.config.site import load_config
        from infosvc.hosts.tokens import Tokens
        from infosvc.web.app import make_app
        from infosvc.web.opening import OPEN

        assert self._runner is None, "already running"
        assert not self.extra_args and self.open_files is None, "needs the real process: use `serve`"
        app = make_app(load_config(self.config_file), db=self.db, tokens=Tokens.load(self.tokens_file))
        handler = logging.FileHandler(self.log)
        handler.setFormatter(TextFormatter())
        logger = logging.getLogger("infosvc")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        self._log_handler = handler
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=f"in-process server {self.directory.name}",
                                  daemon=True)
        thread.start()

        async def up() -> tuple[web.AppRunner, int]:
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", port if port is not None else self.port)
            await site.start()
            await app[OPEN].wait()  # its hosts read, as `serve`'s start waits for /healthz "ok"
            return runner, runner.addresses[0][1]

        try:
            self._runner, self.port = asyncio.run_coroutine_threadsafe(up(), loop).result(START_TIMEOUT)
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()
            logger.removeHandler(handler)
            handler.close()
            raise
        self._loop, self._thread = loop, thread
        self.starts += 1
        return self

    def stop(self) -> None:
        import asyncio
        import logging

        if self._runner is None:
            return
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        logging.getLogger("infosvc").removeHandler(self._log_handler)
        self._log_handler.close()
        self._runner = self._loop = self._thread = None

    def kill(self) -> None:
        raise AssertionError("kill -9 needs the real process: use the `serve` fixture")


def banner_of(process: subprocess.Popen[bytes], lines: int = 100) -> str:
    """The `infosvc: serving on URL` line of an `infosvc serve` started with stdout (and stderr)
    piped: printed once it listens, after whatever start-up logged."""
    assert process.stdout is not None
    seen = []
    for _ in range(lines):
        line = process.stdout.readline().decode()
        if not line or line.startswith("infosvc: serving on"):
            return line
        seen.append(line)
    raise AssertionError(f"no 'serving on' line in the first {lines}: {seen}")
