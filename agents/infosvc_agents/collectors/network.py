"""Network: every interface of /proc/net/dev with its counters, link facts from sysfs, and addresses.

A sysfs attribute that is missing or unreadable gives None (or "down") for that adapter only.
A /proc/net/dev line that cannot be parsed is skipped with a warning; the other adapters stay.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import time
from dataclasses import dataclass
from typing import Callable, Final

from infosvc_agents.collectors._files import ProcFile, read_attr

log = logging.getLogger("infosvc_agents.collectors.network")

IFF_UP: Final = 0x1
_NO_MAC: Final = frozenset({"00:00:00:00:00:00", ""})
# Old kernels print SPEED_UNKNOWN (-1) as an unsigned 32-bit number.
_SPEED_UNKNOWN: Final = frozenset({-1, 0xFFFFFFFF})

AddressProvider = Callable[[], dict[str, list[str]]]


@dataclass(frozen=True, slots=True)
class NetworkAdapter:
    name: str
    mac: str | None
    addresses: tuple[str, ...]
    mtu: int | None
    speed_mbps: int | None
    up: bool
    bytes_in: int
    bytes_out: int
    packets_in: int
    packets_out: int
    operstate: str | None = None  # /sys/class/net/*/operstate as the kernel words it ("up", "unknown", ...)


def psutil_addresses() -> dict[str, list[str]]:
    """IPv4 and IPv6 addresses per interface from psutil, without the IPv6 zone ("%eth0")."""
    import psutil  # where netlink is not to be had (netlink_addresses): psutil's 2.6 MiB only then

    families = (socket.AF_INET, socket.AF_INET6)
    return {name: [a.address.partition("%")[0] for a in addrs if a.family in families]
            for name, addrs in psutil.net_if_addrs().items()}


# rtnetlink (linux/netlink.h, linux/rtnetlink.h, linux/if_addr.h)
_NLMSG_ERROR, _NLMSG_DONE, _RTM_NEWADDR, _RTM_GETADDR = 2, 3, 20, 22
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_IFA_ADDRESS, _IFA_LOCAL = 1, 2
_HEADER: Final = struct.Struct("=LHHLL")  # nlmsghdr: length, type, flags, sequence, port
_IFADDR: Final = struct.Struct("=BBBBL")  # ifaddrmsg: family, prefix length, flags, scope, interface index
_ATTRIBUTE: Final = struct.Struct("=HH")  # rtattr: length, type


def netlink_addresses() -> dict[str, list[str]]:
    """IPv4 and IPv6 addresses per interface, in the kernel's order, asked of rtnetlink (an
    RTM_GETADDR dump): what psutil.net_if_addrs lists, without loading psutil into the agent.
    An address is named by its interface, an IPv4 alias (eth0:1) by the interface it is on.
    OSError when rtnetlink cannot be asked; psutil_addresses is then the way."""
    found: dict[str, list[str]] = {}
    names: dict[int, str] = {}
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock:
        sock.settimeout(2.0)
        sock.bind((0, 0))
        request = _IFADDR.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
        sock.send(_HEADER.pack(_HEADER.size + len(request), _RTM_GETADDR, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0) + request)
        while True:
            data = sock.recv(1 << 16)
            at = 0
            while at + _HEADER.size <= len(data):
                length, kind, _, _, _ = _HEADER.unpack_from(data, at)
                if length < _HEADER.size:
                    raise OSError("a malformed rtnetlink message")
                if kind == _NLMSG_DONE:
                    return found
                if kind == _NLMSG_ERROR:
                    raise OSError("rtnetlink refused the address dump")
                if kind == _RTM_NEWADDR:
                    _address(data, at, length, found, names)
                at += (length + 3) & ~3
            if not data:
                raise OSError("rtnetlink ended the dump early")


def _address(data: bytes, at: int, length: int, found: dict[str, list[str]], names: dict[int, str]) -> None:
    family, _, _, _, index = _IFADDR.unpack_from(data, at + _HEADER.size)
    if family not in (socket.AF_INET, socket.AF_INET6):
        return
    attributes: dict[int, bytes] = {}
    cursor, end = at + _HEADER.size + _IFADDR.size, at + length
    while cursor + _ATTRIBUTE.size <= end:
        size, kind = _ATTRIBUTE.unpack_from(data, cursor)
        if size < _ATTRIBUTE.size:
            break
        attributes[kind] = data[cursor + _ATTRIBUTE.size:cursor + size]
        cursor += (size + 3) & ~3
    # On a point-to-point link IFA_ADDRESS is the peer's; IFA_LOCAL, where given, is this host's.
    raw = attributes.get(_IFA_LOCAL) or attributes.get(_IFA_ADDRESS)
    if raw is None:
        return
    name = names.get(index)
    if name is None:
        try:
            name = names[index] = socket.if_indextoname(index)
        except OSError:
            return  # gone meanwhile
    found.setdefault(name, []).append(socket.inet_ntop(family, raw))


def host_addresses() -> dict[str, list[str]]:
    """This host's addresses: rtnetlink's, else psutil's."""
    try:
        return netlink_addresses()
    except (OSError, AttributeError) as exc:  # AttributeError: no AF_NETLINK (not Linux)
        log.debug("no rtnetlink address dump (%s); asking psutil", exc)
        return psutil_addresses()


def _int(text: str | None, base: int = 10) -> int | None:
    try:
        return int(text, base) if text else None
    except ValueError:
        return None


class AddressWatch:
    """Whether this host's interfaces or addresses may have changed since the last look.

    Listens to the kernel's rtnetlink link and address notifications: one non-blocking recv
    per sample instead of listing every address (a dump costs ~100 us here).
    Where netlink is unavailable every look answers "changed".
    """

    _GROUPS: Final = 0x1 | 0x10 | 0x100  # RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_NONBLOCK, socket.NETLINK_ROUTE)
        except (OSError, AttributeError) as exc:
            log.debug("no rtnetlink (%s); addresses are listed every sample", exc)
            return
        try:
            sock.bind((0, self._GROUPS))
        except OSError as exc:
            log.debug("cannot join rtnetlink groups (%s); addresses are listed every sample", exc)
            sock.close()
            return
        self._sock = sock

    @property
    def active(self) -> bool:
        return self._sock is not None

    def changed(self) -> bool:
        sock = self._sock
        if sock is None:
            return True
        changed = False
        while True:
            try:
                sock.recv(65536)
            except BlockingIOError:
                return changed
            except OSError:
                return True  # ENOBUFS: notifications overflowed, so something did change
            changed = True

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


@dataclass(slots=True)
class _Link:
    """The slow-changing sysfs facts of one adapter, as last read."""

    state: str | None
    mac: str | None
    mtu: int | None
    speed: int | None
    read_at: float


class NetworkCollector:
    """Adapters with counters (every sample), state (every sample) and link facts (cached).

    MAC, MTU and speed are re-read when the adapter is new, when its operstate differs from
    the last sample (a renegotiated link goes down and up) and at least every `link_refresh`
    seconds; at a file open per fact per adapter, reading them every sample would be most of
    the sample's cost on a host with a few adapters. With the default address provider the
    addresses are listed again only when rtnetlink reports a change (and at least every
    `link_refresh` seconds); an injected provider is called every sample.
    """

    name = "network"

    def __init__(self, proc_root: str = "/proc", sys_root: str = "/sys",
                 addresses: AddressProvider | None = None, link_refresh: float = 60.0) -> None:
        self._dev = ProcFile(os.path.join(proc_root, "net", "dev"))
        self._class_net = os.path.join(sys_root, "class", "net")
        self._addresses = addresses or host_addresses
        # Only the host's own view is of this very host, so only then can the kernel tell us of changes.
        self._watch = AddressWatch() if addresses is None else None
        self._known: dict[str, list[str]] | None = None
        self._known_at = 0.0
        self._link_refresh = link_refresh
        self._links: dict[str, _Link] = {}

    def collect(self) -> tuple[NetworkAdapter, ...]:
        lines = self._dev.read().splitlines()[2:]  # two header lines
        now = time.monotonic()
        addresses = self._current_addresses(now)
        adapters: list[NetworkAdapter] = []
        for line in lines:
            name, sep, rest = line.partition(":")
            fields = rest.split()
            name = name.strip()
            try:
                if not sep or not name or len(fields) < 16:
                    raise ValueError
                counters = (int(fields[0]), int(fields[1]), int(fields[8]), int(fields[9]))
            except ValueError:
                log.warning("skipping malformed %s line: %r", self._dev.path, line)
                continue
            adapters.append(self._adapter(name, counters, addresses.get(name, ()), now))
        if len(self._links) > len(adapters):
            # Forget adapters that went away, so a new one of the same name starts afresh.
            names = {a.name for a in adapters}
            self._links = {name: link for name, link in self._links.items() if name in names}
        adapters.sort(key=lambda a: a.name)
        return tuple(adapters)

    def _current_addresses(self, now: float) -> dict[str, list[str]]:
        watch = self._watch
        if (watch is not None and self._known is not None and not watch.changed()
                and now - self._known_at < self._link_refresh):
            return self._known
        try:
            addresses = self._addresses()
        except Exception as exc:  # noqa: BLE001 - counters and link facts are still worth sending
            log.warning("cannot list interface addresses: %s: %s", type(exc).__name__, exc)
            self._known = None
            return {}
        self._known, self._known_at = addresses, now
        return addresses

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
        self._dev.close()

    def _adapter(self, name: str, counters: tuple[int, int, int, int], addresses: list[str] | tuple[()],
                 now: float) -> NetworkAdapter:
        # Plain concatenation: os.path.join is a measurable share of a sample at several files per adapter.
        base = f"{self._class_net}/{name}/"
        state = read_attr(base + "operstate")
        link = self._links.get(name)
        if link is None or link.state != state or now - link.read_at >= self._link_refresh:
            mac = read_attr(base + "address")
            speed = _int(read_attr(base + "speed"))  # EINVAL for virtual devices -> None
            link = self._links[name] = _Link(
                state=state,
                mac=None if mac is None or mac in _NO_MAC else mac,
                mtu=_int(read_attr(base + "mtu")),
                speed=None if speed is None or speed in _SPEED_UNKNOWN or speed < 0 else speed,
                read_at=now,
            )
        if state == "unknown":
            # Loopback and many virtual devices never report an operstate; IFF_UP is the best word.
            up = bool((_int(read_attr(base + "flags"), 16) or 0) & IFF_UP)
        else:
            up = state == "up"
        return NetworkAdapter(
            name=name,
            mac=link.mac,
            addresses=tuple(addresses),
            mtu=link.mtu,
            speed_mbps=link.speed,
            up=up,
            bytes_in=counters[0],
            packets_in=counters[1],
            bytes_out=counters[2],
            packets_out=counters[3],
            operstate=state,
        )
