"""A real headless browser for the web page's tests: Debian's `chromium`, started on a private
profile with a DevTools port, one page driven over the DevTools protocol with aiohttp's websocket
client. What the page logs as an error (console.error, an uncaught exception, a resource that
failed to load, a Content-Security-Policy violation) is collected; JavaScript is evaluated in the
page as it is, so a test can tell what the page shows without reloading it.

`chromium_or_skip()` finds the program: missing, a test is skipped, or fails under CI (CI=true),
where .ci/run installs it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

START_TIMEOUT = 30.0
CALL_TIMEOUT = 30.0

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--no-default-browser-check", "--disable-extensions", "--disable-background-networking", "--disable-sync",
         "--disable-component-update", "--disable-default-apps", "--mute-audio", "--password-store=basic",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0")


def chromium_or_skip() -> str:
    """The chromium program; a skip when it is missing, a failure when under CI."""
    found = shutil.which("chromium")
    if found is None:
        message = "Debian's chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message + ": CI must have it (.ci/run installs it)")
        pytest.skip(message)
    return found


class BrowserError(AssertionError):
    """The browser did not start, did not answer, or the page threw."""


@dataclass(frozen=True)
class ConsoleEntry:
    """Something the page reported as an error."""

    source: str  # console, exception, network, security, ...
    text: str
    url: str = ""

    def __str__(self) -> str:
        return f"[{self.source}] {self.text}" + (f" ({self.url})" if self.url else "")


class Browser:
    """One headless chromium with one page; every call waits on the browser's answer."""

    def __init__(self, executable: str, profile: Path) -> None:
        profile.mkdir(parents=True, exist_ok=True)
        self.profile = profile
        self.log = profile / "chromium.log"
        with open(self.log, "wb") as log:
            # a session of its own, so its helper processes (zygote, renderers) go with it at the end
            self.process = subprocess.Popen([executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.errors: list[ConsoleEntry] = []
        self._loads = 0
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._loop = asyncio.new_event_loop()
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        try:
            self._loop.run_until_complete(self._connect(self._page_socket()))
            for domain in ("Page", "Runtime", "Log"):
                self.call(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    # --- starting and stopping ---

    def _page_socket(self) -> str:
        """The page target's websocket URL, once chromium has written its port (DevToolsActivePort)."""
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrowserError(f"chromium exited with {self.process.returncode}:\n{self.log.read_text()[-3000:]}")
            lines = port_file.read_text().splitlines() if port_file.exists() else []
            if lines and lines[0].isdigit():
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{lines[0]}/json/list", timeout=5) as answer:
                        targets = json.load(answer)
                except OSError:
                    targets = []
                pages = [t for t in targets if t.get("type") == "page" and t.get("webSocketDebuggerUrl")]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            time.sleep(0.05)
        raise BrowserError(f"chromium gave no page within {START_TIMEOUT} s:\n{self.log.read_text()[-3000:]}")

    async def _connect(self, url: str) -> None:
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(url, max_msg_size=64 * 2**20)
        self._reader = asyncio.get_running_loop().create_task(self._read())

    def close(self) -> None:
        """Close the browser (Browser.close, then SIGTERM and SIGKILL to its session if need be)."""
        if self._ws is not None and not self._ws.closed:
            try:
                self.call("Browser.close", timeout=5)
            except (BrowserError, aiohttp.ClientError, ConnectionError):
                pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._loop.run_until_complete(self._disconnect())
        self._loop.close()

    async def _disconnect(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, aiohttp.ClientError):
                pass
        if self._session is not None:
            await self._session.close()

    # --- the protocol ---

    async def _read(self) -> None:
        assert self._ws is not None
        async for message in self._ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            if "id" in data:
                future = self._pending.pop(data["id"], None)
                if future is not None and not future.done():
                    future.set_result(data)
            else:
                self._event(data["method"], data.get("params", {}))
        for future in self._pending.values():  # the browser went away
            if not future.done():
                future.set_exception(BrowserError("the browser closed its DevTools connection"))

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Page.loadEventFired":
            self._loads += 1
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", []))
            self.errors.append(ConsoleEntry("console", text))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text", "")
            self.errors.append(ConsoleEntry("exception", text, details.get("url", "")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(ConsoleEntry(entry.get("source", "log"), entry.get("text", ""), entry.get("url", "")))

    async def _call(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self._ws is not None
        self._next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[self._next_id] = future
        await self._ws.send_str(json.dumps({"id": self._next_id, "method": method, "params": params}))
        try:
            answer = await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise BrowserError(f"{method}: no answer within {timeout} s") from None
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return dict(answer.get("result", {}))

    def call(self, method: str, timeout: float = CALL_TIMEOUT, **params: Any) -> dict[str, Any]:
        """One DevTools command; its result."""
        return self._loop.run_until_complete(self._call(method, params, timeout))

    async def _evaluate(self, expression: str) -> Any:
        result = await self._call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                       "awaitPromise": True}, CALL_TIMEOUT)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(f"{expression!r} threw: {details.get('exception', {}).get('description') or details}")
        return result.get("result", {}).get("value")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise awaited)."""
        return self._loop.run_until_complete(self._evaluate(expression))

    def wait_for(self, expression: str, timeout: float = 20.0, message: str = "") -> Any:
        """Evaluate `expression` in the page until it is truthy; fails the test at the deadline."""

        async def poll() -> tuple[bool, Any]:
            deadline = time.monotonic() + timeout
            value = None
            while time.monotonic() < deadline:
                value = await self._evaluate(expression)
                if value:
                    return True, value
                await asyncio.sleep(0.05)  # the loop runs on: the browser's events are read meanwhile
            return False, value

        done, value = self._loop.run_until_complete(poll())
        if not done:
            pytest.fail(f"timed out after {timeout} s waiting for {message or expression} (last: {value!r}); "
                        f"the page's errors: {[str(e) for e in self.errors]}")
        return value

    def navigate(self, url: str, timeout: float = 20.0) -> None:
        """Open `url` in the page and wait for its load event."""
        loads = self._loads
        answer = self.call("Page.navigate", url=url)
        if answer.get("errorText"):
            raise BrowserError(f"navigating to {url}: {answer['errorText']}")

        async def loaded() -> None:
            deadline = time.monotonic() + timeout
            while self._loads == loads:
                if time.monotonic() > deadline:
                    raise BrowserError(f"{url}: no load event within {timeout} s")
                await asyncio.sleep(0.02)

        self._loop.run_until_complete(loaded())

    def screenshot(self, path: Path) -> None:
        """The page as a PNG, for a person looking into a failure."""
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))
