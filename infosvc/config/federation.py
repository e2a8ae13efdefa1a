"""The site config's `[federation]` table: the upstream site aggregators a top level pulls
(`[[federation.upstreams]]`), how often, how long a silent one is kept, and the bounds of a pull.

A config with upstreams (or `infosvc serve --upstream URL`) makes the server a top level
(infosvc/federation/, docs/grid.md). Read by infosvc/config/site.py through the same typed table
reader as every other table (infosvc/config/table.py), so unknown keys and wrong types name the key.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Sequence
from urllib.parse import urlsplit

from infosvc.config.table import DAY_SECONDS, ConfigError, Setting, TomlTable

if TYPE_CHECKING:
    from infosvc.config.site import SiteConfig

#: The name of the top level's own site (its own store's hosts) in the union.
LOCAL_SITE: Final = "local"
#: A site's name: what its entities are prefixed with on an id clash (`NAME/ID`), so no slash.
_NAME: Final = re.compile(r"[a-z0-9][a-z0-9._:-]{0,62}")


@dataclass(frozen=True, slots=True)
class Upstream:
    """One site aggregator the top level pulls GET /v1/glue from."""

    url: str  # its base URL, http(s)://host:port, no final slash
    #: its name in the union (entity `site`, id prefix on a clash); None: host:port of the url
    name: str | None = None
    #: a file holding the read token the site asks of its readers (service.read_token_required),
    #: read when the top level starts (infosvc.federation.pull)
    token_file: str | None = None
    #: CA certificates (PEM) to verify an https site with, in place of the system's
    ca_file: str | None = None

    @property
    def label(self) -> str:
        return self.name or (urlsplit(self.url).netloc.lower())


#: The plain keys of `[federation]`, as infosvc.config.site's SETTINGS declares the other tables'.
SETTINGS: Final = (
    Setting("interval_seconds", 60.0, "how often each upstream's GET /v1/glue is pulled",
            maximum=DAY_SECONDS),
    Setting("delete_delay_seconds", 1800.0, "how long the last good copy of a site that stopped answering is "
            "published (marked stale) before it is dropped, as a BDII's delete delay"),
    Setting("timeout_seconds", 10.0, "the time one pull of one site may take, connection to last byte",
            maximum=DAY_SECONDS),
    Setting("max_body_bytes", 64 * 1024 * 1024, "the largest answer read from a site (else that pull fails)",
            minimum=1024),
)


def _default(key: str) -> float | int:
    return next(s.default for s in SETTINGS if s.key == key)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class FederationConfig:
    """A top level's upstreams; none: this server is a site, not a top level."""

    upstreams: tuple[Upstream, ...] = ()
    interval_seconds: float = _default("interval_seconds")
    delete_delay_seconds: float = _default("delete_delay_seconds")
    timeout_seconds: float = _default("timeout_seconds")
    max_body_bytes: int = int(_default("max_body_bytes"))


def upstream(url: str, name: str | None = None, token_file: str | None = None, where: str = "--upstream",
             ca_file: str | None = None) -> Upstream:
    """An upstream checked: an http(s) URL with a host and nothing after the path, a usable name.
    ValueError names `where`."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f"{where}: not an http(s) URL of a site aggregator: {url!r}")
    if parts.username or parts.password:
        raise ValueError(f"{where}: no credentials in the URL: give a token_file")
    base = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
    found = Upstream(base, name, token_file, ca_file)
    if not _NAME.fullmatch(found.label) or found.label == LOCAL_SITE:
        raise ValueError(f"{where}: the site name {found.label!r} is not lower-case letters, digits and . _ : - "
                         f"(at most 63, not {LOCAL_SITE!r}): give another name")
    return found


def read_token(up: Upstream) -> str | None:
    """The token in the upstream's token_file (None without one); ValueError says what is wrong."""
    if up.token_file is None:
        return None
    try:
        with open(up.token_file, encoding="utf-8") as handle:
            token = handle.read(4096).strip()
    except OSError as exc:
        raise ValueError(f"cannot read token_file {up.token_file}: {exc.strerror}") from None
    if not token or any(c.isspace() for c in token):
        raise ValueError(f"token_file {up.token_file} holds no token (one word)")
    return token


def _unique(upstreams: Sequence[Upstream], where: str) -> None:
    seen: set[str] = set()
    for up in upstreams:
        if up.label in seen:
            raise ValueError(f"{where}: the site name {up.label!r} is used twice (give each a `name`)")
        seen.add(up.label)


def parse_federation(top: TomlTable) -> FederationConfig:
    """`[federation]` of the config, read from the top-level table."""
    t = top.table("federation")
    upstreams = []
    for u in t.tables("upstreams"):
        url = u.text("url")
        if url is None:
            raise ConfigError(f"{u.where}.url: required, the site aggregator's base URL")
        try:
            upstreams.append(upstream(url, u.text("name"), u.text("token_file"), where=u.where,
                                      ca_file=u.text("ca_file")))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        u.done()
    try:
        _unique(upstreams, f"{t.where}.upstreams")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return FederationConfig(tuple(upstreams), **t.settings(SETTINGS))


def with_upstreams(config: SiteConfig, urls: Sequence[str], token_file: str | None) -> SiteConfig:
    """The config with `infosvc serve --upstream URL...` added to its upstreams, each with
    --upstream-token-file's token when given. ValueError says what is wrong."""
    if token_file is not None and not urls:
        raise ValueError("--upstream-token-file is the token of the --upstream sites: give --upstream URL too")
    added = [upstream(url, token_file=token_file) for url in urls]
    upstreams = (*config.federation.upstreams, *added)
    _unique(upstreams, "--upstream")
    return dataclasses.replace(config, federation=dataclasses.replace(config.federation, upstreams=upstreams))
