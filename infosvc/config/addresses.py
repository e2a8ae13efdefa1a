"""The addresses a site config names, each read by one function that the config's check and the
command line share: where the service listens (service.listen, and `serve --listen`, so that
`check-config` passes only what `serve` takes) and the networks Prometheus may be told to scrape
(prometheus.target_networks, infosvc/publish/targets.py)."""

from __future__ import annotations

import ipaddress
import re
from typing import Final

__all__ = ["check_listen", "check_networks", "listen_address"]


def check_networks(networks: tuple[str, ...]) -> None:
    """prometheus.target_networks: each a network as CIDR, without host bits, listed once."""
    seen: set[ipaddress.IPv4Network | ipaddress.IPv6Network] = set()
    for text in networks:
        try:
            network = ipaddress.ip_network(text)
        except ValueError as exc:
            raise ValueError(f"{text!r} is not a network such as 10.0.0.0/8 or 2001:db8::/32 ({exc})") from None
        if network in seen:
            raise ValueError(f"{text!r} is listed twice")
        seen.add(network)


def listen_address(listen: str) -> tuple[str, int]:
    """(host, port) of service.listen or --listen: HOST:PORT, the host an IPv4 address, an IPv6
    address in brackets or a DNS name (none: 127.0.0.1), the port 1 to 65535 (0 takes any free
    one, as `serve` always has); ValueError saying what is wrong. `check-config` and `serve` both
    read it here, so that what one passes the other takes."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit():
        raise ValueError(f"expected HOST:PORT (127.0.0.1:8080, [::1]:8080), got {listen!r}")
    if len(port) > 5 or not 0 <= int(port) <= 65535:
        raise ValueError(f"the port must be 1 to 65535 (0: any free one), got {listen!r}")
    if host.startswith("[") or host.endswith("]"):
        try:
            if not (host.startswith("[") and host.endswith("]")):
                raise ValueError(host)
            address = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f"only an IPv6 address goes in brackets ([::1]:8080), got {listen!r}") from None
        return str(address), int(port)
    if ":" in host:
        raise ValueError(f"an IPv6 address goes in brackets, [::1]:8080, got {listen!r}")
    if not host:
        return "127.0.0.1", int(port)
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        if not _HOST_NAME.fullmatch(host):
            raise ValueError(f"the host must be an IPv4 address, [IPv6] or a DNS name, got {listen!r}") from None
    return host, int(port)


def check_listen(listen: str) -> None:
    """service.listen, as the config's check (listen_address's result is the command line's)."""
    listen_address(listen)


#: A DNS name as a listen address may be one: labels of letters, digits and '-', dot-separated.
_HOST_NAME: Final = re.compile(r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                               r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")
