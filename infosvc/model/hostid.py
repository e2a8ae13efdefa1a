"""Host Ids as the aggregator keeps them: the grammar an Id must follow, and its one canonical form.

An SSS Node's Id is any token, but a host is addressed by its Id in URLs, NodeSets, GLUE and the
token bindings, so the aggregator takes Ids that are DNS names (RFC 1123 labels, with `_` as
sites use it): ASCII letters, digits, `-`, `_` and `.`, labels of 1 to 63 characters, 253 in
all. Each is kept in one canonical form, lower case without a final dot, as DNS compares names:
the binding, the store, GLUE, every route and the matcher all see that form, so `HOSTA.` and
`hosta` are one host and no route is left unable to address an Id that was accepted.
"""

from __future__ import annotations

import re
from typing import Final

from infosvc.errors import excerpt

MAX_ID_CHARS: Final = 253
_GRAMMAR: Final = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,62})(?:\.[a-z0-9_](?:[a-z0-9_-]{0,62}))*")
#: What the grammar says, in words, for the errors.
GRAMMAR_WORDS: Final = ("a DNS name: letters, digits, '-', '_' and '.', labels of 1 to 63 characters "
                        f"starting with a letter, digit or '_', at most {MAX_ID_CHARS} characters")


class HostIdError(ValueError):
    """An Id outside the grammar."""


def canonical(text: str) -> str:
    """The canonical form of a host name: lower case, one final dot dropped. No check."""
    text = text.strip()
    return (text[:-1] if text.endswith(".") else text).lower()


def host_id(text: str) -> str:
    """The canonical Id of `text`; HostIdError when it is outside the grammar."""
    if len(text) > MAX_ID_CHARS + 1:  # before any other work: an Id of 100,000 characters was taken
        raise HostIdError(f"the Id is {len(text)} characters long; at most {MAX_ID_CHARS} are accepted")
    ident = canonical(text)
    if len(ident) > MAX_ID_CHARS or not ident.isascii() or not _GRAMMAR.fullmatch(ident):
        raise HostIdError(f"the Id {excerpt(text)!r} is not {GRAMMAR_WORDS}")
    return ident
