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

import email.utils
import http.client
import json
import logging
import random
import socket
import ssl
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlsplit

from infosvc_agents.spool import Spool

log = logging.getLogger("infosvc_agents.push")

RETRYABLE = frozenset({408, 429})
#: one exchange with the server takes at most this many `Sender.timeout`s in all
DEADLINES = 3


class PushError(Exception):
    """A delivery that failed; `retry` says whether sending the same sample again may succeed,
    `retry_after` how many seconds the server asked to be left alone (its Retry-After), if it did."""

    def __init__(self, message: str, *, retry: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry = retry
        self.retry_after = retry_after


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A Retry-After header's wait in seconds: delay-seconds or an HTTP-date; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def acknowledges(body: bytes) -> bool:
    """Whether an answer's body is the aggregator's acknowledgement of a report: a JSON object
    naming the host."""
    try:
        answer = json.loads(body)
    except ValueError:
        return False
    return isinstance(answer, dict) and isinstance(answer.get("host"), str)


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
    _context: ssl.SSLContext | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"server URL must be http:// or https://HOST[:PORT], not {self.server!r}")
        try:
            parts.port  # urlsplit checks the port only when asked: here, not at the first delivery
        except ValueError as exc:
            raise ValueError(f"server URL {self.server!r}: {exc}") from None
        if parts.scheme == "https":
            # Built once: a CA file that cannot be used is an error at start-up, not a failure of
            # every delivery.
            try:
                self._context = ssl.create_default_context(cafile=self.ca_file)
            except OSError as exc:  # ssl.SSLError too
                raise ValueError(f"CA file {self.ca_file}: {exc.strerror or exc}") from None
            self._context.minimum_version = ssl.TLSVersion.TLSv1_2

    def send(self, document: bytes) -> None:
        status, body, retry_after = self._exchange("POST", "/v1/nodes", document, "application/xml", 4096)
        if 200 <= status < 300:
            if acknowledges(body):
                return
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
                        retry_after=retry_after_seconds(retry_after) if retry else None)

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
        """`call`, and the answer's Retry-After header."""
        parts = urlsplit(self.server)
        connection: http.client.HTTPConnection
        if self._context is not None:
            connection = http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=self.timeout,
                                                     context=self._context)
        else:
            connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=self.timeout)
        headers = {"Authorization": f"Bearer {self.token}"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        # `timeout` bounds each read and write; a server that answers a byte at a time, each in time,
        # would hold the agent (and its sampling) for ever: the whole exchange is cut at DEADLINES
        # timeouts by shutting the socket under the reader.
        watchdog = threading.Timer(self.timeout * DEADLINES, _cut, (connection,))
        watchdog.daemon = True
        watchdog.start()
        try:
            connection.request(method, parts.path.rstrip("/") + path, body=body, headers=headers)
            response = connection.getresponse()
            answer = response.read(limit)
        except (OSError, http.client.HTTPException, ValueError) as exc:  # ValueError: a socket cut mid-TLS
            raise PushError(f"cannot reach {self.server}: {exc}", retry=True) from None
        finally:
            watchdog.cancel()
            connection.close()
        return response.status, answer, response.getheader("Retry-After")


def _cut(connection: http.client.HTTPConnection) -> None:
    """End an exchange past its deadline: the blocked read returns, and the exchange fails."""
    sock = connection.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


@dataclass(slots=True)
class PushLoop:
    sample: Callable[[], bytes]
    sender: Sender
    interval: float = 60.0
    jitter: float = 0.1
    max_kept: int = 1000
    backoff_initial: float = 1.0
    backoff_max: float = 300.0
    clock: Callable[[], float] = time.monotonic
    #: where kept samples are also written (--spool); what it holds at start is kept first
    spool: Spool | None = None
    kept: deque[bytes] = field(default_factory=deque)
    taken: int = 0
    delivered: int = 0
    dropped: int = 0
    refused: int = 0
    #: samples an earlier run left in the spool, read at start
    resumed: int = 0
    #: each kept sample's file in the spool (None: in memory only), beside `kept`
    _files: deque[str | None] = field(default_factory=deque)
    _backoff: float = 0.0
    _retry_at: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
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

    def keep(self, document: bytes) -> None:
        if len(self.kept) >= self.max_kept:
            self._forget_oldest()
            self.dropped += 1
            log.warning("server unreachable for long: dropped the oldest kept sample (%d dropped so far)", self.dropped)
        # On disk before it is first sent: a restart from here on sends it again, not never.
        self._files.append(self.spool.add(document) if self.spool is not None else None)
        self.kept.append(document)

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
            try:
                self.sender.send(self.kept[0])
            except PushError as exc:
                if exc.retry and exc.retry_after is not None:
                    # The server answered and said when to come back (it sheds load): at least that
                    # long, spread a little so that the agents it turned away do not return at once.
                    wait = min(self.backoff_max, exc.retry_after) * random.uniform(1.0, 1.2)
                    self._retry_at = self.clock() + wait
                    log.warning("%s; %d sample(s) kept, retrying in %.1f s as asked", exc, len(self.kept), wait)
                    return False
                if exc.retry:
                    self._backoff = min(self.backoff_max, self._backoff * 2 if self._backoff else self.backoff_initial)
                    self._retry_at = self.clock() + self._backoff * random.uniform(0.8, 1.2)
                    log.warning("%s; %d sample(s) kept, retrying in %.1f s", exc, len(self.kept), self._backoff)
                    return False
                self._forget_oldest()
                self.refused += 1
                log.error("sample refused, dropped: %s", exc)
                continue
            self._forget_oldest()
            self.delivered += 1
            if self._backoff:
                log.info("server reachable again")
            self._backoff = 0.0
        return True

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
                return
            wake = next_sample if not self.kept else min(next_sample, max(self._retry_at, now + 0.01))
            self._stop.wait(max(0.0, wake - self.clock()))


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
