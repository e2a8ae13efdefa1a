"""GET /v1/glue's choice among every GLUE format: `format=json|xml` (GLUE 1.1, or the Accept header),
`format=ldif` with `schema=1.3|2.0` (both, 1.3 first, when not given: what a resource BDII's
provider prints), `format=glue2-xml`, `format=glue2-json`; `site=` names the site (GlueSiteUniqueID,
the GLUE 2.0 AdminDomain) and `base=1` adds the BDII's base entries to LDIF
(infosvc/publish/glue.py, GRID_FORMATS).

The whole tree in a grid format is rendered off the event loop, from a copy, and kept
(`GridAnswers`): a document is rendered once for the tree it reads and answered to every reader
until that tree changes. A BDII, or anyone, may read a site of hundreds of subclusters and CEs as
often as it likes (17.6 MB of LDIF, 0.45 s to render); eight readers at once rendered it eight
times, in eight worker threads, and held the event loop 0.9-1.2 s."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Callable, Final

from aiohttp import web

from infosvc.codec.gridformat import GridOptions, valid_site
from infosvc.model.snapshot import FrozenTree, Snapshot
from infosvc.publish.glue import GRID_FORMATS, Glue, Parts, Rendering, find
from infosvc.hosts import QueryError
from infosvc.web.negotiate import format_of
from infosvc.web.errors import HttpError
from infosvc.web.turns import Turns

#: the formats /v1/glue offers, by `?format=`
GLUE_FORMATS: Final = ("json", "xml", "ldif", "glue2-xml", "glue2-json")
#: the grid formats' own parameters
GRID_PARAMETERS: Final = ("schema", "base", "site")
_SCHEMAS: Final = {"1.3": "ldif-1.3", "2.0": "ldif-2.0"}


def glue_format(request: web.Request) -> tuple[str, GridOptions]:
    """The publishing layer's name of the format asked for, and the grid formats' options."""
    fmt = format_of(request, GLUE_FORMATS)
    query = request.query
    given = [name for name in GRID_PARAMETERS if name in query]
    if fmt in ("json", "xml"):
        if given:
            raise QueryError(given[0], "only with format=ldif, glue2-xml or glue2-json")
        return fmt, GridOptions()
    site = query.get("site")
    if site is not None and not valid_site(site):
        raise QueryError("site", "a site id: letters, digits, '_', '.', '-', at most 100")
    if fmt != "ldif":
        if "schema" in query or "base" in query:
            raise QueryError("schema" if "schema" in query else "base", "only with format=ldif")
        return fmt, GridOptions(site=site)
    schema = query.get("schema")
    if schema is not None and schema not in _SCHEMAS:
        raise QueryError("schema", "1.3 or 2.0 (both when not given)")
    base = query.get("base", "0")
    if base not in ("0", "1"):
        raise QueryError("base", "1 or 0")
    return _SCHEMAS.get(schema or "", "ldif"), GridOptions(site=site, base=base == "1")


#: (the publishing layer's name of the format, its options, and for an entity its kind and id,
#: else two empty strings): one document
Key = tuple[str, GridOptions, str, str]
#: a document as it is answered: whole, or as the parts to write in turn (publish.glue.Parts)
Body = bytes | Parts


class _Flight:
    """One rendering of one document, of the newest copy of the tree given before its turn came:
    `token` tells what it renders apart from another tree (`GridAnswers._token`), `frozen` is the
    copy it renders (the token itself, for the grid documents)."""

    __slots__ = ("token", "frozen", "glue", "task")

    def __init__(self, token: object, frozen: FrozenTree | None, glue: Glue) -> None:
        self.token = token
        self.frozen = frozen
        self.glue = glue
        self.task: asyncio.Task[Body] | None = None


class GridAnswers:
    """The grid documents, each kept with the copy of the tree it was rendered from, and answered
    while a copy of the tree now is equal to that one (`FrozenTree`): a change, however small or
    recent, is in the next read, and an unchanged tree is rendered once while kept. Readers of a
    document that is being rendered from the tree they see, or waits to be, wait for that one
    rendering (a document waiting for its turn is rendered from the newest copy given it). The
    renderings take turns in a worker thread, one at a time, with at most WAITING others waiting
    (`Turns`, as many again for readers with a read or admin token): past that, the document as it was last
    rendered where one is kept for the key (a reader of a site whose figures change every second
    is answered rather than refused while another client fills the queue), else a 503 with
    Retry-After: a document nothing is kept for yet (the first read after a start) is rendered for
    a reader with a token whatever anonymous readers ask meanwhile. Host-filtered reads take turns
    of their own (`filtered`). At most ENTRIES documents, and KEPT_BYTES of them, are kept, the
    least recently read of those read only once dropped first: `site=` names any site, and a
    reader naming a new one each time costs one rendering in its turn, never memory, nor the
    document a BDII reads again and again."""

    #: the documents kept at most: every format and option of a site's one id twice over
    ENTRIES: Final = 16
    #: their bytes at most (the last rendered is kept whatever its size)
    KEPT_BYTES: Final = 128 << 20
    #: renderings waiting for their turn, past the one under way
    WAITING: Final = 4

    def __init__(self) -> None:
        self._kept: OrderedDict[Key, tuple[object, Body]] = OrderedDict()  # (its flight's token, body)
        self._kept_bytes = 0
        #: the keys of the documents kept that were read again after their rendering: dropped last
        self._read_again: set[Key] = set()
        self._waiting: dict[Key, _Flight] = {}
        self._running: dict[Key, _Flight] = {}
        self.turns = Turns("other GLUE documents are being rendered", self.WAITING)
        #: host-filtered reads, each a tree of its own for its reader: turns of their own, so that
        #: they never keep a whole document's rendering out (nor it them)
        self.filtered = Turns("other filtered GLUE reads are being rendered", self.WAITING)
        #: documents rendered, and answered as they were kept while the queue was full (for tests
        #: and the curious)
        self.renders = 0
        self.answered_kept = 0

    @property
    def kept(self) -> int:
        """How many documents are kept."""
        return len(self._kept)

    @property
    def kept_keys(self) -> list[Key]:
        return list(self._kept)

    async def body(self, glue: Glue, fmt: str, options: GridOptions, *, known: bool = False) -> bytes:
        """The whole tree in the grid format `fmt`, of the current snapshot: the part of the tree
        it reads copied on the loop (O(subclusters)) and compared with the copy of the document
        kept, else rendered in a worker thread in its turn (`known`: the reader came with a valid
        token, and takes one of the places kept for those)."""
        body = await self._answer(glue, (fmt, options, "", ""), known)
        assert isinstance(body, bytes)
        return body

    def _token(self, glue: Glue, snapshot: Snapshot) -> object:
        """What tells the tree now apart from another (equal tokens: equal documents): for the grid
        documents, the copy of the tree they render (O(subclusters), taken on the loop)."""
        return FrozenTree(glue.tree, snapshot)

    def _same(self, token: object, glue: Glue, snapshot: Snapshot) -> bool:
        """Whether a document rendered for `token` is the tree's now."""
        assert isinstance(token, FrozenTree)
        return token.matches(glue.tree, snapshot)  # no copy made for a read answered from what is kept

    def _at_turn(self, flight: _Flight) -> None:
        """On the loop, as the flight's turn comes: the copy it renders is its token."""
        assert isinstance(flight.token, FrozenTree)
        flight.frozen = flight.token

    def _render(self, flight: _Flight, key: Key) -> Callable[[], Body]:
        """The rendering of `key` from the flight's copy, for the worker thread."""
        frozen = flight.frozen
        assert frozen is not None and frozen.snapshot is not None
        snapshot = frozen.snapshot
        return Rendering(frozen, GRID_FORMATS[key[0]](key[1]), lambda: snapshot).tree

    def _turns_of(self, key: Key) -> Turns:
        return self.turns

    async def _answer(self, glue: Glue, key: Key, known: bool) -> Body:
        snapshot = glue.snapshot()
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            self._read_again.add(key)
            if self._same(kept[0], glue, snapshot):
                return kept[1]
        token = self._token(glue, snapshot)
        flight = self._running.get(key)
        if flight is None or flight.token != token:
            flight = self._waiting.get(key)
            if flight is None:
                try:
                    flight = self._start(key, token, glue, known)
                except HttpError:
                    if kept is None:
                        raise
                    # the queue is full (another client's renderings, maybe): the document as it
                    # was last rendered rather than a refusal. A site whose CE figures change every
                    # second (a waiting job's estimated start) has no reader of an equal tree, and
                    # its BDII was refused at every read while one client kept the queue full.
                    self.answered_kept += 1
                    return kept[1]
            else:
                flight.token = token  # a reader now has what it asks for, and so do those before
        assert flight.task is not None
        return await asyncio.shield(flight.task)

    def _start(self, key: Key, token: object, glue: Glue, known: bool) -> _Flight:
        flight = _Flight(token, None, glue)
        flight.task = self._turns_of(key).start(lambda: self._turn(key, flight), known=known)
        flight.task.add_done_callback(lambda task: self._landed(key, flight, task))
        self._waiting[key] = flight
        return flight

    def _turn(self, key: Key, flight: _Flight) -> Callable[[], Body]:
        """On the event loop, as its turn comes: the rendering of the flight's copy, for the thread."""
        if self._waiting.get(key) is flight:
            del self._waiting[key]
        self._running[key] = flight
        self.renders += 1
        self._at_turn(flight)
        return self._render(flight, key)

    def _landed(self, key: Key, flight: _Flight, task: asyncio.Task[Body]) -> None:
        for flights in (self._running, self._waiting):
            if flights.get(key) is flight:
                del flights[key]
        if task.cancelled() or task.exception() is not None:
            return
        # turns are taken in order: no older rendering of this key lands after this one
        body = task.result()
        old = self._kept.pop(key, None)
        if old is not None:
            self._kept_bytes -= _size(old[1])
        self._kept[key] = (flight.token, body)
        self._kept_bytes += _size(body)
        while len(self._kept) > self.ENTRIES or (self._kept_bytes > self.KEPT_BYTES and len(self._kept) > 1):
            # the least recently read of those read once, then of all: a reader naming a new
            # site= each time pushes out its own documents, not those read again (a BDII's)
            drop = next((k for k in self._kept if k not in self._read_again and k != key), None)
            if drop is None:
                drop = next(iter(self._kept))
            _, dropped = self._kept.pop(drop)
            self._read_again.discard(drop)
            self._kept_bytes -= _size(dropped)


def _size(body: Body) -> int:
    return body.size if isinstance(body, Parts) else len(body)


class WholeTrees(GridAnswers):
    """The site's whole tree in GLUE 1.1 JSON and XML, and its clusters and subclusters with their
    hosts, kept and shared as the grid documents are, each assembled in a worker thread, from the
    hosts' cached renderings (publish.glue.Rendering.parts_of), of a copy of the tree with its hosts
    taken on the loop as its turn comes (0.11 ms at 10,000 hosts, 1.1 ms at 50,000): before, every
    read assembled it on the event loop, a part per host (7 ms at 10,000 hosts, 50 ms at 50,000),
    and an XML cluster was joined into one body. A document is told apart by the roll-up's
    generation and the snapshot (O(1) a read), and keeps no copy of the tree once assembled: its
    parts refer to the hosts' fragments, and are what the kept bytes count."""

    def __init__(self) -> None:
        super().__init__()
        self.turns = Turns("other GLUE documents of the whole site are being assembled", self.WAITING)
        #: a site's clusters and subclusters are many keys: a reader naming each in turn takes
        #: these turns, never the whole tree's
        self.entities = Turns("other GLUE clusters and subclusters are being assembled", self.WAITING)

    def _turns_of(self, key: Key) -> Turns:
        return self.entities if key[2] else self.turns

    def _token(self, glue: Glue, snapshot: Snapshot) -> object:
        generation = getattr(glue.tree, "generation", None)
        if generation is None:  # a tree that counts no changes: a copy, compared whole
            return FrozenTree(glue.tree, snapshot, hosts=True)
        return (glue.tree, generation, snapshot)

    def _same(self, token: object, glue: Glue, snapshot: Snapshot) -> bool:
        if isinstance(token, FrozenTree):
            return token.matches(glue.tree, snapshot)
        return token == self._token(glue, snapshot)

    def _at_turn(self, flight: _Flight) -> None:
        # the tree as it is now, and the token that names it (newer than any reader waiting for it)
        snapshot = flight.glue.snapshot()
        flight.token = self._token(flight.glue, snapshot)
        flight.frozen = FrozenTree(flight.glue.tree, snapshot, hosts=True)

    async def parts(self, glue: Glue, fmt: str, kind: str = "", ident: str = "", *, known: bool = False) -> Parts:
        """The whole tree in `fmt` (json or xml), or its cluster or subcluster `ident` (`kind`), as
        parts; an empty Parts for an entity the tree does not hold (known on the loop: no turn is
        taken for it)."""
        if kind and find(glue.tree, kind, ident) is None:
            return Parts()
        body = await self._answer(glue, (fmt, GridOptions(), kind, ident), known)
        assert isinstance(body, Parts)
        glue.formats[fmt].prune()
        return body

    def _render(self, flight: _Flight, key: Key) -> Callable[[], Body]:
        rendering, frozen, kind, ident = flight.glue.formats[key[0]], flight.frozen, key[2], key[3]
        assert frozen is not None
        if not kind:
            return lambda: rendering.parts_of(frozen)
        return lambda: rendering.entity_parts_of(frozen, kind, ident) or Parts()
