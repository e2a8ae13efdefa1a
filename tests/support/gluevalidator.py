"""EGI's glue-validator (vendored in tests/peers/glue_validator, its README says from where) run on
an LDIF file as BDII operators run it, and its findings read back.

Run as `glue-validator -f FILE -g GLUE -s SUITE -v 3`, it prints a summary line, `OK - errors 0,
warnings 0, info 0 | ...` (WARNING or CRITICAL when there are some), then one block per finding,
errors first, then warnings, then infos:

    AssertionError: False is not true : WARNING START:
    W034 Description: Mandatory attribute not present
    W034 Affected DN: GlueSubClusterUniqueID=compute-91f7ac2d41
                      GlueClusterUniqueID=compute
                      mds-vo-name=resource
                      o=grid
    W034 Affected attribute: GlueSubClusterPhysicalCPUs
    W034 Published value: NA
    W034 Additional information: ...            (some findings only)

The first block of each of its unittest checks carries unittest's prefix; the DN is split at every
comma (escaped ones too) onto lines of their own, so it is joined back with commas; a block may
lack any of the coded lines. It exits 0 clean, 1 with warnings, 2 with errors, 3 when it could
not judge (no file, no entries). A check that crashes inside the validator is not reported at
all (its traceback goes to a temporary file the validator reads only for START blocks): nothing
here can see that, which is why the tests also plant findings it must report.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from support import ROOT

HOME = ROOT / "tests" / "peers" / "glue_validator"
SCRIPT = HOME / "bin" / "glue-validator"

#: name -> the validator's (-g, -s): GLUE 1.3 and 2.0 by their general rules, and EGI's profile
SUITES: dict[str, tuple[str, str]] = {
    "glue1": ("glue1", "general"),
    "glue2": ("glue2", "general"),
    "egi": ("egi-glue2", "egi-profile"),
}
LEVELS = {"ERROR": "E", "WARNING": "W", "INFO": "I"}

_SUMMARY = re.compile(r"^(OK|WARNING|CRITICAL) - errors (\d+), warnings (\d+), info (\d+) \|")
_START = re.compile(r"\b(ERROR|WARNING|INFO) START:\s*$")
_LINE = re.compile(r"^([EWI]\d{3}) (Description|Affected DN|Affected attribute|Published value|"
                   r"Additional information):(?: (.*?))?\s*$")
_CONTINUED = re.compile(r"^ {2,}(\S.*?)\s*$")


@dataclass(frozen=True, slots=True)
class Finding:
    level: str  # E, W or I
    code: str  # W034, ...; "" when the block named none
    attribute: str | None
    dn: str | None
    description: str | None = None
    value: str | None = None


@dataclass(frozen=True, slots=True)
class Report:
    #: the summary line's counts, by level
    counts: dict[str, int]
    findings: tuple[Finding, ...]

    def of(self, level: str) -> list[Finding]:
        return [f for f in self.findings if f.level == level]


def parse(output: str) -> Report:
    """The summary and the findings of glue-validator's `-v 3` output; ValueError when there is
    no summary line or the blocks do not add up to it."""
    lines = output.splitlines()
    summary = next((m for m in map(_SUMMARY.match, lines) if m), None)
    if summary is None:
        raise ValueError(f"no summary line in glue-validator's output:\n{output[:2000]}")
    counts = dict(zip("EWI", map(int, summary.groups()[1:])))
    findings: list[Finding] = []
    block: dict[str, str] | None = None
    last = ""

    def close() -> None:
        if block is not None:
            findings.append(Finding(block["level"], block.get("code", ""), block.get("Affected attribute"),
                                    block.get("Affected DN"), block.get("Description"), block.get("Published value")))

    for line in lines:
        start = _START.search(line)
        if start:
            close()
            block, last = {"level": LEVELS[start.group(1)]}, ""
            continue
        if block is None:
            continue
        coded = _LINE.match(line)
        continued = _CONTINUED.match(line)
        if coded:
            code, last, text = coded.group(1), coded.group(2), coded.group(3) or ""
            block.setdefault("code", code)
            block[last] = text
        elif continued and last == "Affected DN":
            block[last] += "," + continued.group(1)
        elif not line.strip():
            close()
            block = None
    close()
    found = {level: sum(f.level == level for f in findings) for level in "EWI"}
    if found != counts:
        raise ValueError(f"glue-validator counted {counts}, its blocks {found}:\n{output[:4000]}")
    mismatched = [f for f in findings if f.code and f.code[0] != f.level]
    if mismatched:
        raise ValueError(f"a finding's code is not of its level: {mismatched}")
    return Report(counts, tuple(findings))


def run(suite: str, ldif: Path, timeout: float = 120) -> Report:
    """glue-validator's `suite` (a key of SUITES) on the LDIF file, in file mode, as a subprocess."""
    glue, tests = SUITES[suite]
    env = {**os.environ, "PYTHONPATH": str(HOME)}
    done = subprocess.run([sys.executable, str(SCRIPT), "-g", glue, "-s", tests, "-f", str(ldif), "-v", "3"],
                          capture_output=True, text=True, env=env, timeout=timeout, cwd=HOME)
    if done.returncode not in (0, 1, 2):
        raise RuntimeError(f"glue-validator {glue}/{tests} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    report = parse(done.stdout)
    expected = 2 if report.counts["E"] else 1 if report.counts["W"] else 0
    if done.returncode != expected:
        raise RuntimeError(f"glue-validator exited {done.returncode} for {report.counts}:\n{done.stderr}")
    return report
