"""Pulling the upstream sites and keeping the union: `Federation`.

Each upstream is pulled on its own schedule (every `interval_seconds`, the first pulls at
start, the later ones spread over the interval), all concurrently on one aiohttp client session: GET URL/v1/glue?format=json
with the site's read token, no redirects followed, within `timeout_seconds`, the answer read to at
most `max_body_bytes`. An answer whose bytes are those of the last good one changes nothing;
another is read into the model in a worker thread (a 1,000-host site is tens of milliseconds of
work that must not hold the event loop) and replaces the site's tree. A site that stops answering,
or answers with an error or a document that does not read, keeps its last good tree in the union,
marked stale, until `delete_delay_seconds` after its last good pull; then it is dropped. A pull
never raises: whatever the site does is one line in the log and the site's status.

`Federation` is itself the union's `GlueTree` (infosvc.model.glue): every read is of the last
complete union. A new one (tree.UnionTree) is built in a worker thread after a site's tree, the
top's own hosts or the set of sites changed (documents.Publisher, woken by `stirred`), and put in
place whole once built: a read during a rebuild is of the previous union, never of a partial one,
and never waits for it (building the union of 190,000 hosts took seconds of the event loop when
it was done at the first read). `version` counts the unions put in place.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import ssl
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import aiohttp

from infosvc.codec.glue_read import GlueDocument, GlueReadError, read_glue
from infosvc.model import glue
from infosvc.model.glue import GlueTree, Host, SubCluster
from infosvc.config import LOCAL_SITE, FederationConfig, Upstream, read_token
from infosvc.federation.tree import SiteTree, UnionTree, dismantle

log = logging.getLogger("infosvc.federation")

#: what a union is built from: (site name, its tree) in order, and the last union's renamed trees
UnionInputs = tuple[list[tuple[str, SiteTree]], Mapping[str, tuple[SiteTree, frozenset[tuple[str, str]], SiteTree]] | None]


class PullError(Exception):
    """One pull failed; the message says how, for the log and the site's status."""


@dataclass(eq=False)
class SiteState:
    """One upstream: its last good tree, and how its pulls went."""

    upstream: Upstream
    tree: SiteTree | None = None
    document: GlueDocument | None = None
    digest: bytes | None = None
    last_success: float | None = None  # wall clock
    error: str | None = None
    pulls_ok: int = 0
    pulls_failed: int = 0
    last_duration: float = 0.0

    @property
    def name(self) -> str:
        return self.upstream.label

    @property
    def stale(self) -> bool:
        """Its last pull failed and an older copy is published."""
        return self.tree is not None and self.error is not None

    @property
    def hosts(self) -> int:
        return len(self.tree.hosts) if self.tree is not None else 0


def _error_of(status: int, body: bytes) -> str:
    """The site's refusal as one line: its JSON error's message when it sent one."""
    try:
        said = json.loads(body)
        message = str(said.get("error")) if isinstance(said, dict) and said.get("error") else ""
    except ValueError:
        message = ""
    hint = " (the site refused the read token: check token_file)" if status in (401, 403) else ""
    return f"HTTP {status}{': ' + message[:200] if message else ''}{hint}"


class Federation:
    """The upstreams' states and their union with the top's own tree (module doc)."""

    def __init__(self, config: FederationConfig, local: GlueTree, url: str | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.local = local
        self.url = url
        self.clock = clock
        self.sites = [SiteState(up) for up in config.upstreams]
        self.version = 0
        #: pulls ended (each moves a site's status)
        self.pulls = 0
        self._union: UnionTree | None = None
        self._local_tree: SiteTree | None = None
        self._dirty = True
        #: sites' trees replaced since the union was last built: the publisher takes apart those the
        #: new union no longer holds (documents.Publisher), off the event loop
        self.retired: list[SiteTree | None] = []
        #: set when the union or the sites' status moved: the publisher (documents.Publisher) wakes
        self.stirred = asyncio.Event()
        self._clashes_logged: set[tuple[str, str]] = set()
        self._tokens: dict[str, str | None] = {}
        self._contexts: dict[str, ssl.SSLContext] = {}

    # --- the union ---

    def changed(self) -> None:
        """A site's tree changed, or a site was dropped: a new union is to be built."""
        self._dirty = True
        self.stirred.set()

    def local_changed(self, *_: Any) -> None:
        """The top's own hosts changed (a hook of its aggregator's on_change and on_remove)."""
        self._dirty = True
        self.retired.append(self._local_tree)
        self._local_tree = None
        self.stirred.set()

    def union_inputs(self) -> UnionInputs | None:
        """On the event loop: what the next union is built from (the top's own tree copied now, each
        site's last good tree, the last union's renamed trees), or None when nothing changed since
        the last. The sites' trees are never changed once made, so a thread may build from them."""
        if not self._dirty and self._union is not None:
            return None
        self._dirty = False
        if self._local_tree is None:
            self._local_tree = SiteTree.of_tree(self.local)
        # The top's own site is part of the union once it has hosts; an empty one would only add
        # its default cluster and CE.
        sites = [(LOCAL_SITE, self._local_tree)] if self._local_tree.hosts else []
        sites += [(s.name, s.tree) for s in self.sites if s.tree is not None]
        return sites, self._union.renamed_trees if self._union is not None else None

    def build_union(self, inputs: UnionInputs) -> UnionTree:
        """The union of `inputs` (union_inputs'): work for a worker thread; it changes nothing here."""
        sites, before = inputs
        return UnionTree(sites, self.url, before)

    def install(self, union: UnionTree) -> None:
        """On the event loop: `union`, built whole, is the one every read sees from now on."""
        self._union = union
        self.version += 1
        for clash in union.clashes:
            if clash not in self._clashes_logged:
                self._clashes_logged.add(clash)
                kind, ident = clash
                log.warning("federation: %s id %r is published by more than one site (or one differing only in "
                            "case or spaces, one id to a directory): each is published as SITE/%s",
                            kind, ident[:200], ident[:200])

    def rebuild(self) -> None:
        """Build and put in place a new union now, in this thread (the first, and tests of the model)."""
        inputs = self.union_inputs()
        if inputs is not None:
            self.install(self.build_union(inputs))

    @property
    def installed(self) -> UnionTree | None:
        """The union put in place last, if any (no build)."""
        return self._union

    @property
    def union(self) -> UnionTree:
        """The last complete union (the first is built at the first read, before any pull)."""
        if self._union is None:
            self.rebuild()
        assert self._union is not None
        return self._union

    @property
    def hosts(self) -> Mapping[str, Host]:
        return self.union.hosts

    @property
    def subclusters(self) -> Mapping[str, SubCluster]:
        return self.union.subclusters

    @property
    def information_service_url(self) -> str | None:
        return self.url

    def clusters(self) -> Sequence[glue.Cluster]:
        return self.union.clusters()

    def cluster(self, cluster_id: str) -> glue.Cluster | None:
        return self.union.cluster(cluster_id)

    def subclusters_of(self, cluster_id: str) -> Sequence[SubCluster]:
        return self.union.subclusters_of(cluster_id)

    def hosts_of(self, sub_id: str) -> Iterable[Host]:
        return self.union.hosts_of(sub_id)

    def subcluster_of(self, host_id: str) -> SubCluster | None:
        return self.union.subcluster_of(host_id)

    def computing_elements(self) -> Sequence[glue.ComputingElement]:
        return self.union.computing_elements()

    def computing_element(self, ce_id: str) -> glue.ComputingElement | None:
        return self.union.computing_element(ce_id)

    # --- pulling ---

    def _token(self, up: Upstream) -> str | None:
        """The site's read token, read from its file once (again after a failure)."""
        if up.label not in self._tokens:
            try:
                self._tokens[up.label] = read_token(up)
            except ValueError as exc:
                raise PullError(str(exc)) from None
        return self._tokens[up.label]

    def _tls(self, up: Upstream) -> ssl.SSLContext | bool:
        """How an https site is verified: against its ca_file (loaded once, again after a failure),
        else the system's CAs."""
        if up.ca_file is None:
            return True
        if up.label not in self._contexts:
            try:
                self._contexts[up.label] = ssl.create_default_context(cafile=up.ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise PullError(f"cannot use ca_file {up.ca_file}: {exc}") from None
        return self._contexts[up.label]

    async def _fetch(self, session: aiohttp.ClientSession, up: Upstream) -> list[bytes]:
        headers = {"Accept": "application/json"}
        token = self._token(up)
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        limit = self.config.max_body_bytes
        async with session.get(f"{up.url}/v1/glue", params={"format": "json"}, headers=headers,
                               allow_redirects=False, ssl=self._tls(up)) as answer:
            if answer.status != 200:
                raise PullError(_error_of(answer.status, await answer.content.read(4096)))
            if answer.content_length is not None and answer.content_length > limit:
                raise PullError(f"the answer is {answer.content_length} bytes, more than max_body_bytes ({limit})")
            chunks, size = [], 0
            async for chunk in answer.content.iter_chunked(1 << 16):
                size += len(chunk)
                if size > limit:
                    raise PullError(f"the answer is more than max_body_bytes ({limit})")
                chunks.append(chunk)
        return chunks

    async def pull(self, session: aiohttp.ClientSession, site: SiteState) -> None:
        """One pull of one site; never raises (but for cancellation)."""
        started = time.perf_counter()
        try:
            chunks = await self._fetch(session, site.upstream)
            previous, last_digest = site.document, site.digest

            def read() -> tuple[bytes, GlueDocument | None, SiteTree | None]:
                # all of it in the thread: joining and hashing tens of megabytes hold the GIL too
                body = b"".join(chunks)
                chunks.clear()
                digest = hashlib.blake2b(body, digest_size=20).digest()
                if digest == last_digest:
                    return digest, None, None
                document = read_glue(body, previous)
                if previous is not None:  # read no more: taken apart here, not freed on the loop
                    dismantle(previous.raw, previous.hosts)
                return digest, document, SiteTree.of_document(document)

            digest, document, tree = await asyncio.to_thread(read)
            if document is not None and tree is not None:
                self.retired.append(site.tree)
                site.document, site.tree, site.digest = document, tree, digest
                self.changed()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, PullError, GlueReadError) as exc:
            error = str(exc) or type(exc).__name__
            if isinstance(exc, asyncio.TimeoutError):
                error = f"no answer within timeout_seconds ({self.config.timeout_seconds:g})"
            elif isinstance(exc, GlueReadError):
                error = f"not a GLUE document: {error}"
            if error != site.error:
                log.warning("federation: pulling %s (%s) failed: %s%s", site.name, site.upstream.url, error,
                            "; its last good copy is kept, marked stale" if site.tree is not None else "")
            site.error = error[:500]
            site.pulls_failed += 1
        else:
            if site.error is not None:
                log.info("federation: %s (%s) answers again", site.name, site.upstream.url)
            site.error = None
            site.last_success = self.clock()
            site.pulls_ok += 1
        finally:
            site.last_duration = time.perf_counter() - started
            self.pulls += 1
            self.stirred.set()  # the site's status moved, whatever its tree did
        self.expire()

    def expire(self) -> None:
        """Drop the copy of every site silent for longer than the delete delay."""
        now = self.clock()
        for site in self.sites:
            if site.stale and site.last_success is not None and \
                    now - site.last_success > self.config.delete_delay_seconds:
                log.warning("federation: %s (%s) has not answered for %.0f s (delete_delay_seconds): its "
                            "hosts are dropped", site.name, site.upstream.url, now - site.last_success)
                self.retired.append(site.tree)
                site.tree = site.document = site.digest = None
                self.changed()

    async def _pull_forever(self, session: aiohttp.ClientSession, site: SiteState, offset: float) -> None:
        """The first pull at once, so that the union is whole within a pull's time; the next ones
        `offset` later in each interval, so that the sites' pulls (and the union's changes) are
        spread over it rather than all at the same moment."""
        interval = self.config.interval_seconds
        delay = offset
        while True:
            started = time.monotonic()
            await self.pull(session, site)
            await asyncio.sleep(max(0.0, interval + delay - (time.monotonic() - started)))
            delay = 0.0

    async def run(self) -> None:
        """Pull every upstream forever (until cancelled); the top's own tree is read afresh each interval."""
        timeout = aiohttp.ClientTimeout(total=self.config.timeout_seconds)
        async with aiohttp.ClientSession(timeout=timeout, raise_for_status=False) as session:
            spread = self.config.interval_seconds / max(1, len(self.sites))
            tasks = [asyncio.create_task(self._pull_forever(session, site, i * spread))
                     for i, site in enumerate(self.sites)]
            try:
                while True:
                    await asyncio.sleep(self.config.interval_seconds * random.uniform(0.9, 1.1))
                    self.local_changed()  # the top's own CE figures move with its job queue, not only its hosts
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
