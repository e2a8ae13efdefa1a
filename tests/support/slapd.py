"""Debian's slapd on a loopback port with a throwaway configuration, set up as a BDII sets up its
own (suffixes `o=grid` and `o=glue`, OpenLDAP's core and cosine schemas then the GLUE schemas
vendored in schemas/, mdb databases, no size limit), and the OpenLDAP clients a grid site uses on
it (ldapadd, ldapmodify, ldapsearch). For tests/publish/test_slapd.py and bench/ldif.py.

The binaries come from the Debian packages slapd and ldap-utils (.ci/run installs them); slapd is
in /usr/sbin, which a user's PATH may lack, so that is looked in too. Without them a test skips
locally and fails under CI (`binary`).
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from infosvc.codec import ldif
from support import ROOT, programs

SUFFIXES = ("o=grid", "o=glue")
PASSWORD = "throwaway"
SCHEMAS = ("glue1.3/Glue-CORE.schema", "glue1.3/Glue-MDS.schema", "glue1.3/Glue-CE.schema", "glue2/GLUE20.schema")
#: the attributes a BDII indexes that the grid clients' queries here use
INDEXES = ("objectClass eq,pres", "GlueCEUniqueID eq", "GlueCEStateStatus eq", "GlueClusterUniqueID eq",
           "GlueSubClusterUniqueID eq", "GLUE2GroupID eq", "GLUE2ServiceID eq", "GLUE2ResourceID eq",
           "GLUE2ExecutionEnvironmentMainMemorySize eq")


def binary(name: str) -> str:
    """The installed tool `name`; a test without it skips, unless under CI, where it fails."""
    return programs.binary(name, "slapd ldap-utils")


@contextmanager
def running(directory: Path) -> Iterator[Slapd]:
    """A started slapd with its files in `directory`, stopped at the end."""
    tools = {name: binary(name) for name in ("ldapadd", "ldapmodify", "ldapsearch")}
    server = Slapd(directory, binary("slapd"), tools=tools).start()
    try:
        yield server
    finally:
        server.stop()


def config_text(directory: Path) -> str:
    lines = ["include /etc/ldap/schema/core.schema", "include /etc/ldap/schema/cosine.schema"]
    lines += [f"include {ROOT / 'schemas' / name}" for name in SCHEMAS]
    lines += [f"pidfile {directory / 'slapd.pid'}", f"argsfile {directory / 'slapd.args'}",
              "modulepath /usr/lib/ldap", "moduleload back_mdb", "sizelimit unlimited", "timelimit 60"]
    for suffix in SUFFIXES:
        data = directory / suffix.replace("=", "-")
        data.mkdir(parents=True, exist_ok=True)
        lines += ["", "database mdb", f'suffix "{suffix}"', f'rootdn "{suffix}"', f"rootpw {PASSWORD}",
                  f"directory {data}", "maxsize 1073741824"]
        lines += [f"index {index}" for index in INDEXES]
    return "\n".join(lines) + "\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Slapd:
    directory: Path
    binary: str
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    tools: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"ldap://127.0.0.1:{self.port}/"

    def start(self) -> Slapd:
        self.directory.mkdir(parents=True, exist_ok=True)
        conf = self.directory / "slapd.conf"
        conf.write_text(config_text(self.directory))
        self.port = _free_port()
        log = open(self.directory / "slapd.log", "wb")
        # -d 0: stay in the foreground (no fork), log nothing beyond errors
        self.process = subprocess.Popen([self.binary, "-f", str(conf), "-h", self.url, "-d", "0"], stdout=log,
                                        stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"slapd exited: {(self.directory / 'slapd.log').read_text()[-2000:]}")
            done = subprocess.run([self.tools["ldapsearch"], "-x", "-H", self.url, "-b", "", "-s", "base"],
                                  capture_output=True)
            if done.returncode == 0:
                return self
            time.sleep(0.05)
        raise RuntimeError("slapd did not answer within 20 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def _write(self, tool: str, suffix: str, text: str, *extra: str) -> subprocess.CompletedProcess[bytes]:
        done = subprocess.run([self.tools[tool], "-x", "-H", self.url, "-D", suffix, "-w", PASSWORD, *extra],
                              input=text.encode(), capture_output=True, timeout=600)
        if done.returncode != 0:
            raise AssertionError(f"{tool} failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
        return done

    def add(self, text: str) -> None:
        """Each suffix's entries of `text`, added as bdii-update adds them: per suffix, as its rootdn."""
        for suffix, part in by_suffix(ldif.parse(text)).items():
            self._write("ldapadd", suffix, part)

    def modify(self, suffix: str, changes: str) -> None:
        if changes:
            self._write("ldapmodify", suffix, changes)

    def search(self, base: str, query: str, *attributes: str) -> dict[str, ldif.Attributes]:
        done = subprocess.run([self.tools["ldapsearch"], "-x", "-LLL", "-o", "ldif-wrap=no", "-H", self.url,
                               "-b", base, query, *attributes], capture_output=True, timeout=600)
        if done.returncode != 0:
            raise AssertionError(f"ldapsearch failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
        return ldif.parse(done.stdout.decode())


def suffix_of(dn: str) -> str:
    return next(s for s in SUFFIXES if dn.lower().endswith(s))


def by_suffix(entries: dict[str, ldif.Attributes]) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    for dn, attrs in entries.items():
        out.setdefault(suffix_of(dn), []).append(ldif.entry(dn, attrs))
    return {suffix: "".join(parts) for suffix, parts in out.items()}


_RDN_SPLIT = re.compile(r"(?<!\\),")
_ESCAPE = re.compile(r"\\([0-9A-Fa-f]{2}|.)")


def normal_dn(dn: str) -> str:
    """A DN as slapd and infosvc both mean it: types lower case, values unescaped (slapd writes
    `beta\\3D2` for `beta\\=2`, `Mds-Vo-name` for `mds-vo-name`)."""
    parts = []
    for rdn in _RDN_SPLIT.split(dn):
        kind, _, value = rdn.partition("=")
        value = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)) if len(m.group(1)) == 2 else m.group(1), value)
        parts.append(f"{kind.strip().lower()}={value}")
    return ",".join(parts)


def normal(entries: dict[str, ldif.Attributes]) -> dict[str, dict[str, list[str]]]:
    """Entries compared as LDAP compares them: DNs normalised, attribute names lower case, value sets."""
    out: dict[str, dict[str, list[str]]] = {}
    for dn, attrs in entries.items():
        found: dict[str, list[str]] = {}
        for name, value in attrs:
            found.setdefault(name.lower(), []).append(value)
        out[normal_dn(dn)] = {name: sorted(values) for name, values in found.items()}
    return out
