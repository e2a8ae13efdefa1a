"""The memory one big read costs the server at 10,000 hosts (issue 27: +224-240 MB while a 64 MB
answer of GET /v1/nodes was built whole; target +64 MB at most).

A real `infosvc serve` on loopback takes one report per host (this machine's own agent document,
`infosvc-agent --once`, its Id changed: ~6 KB, what a real agent sends), and `--history N` more
reports of its first host (kept: [store] history_per_host is N); then, for each GET of each
`--path` (GET /v1/nodes when none is given), the server's peak resident set is reset
(/proc/PID/clear_refs, 5: Linux, as the process's owner or root) and the answer read whole; the
peak over the resident set before it is what the answer cost.

    .venv/bin/python bench/nodes_read.py [--hosts 10000] [--reads 3] [--history 1000] \
        [--path /v1/nodes --path '/v1/glue?format=xml' --path '/v1/nodes/node00000.bench/history?limit=1000']

prints a line per read and writes bench/results/nodes_read.json (`--pythonpath DIR`: the code the
server runs, another checkout's, for a before-and-after in one session). The server runs with
glibc's mmap threshold fixed at 128 KiB (`--mmap-threshold`), so that a large buffer one read freed
is not kept to hide the next read's peak; the heap still keeps what smaller blocks freed, which a
later read reuses, so with several paths `--restart` reads each from a server started afresh on
the same store.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serving import free_port, post_reports  # noqa: E402

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


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--hosts", type=int, default=10_000)
    args.add_argument("--reads", type=int, default=3)
    args.add_argument("--history", type=int, default=0, help="more reports of the first host, all kept")
    args.add_argument("--path", action="append", help="what to read (repeatable; GET /v1/nodes when none)")
    args.add_argument("--pythonpath", help="the code the server runs, first on its path (another checkout)")
    args.add_argument("--mmap-threshold", type=int, default=128 * 1024,
                      help="the server's MALLOC_MMAP_THRESHOLD_, fixed (0: glibc's own, which grows)")
    args.add_argument("--restart", action="store_true",
                      help="each path read by a server started afresh on the store (what an earlier read freed, "
                           "glibc keeps in its heap, and the next read's peak hides in it)")
    opts = args.parse_args()
    paths = opts.path or ["/v1/nodes"]
    documents = agent_documents(opts.hosts)
    with tempfile.TemporaryDirectory() as tmp:
        # an agent token is bound to the first host it reports for: one each
        tokens = [secrets.token_hex(16) for _ in range(opts.hosts)]
        (Path(tmp) / "tokens").write_text("".join(f"agent {token} node{i:05d}.bench\n" for i, token in enumerate(tokens)))
        (Path(tmp) / "site.toml").write_text(f"[store]\nhistory_per_host = {max(100, opts.history + 1)}\n")
        port = free_port()
        # glibc's threshold, left to itself, grows to the largest block freed (up to 32 MiB): the
        # buffers of one read are then kept in the heap and reused by the next, whose peak hides in
        # them. Fixed, each large buffer is its own mapping, returned when freed.
        malloc = {"MALLOC_MMAP_THRESHOLD_": str(opts.mmap_threshold)} if opts.mmap_threshold else {}
        path = os.pathsep.join(filter(None, [opts.pythonpath, str(ROOT), os.environ.get("PYTHONPATH")]))

        def start() -> subprocess.Popen[bytes]:
            started = subprocess.Popen([sys.executable, "-m", "infosvc", "serve", "--config", f"{tmp}/site.toml",
                                        "--db", f"{tmp}/db.sqlite", "--tokens", f"{tmp}/tokens",
                                        "--listen", f"127.0.0.1:{port}"],
                                       env={**os.environ, "PYTHONPATH": path, **malloc},
                                       cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(600):
                try:
                    http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/healthz")
                    break
                except OSError:
                    time.sleep(0.1)
            return started

        server = start()
        try:

            started = time.monotonic()
            post_reports(port, tokens, documents)
            print(f"{opts.hosts} hosts reported in {time.monotonic() - started:.1f} s "
                  f"({len(documents[0])} B a report)", flush=True)
            if opts.history:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                for n in range(opts.history):  # each sample its own SampleId
                    document = re.sub(rb'(name="SampleId" type="Agent">)[^<]*', rb"\g<1>bench-%d" % n, documents[0])
                    conn.request("POST", "/v1/nodes", document, {"Authorization": f"Bearer {tokens[0]}",
                                                               "Content-Type": "application/xml"})
                    answer = conn.getresponse()
                    answer.read()
                    assert answer.status == 200, answer.status
            time.sleep(2)
            results = []
            for target in paths:
                if opts.restart:  # the store's hosts loaded afresh: no read before this one left its heap
                    server.terminate()
                    server.wait(timeout=60)
                    server = start()
                    time.sleep(3)
                for _ in range(opts.reads):
                    Path(f"/proc/{server.pid}/clear_refs").write_text("5")
                    before = status_kb(server.pid, "VmRSS")
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
                    started = time.monotonic()
                    conn.request("GET", target)
                    answer = conn.getresponse()
                    body = answer.read()
                    took = time.monotonic() - started
                    assert answer.status == 200, (target, answer.status, body[:300])
                    peak = status_kb(server.pid, "VmHWM")
                    results.append({"path": target, "body_bytes": len(body), "rss_before_mb": before / 1024,
                                    "peak_over_mb": (peak - before) / 1024, "seconds": took})
                    print(f"GET {target}: {len(body) / 2**20:.1f} MiB in {took:.2f} s; server RSS {before / 1024:.0f} MiB, "
                          f"peak +{(peak - before) / 1024:.1f} MiB while answering", flush=True)
                    time.sleep(1)
        finally:
            server.terminate()
            server.wait(timeout=30)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "nodes_read.json").write_text(json.dumps({"hosts": opts.hosts, "history": opts.history, "restart": opts.restart, "reads": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
