"""The command line's HTTP client: one request to the aggregator with the standard library, the
token from a file, an optional CA file for https, and every failure as one ClientError sentence
(the server, and what went wrong) rather than a traceback.

Kept to the standard library so that the commands run where only the agent is installed.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from calendar import timegm
from dataclasses import dataclass
from typing import Any, Final

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
        return cls(server.rstrip("/"), token, context)

    def call(self, method: str, path: str, body: bytes | None = None, content_type: str | None = None) -> Any:
        """The JSON answer to METHOD SERVER/path; ClientError for a refusal (with the server's
        error and detail), an unreachable server, or an answer that is not JSON."""
        headers = {"Accept": "application/json"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        answer = self.fetch(method, path, body, headers)
        try:
            return json.loads(answer)
        except ValueError:
            raise ClientError(f"{self.server + path}: the answer is not JSON") from None

    def fetch(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> bytes:
        """The body of the answer to METHOD SERVER/path, the token sent with it; ClientError as
        `call` raises it. A redirect is not followed: the token goes to the server given, nowhere else."""
        url = self.server + path
        headers = dict(headers or {})
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=body, headers=headers, method=method)
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        if self.context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=self.context))
        try:
            with urllib.request.build_opener(*handlers).open(request, timeout=self.timeout) as response:
                answer: bytes = response.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                where = str(exc.headers.get("Location", "nowhere"))[:200]
                raise ClientError(f"{url}: {exc.code}: the server redirects to {where}; not followed, so that the "
                                  "token goes only to the server given: give that URL as --server if it is yours") from None
            raise ClientError(f"{url}: {exc.code} {error_of(exc.read(64 * 1024))}") from None
        except urllib.error.URLError as exc:
            raise ClientError(f"cannot reach {self.server}: {exc.reason}") from None
        except (OSError, ValueError) as exc:  # a timeout mid-answer, a URL urllib cannot use
            said = str(exc).replace(self.token, "[token]") if self.token else str(exc)
            raise ClientError(f"cannot reach {self.server}: {said}") from None
        if len(answer) > MAX_ANSWER_BYTES:
            raise ClientError(f"{url}: the answer is larger than {MAX_ANSWER_BYTES // 2**20} MB")
        return answer


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
    except (ValueError, KeyError, TypeError):
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


def epoch_of(iso: str | None) -> float | None:
    """A time as the server writes it (`2026-11-24T14:05:00Z`), in seconds; None if it is not one."""
    if not iso:
        return None
    try:
        return float(timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None
