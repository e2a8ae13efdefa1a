"""The push loop: a sample every interval (with jitter), delivered to the aggregator in order.

While the server cannot be reached, samples are kept (the newest `max_kept`; older ones are
dropped and counted) and retried with exponential back-off; when it answers again they are
delivered oldest first, so the server's history has no holes it could have had filled. A
sample the server refuses for what it is (4xx other than 401, 408 and 429) is dropped with an
error: sending it again would be refused again. A 401 refuses the token, not the sample (a
rotation half done: the aggregator has the new token and this host the old, or the reverse): the
sample is kept, the token file is read again before each retry, and back-off applies. A server that answers 503 or 429 with
Retry-After (it sheds load) is left alone at least that long, the sample kept; a 503 means it
stored nothing. With a spool (infosvc_agents/spool.py) every kept sample is also a file, so
that what was not acknowledged outlives a restart of the agent. Uses the standard library's HTTP
client only, which keeps the agent free of any web framework.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable
from urllib.parse import urlsplit

from infosvc.codec.node_xml import node_to_xml
from infosvc.model.node import Node
from infosvc.model.nodedelta import SAMPLE_ID, BaseIndex, delta_of

from infosvc_agents.http1 import Connection, Deadline
from infosvc_agents.spool import Spool

if TYPE_CHECKING:
    import ssl

log = logging.getLogger("infosvc_agents.push")

RETRYABLE = frozenset({408, 429})
#: the push loop keeps its connection between exchanges less than this many seconds apart (the
#: server keeps an agent's idle connection 30 s: service.keepalive_seconds); a longer wait drops it
KEEP_CONNECTION_BELOW = 20.0
#: one exchange with the server takes at most this many `Sender.timeout`s in all
DEADLINES = 3


class PushError(Exception):
    """A delivery that failed; `retry` says whether sending the same sample again may succeed,
    `retry_after` how many seconds the server asked to be left alone (its Retry-After), if it did,
    `status` the server's answer (None: none came)."""

    def __init__(self, message: str, *, retry: bool, retry_after: float | None = None,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.retry = retry
        self.retry_after = retry_after
        self.status = status


class Sample:
    """One sample as the push loop keeps it: the Node, and its whole document when it is needed
    (the spool's file, a server without the base, a sample with no delta to say). The Node is
    kept only while the sample is the newest kept: older ones are kept as their documents."""

    __slots__ = ("node", "_document")

    def __init__(self, node: Node) -> None:
        self.node = node
        self._document: bytes | None = None

    @property
    def document(self) -> bytes:
        if self._document is None:
            self._document = node_to_xml(self.node)
        return self._document


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A Retry-After header's wait in seconds: delay-seconds (ASCII digits: str.isdigit also takes
    "\u00b2", which float() does not) or an HTTP-date; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    import email.utils  # the HTTP-date form alone needs it: not loaded otherwise

    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - (time.time() if now is None else now))
    except (TypeError, ValueError, OverflowError):  # not a date, or one out of range
        return None


def acknowledgement(body: bytes) -> dict[str, object] | None:
    """The aggregator's acknowledgement of a report in an answer's body: a JSON object naming the
    host (and, from a server that takes deltas, the sample they may build on: "base"); None when
    the body is not one."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) and isinstance(answer.get("host"), str) else None


@dataclass(slots=True)
class Sender:
    """POSTs one document to SERVER/v1/nodes with the bearer token.

    An https server's certificate is verified, host name included: against `ca_file` (a private
    CA's certificates, PEM) when given, else against the system's CAs. A certificate that does not
    verify is a delivery failure like any other, so the samples are kept and retried. `timeout`
    bounds each read and write, DEADLINES times it the whole exchange.
    """

    server: str
    token: str
    timeout: float = 10.0
    ca_file: str | None = None
    #: where `token` came from: read again when the server refuses it (401)
    token_file: str | None = None
    #: keep the connection for the next exchange (the push loop's, while its interval is short)
    keep_alive: bool = False
    _context: "ssl.SSLContext | None" = field(default=None, init=False, repr=False)
    _connection: Connection | None = field(default=None, init=False, repr=False)
    _deadline: Deadline = field(init=False, repr=False)
    _base_path: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.server)
        self._deadline = Deadline(self.timeout, self.timeout * DEADLINES)
        self._base_path = parts.path.rstrip("/")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"server URL must be http:// or https://HOST[:PORT], not {self.server!r}")
        try:
            parts.port  # urlsplit checks the port only when asked: here, not at the first delivery
        except ValueError as exc:
            raise ValueError(f"server URL {self.server!r}: {exc}") from None
        if parts.scheme == "https":
            from infosvc_agents.tls import client_context

            # Built once: a CA file that cannot be used is an error at start-up, not a failure of
            # every delivery.
            self._context = client_context(self.ca_file)

    def send(self, document: bytes) -> dict[str, object]:
        """Deliver one report: the server's acknowledgement, or PushError."""
        status, body, retry_after = self._exchange("POST", "/v1/nodes", document, "application/xml", 4096)
        if 200 <= status < 300:
            answer = acknowledgement(body)
            if answer is not None:
                return answer
            # Not the aggregator's answer (a proxy's or a portal's page, a cut body): the sample
            # may not be stored, so it is kept and sent again; the aggregator stores it once.
            raise PushError(f"server answered {status} without an acknowledgement: "
                            f"{body[:100].decode('utf-8', 'replace')!r}", retry=True)
        if status == 401:
            changed, note = self._reread_token()
            if changed:  # a rotation finished on this side: the new token at once, not after a back-off
                return self.send(document)
            raise PushError(f"server refused the token (401){note}; the sample is kept", retry=True)
        retry = status >= 500 or status in RETRYABLE
        raise PushError(f"server answered {status}: {body[:300].decode('utf-8', 'replace')}", retry=retry,
                        retry_after=retry_after_seconds(retry_after) if retry else None, status=status)

    def _reread_token(self) -> tuple[bool, str]:
        """Read the token file again (a rotation): whether the token changed, and what happened
        for the log line."""
        if self.token_file is None:
            return False, ""
        try:
            token = read_token(self.token_file)
        except (OSError, ValueError) as exc:
            return False, f"; token file unreadable: {exc}"
        if token == self.token:
            return False, "; the token file holds the same token"
        self.token = token
        log.info("the token file holds a new token: sent from now on")
        return True, ""

    def call(self, method: str, path: str, body: bytes | None = None, content_type: str | None = None,
             limit: int = 4096) -> tuple[int, bytes]:
        """One request to the server with the bearer token: (status, at most `limit` bytes of the
        answer); PushError (retry) when the server cannot be reached."""
        status, answer, _ = self._exchange(method, path, body, content_type, limit)
        return status, answer

    def _exchange(self, method: str, path: str, body: bytes | None, content_type: str | None,
                  limit: int) -> tuple[int, bytes, str | None]:
        """`call`, and the answer's Retry-After header. The whole exchange (connecting, the TLS
        handshake, sending, the answer read) ends by DEADLINES timeouts: a server that answers a
        byte at a time, each in time, would otherwise hold the agent (and its sampling) for ever.
        With `keep_alive` the connection is kept for the next exchange; a kept one the server
        closed meanwhile is replaced once, within the same deadline."""
        self._deadline.start()
        headers = {"Authorization": f"Bearer {self.token}"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        while True:
            connection = self._connection
            if connection is None:
                parts = urlsplit(self.server)
                port = parts.port or (443 if parts.scheme == "https" else 80)
                connection = self._connection = Connection(parts.hostname or "", port, self._deadline, self._context)
            try:
                answer = connection.exchange(method, self._base_path + path, headers, body, limit)
            except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as exc:
                self._connection = None
                if connection.used:  # a kept connection the server closed while it was idle
                    continue
                raise PushError(f"cannot reach {self.server}: {exc}", retry=True) from None
            except (OSError, ValueError) as exc:  # ValueError: a socket cut mid-TLS
                self._connection = None
                raise PushError(f"cannot reach {self.server}: {exc}", retry=True) from None
            if not (self.keep_alive and answer.reusable):
                self.close()
            return answer.status, answer.body, answer.headers.get("retry-after")

    def close(self) -> None:
        """Drop the kept connection, if any (the push loop does before a long wait: the server
        would close it first)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()


@dataclass(slots=True)
class PushLoop:
    #: a new sample: its document, or a Sample (sent as a delta of the last whole one the server took, when it can be)
    sample: Callable[[], bytes | Sample]
    sender: Sender
    interval: float = 60.0
    jitter: float = 0.1
    max_kept: int = 1000
    backoff_initial: float = 1.0
    backoff_max: float = 300.0
    clock: Callable[[], float] = time.monotonic
    #: where kept samples are also written (--spool); what it holds at start is kept first
    spool: Spool | None = None
    kept: deque[bytes | Sample] = field(default_factory=deque)
    taken: int = 0
    delivered: int = 0
    dropped: int = 0
    refused: int = 0
    #: samples an earlier run left in the spool, read at start
    resumed: int = 0
    #: of those delivered, how many went as deltas
    deltas: int = 0
    #: the last whole sample the server acknowledged, which the next deltas build on (None: send whole)
    _base: Node | None = None
    _base_index: BaseIndex | None = None
    #: each kept sample's file in the spool (None: in memory only), beside `kept`
    _files: deque[str | None] = field(default_factory=deque)
    _backoff: float = 0.0
    _retry_at: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.sender.keep_alive = True  # dropped before any wait of KEEP_CONNECTION_BELOW or more: see run
        if self.spool is None:
            return
        left = self.spool.load()
        over = max(0, len(left) - self.max_kept)  # --max-kept lowered since: the oldest go
        for name, _ in left[:over]:
            self.spool.remove(name)
            self.dropped += 1
        if over:
            log.warning("spool %s: dropped the %d oldest samples, over --max-kept %d", self.spool.directory,
                        over, self.max_kept)
        for name, document in left[over:]:
            self.kept.append(document)
            self._files.append(name)
        self.resumed = len(self.kept)
        if self.resumed:
            log.info("spool %s: %d sample(s) left by the last run, sent first", self.spool.directory, self.resumed)

    def keep(self, sample: bytes | Sample) -> None:
        if len(self.kept) >= self.max_kept:
            self._forget_oldest()
            self.dropped += 1
            log.warning("server unreachable for long: dropped the oldest kept sample (%d dropped so far)", self.dropped)
        if self.kept and isinstance(self.kept[-1], Sample):
            self.kept[-1] = self.kept[-1].document  # a Node is kept for the newest sample alone
        # On disk before it is first sent: a restart from here on sends it again, not never. (Without
        # a spool a Sample's whole document is written only if it is sent whole.)
        if self.spool is not None:
            self._files.append(self.spool.add(sample.document if isinstance(sample, Sample) else sample))
        else:
            self._files.append(None)
        self.kept.append(sample)

    def spooled(self) -> int:
        """How many kept samples are in the spool (those it could not write are in memory only)."""
        return sum(1 for name in self._files if name is not None)

    def _forget_oldest(self) -> None:
        """The oldest kept sample is done with (acknowledged, refused or dropped): out of memory
        and out of the spool."""
        self.kept.popleft()
        name = self._files.popleft() if self._files else None
        if name is not None and self.spool is not None:
            self.spool.remove(name)

    def deliver(self) -> bool:
        """Send kept samples oldest first; False when the server could not take them (back off)."""
        while self.kept:
            head = self.kept[0]
            try:
                document, delta = self._document(head)
            except Exception:  # noqa: BLE001 - a sample that cannot be written must not end the agent
                log.exception("a kept sample cannot be written as a document: dropped")
                self._forget_oldest()
                self.dropped += 1
                continue
            try:
                answer = self.sender.send(document)
            except PushError as exc:
                if delta and exc.status in (400, 409):
                    # 409: the server does not hold the sample the delta builds on (restarted from
                    # an older store, the host removed, another sender); 400: it would not take
                    # this delta. Either way the whole document goes, at once.
                    log.log(logging.INFO if exc.status == 409 else logging.WARNING,
                            "delta refused (%s): sending the whole sample", exc)
                    self._base = None
                    continue
                if exc.retry and exc.retry_after is not None:
                    # The server answered and said when to come back (it sheds load): at least that
                    # long, spread a little so that the agents it turned away do not return at once.
                    wait = min(self.backoff_max, exc.retry_after) * random.uniform(1.0, 1.2)
                    self._retry_at = self.clock() + wait
                    log.warning("%s; %d sample(s) kept, retrying in %.1f s as asked", exc, len(self.kept), wait)
                    return False
                if exc.retry:
                    self._back_off()
                    log.warning("%s; %d sample(s) kept, retrying in %.1f s", exc, len(self.kept), self._backoff)
                    return False
                self._forget_oldest()
                self.refused += 1
                log.error("sample refused, dropped: %s", exc)
                continue
            except Exception:  # noqa: BLE001 - an answer this agent cannot read must not end it
                self.sender.close()  # a fresh connection for the next try
                self._back_off()
                log.exception("delivery failed unexpectedly; %d sample(s) kept, retrying in %.1f s", len(self.kept),
                              self._backoff)
                return False
            if delta:
                self.deltas += 1
            elif isinstance(head, Sample) and answer.get("base") == head.node.extension(SAMPLE_ID, "Agent"):
                # the server holds it, and takes deltas of it: its answer named it the base
                self._base, self._base_index = head.node, BaseIndex(head.node)
            else:
                self._base = None
            self._forget_oldest()
            self.delivered += 1
            if self._backoff:
                log.info("server reachable again")
            self._backoff = 0.0
        return True

    def _document(self, head: bytes | Sample) -> tuple[bytes, bool]:
        """What to send for the oldest kept sample, and whether it is a delta (of the base)."""
        if self._base is not None and isinstance(head, Sample):
            delta = delta_of(self._base, head.node, self._base_index)
            if delta is not None:
                return node_to_xml(delta), True
        return (head.document if isinstance(head, Sample) else head), False

    def _back_off(self) -> None:
        """The next try after the back-off, doubled from the last (up to backoff_max), spread a little."""
        self._backoff = min(self.backoff_max, self._backoff * 2 if self._backoff else self.backoff_initial)
        self._retry_at = self.clock() + self._backoff * random.uniform(0.8, 1.2)

    def stop(self) -> None:
        self._stop.set()

    def run(self, samples: int | None = None) -> None:
        """Sample and deliver until stop() (or until `samples` samples were taken)."""
        taken = 0  # by this call
        if self.kept:
            # Left by the last run (the spool): one try before the first sample, which would push the
            # oldest out of a full spool before the server was even asked.
            self.deliver()
        next_sample = self.clock()
        while not self._stop.is_set():
            now = self.clock()
            if now >= next_sample:
                try:
                    self.keep(self.sample())
                except Exception:  # noqa: BLE001 - a failed sample must not end the agent
                    log.exception("sample failed")
                taken += 1
                self.taken += 1
                # Jitter spreads a thousand agents started together over the interval.
                next_sample = now + self.interval * random.uniform(1 - self.jitter, 1 + self.jitter)
            if self.kept and now >= self._retry_at:
                self.deliver()
            if samples is not None and taken >= samples and not self.kept:
                break
            wake = next_sample if not self.kept else min(next_sample, max(self._retry_at, now + 0.01))
            wait = max(0.0, wake - self.clock())
            if wait >= KEEP_CONNECTION_BELOW:
                self.sender.close()  # the server would close it first, and a kept socket costs it a slot
            self._stop.wait(wait)
        self.sender.close()


def read_token(path: str, role: str = "agent") -> str:
    """The token in a token file: its first non-blank, non-comment line, which is "TOKEN", or a
    line of the server's tokens file ("ROLE TOKEN" or "ROLE TOKEN HOST", ROLE `role`)."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) == 1:
                return words[0]
            if words[0] == role and len(words) in (2, 3):
                return words[1]
            # The words are not repeated: one of them may be the secret.
            raise ValueError(f"{path}: expected 'TOKEN' or '{role} TOKEN [HOST]' on its first line, "
                             f"found {len(words)} words")
    raise ValueError(f"{path}: no token in the file")
