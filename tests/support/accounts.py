"""Local accounts the tests make for owners that run as an account of their own (uid >= 1000,
useradd's UID_MIN): made where missing, removed after; a test skips, saying why, where one cannot
be made (no useradd, not root)."""

from __future__ import annotations

import pwd
import subprocess
from contextlib import contextmanager
from typing import Iterator

import pytest


@contextmanager
def local_account(name: str) -> Iterator[pwd.struct_passwd]:
    try:
        existing = pwd.getpwnam(name)  # left by another run: kept, since this run did not make it
    except KeyError:
        pass
    else:
        yield existing
        return
    try:
        made = subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
                               "/usr/sbin/nologin", "--key", "UID_MIN=1000", name],
                              capture_output=True, text=True, timeout=60)
    except OSError as exc:
        pytest.skip(f"cannot make the local account {name}: {exc}")
    if made.returncode != 0:
        pytest.skip(f"cannot make the local account {name}: useradd: {made.stderr.strip()}")
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=60, check=True)
