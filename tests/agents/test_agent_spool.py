"""The real agent command with `--spool` against the real server (docs/reliability.md, Faults):
killed (kill -9) during an outage and started again, it delivers what it had kept, each sample
once; a sample the server stored just before the agent died, its file still there, is not stored
twice; the bound holds on disk; what a crash or a person leaves in the spool does not stop it; a
spool it cannot use is a one-line error at start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infosvc.codec.node_xml import parse_node
from support import ROOT
from support.agentrun import figures
from support.server import Server, ServerFactory, free_port, wait_for

pytestmark = pytest.mark.serial  # agents killed and started against a server that comes and goes



def sample_ids(server: Server, host: str) -> list[str]:
    documents = [row[0] for row in server.sql("SELECT document FROM reports WHERE host_id = ? ORDER BY seq", host)]
    return [parse_node(d).extension("SampleId", "Agent") or "" for d in documents]


def spooled(spool: Path) -> list[Path]:
    return sorted(spool.glob("*.sample"))


def ids_in(files: list[Path]) -> list[str]:
    return [parse_node(f.read_bytes()).extension("SampleId", "Agent") or "" for f in files]


class Agents:
    """Starts `python -m infosvc_agents` with --spool; every one still running is killed at the end."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self, url: str, token: str, spool: Path, *more: str, host: str = "spool01",
              interval: float = 0.1) -> tuple[subprocess.Popen[bytes], Path]:
        token_file = self.tmp_path / f"{host}.token"
        token_file.write_text(token + "\n")
        log = self.tmp_path / f"{host}-{len(self.started)}.log"
        with open(log, "wb") as out:
            agent = subprocess.Popen(
                [sys.executable, "-m", "infosvc_agents", "--server", url, "--token-file", str(token_file),
                 "--id", host, "--interval", str(interval), "--backoff-max", "0.3", "--spool", str(spool), *more],
                stdout=subprocess.DEVNULL, stderr=out)
        self.started.append((agent, log))
        return agent, log

    def close(self) -> None:
        for agent, _ in self.started:
            if agent.poll() is None:
                agent.kill()
                agent.wait()


@pytest.fixture
def agents(tmp_path: Path) -> Any:
    made = Agents(tmp_path)
    yield made
    made.close()


def finished(agent: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> tuple[int, ...]:
    """Wait for an agent run with --samples to end by itself; its stop line's figures."""
    agent.wait(timeout=timeout)
    return figures(agent, log)


def test_killed_during_an_outage_and_restarted_it_delivers_every_kept_sample_once(
        serve: ServerFactory, agents: Agents, tmp_path: Path) -> None:
    server = serve({"store": {"history_per_host": 10000}}, agents=1, start=False)
    port = free_port()  # nothing listens here yet
    url, token, spool = f"http://127.0.0.1:{port}", server.agent_token(), tmp_path / "spool"
    first, _ = agents.start(url, token, spool)
    wait_for(lambda: len(spooled(spool)) >= 8, timeout=30, message="samples kept while the server is down")
    first.send_signal(signal.SIGKILL)
    first.wait()
    kept = ids_in(spooled(spool))
    run = kept[0].rsplit("-", 1)[0]
    assert kept == [f"{run}-{n}" for n in range(1, len(kept) + 1)]  # every sample taken, in order
    # Started again while the server comes up: what the first run kept goes first, then its own.
    second, log = agents.start(url, token, spool, "--samples", "5")
    server.start(port=port)
    delivered, dropped, refused, undelivered, taken = finished(second, log)
    # It samples on while the server comes up: 5 or more of its own.
    assert (delivered, dropped, refused, undelivered) == (len(kept) + taken, 0, 0, 0) and taken >= 5
    ids = sample_ids(server, "spool01")
    later = ids[len(kept):]
    assert ids[:len(kept)] == kept and len(set(ids)) == len(ids)  # each once, in order
    assert [i.rsplit("-", 1)[1] for i in later] == [str(n) for n in range(1, taken + 1)]
    assert later[0].rsplit("-", 1)[0] != run
    assert f"{len(kept)} sample(s) left by the last run, sent first" in log.read_text()
    assert spooled(spool) == []  # each file removed once acknowledged
    print(f"\nspool: {len(kept)} samples kept on disk by an agent killed (-9) during the outage, all delivered "
          f"by the next run before its own {taken}: {len(ids)} stored, each once, in order, 0 lost")


def test_a_sample_stored_just_before_the_agent_died_is_not_stored_twice(
        serve: ServerFactory, agents: Agents, tmp_path: Path) -> None:
    """The crash window: the server stored the sample, the agent died before removing its file.
    Made here as it would be left: after a run that delivered everything, the file of its last
    sample (the document the server stored: the bytes sent) is put back. The server is killed
    and started too, so it knows its newest sample from the store."""
    server = serve({"store": {"history_per_host": 10000}}, agents=1)
    url, token, spool = server.url, server.agent_token(), tmp_path / "spool"
    first, log = agents.start(url, token, spool, "--samples", "3")
    delivered, *_ = finished(first, log)
    assert delivered == 3 and spooled(spool) == []
    stored = sample_ids(server, "spool01")
    (last,), = server.sql("SELECT document FROM reports WHERE host_id = 'spool01' ORDER BY seq DESC LIMIT 1")
    (spool / "00000000000000000004.sample").write_bytes(last)  # the probe was 1, the samples 2 to 4
    server.kill()
    server.start()
    second, log = agents.start(url, token, spool, "--samples", "1")
    assert finished(second, log)[:4] == (2, 0, 0, 0)  # the one left, acknowledged, and a new one
    ids = sample_ids(server, "spool01")
    assert ids[:3] == stored and len(ids) == 4 and len(set(ids)) == 4  # stored once
    assert spooled(spool) == []
    metrics = server.get("/metrics").body.decode().splitlines()
    assert "infosvc_reports_repeated_total 1.0" in metrics


def test_the_bound_holds_on_disk_the_newest_kept(serve: ServerFactory, agents: Agents, tmp_path: Path) -> None:
    server = serve({"store": {"history_per_host": 10000}}, agents=1, start=False)
    port = free_port()
    url, token, spool = f"http://127.0.0.1:{port}", server.agent_token(), tmp_path / "spool"
    first, log = agents.start(url, token, spool, "--max-kept", "4")
    wait_for(lambda: "(6 dropped so far)" in log.read_text(), timeout=30, message="more samples than --max-kept")
    first.send_signal(signal.SIGTERM)
    first.wait(timeout=30)
    delivered, dropped, refused, undelivered, taken = figures(first, log)
    assert (delivered, undelivered, dropped) == (0, 4, taken - 4) and taken >= 10
    kept = ids_in(spooled(spool))
    run = kept[0].rsplit("-", 1)[0]
    assert kept == [f"{run}-{n}" for n in range(taken - 3, taken + 1)]  # the newest four
    server.start(port=port)
    second, log = agents.start(url, token, spool, "--max-kept", "4", "--samples", "1")
    assert finished(second, log)[:2] == (5, 0)
    assert sample_ids(server, "spool01")[:4] == kept and spooled(spool) == []


def test_leftovers_and_foreign_files_in_the_spool_do_not_stop_it(
        serve: ServerFactory, agents: Agents, tmp_path: Path) -> None:
    server = serve({"store": {"history_per_host": 10000}}, agents=1)
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    (spool / "00000000000000000003.tmp").write_bytes(b"<?xml version='1.0'?><Node")  # a write cut by a crash
    (spool / "notes.txt").write_text("the operator's\n")
    (spool / "old").mkdir()
    agent, log = agents.start(server.url, server.agent_token(), spool, "--samples", "2")
    assert finished(agent, log)[:2] == (2, 0)
    assert sorted(os.listdir(spool)) == ["notes.txt", "old"]
    text = log.read_text()
    assert "removed 00000000000000000003.tmp" in text and "notes.txt is not a sample" in text
    assert len(sample_ids(server, "spool01")) == 2 and "Traceback" not in text


@pytest.mark.parametrize("where", ["file", "under-a-file", "in-use"])
def test_a_spool_it_cannot_use_is_a_one_line_error(agents: Agents, tmp_path: Path, where: str) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    spool = {"file": a_file, "under-a-file": a_file / "spool", "in-use": tmp_path / "spool"}[where]
    if where == "in-use":
        holder, _ = agents.start(f"http://127.0.0.1:{free_port()}", "t" * 20, spool, host="holder")
        wait_for(lambda: spooled(spool), timeout=30, message="the first agent to hold the spool")
    agent, log = agents.start(f"http://127.0.0.1:{free_port()}", "t" * 20, spool)
    assert agent.wait(timeout=60) == 2
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"infosvc-agent: spool {spool}"), lines
    assert {"file": "not a directory", "under-a-file": "Not a directory",
            "in-use": "in use by another agent"}[where] in lines[0]


def test_the_packaged_unit_gives_the_agent_a_spool_of_its_own() -> None:
    """deploy/infosvc-agent.service: the spool in the agent's state directory, which systemd makes
    for the agent's user, private (tests/product/test_deploy.py verifies the unit)."""
    lines = (ROOT / "deploy" / "infosvc-agent.service").read_text(encoding="utf-8").splitlines()
    assert "StateDirectory=infosvc-agent" in lines and "StateDirectoryMode=0700" in lines
    (start,) = [line for line in lines if line.startswith("ExecStart=")]
    assert " --spool ${STATE_DIRECTORY}/spool " in start
