"""An agent across an outage of the aggregator (docs/reliability.md, Faults): the real agent command
reports, the server is killed (kill -9) and comes back after OUTAGE seconds on the same port; every
sample the agent took meanwhile arrives, once each, in order, and the figures are printed.

The outage is a parameter. The suite runs a short one with a short interval; the five-minute one,
with the same proportions, is

    INFOSVC_OUTAGE_SECONDS=300 .venv/bin/python -m pytest -q -s -p no:xdist tests/agents/test_agent_outage.py

(interval OUTAGE/20, the agent's back-off capped at OUTAGE/5: 15 s and 60 s for five minutes)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infosvc.codec.node_xml import parse_node
from support.agentrun import figures, stop, stored
from support.server import ServerFactory, wait_for

pytestmark = pytest.mark.serial  # intervals and back-off measured from outside

OUTAGE = float(os.environ.get("INFOSVC_OUTAGE_SECONDS", "4"))
INTERVAL = OUTAGE / 20
BACKOFF_MAX = OUTAGE / 5
KEPT = re.compile(r"(\d+) sample\(s\) kept")


def test_an_agent_delivers_what_it_kept_across_an_outage(serve: ServerFactory, tmp_path: Path) -> None:
    server = serve({"store": {"history_per_host": 10000}}, agents=1)
    token_file = tmp_path / "agent.token"
    token_file.write_text(server.agent_token() + "\n")
    log_path = tmp_path / "agent.log"
    with open(log_path, "wb") as log:
        agent = subprocess.Popen(
            [sys.executable, "-m", "infosvc_agents", "--server", server.url, "--token-file", str(token_file),
             "--interval", str(INTERVAL), "--backoff-max", str(BACKOFF_MAX), "--id", "outage01"],
            stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_for(lambda: len(stored(server, "outage01")) >= 3, timeout=30 + 5 * INTERVAL,
                 message="the agent's first reports")
        before = len(stored(server, "outage01"))
        server.kill()
        down = time.monotonic()
        time.sleep(OUTAGE)
        server.start()
        up = time.monotonic()
        assert agent.poll() is None
        expected = before + int(OUTAGE / (INTERVAL * 1.1))  # at least this many taken by now (jitter 10%)
        wait_for(lambda: len(stored(server, "outage01")) >= expected, timeout=BACKOFF_MAX * 1.2 + 30,
                 message="the samples kept during the outage")
        caught_up = time.monotonic() - up
    finally:
        stop(agent)
    text = log_path.read_text()
    delivered, dropped, refused, undelivered, taken = figures(agent, log_path)
    assert (dropped, refused) == (0, 0), text
    documents = stored(server, "outage01")
    ids = [parse_node(d).extension("SampleId", "Agent") for d in documents]
    assert len(ids) == len(set(ids)) == delivered, "a sample lost or stored twice"
    numbers = [int(str(i).rsplit("-", 1)[1]) for i in ids]
    assert numbers == list(range(1, delivered + 1))  # every sample, once, in order
    assert delivered + undelivered == taken
    kept = max(map(int, KEPT.findall(text)), default=0)  # the backlog at its peak
    assert kept >= int(OUTAGE / (INTERVAL * 1.1)) - 1, text
    print(f"\noutage {OUTAGE:g} s (interval {INTERVAL:g} s, back-off max {BACKOFF_MAX:g} s): "
          f"{kept} samples kept across it, all delivered {caught_up:.1f} s after the server was back; "
          f"{delivered} delivered of {taken} taken, 0 lost, 0 twice ({time.monotonic() - down:.0f} s in all)")
