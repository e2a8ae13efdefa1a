"""The accounts Slurm's own daemons run as (SlurmUser, SlurmdUser of `scontrol show config`): no
job's owner is submitted as one of them, whatever the site's account policy says. Slurm takes a
job of SlurmUser's uid for an operator's (it may cancel any job, change any), and that account owns
the controller's state; where the packages give it a uid in the owners' range (an admin's own
`useradd slurm`), the uid bounds alone would not keep an owner named `slurm` out of it."""

from __future__ import annotations

import re
from typing import Final

from infosvc.config import LrmsConfig
from infosvc.lrms.slurm_commands import run

#: `SlurmUser               = slurm(64030)`: the key, and the name before the uid
_LINE: Final = re.compile(r"(SlurmUser|SlurmdUser)\s*=\s*([^\s(]+)")


def daemon_accounts(config: LrmsConfig) -> frozenset[str]:
    """The names of SlurmUser and SlurmdUser (blocking: one scontrol; SlurmUnavailable when it fails)."""
    return parse_daemon_accounts(run(config, "scontrol", "show", "config").stdout)


def parse_daemon_accounts(text: str) -> frozenset[str]:
    """What `scontrol show config` names SlurmUser and SlurmdUser."""
    return frozenset(found.group(2) for line in text.splitlines() if (found := _LINE.match(line.strip())))
