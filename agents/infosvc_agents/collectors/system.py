"""System: kernel (uname, and the NIS domain name uname also gives) and operating system release
(os-release), read once at construction. The architecture is the root's: uname's for this
machine's /proc, else (a tree read through --proc-root) what that tree's kernel or cpuinfo says."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Callable

from infosvc_agents.collectors._files import is_live_root, read_attr, read_text
from infosvc_agents.collectors.processors import root_machine

log = logging.getLogger("infosvc_agents.collectors.system")


@dataclass(frozen=True, slots=True)
class SystemInfo:
    sysname: str
    kernel_release: str
    kernel_version: str
    machine: str | None  # None: a --proc-root tree whose kernel and cpuinfo name no architecture
    os_name: str | None
    os_release: str | None
    os_version: str | None
    hostname: str
    domainname: str | None = None  # uname's NIS domain name, "(none)" when unset; None when unreadable
    release_fields: dict[str, str] = field(default_factory=dict)  # os-release's KEY=value pairs, all of them


def parse_os_release(text: str) -> dict[str, str]:
    """os-release KEY=value lines; values may be single- or double-quoted with backslash escapes."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.isidentifier():
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            quote, value = value[0], value[1:-1]
            if quote == '"':
                out: list[str] = []
                chars = iter(value)
                for ch in chars:
                    out.append(next(chars, "") if ch == "\\" else ch)
                value = "".join(out)
        values[key] = value
    return values


class SystemCollector:
    name = "system"

    def __init__(self, etc_root: str = "/etc", uname: Callable[[], os.uname_result] = os.uname,
                 proc_root: str = "/proc") -> None:
        u = uname()
        release = self._os_release(etc_root)
        self.info = SystemInfo(
            sysname=u.sysname,
            kernel_release=u.release,
            kernel_version=u.version,
            machine=u.machine if is_live_root(proc_root) else root_machine(proc_root),
            os_name=release.get("NAME") or None,
            os_release=release.get("VERSION_ID") or None,
            os_version=release.get("VERSION_CODENAME") or release.get("VERSION") or None,
            hostname=u.nodename,
            # os.uname() leaves the domain name out; the kernel has the same string here.
            domainname=read_attr(os.path.join(proc_root, "sys", "kernel", "domainname")),
            release_fields=release,
        )

    @staticmethod
    def _os_release(etc_root: str) -> dict[str, str]:
        # The spec's fallback is /usr/lib/os-release; taken relative to etc_root's parent
        # so that a fixture tree (<root>/etc, <root>/usr/lib) behaves like a real one.
        usr_lib = os.path.join(os.path.dirname(os.path.normpath(etc_root)), "usr", "lib", "os-release")
        for path in (os.path.join(etc_root, "os-release"), usr_lib):
            try:
                return parse_os_release(read_text(path))
            except OSError:
                continue
        log.warning("no os-release in %s or %s; operating system name unknown", etc_root, usr_lib)
        return {}

    def collect(self) -> SystemInfo:
        return self.info
