"""The hosts as Prometheus HTTP service discovery targets (`GET /v1/prometheus/targets`).

Prometheus's http_sd_configs reads a JSON array of target groups, each
`{"targets": ["HOST:PORT", ...], "labels": {NAME: VALUE, ...}}`. Here each host is one group:
its SSS Node Id and the exporter port of the config (`prometheus.exporter_port`), labelled with
the host (`node`, the label name of infosvc's own metrics) and where the GLUE roll-up puts it
(`subcluster`, `cluster`).

Which hosts: every host an admin has let in, that is all but Pending ones. Unreachable hosts stay
listed on purpose: Prometheus marks a target it cannot scrape `up == 0`, which is what an alert
wants to see; a host dropped from discovery instead has its series go stale without a word.
Pending hosts are not listed: nobody approved them yet, so nobody asked for them to be scraped.
The life-cycle state goes along as the meta label `__meta_infosvc_state`, for relabelling (to
drop Paused hosts, say), and not as a target label: a label that changes with the state would
start a new series at every change.

Which addresses: a host's Id is chosen by whoever holds an agent token, and Prometheus fetches
every target it is given, so a target is a request the site's Prometheus makes on that client's
behalf. By default every address is a target but those that reach the scraper's own host, its
link or a cloud's metadata service (BLOCKED: loopback, link-local with 169.254.169.254 in it,
unspecified, multicast and reserved, the metadata addresses), judged as the C library reads an
address (inet_aton: `2852039166`, `0xa9fea9fe` and `127.1` are addresses too) and through IPv6's
embeddings of IPv4 (::ffff:a.b.c.d, 64:ff9b::a.b.c.d). `prometheus.target_networks` lists the
networks allowed instead; a blocked family is a target only when the list names a network inside
it (`127.0.0.0/8`), never because a wider one (`0.0.0.0/0`) holds it.

A name is never resolved here: the answer is served to anyone, and a resolution on its path would
let a client's choice of name hold the event loop on DNS; nor would it protect, since Prometheus
resolves the name again at each scrape and the answer may have changed by then (DNS rebinding).
Names are targets unless `prometheus.target_names` is false (a site whose hosts are ordinary names
has no other way to be scraped), but never the loopback's names, the clouds' metadata names and
the public zones that lead to loopback or to the address a name spells (BLOCKED_NAMES,
BLOCKED_ZONES). Nothing else vets a name: a site that lets unknown hosts in (no `lifecycle.require_approval`, agent tokens
bound to no host) and wants no name it has not vetted sets `target_names = false`.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from infosvc.model.hostid import canonical
from infosvc.hosts import HostEntry, HostTable
from infosvc.hosts import NodeState

#: The life-cycle states whose hosts are listed.
LISTED_STATES: Final = frozenset({NodeState.READY, NodeState.PAUSED, NodeState.UNREACHABLE})

STATE_LABEL: Final = "__meta_infosvc_state"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: The addresses that are never targets unless a configured network inside them says so.
BLOCKED: Final[tuple[Network, ...]] = tuple(ipaddress.ip_network(net) for net in (
    "0.0.0.0/8",  # unspecified, "this network": 0.0.0.0 reaches the scraper's own host
    "127.0.0.0/8",  # loopback
    "169.254.0.0/16",  # link-local: the metadata service of AWS, GCP, Azure, OpenStack (169.254.169.254), ECS's
    "100.100.100.200/32",  # Alibaba Cloud's metadata service
    "224.0.0.0/4",  # multicast
    "240.0.0.0/4",  # reserved, and the broadcast address
    "::/128",  # unspecified
    "::1/128",  # loopback
    "fe80::/10",  # link-local
    "ff00::/8",  # multicast
    "fd00:ec2::254/128",  # AWS's metadata service over IPv6
))
#: IPv6 networks whose last 32 bits are an IPv4 address that the connection reaches.
_EMBEDDING_IPV4: Final = tuple(ipaddress.IPv6Network(net) for net in ("::ffff:0:0/96", "64:ff9b::/96", "::/96"))
#: Names that are the scraper's own host or a metadata service wherever they are resolved.
BLOCKED_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback",
                                  "localhost4", "localhost6", "localhost4.localdomain4", "localhost6.localdomain6",
                                  "ip6-localnet", "metadata", "metadata.google.internal", "metadata.goog",
                                  "instance-data", "instance-data.ec2.internal"})
#: Public zones whose every name resolves to loopback (localtest.me, lvh.me) or to the address it
#: spells (nip.io, sslip.io, xip.io: 127.0.0.1.nip.io, 169-254-169-254.sslip.io): never targets, the
#: zone's own name nor any below it. (A name of the site's own DNS that leads home is the site's
#: to keep out: no list here can know it, as docs/security.md says.)
BLOCKED_ZONES: Final = ("localhost", "localtest.me", "lvh.me", "nip.io", "sslip.io", "xip.io")


def address_of(ident: str) -> Address | None:
    """The address `ident` is to a connecting client, or None for a name: dotted IPv4 or IPv6, else
    what inet_aton reads (one number, a.b, a.b.c, octal, hex), as getaddrinfo would without DNS."""
    try:
        address = ipaddress.ip_address(ident)
    except ValueError:
        if ":" in ident:
            return None
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(ident))
        except (OSError, ValueError):
            return None
    if isinstance(address, ipaddress.IPv6Address) and int(address) > 1:  # :: and ::1 are IPv6's own
        for net in _EMBEDDING_IPV4:
            if address in net:
                return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


@dataclass(frozen=True, slots=True)
class TargetPolicy:
    """Which host Ids may be targets: `networks` empty is every address but BLOCKED."""

    networks: tuple[Network, ...]
    names: bool

    def allows(self, ident: str) -> bool:
        address = address_of(ident)
        if address is None:
            name = canonical(ident)
            return self.names and name not in BLOCKED_NAMES and not any(
                name == zone or name.endswith("." + zone) for zone in BLOCKED_ZONES)
        blocked = [net for net in BLOCKED if net.version == address.version and address in net]
        if not self.networks:
            return not blocked
        return any(address in net and all(net.subnet_of(b) for b in blocked)  # type: ignore[arg-type]
                   for net in self.networks if net.version == address.version)


@lru_cache(maxsize=8)
def target_policy(networks: tuple[str, ...], names: bool) -> TargetPolicy:
    """The policy of the config's `prometheus.target_networks` (checked at load) and `target_names`."""
    return TargetPolicy(tuple(ipaddress.ip_network(net) for net in networks), names)


def address(host: str, port: int) -> str:
    """HOST:PORT, with an IPv6 literal in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def target_group(entry: HostEntry, table: HostTable, port: int) -> dict[str, Any]:
    labels = {"node": entry.id}
    sub = table.rollup.subcluster_of(entry.id)
    if sub is not None:
        labels["subcluster"] = sub.unique_id
    host = table.rollup.hosts.get(entry.id)
    if host is not None and host.cluster:
        labels["cluster"] = host.cluster
    labels[STATE_LABEL] = entry.state.value
    return {"targets": [address(entry.id, port)], "labels": labels}


def by_id(entry: HostEntry) -> str:
    return entry.id


def listed_group(entry: HostEntry, table: HostTable, port: int, policy: TargetPolicy) -> dict[str, Any] | None:
    """The host's target group if it is listed (its state, and the policy allows its address)."""
    return target_group(entry, table, port) if entry.state in LISTED_STATES and policy.allows(entry.id) else None
