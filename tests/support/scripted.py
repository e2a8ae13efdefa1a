"""A scripted HTTP server for the agent's tests: answers each POST with the next status of its
script (then 200), with the given headers on refusals, and records what it received and when."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator


class Scripted:
    def __init__(self, statuses: list[int], refusal_headers: dict[str, str] | None = None) -> None:
        self.statuses = list(statuses)
        #: (when, body) of every POST, in order
        self.received: list[tuple[float, bytes]] = []
        lock = threading.Lock()
        script = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with lock:
                    script.received.append((time.monotonic(), body))
                    status = script.statuses.pop(0) if script.statuses else 200
                answer = b'{"error": "scripted", "detail": null}' if status >= 300 else b'{"host": "x"}'
                self.send_response(status)
                for name, value in (refusal_headers or {}).items() if status >= 300 else ():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


ScriptedFactory = Callable[..., Scripted]


def scripted_servers() -> Iterator[ScriptedFactory]:
    """For a fixture: a factory of Scripted servers (statuses, refusal_headers=None), each closed
    when the generator resumes."""
    made: list[Scripted] = []

    def start(statuses: list[int], refusal_headers: dict[str, str] | None = None) -> Scripted:
        made.append(Scripted(statuses, refusal_headers))
        return made[-1]

    yield start
    for server in made:
        server.close()
