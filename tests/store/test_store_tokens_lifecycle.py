"""The SQLite store on real files, the tokens file and bindings, and the CCS node life cycle."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from infosvc.hosts.lifecycle import NodeState, node_state, unreachable_at
from infosvc.store import MIGRATIONS, Report, Store, StoreError, connect
from infosvc.hosts.tokens import Role, TokenFileError, Tokens, digest, new_token


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "infosvc.sqlite", history_per_host=3)
    yield s
    s.close()


def test_reports_keep_newest_and_bounded_history(store: Store) -> None:
    async def reports() -> None:
        await asyncio.gather(*(store.add_report(Report(f"h{i % 2}", f"<doc {i}/>".encode(), 1000.0 + i, True))
                               for i in range(10)))

    asyncio.run(reports())
    hosts = {h.id: h for h in store.hosts()}
    assert set(hosts) == {"h0", "h1"}
    assert hosts["h1"].document == b"<doc 9/>" and hosts["h1"].reported_at == 1009.0
    assert hosts["h0"].first_seen == 1000.0 and hosts["h0"].approved
    assert [doc for _, doc in store.history("h0")] == [b"<doc 8/>", b"<doc 6/>", b"<doc 4/>"]


def test_reopen_keeps_everything_and_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    first = Store(path)
    asyncio.run(first.add_report(Report("a", b"<x/>", 1.0, False)))
    asyncio.run(first.set_flags("a", paused=True))
    first.close()
    second = Store(path)
    try:
        (host,) = list(second.hosts())
        assert (host.id, host.approved, host.paused) == ("a", False, True)
        assert connect(path).execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        second.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={len(MIGRATIONS) + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        Store(path)


def test_set_flags_on_missing_host(store: Store) -> None:
    assert asyncio.run(store.set_flags("ghost", approved=True)) is False


def test_a_failed_operation_does_not_sink_its_group(store: Store) -> None:
    asyncio.run(store.bind_token("d1", "h1"))

    async def group() -> list[object]:
        return await asyncio.gather(store.bind_token("d2", "h1"),  # host already bound: UNIQUE constraint
                                    store.add_report(Report("h2", b"<y/>", 5.0, True)), return_exceptions=True)

    clash, fine = asyncio.run(group())
    assert isinstance(clash, sqlite3.IntegrityError)
    assert fine == 1  # stored: its number in the history
    assert store.token_bindings() == {"d1": "h1"}
    assert [h.id for h in store.hosts()] == ["h2"]


def test_a_cancelled_caller_neither_runs_nor_stops_the_writer(store: Store) -> None:
    # An admin request cut short is cancelled while its write waits in the queue; answering it
    # then raised InvalidStateError in the writer thread, and every later write waited forever
    # (found in review).
    import threading

    release = threading.Event()
    ran: list[str] = []

    def blocking(conn: sqlite3.Connection) -> None:
        release.wait(10)

    def cancelled_write(conn: sqlite3.Connection) -> None:
        ran.append("cancelled")

    async def scenario() -> None:
        first = asyncio.ensure_future(store.write(blocking))
        await asyncio.sleep(0.1)  # the writer is inside the first transaction now
        second = asyncio.ensure_future(store.write(cancelled_write))
        await asyncio.sleep(0)  # queued
        assert second.cancel()
        await asyncio.sleep(0)
        release.set()
        await first
        await store.add_report(Report("after", b"<z/>", 7.0, True))

    asyncio.run(scenario())
    assert store.writing
    assert ran == []
    assert [h.id for h in store.hosts()] == ["after"]


def test_a_stopped_writer_is_reported_not_waited_on(store: Store) -> None:
    writer = store._writer
    writer._queue.put(None)  # the writer's own stop signal: the thread ends as if it had died
    writer._thread.join(10)
    assert not store.writing  # GET /healthz answers 503 on this
    with pytest.raises(StoreError, match="stopped"):
        asyncio.run(store.add_report(Report("late", b"<z/>", 8.0, True)))


def test_closed_store_refuses_writes(tmp_path: Path) -> None:
    s = Store(tmp_path / "c.sqlite")
    s.close()
    with pytest.raises(StoreError, match="closed"):
        asyncio.run(s.add_report(Report("a", b"", 0.0, True)))


def test_history_bound_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Store(tmp_path / "b.sqlite", history_per_host=0)


# --- tokens ----------------------------------------------------------------------------------

def test_tokens_file(tmp_path: Path) -> None:
    agent, admin, pinned = new_token(), new_token(), new_token()
    path = tmp_path / "tokens"
    path.write_text(f"# who may write\nagent {agent}\n\nadmin {admin}  # the operator\nagent {pinned} cn017\n")
    tokens = Tokens.load(path)
    assert tokens.check(agent) == (digest(agent), Role.AGENT)
    assert tokens.check(admin) == (digest(admin), Role.ADMIN)
    assert tokens.check("not-a-token-at-all") is None
    assert tokens.host_of(digest(pinned)) == "cn017" and tokens.holder_of("cn017") == digest(pinned)
    assert agent not in repr(tokens) and digest(agent) in repr(tokens)  # only digests are kept


@pytest.mark.parametrize("line,message", [
    ("agent", "expected 'ROLE TOKEN"),
    ("root 0123456789abcdef", "unknown role"),
    ("agent short", "too short"),
    ("admin 0123456789abcdef hostx", "an admin token is bound to no host or user"),
    ("submit 0123456789abcdef 9lives", "is not a user name"),
    ("submit 0123456789abcdef a;rm", "is not a user name"),
    ("executor 0123456789abcdef", "an executor token names its host"),
])
def test_bad_tokens_file(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "tokens"
    path.write_text(line + "\n")
    with pytest.raises(TokenFileError, match=message) as caught:
        Tokens.load(path)
    assert f"{path}:1" in str(caught.value)


def test_a_submit_token_names_the_owner_of_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    named, anonymous = new_token(), new_token()
    path.write_text(f"submit {named} alice\nsubmit {anonymous}\n")
    tokens = Tokens.load(path)
    assert tokens.user_of(digest(named)) == "alice"
    assert tokens.user_of(digest(anonymous)) == "token-" + digest(anonymous)[:8]


def test_missing_tokens_file(tmp_path: Path) -> None:
    with pytest.raises(TokenFileError, match="cannot read"):
        Tokens.load(tmp_path / "nope")


def test_binding_is_one_to_one() -> None:
    tokens = Tokens()
    a = tokens.add(new_token(), Role.AGENT)
    b = tokens.add(new_token(), Role.AGENT)
    tokens.bind(a, "h1")
    tokens.bind(a, "h1")  # again: no change
    with pytest.raises(TokenFileError, match="already bound to host"):
        tokens.bind(a, "h2")
    with pytest.raises(TokenFileError, match="another token"):
        tokens.bind(b, "h1")


# --- life cycle ------------------------------------------------------------------------------

def state(**kw: object) -> NodeState:
    args = dict(approved=True, paused=False, last_report=1000.0, now=1000.0, heartbeat_seconds=60.0,
                missed_heartbeats=3)
    args.update(kw)
    return node_state(**args)  # type: ignore[arg-type]


def test_life_cycle() -> None:
    assert state() is NodeState.READY
    assert state(approved=False) is NodeState.PENDING
    assert state(approved=False, now=99999.0) is NodeState.PENDING  # never approved: stays Pending
    assert state(paused=True) is NodeState.PAUSED
    assert state(paused=True, now=1000.0 + 181) is NodeState.UNREACHABLE


def test_unreachable_boundary() -> None:
    # three heartbeats of 60 s may be missed: at exactly 180 s the host is still Ready
    assert state(now=1180.0) is NodeState.READY
    assert state(now=1180.001) is NodeState.UNREACHABLE
    assert unreachable_at(1000.0, 60.0, 3) == 1180.0


@pytest.mark.parametrize("step", [3600.0, -3600.0, 200.0, -200.0])
def test_a_wall_clock_step_neither_kills_nor_revives_hosts(tmp_path: Path, step: float) -> None:
    # Liveness counts heartbeats on the wall clock; a step of it (an NTP step at boot, a VM
    # resumed) made every host Unreachable at once (forward), or kept a dead host Ready for as
    # long as the step (back). Aggregator.now() moves the hosts' last-heard times with a step.
    from support.documents import make_node

    from infosvc.hosts.aggregator import Aggregator
    from infosvc.config.site import parse_config

    wall, steady = [1_800_000_000.0], [1000.0]

    def advance(seconds: float) -> None:
        wall[0] += seconds
        steady[0] += seconds

    config = parse_config({"lifecycle": {"heartbeat_seconds": 60, "missed_heartbeats": 3}})
    agg = Aggregator(config, Store(tmp_path / "s.sqlite"), Tokens(), clock=lambda: wall[0], monotonic=lambda: steady[0])
    try:
        node = make_node("h1")
        agg.table.report(node, agg.now())
        advance(100)
        wall[0] += step  # the step: the wall clock alone moves
        agg.sweep()
        assert agg.table.get("h1").state is NodeState.READY  # 100 s of silence: alive either way
        advance(79)  # 179 s of real silence: still within 3 heartbeats
        agg.sweep()
        assert agg.table.get("h1").state is NodeState.READY
        advance(2)  # 181 s: three heartbeats missed, whatever the wall clock did
        agg.sweep()
        assert agg.table.get("h1").state is NodeState.UNREACHABLE
        assert agg.table.get("h1").reported_at == 1_800_000_000.0  # what is shown stays as reported
    finally:
        agg.store.close()


def test_slow_drift_of_the_wall_clock_is_no_step(tmp_path: Path) -> None:
    from infosvc.hosts.aggregator import Aggregator
    from infosvc.config.site import parse_config

    wall, steady = [1_800_000_000.0], [1000.0]
    agg = Aggregator(parse_config({}), Store(tmp_path / "s.sqlite"), Tokens(), clock=lambda: wall[0],
                     monotonic=lambda: steady[0])
    try:
        shifted: list[float] = []
        agg.table.shift_liveness = shifted.append  # type: ignore[method-assign]
        for _ in range(1000):  # 0.5 ms of slew per second read, 0.5 s in all: NTP slewing, not a step
            wall[0] += 1.0005
            steady[0] += 1.0
            agg.now()
        assert shifted == []
        wall[0] += 5
        agg.now()
        assert shifted == [5]
    finally:
        agg.store.close()


def test_a_claim_survives_when_the_report_that_made_it_fails(tmp_path: Path) -> None:
    # Two reports of one new token in flight together: the first carries the token's first claim
    # on the host, and fails in the store; the second commits. The claim must be stored with the
    # second, or the host is stored with no binding and any token may take it (found in review).
    import asyncio

    from support.documents import node_document

    from infosvc.hosts.aggregator import Aggregator
    from infosvc.config.site import parse_config

    path = tmp_path / "s.sqlite"
    store = Store(path)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON reports "
                 "WHEN instr(CAST(NEW.document AS TEXT), '\"Test\">1<') > 0 "  # the report of sequence 1
                 "BEGIN SELECT RAISE(ABORT, 'disk full, say'); END")
    conn.commit()
    conn.close()
    tokens = Tokens()
    token = new_token()
    key = tokens.add(token, Role.AGENT)
    agg = Aggregator(parse_config({}), store, tokens)

    async def both() -> list[object]:
        return await asyncio.gather(agg.ingest(key, node_document("h1", sequence=1)),
                                    agg.ingest(key, node_document("h1", sequence=2)),
                                    return_exceptions=True)

    try:
        first, second = asyncio.run(both())
        assert isinstance(first, Exception) and not isinstance(second, Exception), (first, second)
        assert store.token_bindings() == {key: "h1"}
        assert tokens.host_of(key) == "h1"
    finally:
        store.close()
