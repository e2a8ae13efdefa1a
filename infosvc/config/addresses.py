"""The addresses a site config names, each read by one function that the config's check and the
command line share: where the service listens (service.listen, and `serve --listen`, so that
`check-config` passes only what `serve` takes), the networks Prometheus may be told to scrape
(prometheus.target_networks, infosvc/publish/targets.py) and the origins whose pages may read the
API (service.cors_origins, infosvc/web/cors.py)."""

from __future__ import annotations

import ipaddress
import re
from typing import Final

__all__ = ["ANY_ORIGIN", "check_listen", "check_networks", "check_origins", "listen_address"]

#: service.cors_origins' one entry that lets every origin read (infosvc/web/cors.py)
ANY_ORIGIN: Final = "*"
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
#: scheme://host[:port]: a DNS name or IPv4 address, or an IPv6 address in brackets
_ORIGIN: Final = re.compile(r"(?P<scheme>[a-z]+)://(?P<host>[a-z0-9-]+(?:\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])"
                            r"(?::(?P<port>[0-9]{1,5}))?", re.IGNORECASE)


def check_origins(origins: tuple[str, ...]) -> None:
    """service.cors_origins: `*` alone, or origins each written as a browser sends its `Origin`
    header (lower case, no default port, no path), since the header is compared to them as text:
    any other spelling would never match, and the site would not know why."""
    if ANY_ORIGIN in origins and len(origins) > 1:
        raise ValueError(f"{ANY_ORIGIN!r} (any origin) must be the only entry, got {list(origins)!r}")
    seen: set[str] = set()
    for origin in origins:
        if origin in seen:
            raise ValueError(f"{origin!r} is listed twice")
        seen.add(origin)
        if origin != ANY_ORIGIN:
            problem = _origin_problem(origin)
            if problem is not None:
                raise ValueError(f"{origin!r}: {problem}")


def _origin_problem(origin: str) -> str | None:
    if "*" in origin:
        return f"no wildcards in an origin: list each one, or {ANY_ORIGIN!r} alone for any origin"
    found = _ORIGIN.fullmatch(origin)
    if found is None:
        if re.match(r"[a-z]+://[^/?#]+[/?#]", origin, re.IGNORECASE):
            return "an origin has no path, query or fragment (not even a final '/'): scheme://host[:port]"
        return "not an origin: expected http:// or https://, a host and an optional port"
    scheme, port = found["scheme"].lower(), found["port"]
    if scheme not in _DEFAULT_PORTS:
        return "not an origin: expected http:// or https://, a host and an optional port"
    if port is not None and not 1 <= int(port) <= 65535:
        return f"the port must be 1 to 65535, got {port}"
    host = found["host"].lower()
    if host.startswith("["):
        try:
            host = f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
        except ValueError:
            return f"{host} is no IPv6 address"
    spelled = f"{scheme}://{host}"
    if port is not None and int(port) != _DEFAULT_PORTS[scheme]:
        spelled += f":{int(port)}"
    if spelled != origin:
        return f"a browser sends it as {spelled!r}, and the header is compared as written: write that"
    return None


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
