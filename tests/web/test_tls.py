"""TLS: `infosvc serve --tls-cert --tls-key` serves https (TLS 1.2 or later), and the agent verifies it.

A private CA and a server certificate for 127.0.0.1 / localhost are made (support/pki.py);
the real server runs with them, and the agent's own Sender (and the agent command) posts to it.
An agent that cannot verify the server keeps its samples to retry; plain http to the port fails.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import ssl
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import ROOT

from support.documents import node_document

from support.pki import Issued, make_ca, make_server_cert
from support.server import Server, ServerFactory, banner_of, free_port, request, wait_for
from infosvc_agents.push import PushError, PushLoop, Sender


@dataclass
class Pki:
    ca: Issued
    server: Issued
    other_ca: Issued  # a CA that did not sign the server's certificate


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca, ca_cert, ca_key = make_ca(directory, "site-ca")
    other, _, _ = make_ca(directory, "other-ca")
    return Pki(ca, make_server_cert(directory, ca_cert, ca_key), other)


@pytest.fixture
def tls_server(serve: ServerFactory, pki: Pki) -> Server:
    return serve(extra_args=("--tls-cert", str(pki.server.cert), "--tls-key", str(pki.server.key)),
                 ca_file=pki.ca.cert)


# --- the server ---------------------------------------------------------------------------------

def test_serves_https_and_says_so(tls_server: Server) -> None:
    assert tls_server.url.startswith("https://")
    reply = tls_server.get("/healthz")
    assert reply.status == 200 and reply.json()["status"] == "ok"
    assert f"serving on https://127.0.0.1:{tls_server.port}" in tls_server.log.read_text()


def test_plain_http_to_the_tls_port_fails(tls_server: Server) -> None:
    with pytest.raises((OSError, http.client.HTTPException)):
        request(tls_server.port, "GET", "/healthz", timeout=5.0)


def _negotiate(port: int, context: ssl.SSLContext) -> str | None:
    with socket.create_connection(("127.0.0.1", port), timeout=5.0) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            return tls.version()


def test_tls_1_2_or_later_only(tls_server: Server, pki: Pki) -> None:
    assert _negotiate(tls_server.port, ssl.create_default_context(cafile=str(pki.ca.cert))) in ("TLSv1.2", "TLSv1.3")
    old = ssl.create_default_context(cafile=str(pki.ca.cert))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # as it should be: that is the point
        old.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        old.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, OSError)):
        _negotiate(tls_server.port, old)


@pytest.mark.parametrize("args, message", [
    (["--tls-cert", "cert.pem"], "--tls-cert and --tls-key go together"),
    (["--tls-key", "key.pem"], "--tls-cert and --tls-key go together"),
    (["--tls-cert", "missing.pem", "--tls-key", "missing.key"], "cannot read missing.pem"),
])
def test_tls_options_refused_clearly(tmp_path: Path, args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "infosvc", "serve", "--db", str(tmp_path / "db.sqlite"), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert message in done.stderr


def test_key_that_does_not_match_the_certificate_is_refused(tmp_path: Path, pki: Pki) -> None:
    done = subprocess.run([sys.executable, "-m", "infosvc", "serve", "--db", str(tmp_path / "db.sqlite"),
                           "--tls-cert", str(pki.server.cert), "--tls-key", str(pki.other_ca.key)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "TLS: cannot use certificate" in done.stderr


# --- the agent ----------------------------------------------------------------------------------

def test_sender_with_the_private_ca_delivers(tls_server: Server, pki: Pki) -> None:
    sender = Sender(tls_server.url, tls_server.agent_token(), ca_file=str(pki.ca.cert))
    sender.send(node_document("tls01.example.org"))
    assert tls_server.node_ids() == ["tls01.example.org"]


def test_sender_verifies_by_name_too(tls_server: Server, pki: Pki) -> None:
    """localhost is in the certificate as well; the host name is checked, not just the chain."""
    sender = Sender(f"https://localhost:{tls_server.port}", tls_server.agent_token(), ca_file=str(pki.ca.cert))
    sender.send(node_document("tls02.example.org"))
    assert "tls02.example.org" in tls_server.node_ids()


@pytest.mark.parametrize("trust", ["system CAs", "another CA"])
def test_agent_that_cannot_verify_keeps_its_samples(tls_server: Server, pki: Pki, trust: str) -> None:
    ca_file = None if trust == "system CAs" else str(pki.other_ca.cert)
    sender = Sender(tls_server.url, tls_server.agent_token(), ca_file=ca_file)
    with pytest.raises(PushError) as failure:
        sender.send(node_document("tls03.example.org"))
    assert failure.value.retry
    assert "CERTIFICATE_VERIFY_FAILED" in str(failure.value)
    loop = PushLoop(lambda: node_document("tls03.example.org"), sender)
    loop.keep(node_document("tls03.example.org"))
    assert loop.deliver() is False
    assert len(loop.kept) == 1 and loop.delivered == 0 and loop.refused == 0
    assert tls_server.node_ids() == []


def test_sender_refuses_an_unusable_ca_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no-such-ca.pem: No such file"):
        Sender("https://127.0.0.1:1", "token", ca_file=str(tmp_path / "no-such-ca.pem"))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ValueError, match="garbage.pem"):
        Sender("https://127.0.0.1:1", "token", ca_file=str(garbage))


def test_agent_command_stops_at_start_on_an_unreadable_ca_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("t0k3n\n")
    done = subprocess.run([sys.executable, "-m", "infosvc_agents", "--server", "https://127.0.0.1:1",
                           "--token-file", str(token_file), "--ca-file", str(tmp_path / "no-such-ca.pem")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "no-such-ca.pem" in done.stderr


def test_agent_command_pushes_over_tls(tls_server: Server, pki: Pki, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(tls_server.agent_token() + "\n")
    done = subprocess.run([sys.executable, "-m", "infosvc_agents", "--server", tls_server.url,
                           "--token-file", str(token_file), "--ca-file", str(pki.ca.cert),
                           "--id", "tls04.example.org", "--samples", "1", "--interval", "0.1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    wait_for(lambda: "tls04.example.org" in tls_server.node_ids(), message="the agent's report")


def test_local_agent_reports_over_tls(tmp_path: Path, pki: Pki) -> None:
    """`serve --local-agent` with TLS: the local agent trusts the served chain file (server + its CA)."""
    chain = tmp_path / "chain.pem"
    chain.write_bytes(pki.server.cert.read_bytes() + pki.ca.cert.read_bytes())
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "infosvc", "serve", "--db", str(tmp_path / "run.sqlite"), "--local-agent",
         "--agent-interval", "0.5", "--listen", f"127.0.0.1:{port}",
         "--tls-cert", str(chain), "--tls-key", str(pki.server.key)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path)
    tls = ssl.create_default_context(cafile=str(pki.ca.cert))
    try:
        banner = banner_of(server)
        assert banner.startswith(f"infosvc: serving on https://127.0.0.1:{port}"), banner

        def nodes() -> list[str]:
            try:
                reply = request(port, "GET", "/v1/nodes", timeout=2, tls=tls)
            except (OSError, http.client.HTTPException):
                return []
            return [n["id"] for n in reply.json()] if reply.status == 200 else []

        assert wait_for(nodes, timeout=30, message="this host in /v1/nodes, over https") == [os.uname().nodename]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=20)
    assert server.returncode == 0
