"""The command line's HTTP client: one request to the aggregator with the standard library, the
token from a file, an optional CA file for https, and every failure as one ClientError sentence
(the server, and what went wrong) rather than a traceback.

Every request has one time limit for the whole exchange (TIMEOUT_SECONDS: connecting, sending,
and the whole answer), not only for each read: a server that trickles its answer a byte at a time
is cut off there, so a command run by a BDII provider or a cron job cannot hang on one. A JSON
answer is one object, or a ClientError (nested past the parser's depth, of another shape): the
commands check the fields they print (`checked`) and say what was wrong in one line.

Kept to the standard library so that the commands run where only the agent is installed.
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from calendar import timegm
from dataclasses import dataclass
from typing import Any, Final, Iterable, Mapping

#: The most one request may take, whole: connecting, sending, and reading all of the answer.
TIMEOUT_SECONDS: Final = 15.0
#: The most the command line reads of one answer (GET /v1/jobs with 10,000 jobs is ~10 MB).
MAX_ANSWER_BYTES: Final = 64 * 1024 * 1024


class ClientError(Exception):
    """The server could not be reached, refused the request, or answered something unusable."""


@dataclass(frozen=True, slots=True)
class Client:
    server: str
    token: str | None = None
    context: ssl.SSLContext | None = None
    timeout: float = TIMEOUT_SECONDS

    @classmethod
    def of(cls, server: str, *, token_file: str | None = None, ca_file: str | None = None) -> Client:
        """A client for `server`; ClientError when the URL, the token file or the CA file is unusable."""
        parts = urllib.parse.urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ClientError(f"the server must be an http:// or https:// URL, not {server!r}")
        token = None
        if token_file is not None:
            try:
                with open(token_file, encoding="utf-8") as handle:
                    token = handle.read().strip()
            except OSError as exc:
                raise ClientError(f"{token_file}: cannot read: {exc.strerror}") from None
            except UnicodeDecodeError:
                raise ClientError(f"{token_file}: the file is not UTF-8 text") from None
            if not token:
                raise ClientError(f"{token_file}: the file holds no token")
            if not token.isprintable() or any(char.isspace() for char in token):
                # Never quoted: the header http.client refused was quoted whole, the token in it.
                raise ClientError(f"{token_file}: a token is one word on one line, of printable characters; "
                                  "this file's content is not (it is not shown: it may be secret)")
        context = None
        if ca_file is not None:
            try:
                context = ssl.create_default_context(cafile=ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ClientError(f"{ca_file}: cannot use as CA certificates: {exc}") from None
        return cls(server.rstrip("/"), token, context, TIMEOUT_SECONDS)

    def call(self, method: str, path: str, body: bytes | None = None,
             content_type: str | None = None) -> dict[str, Any]:
        """The JSON object answering METHOD SERVER/path; ClientError for a refusal (with the
        server's error and detail), an unreachable server, or an answer that is not a JSON object
        (nested past the parser's depth included: it raised RecursionError)."""
        headers = {"Accept": "application/json"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        answer = self.fetch(method, path, body, headers)
        try:
            data = json.loads(answer)
        except RecursionError:
            raise ClientError(f"{self.server + path}: the answer is JSON nested too deeply to read") from None
        except ValueError:
            raise ClientError(f"{self.server + path}: the answer is not JSON") from None
        if not isinstance(data, dict):
            raise ClientError(f"{self.server + path}: the answer is not a JSON object but {_kind(data)}")
        return data

    def fetch(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> bytes:
        """The body of the answer to METHOD SERVER/path, the token sent with it; ClientError as
        `call` raises it. A redirect is not followed: the token goes to the server given, nowhere else.
        The whole exchange is bounded by `timeout`, not only each read (a ClientError that says so)."""
        if not path.startswith("/"):  # SERVER + path must stay on SERVER: `:8088/x` would change its port
            raise ClientError(f"{self.server}: {path[:200]!r} is not a path on the server; not requested")
        url = self.server + path
        deadline = _Deadline(self.timeout)
        try:
            answer = self._exchange(method, url, body, headers, deadline)
        except ClientError:
            if deadline.passed():
                raise self._late(url) from None
            raise
        finally:
            deadline.close()
        if deadline.passed():  # cut off while reading: what was read is not the whole answer
            raise self._late(url)
        return answer

    def _late(self, url: str) -> ClientError:
        return ClientError(f"{url}: no whole answer within {self.timeout:g} s (the time limit of a request); "
                           "stopped")

    def _exchange(self, method: str, url: str, body: bytes | None, headers: dict[str, str] | None,
                  deadline: _Deadline) -> bytes:
        headers = dict(headers or {})
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=body, headers=headers, method=method)
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect(), _HTTPHandler(deadline),
                                                      _HTTPSHandler(deadline, self.context)]
        try:
            with urllib.request.build_opener(*handlers).open(request, timeout=self.timeout) as response:
                answer: bytes = response.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                where = str(exc.headers.get("Location", "nowhere"))[:200]
                raise ClientError(f"{url}: {exc.code}: the server redirects to {where}; not followed, so that the "
                                  "token goes only to the server given: give that URL as --server if it is yours") from None
            try:
                said = error_of(exc.read(64 * 1024))
            except (OSError, http.client.HTTPException):
                said = "(its answer cut short)"
            raise ClientError(f"{url}: {exc.code} {said}") from None
        except urllib.error.URLError as exc:
            raise ClientError(f"cannot reach {self.server}: {exc.reason}") from None
        except (OSError, ValueError, http.client.HTTPException) as exc:  # a timeout mid-answer, a URL urllib
            # cannot use, an answer that is not HTTP (a status line or chunk cut short)
            said = str(exc).replace(self.token, "[token]") if self.token else str(exc)
            raise ClientError(f"cannot reach {self.server}: {said or type(exc).__name__}") from None
        if len(answer) > MAX_ANSWER_BYTES:
            raise ClientError(f"{url}: the answer is larger than {MAX_ANSWER_BYTES // 2**20} MB")
        return answer


class _Deadline:
    """The time limit of one exchange. Each socket op has urllib's timeout, which a server that
    sends a byte a second never reaches; so, when the limit passes, a timer thread shuts the
    connection down (a copy of its socket, taken as it was connected, before any TLS), and
    whatever read or write is blocked on it returns at once. `passed()` says it did: what was
    read by then is not the whole answer, even where urllib returns it without an error."""

    def __init__(self, seconds: float) -> None:
        self._at = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._passed = False
        self._closed = False
        self._timer = threading.Timer(seconds, self._pass)
        self._timer.daemon = True
        self._timer.start()

    def passed(self) -> bool:
        with self._lock:
            return self._passed

    def connect(self, address: tuple[str, int], timeout: Any = None,
                source_address: tuple[str, int] | None = None) -> socket.socket:
        """socket.create_connection, the name's lookup included, bounded by what is left of the
        limit; its socket watched."""
        host, port = address
        sock: socket.socket | None = None
        failed: OSError = OSError(f"no address for {host}")
        for family, kind, protocol, _, where in self._addresses(host, port):
            left = self._at - time.monotonic()
            if left <= 0:
                failed = TimeoutError("timed out")
                break
            wait = min(timeout, left) if isinstance(timeout, (int, float)) else left
            attempt = socket.socket(family, kind, protocol)
            try:
                attempt.settimeout(wait)
                if source_address:
                    attempt.bind(source_address)
                attempt.connect(where)  # the address as looked up: an IPv6 one keeps its scope
                sock = attempt
                break
            except OSError as exc:
                attempt.close()
                failed = exc
        if sock is None:
            raise failed
        copy = sock.dup()
        with self._lock:
            if not self._passed and not self._closed:
                self._sockets.append(copy)
                return sock
        _shut(copy)
        copy.close()
        return sock  # shut: the request fails at once, and passed() says why

    def _addresses(self, host: str, port: int) -> list[Any]:
        """getaddrinfo within what is left of the limit: the resolver's own timeouts and retries
        (5 s each, by resolv.conf's default, per server and attempt) know nothing of it. The lookup
        runs in a thread of its own, left behind if the limit passes first."""
        found: list[Any] = []
        failed: list[Exception] = []

        def look_up() -> None:
            try:
                found.extend(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
            except Exception as exc:  # noqa: BLE001 - raised again in the caller: a label over 63 characters is a UnicodeError
                failed.append(exc)

        lookup = threading.Thread(target=look_up, name="infosvc-lookup", daemon=True)
        lookup.start()
        lookup.join(max(0.0, self._at - time.monotonic()))
        if lookup.is_alive():
            raise TimeoutError(f"timed out looking up {host}")
        if failed:
            raise failed[0]
        return found

    def _pass(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._passed = True
            for sock in self._sockets:
                _shut(sock)

    def close(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._closed = True
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # not connected any more
        pass


class _HTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, *, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self._create_connection = deadline.connect  # http.client connects with this attribute


class _HTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, *, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self._create_connection = deadline.connect  # the TCP socket, before TLS wraps it


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        def connection(host: str, **kwargs: Any) -> http.client.HTTPConnection:
            return _HTTPConnection(host, deadline=self._deadline, **kwargs)
        return self.do_open(connection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline, context: ssl.SSLContext | None) -> None:
        super().__init__(context=context)
        self._deadline = deadline
        self._tls = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        def connection(host: str, **kwargs: Any) -> http.client.HTTPConnection:
            return _HTTPSConnection(host, deadline=self._deadline, **kwargs)
        return self.do_open(connection, req, context=self._tls)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 30x answer is an HTTPError, not a new request: urllib's default follows it with the
    Authorization header, to any host and from https to http."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> None:
        return None


def error_of(body: bytes) -> str:
    """The server's {"error", "detail"} as one line (a detail that lists problems adds those the
    error does not already say), else the start of the body."""
    try:
        data = json.loads(body)
        error, detail = str(data["error"]), data.get("detail")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return body.decode("utf-8", "replace").strip()[:200]
    if isinstance(detail, list):  # problems, each with a message and where it is
        said = []
        for item in detail[:10]:
            if not isinstance(item, dict):
                said.append(str(item))
                continue
            message = str(item.get("message", ""))
            where = ", ".join(f"{key} {item[key]}" for key in ("element", "attribute", "line") if key in item)
            if message == error or not message:
                said.append(where)
            else:
                said.append(f"{message} ({where})" if where else message)
        detail = "; ".join(text for text in said if text)
    return error + (f": {detail}" if detail else "")


def epoch_of(iso: object) -> float | None:
    """A time as the server writes it (`2026-11-24T14:05:00Z`), in seconds; None if it is not one."""
    if not iso or not isinstance(iso, str):
        return None
    try:
        return float(timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


#: The largest number `checked` lets through (a run time, a count): 10**11 s is over 3,000 years,
#: and clock() and time.gmtime() have to take it (inf, or 1e300, raised OverflowError in `why`).
MAX_NUMBER: Final = 10**11


def checked(value: Any, where: str, what: str, kinds: Mapping[str, type | tuple[type, ...]],
            required: Iterable[str] = ()) -> dict[str, Any]:
    """`value` if it is a JSON object holding each of `required` (not null) and, of the fields in
    `kinds`, only values of those types (or null; a number finite, at most MAX_NUMBER); else a
    ClientError naming `where`, `what` was expected and the field: an answer of another shape is
    one line, not a TypeError's traceback out of the printing."""
    if not isinstance(value, dict):
        raise ClientError(f"{where}: the answer is not {what}: it is {_kind(value)}, not an object")
    for key in required:
        if value.get(key) is None:
            raise ClientError(f"{where}: the answer is not {what}: it has no {key!r}")
    for key, kind in kinds.items():
        field = value.get(key)
        if field is None:
            continue
        if not isinstance(field, kind):
            raise ClientError(f"{where}: the answer is not {what}: its {key!r} is {_kind(field)}")
        if isinstance(field, (int, float)) and not (math.isfinite(field) and abs(field) <= MAX_NUMBER):
            raise ClientError(f"{where}: the answer is not {what}: its {key!r} is out of range")
    return value


def _kind(value: Any) -> str:
    """A JSON value's kind, as an error names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"
