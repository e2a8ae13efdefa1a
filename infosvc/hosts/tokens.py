"""Who may write: the tokens file (`ROLE TOKEN [HOST|USER]` a line) and the token -> host bindings.
An executor token always names its HOST: it acts for the tasks placed there and no others. A
submit token may name its USER: the owner of the jobs it submits (else `token-` and the first
characters of its digest).

Tokens are kept only as SHA-256 digests. A presented token is hashed; candidates are found by
the first bytes of the digest (an index, not a secret: the dict lookup's timing may leak it)
and the whole digest is then compared in constant time. An agent token is bound to
the first host it reports for, or to the HOST written beside it; reports for any other host
are refused, and so is a second token's claim on a bound host.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from infosvc.model.hostid import HostIdError, host_id


class Role(StrEnum):
    AGENT = "agent"
    SUBMIT = "submit"
    ADMIN = "admin"
    #: runs the tasks placed on one host and reports their start and end (infosvc-agent --run-jobs)
    EXECUTOR = "executor"
    #: reads and nothing else, where service.read_token_required: what a site gives a top level
    READ = "read"


class TokenFileError(ValueError):
    pass


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


_INDEX_CHARS = 8
#: A user name as POSIX systems accept one (useradd's default rule).
USER_NAME = re.compile(r"[a-z_][a-z0-9_.-]{0,31}\Z", re.IGNORECASE)


@dataclass(slots=True)
class Tokens:
    """The known tokens (as digests) with their roles, and agent tokens' host bindings."""

    _index: dict[str, list[tuple[str, Role]]] = field(default_factory=dict)
    _hosts: dict[str, str] = field(default_factory=dict)  # digest -> host
    _tokens: dict[str, str] = field(default_factory=dict)  # host -> digest
    _executors: dict[str, str] = field(default_factory=dict)  # executor digest -> host
    _users: dict[str, str] = field(default_factory=dict)  # submit digest -> the user its jobs belong to
    #: the hosts executor tokens are bound to: the only ones the queue places tasks on
    executor_hosts: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, path: str | Path | None) -> Tokens:
        tokens = cls()
        if path is None:
            return tokens
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise TokenFileError(f"{path}: cannot read tokens: {exc.strerror}") from None
        for number, line in enumerate(text.splitlines(), 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) not in (2, 3):
                raise TokenFileError(f"{path}:{number}: expected 'ROLE TOKEN [HOST|USER]'")
            try:
                role = Role(words[0])
            except ValueError:
                # A word as long as a token is not quoted: it may be one, written first by mistake.
                said = repr(words[0]) if len(words[0]) < 16 else f"(a word of {len(words[0])} characters)"
                raise TokenFileError(f"{path}:{number}: unknown role {said}; "
                                     f"one of {', '.join(r.value for r in Role)}") from None
            if len(words[1]) < 16:
                raise TokenFileError(f"{path}:{number}: token too short (at least 16 characters)")
            if len(words) == 3 and role in (Role.ADMIN, Role.READ):
                raise TokenFileError(f"{path}:{number}: an {role.value} token is bound to no host or user")
            if len(words) == 3 and role is Role.SUBMIT:
                if not USER_NAME.match(words[2]):
                    raise TokenFileError(f"{path}:{number}: {words[2][:40]!r} is not a user name "
                                         "(a letter or _, then up to 31 letters, digits, _ . -)")
                tokens.add(words[1], role, user=words[2])
                continue
            if len(words) == 2 and role is Role.EXECUTOR:
                raise TokenFileError(f"{path}:{number}: an executor token names its host: 'executor TOKEN HOST'")
            try:
                tokens.add(words[1], role, host=host_id(words[2]) if len(words) == 3 else None)
            except (TokenFileError, HostIdError) as exc:
                raise TokenFileError(f"{path}:{number}: {exc}") from None
        return tokens

    def add(self, token: str, role: Role, host: str | None = None, user: str | None = None) -> str:
        key = digest(token)
        entries = self._index.setdefault(key[:_INDEX_CHARS], [])
        if any(known == key for known, _ in entries):
            raise TokenFileError("the same token is listed twice")
        entries.append((key, role))
        if user is not None:
            self._users[key] = user
        if host is not None and role is Role.EXECUTOR:
            self._executors[key] = host
            self.executor_hosts.add(host)
        elif host is not None:
            self.bind(key, host)
        return key

    def user_of(self, key: str) -> str:
        """The owner of the jobs a token submits: its USER, else `token-` and its digest's start."""
        return self._users.get(key) or f"token-{key[:8]}"

    def bound_user(self, key: str) -> str | None:
        """The USER a submit token is bound to: it files that user's jobs and no one else's."""
        return self._users.get(key)

    def executor_host(self, key: str) -> str | None:
        """The host an executor token acts for."""
        return self._executors.get(key)

    def check(self, token: str) -> tuple[str, Role] | None:
        """(digest, role) of a known token, else None; the digest is compared in constant time."""
        key = digest(token)
        found = None
        for known, role in self._index.get(key[:_INDEX_CHARS], ()):
            if hmac.compare_digest(known, key):
                found = (known, role)
        return found

    def host_of(self, key: str) -> str | None:
        return self._hosts.get(key)

    def holder_of(self, host: str) -> str | None:
        """The digest of the token bound to `host`, if any."""
        return self._tokens.get(host)

    def unbind(self, key: str, host: str) -> None:
        if self._hosts.get(key) == host:
            del self._hosts[key]
            del self._tokens[host]

    def bind(self, key: str, host: str) -> None:
        if self._hosts.get(key, host) != host:
            raise TokenFileError(f"token is already bound to host {self._hosts[key]!r}")
        if self._tokens.get(host, key) != key:
            raise TokenFileError(f"host {host!r} is already bound to another token")
        self._hosts[key] = host
        self._tokens[host] = key
