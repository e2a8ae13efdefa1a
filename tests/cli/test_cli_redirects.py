"""The command line sends its token to the --server it was given, and nowhere else: an answer that
redirects (to another host, port or scheme) is not followed, and says where it pointed. urllib's
default opener follows a 30x with the Authorization header, across hosts and from https to http."""

from __future__ import annotations

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

SECRET = "SECRET-token-0123456789"


class _Seen(BaseHTTPRequestHandler):
    """The host a redirect points at: records what reaches it."""

    seen: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.seen.append((self.path, self.headers.get("Authorization")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"jobs": []}')

    def log_message(self, *args: object) -> None:
        pass


def _serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def servers() -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
    seen: list[tuple[str, str | None]] = []
    elsewhere = _serve(type("Elsewhere", (_Seen,), {"seen": seen}))
    target = f"http://127.0.0.1:{elsewhere.server_address[1]}"

    class Redirecting(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(302)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass
    redirecting = _serve(Redirecting)
    yield f"http://127.0.0.1:{redirecting.server_address[1]}", seen
    for server in (redirecting, elsewhere):
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("command", [["jobs"], ["ldif"], ["status"]])
def test_a_redirect_is_not_followed_with_the_token(servers: tuple[str, list[tuple[str, str | None]]],
                                                   tmp_path: Path, command: list[str]) -> None:
    url, seen = servers
    token = tmp_path / "t.token"
    token.write_text(SECRET + "\n")
    done = subprocess.run([sys.executable, "-m", "infosvc", *command, "--server", url, "--token-file", str(token)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert seen == []  # nothing reached the other host, token or not
    assert "redirect" in done.stderr and "not followed" in done.stderr, done.stderr
    assert "127.0.0.1:" in done.stderr  # where it pointed, so the user can choose to use that server
    assert SECRET not in done.stderr + done.stdout
