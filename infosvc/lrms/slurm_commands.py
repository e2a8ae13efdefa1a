"""Running one Slurm command (sinfo, squeue, scontrol, sbatch, scancel) for the service: the
program from `[lrms] bin_dir` (else PATH), SLURM_CONF from `[lrms] slurm_conf`, a time limit, no
shell, and arguments checked to be plain text, so nothing from a request can become an option or a
second command. A failure is one exception, `SlurmUnavailable`, whose message says what failed and
why in Slurm's own words (munge not running, slurmctld not answering, the time limit).

Blocking: callers on the event loop run it in a thread (asyncio.to_thread).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Mapping

from infosvc.config import LrmsConfig

#: the programs the service runs; no other name is accepted
PROGRAMS: Final = frozenset({"sinfo", "squeue", "scontrol", "sbatch", "scancel", "sacctmgr"})
#: the most of a command's stderr a message carries
_STDERR_CHARS: Final = 2000


class SlurmUnavailable(RuntimeError):
    """A Slurm command could not run or failed: the message names it and says why."""


@dataclass(frozen=True, slots=True)
class Ran:
    """One command's output and what it cost: its wall time, and the CPU time of the command's
    process itself (user + system), as the kernel accounted it to the children waited for
    meanwhile (exact when one command runs at a time, as the reader runs them)."""

    stdout: str
    wall_seconds: float
    cpu_seconds: float


def program(config: LrmsConfig, name: str) -> str:
    """The path of Slurm's `name` (one of PROGRAMS) under bin_dir, or on PATH."""
    if name not in PROGRAMS:
        raise ValueError(f"not a Slurm program the service runs: {name!r}")
    if config.bin_dir:
        path = Path(config.bin_dir) / name
        if not os.access(path, os.X_OK):
            raise SlurmUnavailable(f"{name}: not found as an executable in [lrms] bin_dir {config.bin_dir}")
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise SlurmUnavailable(f"{name}: not found on PATH (install Slurm's client commands, or set [lrms] bin_dir)")
    return found


def environment(config: LrmsConfig) -> dict[str, str]:
    env = dict(os.environ)
    if config.slurm_conf:
        env["SLURM_CONF"] = config.slurm_conf
    return env


def _check_argument(argument: str) -> None:
    if not isinstance(argument, str) or "\0" in argument or not argument.isprintable():
        raise ValueError(f"a Slurm command's argument must be printable text, got {argument!r}")


def run(config: LrmsConfig, name: str, *arguments: str, stdin: str | None = None,
        timeout: float | None = None, check: bool = True, env: Mapping[str, str | None] | None = None) -> Ran:
    """Slurm's `name` run with `arguments` (each one argv entry, never through a shell); its output
    when it exits 0 (or whatever its exit, without `check`), else SlurmUnavailable with its
    stderr. `timeout`: config.timeout_seconds; `env`: variables set beside SLURM_CONF (None: unset,
    so that the server's own environment cannot choose in its place)."""
    for argument in arguments:
        _check_argument(argument)
    argv = [program(config, name), *arguments]
    limit = config.timeout_seconds if timeout is None else timeout
    variables = environment(config)
    for key, value in (env or {}).items():
        if value is None:
            variables.pop(key, None)
        else:
            variables[key] = value
    started, before = time.monotonic(), os.times()
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=limit,
                              env=variables, errors="replace")
    except subprocess.TimeoutExpired:
        raise SlurmUnavailable(f"{name} did not finish within {limit:g} s ([lrms] timeout_seconds)") from None
    except OSError as exc:
        raise SlurmUnavailable(f"{name}: cannot run: {exc.strerror}") from None
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    if check and done.returncode != 0:
        said = " ".join(done.stderr.split())[-_STDERR_CHARS:] or "(nothing on stderr)"
        raise SlurmUnavailable(f"{name} failed (exit {done.returncode}): {said}")
    return Ran(done.stdout, time.monotonic() - started, cpu)


def run_json(config: LrmsConfig, name: str, *arguments: str, key: str | None = None) -> tuple[Any, Ran]:
    """`name --json ARGUMENTS` parsed: the whole document, or its `key` (a list Slurm must give);
    errors Slurm puts in the document's `errors` are a SlurmUnavailable too."""
    ran = run(config, name, "--json", *arguments)
    document = parse_json(name, ran.stdout)
    if key is None:
        return document, ran
    value = document.get(key)
    if not isinstance(value, list):
        raise SlurmUnavailable(f"{name} --json gave no list {key!r}: is this Slurm older than 21.08?")
    return value, ran


def parse_json(name: str, text: str) -> dict[str, Any]:
    """A Slurm command's --json output: a JSON object whose `errors` list is empty."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise SlurmUnavailable(f"{name} --json gave no JSON: {exc}") from None
    if not isinstance(document, dict):
        raise SlurmUnavailable(f"{name} --json gave no JSON object")
    errors = document.get("errors") or []
    if errors:
        said = "; ".join(str(e.get("description") or e.get("error") or e) if isinstance(e, dict) else str(e)
                         for e in errors[:5])
        raise SlurmUnavailable(f"{name} --json reported: {said}")
    return document


def diagnosis(config: LrmsConfig) -> str | None:
    """What `scontrol ping` says of the controller when it is not UP (a --json command whose only
    word is "Unspecified error" fails so when slurmctld does not answer); None when it is UP or
    cannot tell."""
    try:
        lines = run(config, "scontrol", "ping", check=False, timeout=min(config.timeout_seconds, 30.0)).stdout
    except SlurmUnavailable:
        return None
    said = next((" ".join(line.split()) for line in lines.splitlines() if line.strip()), "")  # not its banner
    return said if said and not said.endswith("is UP") else None


def key_values(line: str) -> dict[str, str]:
    """One record of `scontrol show ... -o` (KEY=VALUE separated by spaces) as a dict. A value may
    hold spaces only where it is the line's last key's (OS=, Reason=): a word without `=` is joined
    to the value before it."""
    found: dict[str, str] = {}
    last: str | None = None
    for word in line.split(" "):
        key, sep, value = word.partition("=")
        if sep and key and key.replace("_", "").replace(":", "").isalnum():
            found[key] = value
            last = key
        elif last is not None and word:
            found[last] += " " + word
    return found


def version(config: LrmsConfig) -> str:
    """The installed Slurm's version (`sinfo --version`: "slurm-wlm 22.05.8" -> "22.05.8")."""
    words = run(config, "sinfo", "--version").stdout.split()
    return words[-1] if words else ""

