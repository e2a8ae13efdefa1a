"""A restart of a site with many hosts: how long until `infosvc serve` answers /healthz, and until
every host is published (GET /v1/nodes lists them all), after a clean stop (SIGTERM) and after a
crash (SIGKILL).

A real `infosvc serve` on loopback takes one report per host (this machine's own agent document,
`infosvc-agent --once`, its Id changed: ~6 KB, what a real agent sends), then is stopped and
started again on the same store, the clock running from the start of the new process.

    .venv/bin/python bench/restart.py [--hosts 10000]

prints a line per restart and writes bench/results/restart.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nodes_read import agent_documents  # noqa: E402
from serving import free_port, post_reports, start_server  # noqa: E402


def host_count(port: int) -> int | None:
    """How many hosts GET /v1/nodes lists, or None while it does not answer 200."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/v1/nodes")
        answer = conn.getresponse()
        body = answer.read()
    except OSError:
        return None
    return len(json.loads(body)) if answer.status == 200 else None


def health(port: int) -> str | None:
    """What /healthz says ("starting", "ok", ...), None while it does not answer."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        conn.request("GET", "/healthz")
        return str(json.loads(conn.getresponse().read())["status"])
    except (OSError, ValueError, KeyError):
        return None


def restart(tmp: str, port: int, hosts: int) -> dict[str, float]:
    started = time.monotonic()
    server = subprocess.Popen([sys.executable, "-m", "infosvc", "serve", "--db", f"{tmp}/db.sqlite", "--tokens",
                               f"{tmp}/tokens", "--config", f"{tmp}/site.toml", "--listen", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while health(port) is None:
        if server.poll() is not None:
            raise RuntimeError(f"infosvc serve exited with {server.returncode}")
        time.sleep(0.01)
    answering = time.monotonic() - started
    while health(port) != "ok":
        time.sleep(0.01)
    published = time.monotonic() - started
    if host_count(port) != hosts:
        raise RuntimeError("not every host is listed once the server says ok")
    listed = time.monotonic() - started
    return {"healthz_s": answering, "all_published_s": published, "first_full_read_s": listed, "pid": server.pid}


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--hosts", type=int, default=10_000)
    args.add_argument("--keep", metavar="DIR", help="leave the store in DIR (made) rather than a temporary directory")
    opts = args.parse_args()
    documents = agent_documents(opts.hosts)
    results: dict[str, object] = {"hosts": opts.hosts, "report_bytes": len(documents[0])}
    with tempfile.TemporaryDirectory() as scratch:
        tmp = opts.keep or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        tokens = [secrets.token_hex(16) for _ in range(opts.hosts)]
        # hosts that stay Ready through the restarts: no mass turn to Unreachable in the measure
        Path(tmp, "site.toml").write_text("[lifecycle]\nheartbeat_seconds = 86400\n")
        server, port = start_server(tmp, "".join(f"agent {token} node{i:05d}.bench\n" for i, token in enumerate(tokens)),
                                    "--config", f"{tmp}/site.toml")

        post_reports(port, tokens, documents)
        print(f"{opts.hosts} hosts reported ({len(documents[0])} B a report)", flush=True)
        for how, signum in (("clean stop (SIGTERM)", signal.SIGTERM), ("crash (SIGKILL)", signal.SIGKILL),
                            ("clean stop again (SIGTERM)", signal.SIGTERM)):
            server.send_signal(signum)
            server.wait(timeout=120)
            port = free_port()
            figures = restart(tmp, port, opts.hosts)
            server = _Process(figures.pop("pid"))  # type: ignore[assignment]
            results[how] = figures
            print(f"after a {how}: /healthz answers in {figures['healthz_s']:.2f} s, all {opts.hosts} hosts "
                  f"published (/healthz ok) in {figures['all_published_s']:.2f} s, the first GET /v1/nodes of them "
                  f"all answered at {figures['first_full_read_s']:.2f} s", flush=True)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "restart.json").write_text(json.dumps(results, indent=2))
    return 0


class _Process:
    """A started server by its pid (Popen's own object went with the restart's scope)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def send_signal(self, signum: int) -> None:
        import os

        os.kill(self.pid, signum)

    def wait(self, timeout: float) -> None:
        import os

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return
            if done:
                return
            time.sleep(0.02)
        raise TimeoutError(f"process {self.pid} did not end")


if __name__ == "__main__":
    raise SystemExit(main())
