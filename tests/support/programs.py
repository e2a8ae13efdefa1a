"""Outside programs the tests run (slapd, Slurm, munge ...): found on PATH or in the sbin folders a
user's PATH may lack; a test without one skips with the packages to install, unless under CI
(`CI` set), where .ci/run installs them and a missing one is a failure."""

from __future__ import annotations

import os
import shutil

import pytest


def find(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH", "") + os.pathsep + "/usr/sbin" + os.pathsep + "/usr/bin")


def binary(name: str, packages: str) -> str:
    """The installed program `name` (from the Debian `packages`); without it a test skips, or fails under CI."""
    path = find(name)
    if path is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{name} not found under CI: .ci/run installs the Debian packages {packages}")
        pytest.skip(f"{name} not installed (apt-get install {packages}); CI is not set, so skipped")
    return path
