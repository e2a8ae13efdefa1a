"""The agent honours Retry-After: a server that sheds load (503 or 429 with Retry-After) is left
alone at least that long, and the sample is kept and delivered once afterwards; against the real
server overloaded, nothing the agent saw acknowledged is missing."""

from __future__ import annotations

import email.utils
import re
import threading

import pytest

from support.documents import node_document
from support.scripted import ScriptedFactory
from support.server import ServerFactory
from infosvc_agents.push import PushError, PushLoop, Sender, retry_after_seconds

pytestmark = pytest.mark.serial  # times a wait from outside


def test_retry_after_values() -> None:
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(" 0 ") == 0.0
    later = email.utils.formatdate(1_000_000 + 30, usegmt=True)
    assert retry_after_seconds(later, now=1_000_000) == pytest.approx(30, abs=1)
    assert retry_after_seconds(email.utils.formatdate(5, usegmt=True), now=1_000_000) == 0.0  # past: now
    for junk in (None, "", "soon", "-1", "1.5e9x"):
        assert retry_after_seconds(junk) is None


def one_sample(document: bytes, sender: Sender) -> PushLoop:
    """A push loop that takes one sample, `document`, run until it has delivered it (15 s at most)."""
    loop = PushLoop(lambda: document, sender, interval=3600, backoff_initial=0.05)
    thread = threading.Thread(target=loop.run, kwargs={"samples": 1}, daemon=True)
    thread.start()
    thread.join(timeout=15)
    assert not thread.is_alive()
    return loop


@pytest.mark.parametrize("junk", ["\u00b2", "1\u00b2", "\u0661\u0662", "\uff13", "+3", "3 s",
                                  "Sun, 06 Nov 99999 08:49:37 GMT", "Sun, 06 Nov 1994 99:49:37 GMT",
                                  "a, 1 Jan 10000000000000000000000 0:0:0 GMT"])
def test_retry_after_that_is_neither_ascii_digits_nor_a_date_is_ignored(junk: str) -> None:
    # "\u00b2".isdigit() is True and float() of it raises: it ended the agent
    assert retry_after_seconds(junk) is None


def test_a_retry_after_of_a_superscript_two_is_a_plain_back_off(scripted: ScriptedFactory) -> None:
    server = scripted([503], {"Retry-After": "\u00b2"})
    document = node_document("sup.example.org", sequence=1)
    loop = one_sample(document, Sender(server.url, "t"))
    assert loop.delivered == 1 and not loop.kept
    assert [body for _, body in server.received] == [document, document]


def test_an_unexpected_failure_reading_an_answer_backs_off_instead_of_ending_the_agent(
        scripted: ScriptedFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    server = scripted([])
    sender = Sender(server.url, "t")
    calls = []
    send = Sender.send

    def once_broken(self: Sender, document: bytes) -> dict[str, object]:
        calls.append(document)
        if len(calls) == 1:
            raise RecursionError("an answer nested too deep")  # not a PushError
        return send(self, document)

    monkeypatch.setattr(Sender, "send", once_broken)
    document = node_document("odd.example.org", sequence=2)
    loop = one_sample(document, sender)
    assert loop.delivered == 1 and not loop.kept and loop.refused == 0
    assert calls == [document, document]
    assert any("an answer nested too deep" in record.getMessage() or record.exc_info for record in caplog.records)


@pytest.mark.parametrize("status", [503, 429])
def test_the_agent_waits_at_least_retry_after_and_keeps_the_sample(scripted: ScriptedFactory, status: int) -> None:
    server = scripted([status], {"Retry-After": "2"})
    document = node_document("retry.example.org", sequence=7)
    loop = one_sample(document, Sender(server.url, "t"))
    assert loop.delivered == 1 and loop.refused == 0 and not loop.kept
    (first, sent), (second, again) = server.received
    assert sent == again == document  # kept, and sent again as it was
    # Retry-After 2, not the 0.05 s back-off: at least that long, at most 1.2 times.
    assert 2.0 <= second - first < 2.0 * 1.2 + 1.0


def test_a_huge_retry_after_is_capped_at_the_longest_back_off(scripted: ScriptedFactory) -> None:
    server = scripted([503], {"Retry-After": "86400"})
    loop = PushLoop(lambda: b"", Sender(server.url, "t"), backoff_max=5.0)
    loop.keep(node_document("cap.example.org"))
    started = loop.clock()
    assert loop.deliver() is False
    assert len(loop.kept) == 1
    assert 5.0 <= loop._retry_at - started <= 5.0 * 1.2 + 0.5


def test_without_retry_after_the_back_off_applies(scripted: ScriptedFactory) -> None:
    server = scripted([503])
    loop = PushLoop(lambda: b"", Sender(server.url, "t"), backoff_initial=0.5)
    loop.keep(node_document("plain.example.org"))
    started = loop.clock()
    assert loop.deliver() is False
    assert 0.4 <= loop._retry_at - started <= 0.6 + 0.5


def test_the_sender_reads_retry_after_only_when_the_answer_may_be_retried(scripted: ScriptedFactory) -> None:
    refused = scripted([400], {"Retry-After": "9"})
    with pytest.raises(PushError) as caught:
        Sender(refused.url, "t").send(node_document("bad.example.org"))
    assert not caught.value.retry and caught.value.retry_after is None
    shed = scripted([503], {"Retry-After": "9"})
    with pytest.raises(PushError) as caught:
        Sender(shed.url, "t").send(node_document("shed.example.org"))
    assert caught.value.retry and caught.value.retry_after == 9.0


def test_agents_against_an_overloaded_real_server_lose_nothing_acknowledged(serve: ServerFactory) -> None:
    """Twelve agents push to a server allowed one report under way: some are shed, and every
    sample each agent counts as delivered is stored, each once."""
    server = serve(config={"service": {"max_pending_reports": 1}}, agents=12)
    loops = []
    for i in range(12):
        host = f"pushed{i:02d}.example.org"
        loop = PushLoop(lambda host=host: node_document(host, sequence=14), Sender(server.url, server.agent_token()),
                        interval=3600)
        for n in range(14):  # an agent back from an outage: 14 samples kept, a 15th taken now
            loop.keep(node_document(host, sequence=n))
        loops.append(loop)
    threads = [threading.Thread(target=loop.run, kwargs={"samples": 1}, daemon=True) for loop in loops]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert sum(loop.delivered for loop in loops) == 12 * 15 and not any(loop.dropped or loop.refused for loop in loops)
    rows = server.sql("SELECT host_id, count(*) FROM reports GROUP BY host_id")
    assert sorted(rows) == [(f"pushed{i:02d}.example.org", 15) for i in range(12)]
    counted = re.search(r'^infosvc_reports_rejected_total\{reason="overloaded"\} (\S+)$',
                        server.get("/metrics").body.decode(), re.M)
    assert counted is not None and float(counted[1]) > 0, "no report was shed: the test proved nothing"
