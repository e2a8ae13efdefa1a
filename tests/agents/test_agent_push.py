"""The agent's push loop against real servers on loopback: the agent outage (server down, then up:
every sample taken arrives, in order), bounded keeping, back-off, and what is retried or dropped."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support.documents import node_document

from support.agentrun import figures, stop, stored
from support.scripted import ScriptedFactory
from support.server import ServerFactory, free_port, wait_for
from infosvc.codec.node_xml import parse_node
from infosvc_agents.push import PushError, PushLoop, Sender

# Latency and timeouts measured from outside: run alone, not beside other tests (make test).
pytestmark = pytest.mark.serial


def sequence_of(document: bytes) -> int:
    value = parse_node(document).extension("Sequence", "Test")
    assert value is not None
    return int(value)


class Counter:
    """sample(): a new document for `host` each call, numbered, with the time it was taken."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.count = 0
        self.times: list[float] = []

    def __call__(self) -> bytes:
        self.times.append(time.monotonic())
        document = node_document(self.host, sequence=self.count)
        self.count += 1
        return document


def run_in_thread(loop: PushLoop, samples: int | None = None) -> threading.Thread:
    thread = threading.Thread(target=loop.run, kwargs={"samples": samples}, daemon=True)
    thread.start()
    return thread


# --- the agent as a subprocess, through an outage -----------------------------------------------

KEPT = re.compile(r"(\d+) sample\(s\) kept")


def test_agent_outage_every_sample_arrives_in_order(serve: ServerFactory, tmp_path: Path) -> None:
    server = serve({"store": {"history_per_host": 1000}}, agents=1, start=False)
    token_file = tmp_path / "agent.token"
    token_file.write_text(f"# the agent's token\n{server.agent_token()}\n")
    port = free_port()  # nothing listens here yet
    log_path = tmp_path / "agent.log"
    with open(log_path, "wb") as log:
        agent = subprocess.Popen(
            [sys.executable, "-m", "infosvc_agents", "--server", f"http://127.0.0.1:{port}", "--token-file",
             str(token_file), "--interval", "0.2", "--id", "testhost", "--max-kept", "1000", "--backoff-max", "0.4"],
            stdout=subprocess.DEVNULL, stderr=log)
    try:
        def kept_so_far() -> int:
            counts = [int(n) for n in KEPT.findall(log_path.read_text())]
            return max(counts, default=0)

        wait_for(lambda: kept_so_far() >= 6, timeout=30, message="the agent to keep samples while the server is down")
        assert agent.poll() is None
        taken_while_down = kept_so_far()
        server_up = time.time()
        server.start(port=port)
        backlog = kept_so_far()
        wait_for(lambda: len(stored(server, "testhost")) >= backlog + 3, timeout=30,
                 message="the kept samples and new ones to arrive")
    finally:
        stop(agent, timeout=15)
    text = log_path.read_text()
    delivered, dropped, refused, undelivered, taken = figures(agent, log_path)
    assert (dropped, refused, undelivered) == (0, 0, 0), text
    assert delivered == taken >= backlog + 3

    documents = stored(server, "testhost")
    assert len(documents) == taken  # every sample taken arrived, once
    stamps = [parse_node(d).extension("SampleTime", "Agent") or "" for d in documents]
    assert stamps == sorted(stamps), stamps  # in the order they were taken (SampleTime has 1 s resolution)
    assert len(set(stamps)) >= 2
    up = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(server_up))
    assert stamps[taken_while_down - 1] <= up  # the first ones were taken while the server was down
    assert server.state_of("testhost") == "Ready"


# --- PushLoop against real servers --------------------------------------------------------------

def test_outage_in_process_delivers_everything_in_order(serve: ServerFactory) -> None:
    # every sample kept in the history, however long the server takes to start on a loaded machine
    server = serve({"store": {"history_per_host": 1000}}, agents=1, start=False)
    port = free_port()
    sample = Counter("inproc")
    loop = PushLoop(sample, Sender(f"http://127.0.0.1:{port}", server.agent_token(), timeout=5), interval=0.05,
                    backoff_initial=0.05, backoff_max=0.2)
    thread = run_in_thread(loop)
    try:
        wait_for(lambda: sample.count >= 10, message="samples kept during the outage")
        assert loop.delivered == 0 and len(loop.kept) >= 9
        server.start(port=port)
        wait_for(lambda: loop.delivered >= sample.count - 1 and loop.delivered >= 15, timeout=20,
                 message="delivery after the outage")
    finally:
        loop.stop()
        thread.join(timeout=10)
    assert not thread.is_alive()
    documents = stored(server, "inproc")
    assert [sequence_of(d) for d in documents] == list(range(loop.delivered))
    assert loop.delivered + len(loop.kept) == loop.taken == sample.count and loop.dropped == 0


def test_bounded_keep_drops_the_oldest_and_counts_them(serve: ServerFactory) -> None:
    server = serve(agents=1, start=False)
    port = free_port()
    sample = Counter("bounded")
    loop = PushLoop(sample, Sender(f"http://127.0.0.1:{port}", server.agent_token(), timeout=5), interval=0.02,
                    max_kept=4, backoff_initial=0.05, backoff_max=0.1)
    thread = run_in_thread(loop)
    try:
        wait_for(lambda: sample.count >= 12, message="samples taken during the outage")
        assert len(loop.kept) <= 4
        server.start(port=port)
        wait_for(lambda: loop.delivered >= 8, timeout=20, message="delivery after the outage")
    finally:
        loop.stop()
        thread.join(timeout=10)
    sequences = [sequence_of(d) for d in stored(server, "bounded")]
    # every sample was delivered, or dropped as the oldest kept while over the bound, or is still kept
    assert loop.delivered + loop.dropped + len(loop.kept) == loop.taken == sample.count
    assert loop.dropped >= 12 - 4
    # the dropped ones are the oldest: what arrived is one run of consecutive samples, in order
    assert sequences == list(range(loop.dropped, loop.dropped + loop.delivered))


def test_keep_bound_unit() -> None:
    loop = PushLoop(lambda: b"", Sender("http://127.0.0.1:9", "t"), max_kept=3)
    for i in range(7):
        loop.keep(str(i).encode())
    assert list(loop.kept) == [b"4", b"5", b"6"] and loop.dropped == 4


def test_backoff_grows_exponentially_and_is_capped() -> None:
    now = 1000.0
    loop = PushLoop(lambda: b"", Sender(f"http://127.0.0.1:{free_port()}", "t", timeout=2), clock=lambda: now,
                    backoff_initial=0.5, backoff_max=4.0)
    loop.keep(b"<Node><Id>x</Id></Node>")
    waits = []
    for _ in range(7):
        assert loop.deliver() is False  # nothing listens: kept, to be retried
        waits.append(loop._retry_at - now)
    expected = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    for wait, base in zip(waits, expected):
        assert base * 0.8 <= wait <= base * 1.2, (waits, expected)
    assert len(loop.kept) == 1 and loop.delivered == 0 and loop.refused == 0


def test_retries_back_off_against_a_failing_server(scripted: ScriptedFactory) -> None:
    server = scripted([503] * 6)
    loop = PushLoop(Counter("failing"), Sender(server.url, "t", timeout=5), interval=60.0,
                    backoff_initial=0.05, backoff_max=0.2)
    thread = run_in_thread(loop, samples=1)
    thread.join(timeout=20)
    assert not thread.is_alive()
    times = [t for t, _ in server.received]
    assert len(times) == 7 and len({body for _, body in server.received}) == 1  # the same sample, again
    gaps = [b - a for a, b in zip(times, times[1:])]
    for gap, base in zip(gaps, [0.05, 0.1, 0.2, 0.2, 0.2, 0.2]):
        assert base * 0.8 - 0.01 <= gap <= base * 1.2 + 0.5, gaps
    assert max(gaps[2:]) <= 0.2 * 1.2 + 0.5 and sum(gaps[2:]) >= 4 * 0.2 * 0.8 - 0.01  # capped, not growing
    assert loop.delivered == 1 and loop.refused == 0


@pytest.mark.parametrize("status", [500, 502, 503, 408, 429])
def test_server_errors_and_throttling_are_retried(scripted: ScriptedFactory, status: int) -> None:
    server = scripted([status, status])
    sample = Counter("retry")
    loop = PushLoop(sample, Sender(server.url, "t", timeout=5), interval=0.01, backoff_initial=0.02,
                    backoff_max=0.05)
    thread = run_in_thread(loop, samples=3)
    thread.join(timeout=20)
    assert not thread.is_alive()
    sequences = [sequence_of(body) for _, body in server.received]
    assert sequences[:3] == [0, 0, 0]  # the first sample, until it was taken
    assert sequences[2:] == list(range(loop.taken))  # then each once, in order, those kept meanwhile too
    assert loop.delivered == loop.taken >= 3 and loop.refused == 0 and loop.dropped == 0


@pytest.mark.parametrize("status", [400, 403, 404, 413])
def test_refused_sample_is_dropped_not_retried(scripted: ScriptedFactory, status: int) -> None:
    server = scripted([status])
    sample = Counter("refused")
    loop = PushLoop(sample, Sender(server.url, "t", timeout=5), interval=0.01, backoff_initial=0.02)
    thread = run_in_thread(loop, samples=3)
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert [sequence_of(body) for _, body in server.received] == [0, 1, 2]  # sent once, then the next
    assert loop.refused == 1 and loop.delivered == 2 and not loop.kept


def test_a_refused_token_keeps_the_sample_and_a_rotated_token_file_delivers_it(serve: ServerFactory,
                                                                                tmp_path: Path) -> None:
    """A 401 refuses the token, not the sample: a rotation done on the aggregator first (the host
    still has the old token) keeps the samples, and the token file is read again at each retry,
    so once the host has the new token everything kept is delivered, in order, none refused."""
    server = serve({}, agents=2)
    new_token = server.agent_token()
    token_file = tmp_path / "token"
    token_file.write_text("agent " + "o" * 32 + "  # the old token, unknown to the aggregator\n")
    sample = Counter("rotated")
    loop = PushLoop(sample, Sender(server.url, "o" * 32, timeout=5, token_file=str(token_file)), interval=0.05,
                    backoff_initial=0.05, backoff_max=0.1)
    thread = run_in_thread(loop)
    try:
        wait_for(lambda: loop.taken >= 4, timeout=20)
        assert loop.delivered == 0 and loop.refused == 0 and len(loop.kept) >= 4, "kept, not dropped"
        token_file.write_text(new_token + "\n")
        wait_for(lambda: loop.delivered >= 6 and not loop.kept, timeout=20)
    finally:
        loop.stop()
        thread.join(timeout=20)
    assert loop.refused == 0 and loop.dropped == 0
    numbers = [sequence_of(d) for d in stored(server, "rotated")]
    assert numbers == list(range(len(numbers))) and len(numbers) >= 6  # each once, in order, from the first


def test_a_token_file_already_rotated_is_used_at_the_first_401_without_a_back_off(
        scripted: ScriptedFactory, tmp_path: Path) -> None:
    server = scripted([401, 200, 401])
    token_file = tmp_path / "token"
    token_file.write_text("n" * 32 + "\n")
    sender = Sender(server.url, "o" * 32, timeout=5, token_file=str(token_file))
    sender.send(node_document("h", sequence=0))  # 401 with the old token, then the new one at once: 200
    with pytest.raises(PushError, match=r"401.*same token.*kept"):
        sender.send(node_document("h", sequence=1))  # no new token: kept, back-off
    assert sender.token == "n" * 32 and len(server.received) == 3


def test_refusals_from_the_real_server(serve: ServerFactory) -> None:
    server = serve({"service": {"max_body_bytes": 4096}}, agents=2)
    token = server.agent_token()
    server.report("mine", token)  # binds the token to "mine"
    documents = [
        node_document("mine", sequence=0),
        b"<Node><Id>mine</Id><Configured><Processors>many</Processors></Configured></Node>",  # 400
        node_document("not-mine", sequence=1),  # 403: the token is bound to "mine"
        node_document("mine", sequence=2, features=tuple(f"F{i:05d}" for i in range(800))),  # 413
        node_document("mine", sequence=3),
    ]
    remaining = list(documents)
    loop = PushLoop(lambda: remaining.pop(0), Sender(server.url, token, timeout=5), interval=0.01,
                    backoff_initial=0.02)
    thread = run_in_thread(loop, samples=len(documents))
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert loop.refused == 3 and loop.delivered == 2 and not loop.kept
    assert [sequence_of(d) for d in stored(server, "mine")[1:]] == [0, 3]
    assert server.get("/v1/nodes/not-mine").status == 404


def test_samples_come_every_interval_with_jitter(scripted: ScriptedFactory) -> None:
    server = scripted([])
    sample = Counter("jitter")
    interval = 0.1
    loop = PushLoop(sample, Sender(server.url, "t", timeout=5), interval=interval, jitter=0.2)
    thread = run_in_thread(loop, samples=12)
    thread.join(timeout=30)
    assert not thread.is_alive()
    gaps = [b - a for a, b in zip(sample.times, sample.times[1:])]
    assert len(gaps) == 11
    assert min(gaps) >= interval * 0.8 - 0.005, gaps  # never early
    assert sorted(gaps)[len(gaps) // 2] <= interval * 1.2 + 0.05, gaps
    assert max(gaps) - min(gaps) > 0.002, gaps  # not all the same: jittered
    assert [sequence_of(body) for _, body in server.received] == list(range(12))


@pytest.mark.parametrize("line,token", [
    ("abcdefghijklmnopqrstu", "abcdefghijklmnopqrstu"),
    ("agent abcdefghijklmnopqrstu", "abcdefghijklmnopqrstu"),
    ("agent abcdefghijklmnopqrstu node001", "abcdefghijklmnopqrstu"),  # docs/operations.md's form
    ("  # a comment\n\nagent abcdefghijklmnopqrstu node001 # the pinned host", "abcdefghijklmnopqrstu"),
])
def test_token_file_forms(tmp_path: Path, line: str, token: str) -> None:
    from infosvc_agents.push import read_token

    path = tmp_path / "token"
    path.write_text(line + "\n")
    assert read_token(str(path)) == token


@pytest.mark.parametrize("line", ["admin abcdefghijklmnopqrstu", "abcdefghijklmnopqrstu node001", "agent a b c", ""])
def test_token_file_that_is_no_agent_token_is_refused_without_echoing_it(tmp_path: Path, line: str) -> None:
    from infosvc_agents.push import read_token

    path = tmp_path / "token"
    path.write_text(line + "\n")
    with pytest.raises(ValueError) as caught:
        read_token(str(path))
    assert "abcdefghijklmnopqrstu" not in str(caught.value)


@pytest.mark.parametrize("url", ["http://head:80800", "http://head:port", "https://head:-1"])
def test_a_bad_port_is_refused_at_start(url: str) -> None:
    with pytest.raises(ValueError, match="server URL"):
        Sender(url, "abcdefghijklmnopqrstu")
