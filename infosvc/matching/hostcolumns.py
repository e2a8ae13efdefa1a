"""The roll-up's hosts as columns (numpy arrays), so that `matching.match` can decide threshold
requirements (free CPUs, free RAM, GPUs of a model, all or free, Ready) for a whole site with a few array operations instead of
a Python loop over the hosts.

Rows are the hosts in the order the matcher visits them: subcluster by subcluster in the
roll-up's order, each subcluster's members in their order (arrival), so that one subcluster's rows
are contiguous (`starts`) and any selection of rows taken in row order is the order of the general
path (the rejected hosts). `ccs_order` is the rows sorted by the CCS resource sort (memory size,
then processor speed, both largest first; then host id), so that the fitting rows come out
already ordered.

Kept current without a hook in the roll-up or the host table: a GLUE Host is a frozen object the
roll-up replaces on every change (each report builds a new one, a state change replaces it), so
`HostColumns.sync` compares the Host objects of the roll-up's `hosts` dict with the ones its
columns were built from, by identity and in the dict's own order (C speed: no hashing), and
rewrites only the rows that changed. A change of membership (a host joins, leaves, or moves to
another subcluster, even and back: the dict's ids, and the member ids of the changed rows'
subclusters, `Rollup.member_ids`, are compared too) rebuilds the whole, subcluster by subcluster. The node of a row is what `node_of`
gave when the row was (re)built: that is right while a host's node changes only together with its
Host object, as infosvc.hosts.table.HostTable does (every report builds a new Host). A caller whose
nodes change under an unchanged Host must not keep a HostColumns (match() without `columns`
looks every node up each time).

Each `sync` returns a `Columns` snapshot that is never changed afterwards (a change makes a new
one), so a match result may keep it and render from it later, in another thread.
"""

from __future__ import annotations

import operator
import weakref
from dataclasses import dataclass, field, replace
from typing import Callable, Final, Iterable, Mapping, Protocol

import numpy as np
import numpy.typing as npt

from infosvc.model.glue import Host
from infosvc.model.node import Node

__all__ = ["Columns", "HostColumns", "Membership", "columns_for", "MIXED", "NO_NODE", "BoolArray", "FloatArray",
           "IndexArray", "IntArray"]

MIXED = object()
NO_NODE = object()

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
IndexArray = npt.NDArray[np.intp]


class Membership(Protocol):
    """What the columns read of a roll-up (infosvc.hosts.rollup.Rollup; any infosvc.matching.SiteView):
    its hosts by id in the dict's order, its subcluster ids in order, and each one's member ids."""

    @property
    def hosts(self) -> Mapping[str, Host]: ...

    @property
    def subclusters(self) -> Mapping[str, object]: ...

    def member_ids(self, sub_id: str) -> Iterable[str]: ...


@dataclass(frozen=True, slots=True, eq=False)
class Columns:
    """One snapshot of the site's hosts, a row per host (see the module's docstring)."""

    sub_ids: tuple[str, ...]  # subclusters, in the roll-up's order
    counts: tuple[int, ...]  # hosts of each
    starts: IndexArray  # first row of each subcluster, and the row count last (len(sub_ids) + 1)
    hosts: list[Host]
    nodes: list[Node | None]
    ids: list[str]
    sub_of_row: IndexArray  # index into sub_ids
    cpus: FloatArray  # Host.available_cpus
    ram: FloatArray  # Host.main_memory.ram_available in MB; NaN when not reported (never >= anything)
    ready: BoolArray
    has_node: BoolArray
    ram_size: IntArray  # for the order: ram_size or 0
    clock: IntArray  # clock_speed or 0
    id_rank: IndexArray  # the row's place among the ids sorted as Python sorts str
    ccs_order: IndexArray  # rows by (ram_size desc, clock desc, id asc)
    #: per subcluster, the one Opsys its hosts' nodes have; NO_NODE when none has a node, MIXED
    #: when they differ (the matcher's static cache is keyed by the Opsys, which the key lacks)
    sub_opsys: tuple[object, ...]
    #: the roll-up's hosts dict as it was: its ids and Hosts in its own order, and each one's row
    dict_ids: list[str]
    dict_hosts: list[Host]
    row_of: IndexArray
    #: feature name -> whether each row's node has it; made when first asked for (`feature`),
    #: carried over (the changed rows redone) by the next patch
    features: dict[str, BoolArray] = field(default_factory=dict)
    #: rows with an amount past EXACT (see _row_values): while any is, the columns are not used
    big: BoolArray = field(default_factory=lambda: np.zeros(0, np.bool_))
    #: max(0, Host.accelerators_available): the GPUs its agent reports free, of any model
    gpus_available: FloatArray = field(default_factory=lambda: np.zeros(0, np.float64))
    #: GPU model (None: any) -> each row's accelerators of it; made when first asked for
    #: (`gpu_total`), carried over (the changed rows redone) by the next patch
    gpu_totals: dict[str | None, FloatArray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.hosts)

    def feature(self, name: str) -> BoolArray:
        """Whether each row's node has the feature `name` (False for a row without a node)."""
        found = self.features.get(name)
        if found is None:
            found = self.features[name] = np.fromiter(
                (node is not None and name in node.features for node in self.nodes), np.bool_, len(self.nodes))
        return found

    def gpu_total(self, model: str | None) -> FloatArray:
        """Each row's accelerators of `model` (None: of any), as the GPU check counts them."""
        found = self.gpu_totals.get(model)
        if found is None:
            found = self.gpu_totals[model] = np.fromiter((_gpus_of(host, model) for host in self.hosts), np.float64,
                                                         len(self.hosts))
        return found


def _gpus_of(host: Host, model: str | None) -> int:
    total = sum(a.count for a in host.accelerators if model is None or a.model == model)
    return max(-EXACT, min(total, EXACT))  # past EXACT the row is `big`: the columns are not read


#: Beyond this no float64 holds every integer: a row with an amount past it is `big`.
EXACT: Final = 2 ** 53


#: What a row's values are: free CPUs, free RAM (NaN: not reported), Ready, RAM size, clock, big,
#: GPUs free
Row = tuple[float, float, bool, int, int, bool, float]


def _row_values(host: Host) -> Row:
    ram = host.main_memory.ram_available
    cpus, size, mhz = host.available_cpus, host.main_memory.ram_size or 0, host.processor.clock_speed or 0
    gpus_free = max(0, host.accelerators_available)
    # Amounts no real host has (the schema bounds none of them) would round in float64 or not fit
    # int64: such a row is flagged, its order columns clamped, and match() takes the general path.
    # Every GPU total of one model is within the sum of the counts' sizes: bounded with it.
    big = not (-EXACT <= cpus <= EXACT and size <= EXACT and mhz <= EXACT and (ram is None or abs(ram) <= EXACT)
               and gpus_free <= EXACT and sum(abs(a.count) for a in host.accelerators) <= EXACT)
    return (float(cpus), float("nan") if ram is None else float(ram), host.accepts_jobs,
            min(size, EXACT), min(mhz, EXACT), big, float(min(gpus_free, EXACT)))


def _sub_opsys(nodes: list[Node | None], start: int, stop: int) -> object:
    found: object = NO_NODE
    for r in range(start, stop):
        node = nodes[r]
        if node is not None:
            if found is NO_NODE:
                found = node.opsys
            elif node.opsys != found:
                return MIXED
    return found


def _ccs_order(ram_size: IntArray, clock: IntArray, id_rank: IndexArray) -> IndexArray:
    # lexsort sorts by the last key first; negated for "largest first" (the values are small ints).
    order: IndexArray = np.lexsort((id_rank, -clock, -ram_size)).astype(np.intp)
    return order


def _build(sub_ids: tuple[str, ...], counts: tuple[int, ...], ids: list[str], by_id: Mapping[str, Host],
           node_of: Callable[[str], Node | None]) -> Columns:
    n = len(ids)
    hosts = list(map(by_id.__getitem__, ids))
    nodes = [node_of(i) for i in ids]
    values = [_row_values(h) for h in hosts]
    cpus = np.fromiter((v[0] for v in values), np.float64, n)
    ram = np.fromiter((v[1] for v in values), np.float64, n)
    ready = np.fromiter((v[2] for v in values), np.bool_, n)
    ram_size = np.fromiter((v[3] for v in values), np.int64, n)
    clock = np.fromiter((v[4] for v in values), np.int64, n)
    big = np.fromiter((v[5] for v in values), np.bool_, n)
    gpus_available = np.fromiter((v[6] for v in values), np.float64, n)
    has_node = np.fromiter((node is not None for node in nodes), np.bool_, n)
    # Python's own str order (code points), as the general path sorts ids.
    id_rank = np.empty(n, np.intp)
    id_rank[sorted(range(n), key=ids.__getitem__)] = np.arange(n, dtype=np.intp)
    starts = np.zeros(len(counts) + 1, np.intp)
    np.cumsum(counts, out=starts[1:])
    sub_of_row = np.repeat(np.arange(len(counts), dtype=np.intp), counts)
    bounds = starts.tolist()
    sub_opsys = tuple(_sub_opsys(nodes, bounds[i], bounds[i + 1]) for i in range(len(counts)))
    row_by_id = dict(zip(ids, range(n)))
    dict_ids = list(by_id)
    row_of = np.fromiter(map(row_by_id.__getitem__, dict_ids), np.intp, n)
    return Columns(sub_ids, counts, starts, hosts, nodes, ids, sub_of_row, cpus, ram, ready, has_node, ram_size,
                   clock, id_rank, _ccs_order(ram_size, clock, id_rank), sub_opsys, dict_ids, list(by_id.values()),
                   row_of, big=big, gpus_available=gpus_available)


def _patch(prev: Columns, dict_hosts: list[Host], rows: list[int], node_of: Callable[[str], Node | None]) -> Columns:
    """`prev` with the hosts of `rows` replaced by `dict_hosts`' (the same ids, in the same places);
    copies, so that `prev` stays as it was."""
    hosts, nodes = list(prev.hosts), list(prev.nodes)
    cpus, ram, ready, has_node = prev.cpus.copy(), prev.ram.copy(), prev.ready.copy(), prev.has_node.copy()
    values = []
    for r, host in zip(rows, dict_hosts):
        hosts[r] = host
        nodes[r] = node_of(host.unique_id)
        values.append(_row_values(host))
    # one fancy-indexed assignment per column, not a numpy scalar store per row and column
    has_node[rows] = [nodes[r] is not None for r in rows]
    cpus[rows] = [v[0] for v in values]
    ram[rows] = [v[1] for v in values]
    ready[rows] = [v[2] for v in values]
    big = prev.big.copy()
    big[rows] = [v[5] for v in values]
    gpus_available = prev.gpus_available.copy()
    gpus_available[rows] = [v[6] for v in values]
    ram_size, clock, order = _reordered(prev, rows, values)
    return Columns(prev.sub_ids, prev.counts, prev.starts, hosts, nodes, prev.ids, prev.sub_of_row, cpus, ram, ready,
                   has_node, ram_size, clock, prev.id_rank, order, _patched_opsys(prev, nodes, rows), prev.dict_ids,
                   prev.dict_hosts, prev.row_of, _patched_features(prev, nodes, rows), big, gpus_available,
                   _patched_gpu_totals(prev, hosts, rows))


def _reordered(prev: Columns, rows: list[int], values: list[Row]) -> tuple[IntArray, IntArray, IndexArray]:
    """The memory size and clock columns, and the CCS order, with the patched rows' values: `prev`'s
    own unless a size or clock changed (rare: the order changes)."""
    sizes = np.array([v[3] for v in values], np.int64)
    mhzs = np.array([v[4] for v in values], np.int64)
    if not ((sizes != prev.ram_size[rows]).any() or (mhzs != prev.clock[rows]).any()):
        return prev.ram_size, prev.clock, prev.ccs_order
    ram_size, clock = prev.ram_size.copy(), prev.clock.copy()
    ram_size[rows], clock[rows] = sizes, mhzs
    return ram_size, clock, _ccs_order(ram_size, clock, prev.id_rank)


def _patched_opsys(prev: Columns, nodes: list[Node | None], rows: list[int]) -> tuple[object, ...]:
    """Each subcluster's one Opsys, with the patched rows' nodes."""
    sub_opsys = list(prev.sub_opsys)
    bounds = prev.starts.tolist()
    redo = set()
    for r, i in zip(rows, prev.sub_of_row[rows].tolist()):
        node = nodes[r]
        # A report that keeps its subcluster's one Opsys changes nothing here (the usual case);
        # anything else is worked out again over that subcluster's rows.
        if node is None or node.opsys != sub_opsys[i]:
            redo.add(i)
    for i in redo:
        sub_opsys[i] = _sub_opsys(nodes, bounds[i], bounds[i + 1])
    return tuple(sub_opsys)


def _patched_features(prev: Columns, nodes: list[Node | None], rows: list[int]) -> dict[str, BoolArray]:
    """The feature columns made so far, with the patched rows' nodes."""
    features = {}
    for name, had in prev.features.items():
        has = features[name] = had.copy()
        for r in rows:
            node = nodes[r]
            has[r] = node is not None and name in node.features
    return features


def _patched_gpu_totals(prev: Columns, hosts: list[Host], rows: list[int]) -> dict[str | None, FloatArray]:
    """The GPU totals made so far, with the patched rows' hosts (the same while the roll-up keys
    subclusters by their accelerators, so that a change of them moves the host and rebuilds: redone
    all the same, as the columns do not rely on what the key holds)."""
    totals = {}
    for model, had in prev.gpu_totals.items():
        totals[model] = had.copy()
        totals[model][rows] = [_gpus_of(hosts[r], model) for r in rows]
    return totals


class HostColumns:
    """The columns of one roll-up, brought up to date by `sync` (see the module's docstring)."""

    def __init__(self) -> None:
        self._columns: Columns | None = None
        #: what the last sync did: "same", "patched" (with the number of rows), "rebuilt"; for tests
        self.last_sync: tuple[str, int] = ("none", 0)

    def sync(self, rollup: Membership, node_of: Callable[[str], Node | None]) -> Columns:
        """The columns of `rollup` as it is now."""
        by_id = rollup.hosts
        prev = self._columns
        sub_ids = tuple(rollup.subclusters)
        if prev is not None and prev.sub_ids == sub_ids and prev.dict_ids == list(by_id):
            # The same hosts and subclusters (C speed: the ids are the same str objects). A host
            # keeps its place in the dict when it reports again; one that left and came back
            # does not.
            now = list(by_id.values())
            if all(map(operator.is_, now, prev.dict_hosts)):  # the usual case between two reports
                self.last_sync = ("same", 0)
                return prev
            changed = np.flatnonzero(~np.fromiter(map(operator.is_, now, prev.dict_hosts), np.bool_, len(now)))
            rows = prev.row_of[changed].tolist()
            fresh = [now[p] for p in changed.tolist()]
            # A changed host may have left its subcluster (and come back: last in it now). The
            # members of the subclusters of the changed rows, as the rows have them? (C speed)
            bounds, members, rows_ids = prev.starts.tolist(), rollup.member_ids, prev.ids
            if all(list(members(sub_ids[i])) == rows_ids[bounds[i]:bounds[i + 1]]
                   for i in set(prev.sub_of_row[rows].tolist())):
                columns = _patch(prev, fresh, rows, node_of)
                # the dict as it is now, for the next comparison
                columns = replace(columns, dict_hosts=now)
                return self._keep(columns, "patched", len(rows))
        # A host joined, left or moved to another subcluster: rows anew, subcluster by subcluster.
        ids: list[str] = []
        counts = []
        member_ids = rollup.member_ids
        for sub_id in sub_ids:
            before = len(ids)
            ids.extend(member_ids(sub_id))
            counts.append(len(ids) - before)
        return self._keep(_build(sub_ids, tuple(counts), ids, by_id, node_of), "rebuilt", len(ids))

    def _keep(self, columns: Columns, how: str, rows: int) -> Columns:
        self._columns = columns
        self.last_sync = (how, rows)
        return columns


_OF_ROLLUP: weakref.WeakKeyDictionary[Membership, HostColumns] = weakref.WeakKeyDictionary()


def columns_for(rollup: Membership) -> HostColumns:
    """The HostColumns kept for `rollup` (made on first use; gone with the roll-up). For callers
    whose node_of is a HostTable's, whose nodes change only with their Host (the server)."""
    found = _OF_ROLLUP.get(rollup)
    if found is None:
        found = _OF_ROLLUP[rollup] = HostColumns()
    return found
