"""A real `infosvc serve` on a loopback port for the benchmarks, on a store in a given directory."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(directory: str | Path, tokens: str, *options: str) -> tuple[subprocess.Popen[bytes], int]:
    """`infosvc serve` with `tokens` as its tokens file and its store in `directory`, answering
    /healthz: (the process, its port)."""
    Path(directory, "tokens").write_text(tokens)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "infosvc", "serve", "--db", f"{directory}/db.sqlite", "--tokens",
                               f"{directory}/tokens", "--listen", f"127.0.0.1:{port}", *options],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            probe = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            probe.request("GET", "/healthz")
            probe.getresponse().read()
            return server, port
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(f"infosvc serve exited with {server.returncode}") from None
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("infosvc serve did not answer /healthz within 30 s")


def post_reports(port: int, tokens: list[str], documents: list[bytes], connections: int = 4) -> None:
    """Each document once to POST /v1/nodes with the token beside it, over `connections` kept
    connections at once; each answered 200."""

    def post(first: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for token, body in zip(tokens[first::connections], documents[first::connections]):
            conn.request("POST", "/v1/nodes", body, {"Authorization": f"Bearer {token}",
                                                      "Content-Type": "application/xml"})
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 200, (answer.status, answer.read())
        conn.close()

    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(post, range(connections)))
