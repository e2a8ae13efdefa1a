"""The memory one GET /v1/nodes costs the server at 10,000 hosts (issue 27: +224-240 MB while a 64 MB
answer was built whole; target +64 MB at most).

A real `infosvc serve` on loopback takes one report per host (this machine's own agent document,
`infosvc-agent --once`, its Id changed: ~6 KB, what a real agent sends); then, for each GET, the
server's peak resident set is reset (/proc/PID/clear_refs, 5: Linux, as the process's owner or root)
and GET /v1/nodes read whole; the peak over the resident set before it is what the answer cost.

    .venv/bin/python bench/nodes_read.py [--hosts 10000] [--reads 3]

prints a line per read and writes bench/results/nodes_read.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def status_kb(pid: int, field: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
    assert match, field
    return int(match.group(1))


#: What differs between two hosts of one kind: the sample's name, the adapters' MAC and addresses,
#: and the measurements (Available, Utilized); the rest (OS, processor, sizes) is the kind's.
_PER_HOST = re.compile(rb'(name="SampleId"[^>]*>|name="MAC"[^>]*>|name="Address" type="NetworkAdapter:(?!lo")'
                       rb'[^"]*">)([^<]*)|(<(?:Available|Utilized)>.*</(?:Available|Utilized)>)', re.S)
_MEASURE = re.compile(rb">(\d+)(\.\d+)?<")


def _own(document: bytes, host: int) -> bytes:
    """The document with the values a host has of its own (see _PER_HOST) made this host's, each the
    length it was (so the document keeps its size): digits and hex digits drawn afresh for each
    host (seeded by its number, so a run is repeatable)."""
    draw = random.Random(host).randrange

    def turn(text: bytes) -> bytes:
        return bytes(b"0123456789"[draw(10)] if 48 <= c <= 57 else b"abcdef"[draw(6)] if 97 <= c <= 102 else c
                     for c in text)

    def measure(match: re.Match[bytes]) -> bytes:  # a count of a few (processors, a load of 2) is left
        whole, fraction = match.group(1), match.group(2) or b""
        if not fraction and len(whole) < 3:
            return match.group(0)
        return b">" + (turn(whole).lstrip(b"0") or b"0") + turn(fraction) + b"<"

    def one(match: re.Match[bytes]) -> bytes:
        if match.group(3) is not None:
            return _MEASURE.sub(measure, match.group(3))
        return match.group(1) + turn(match.group(2))
    return _PER_HOST.sub(one, document)


def agent_documents(hosts: int) -> list[bytes]:
    """This machine's own agent document (`infosvc-agent --once`) as `hosts` hosts of one kind send
    it: Id nodeNNNNN.bench, Name nodeNNNNN (an Id is the Name's own long form, never another
    host's), and what a host has of its own (its sample's name, MACs, addresses, measurements)
    differing between hosts, as it does on a real site: a server that shares what hosts have alike
    is measured on what they really have alike."""
    template = subprocess.run([sys.executable, "-m", "infosvc_agents", "--once", "--id", "bench-template"],
                              capture_output=True, check=True).stdout
    return [_own(re.sub(rb"<Name>[^<]*</Name>", f"<Name>node{i:05d}</Name>".encode(),
                        template.replace(b"bench-template", f"node{i:05d}.bench".encode()), count=1), i)
            for i in range(hosts)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--hosts", type=int, default=10_000)
    args.add_argument("--reads", type=int, default=3)
    opts = args.parse_args()
    documents = agent_documents(opts.hosts)
    with tempfile.TemporaryDirectory() as tmp:
        # an agent token is bound to the first host it reports for: one each
        tokens = [secrets.token_hex(16) for _ in range(opts.hosts)]
        (Path(tmp) / "tokens").write_text("".join(f"agent {token} node{i:05d}.bench\n" for i, token in enumerate(tokens)))
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "infosvc", "serve", "--db", f"{tmp}/db.sqlite", "--tokens",
                                   f"{tmp}/tokens", "--listen", f"127.0.0.1:{port}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                try:
                    http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/healthz")
                    break
                except OSError:
                    time.sleep(0.1)

            def report(first: int) -> None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                for i in range(first, opts.hosts, 4):
                    conn.request("POST", "/v1/nodes", documents[i], {"Authorization": f"Bearer {tokens[i]}",
                                                            "Content-Type": "application/xml"})
                    answer = conn.getresponse()
                    answer.read()
                    assert answer.status == 200, answer.status

            started = time.monotonic()
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(report, range(4)))
            print(f"{opts.hosts} hosts reported in {time.monotonic() - started:.1f} s "
                  f"({len(documents[0])} B a report)", flush=True)
            time.sleep(2)
            results = []
            for _ in range(opts.reads):
                Path(f"/proc/{server.pid}/clear_refs").write_text("5")
                before = status_kb(server.pid, "VmRSS")
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                started = time.monotonic()
                conn.request("GET", "/v1/nodes")
                body = conn.getresponse().read()
                took = time.monotonic() - started
                peak = status_kb(server.pid, "VmHWM")
                results.append({"body_bytes": len(body), "rss_before_mb": before / 1024,
                                "peak_over_mb": (peak - before) / 1024, "seconds": took})
                print(f"GET /v1/nodes: {len(body) / 2**20:.1f} MiB in {took:.2f} s; server RSS {before / 1024:.0f} MiB, "
                      f"peak +{(peak - before) / 1024:.1f} MiB while answering", flush=True)
                time.sleep(1)
        finally:
            server.terminate()
            server.wait(timeout=30)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "nodes_read.json").write_text(json.dumps({"hosts": opts.hosts, "reads": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
