"""What the server says when it refuses what aiohttp cannot hand to the API: a request its parser
refused (answered as the API's JSON error, quoting none of the request's bytes) and a connection
it has no room for. Floods of either are logged through infosvc/loglimit.py."""

from __future__ import annotations

import json
import re
from typing import Final

from aiohttp.http_exceptions import (BadHttpMethod, BadStatusLine, HttpProcessingError, InvalidHeader,
                                     InvalidURLError, LineTooLong, PayloadEncodingError)

# --- requests aiohttp cannot parse ----------------------------------------------------------------

#: llhttp's errors read "REASON:\n\n  b'<the request's bytes>'\n  ^": REASON is llhttp's own text
#: ("Duplicate Content-Length", "Invalid character in chunk size"), the rest is the client's.
_LLHTTP_REASON = re.compile(r"(?:Bad status line:\n  )?([A-Za-z][A-Za-z0-9 '`-]{0,79}):\n\n  ")
_FRAMING_WORDS = ("Content-Length", "Transfer-Encoding", "chunk")


def describe_protocol_error(exc: HttpProcessingError, *, max_field_size: int,
                            max_headers: int) -> tuple[int, str, str]:
    """(status, error, detail) for a request aiohttp's parser refused. Nothing of the request is
    repeated: aiohttp's messages quote its bytes (the first 100 of an oversized header, which may
    be an Authorization value), so only llhttp's reason and fixed words are used."""
    found = _LLHTTP_REASON.match(exc.message)
    reason = found.group(1) if found else None
    if isinstance(exc, LineTooLong):
        return (431, "request line or header too long",
                f"a request line or header field may be at most {max_field_size} bytes")
    if exc.message == "Too many headers received":
        return 431, "too many header fields", f"a request may have at most {max_headers} header fields"
    if isinstance(exc, BadHttpMethod):
        if exc.message == "Received HTTPS traffic on an HTTP port":
            return 400, "not an HTTP request", "this port speaks plain HTTP, not TLS"
        return 400, "invalid request method", reason or "a method is a token such as GET or POST"
    if isinstance(exc, BadStatusLine):
        return 400, "invalid request line", reason or "expected METHOD TARGET HTTP/1.1"
    if isinstance(exc, InvalidURLError):
        return 400, "invalid request target", reason or "expected a path such as /v1/nodes"
    if isinstance(exc, InvalidHeader):
        return 400, "invalid header field", reason or "a header field's name or value holds a forbidden character"
    if isinstance(exc, PayloadEncodingError) or (reason and any(w in reason for w in _FRAMING_WORDS)):
        return 400, "invalid body framing", reason or "Content-Length or Transfer-Encoding does not match the body"
    return 400, "malformed request", reason or "the request is not valid HTTP/1.1"


# --- refusing a connection ----------------------------------------------------------------------

def _refusal(status: str, error: str, detail: str) -> bytes:
    body = json.dumps({"error": error, "detail": detail}).encode()
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Retry-After: 1\r\nConnection: close\r\n\r\n").encode() + body


#: Written to a connection the server has no room for, before closing it.
NO_ROOM: Final = _refusal("503 Service Unavailable", "too many connections",
                          "the server holds all the connections it may; try again shortly")
