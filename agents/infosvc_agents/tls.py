"""TLS for the agent's connection to an https aggregator (infosvc_agents/http1.py): the only module
of the agent that imports ssl, so an agent of an http server never loads it.

A server's certificate is verified, host name included, against `ca_file` (a private CA's
certificates, PEM) when given, else against the system's CAs; TLS 1.2 at least. The handshake,
every read and every write wait at most what is left of the exchange's deadline.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

from infosvc_agents.http1 import Deadline


class _DeadlineSSLSocket(ssl.SSLSocket):
    """http1.DeadlineSocket over TLS (the SSL object reads the socket's timeout at each call)."""

    deadline: Deadline

    def recv_into(self, buffer: Any, nbytes: int | None = None, flags: int = 0) -> int:
        self.settimeout(self.deadline.left())
        return super().recv_into(buffer, nbytes, flags)

    def sendall(self, data: Any, flags: int = 0) -> None:
        self.settimeout(self.deadline.left())
        super().sendall(data, flags)

    def do_handshake(self, block: bool = False) -> None:
        self.settimeout(self.deadline.left())
        super().do_handshake(block)


def client_context(ca_file: str | None) -> ssl.SSLContext:
    """The context every connection of one sender uses; ValueError when `ca_file` cannot be used."""
    try:
        context = ssl.create_default_context(cafile=ca_file)
    except OSError as exc:  # ssl.SSLError too
        raise ValueError(f"CA file {ca_file}: {exc.strerror or exc}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.sslsocket_class = _DeadlineSSLSocket
    return context


def wrap(sock: socket.socket, context: ssl.SSLContext, host: str, deadline: Deadline) -> socket.socket:
    """`sock` over TLS, its handshake done (the certificate and the host name verified)."""
    tls = context.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
    assert isinstance(tls, _DeadlineSSLSocket)
    tls.deadline = deadline
    tls.do_handshake()
    return tls
