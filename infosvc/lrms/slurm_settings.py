"""What the job routes must know of Slurm's own configuration (`scontrol show config`), read once:

- the accounts Slurm's daemons run as (SlurmUser, SlurmdUser): no job's owner is submitted as one
  of them, whatever the site's account policy says. Slurm takes a job of SlurmUser's uid for an
  operator's (it may cancel any job, change any), and that account owns the controller's state;
  where the packages give it a uid in the owners' range (an admin's own `useradd slurm`), the uid
  bounds alone would not keep an owner named `slurm` out of it;
- what Slurm keeps private (PrivateData: jobs, users, ...): the server reads squeue and scontrol as
  root, which Slurm's privacy does not filter, so the routes filter as Slurm would for each caller."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from infosvc.config import LrmsConfig
from infosvc.lrms.slurm_commands import run

#: `SlurmUser               = slurm(64030)`: the key, the name, and the uid
_USER: Final = re.compile(r"(SlurmUser|SlurmdUser)\s*=\s*([^\s(]+)(?:\((\d+)\))?")
#: `PrivateData             = jobs,usage,users`
_PRIVATE: Final = re.compile(r"PrivateData\s*=\s*(\S+)")


@dataclass(frozen=True, slots=True)
class SlurmSettings:
    #: the names of SlurmUser and SlurmdUser, and their uids (an alias of another name has the uid)
    daemons: frozenset[str] = frozenset()
    daemon_uids: frozenset[int] = frozenset()
    #: PrivateData's words, lower case (none: `none`, or not said)
    private: frozenset[str] = frozenset()

    @property
    def private_jobs(self) -> bool:
        """Whether Slurm shows a user only that user's jobs (PrivateData=jobs, or all)."""
        return bool(self.private & {"jobs", "all"})


def slurm_settings(config: LrmsConfig) -> SlurmSettings:
    """Slurm's settings that matter here (blocking: one scontrol; SlurmUnavailable when it fails)."""
    return parse_settings(run(config, "scontrol", "show", "config").stdout)


def parse_settings(text: str) -> SlurmSettings:
    """What `scontrol show config` says of SlurmUser, SlurmdUser and PrivateData."""
    daemons, uids, private = set(), set(), set()
    for line in text.splitlines():
        line = line.strip()
        if found := _USER.match(line):
            daemons.add(found.group(2))
            if found.group(3):
                uids.add(int(found.group(3)))
        elif found := _PRIVATE.match(line):
            private |= {word.lower() for word in found.group(1).split(",") if word and word.lower() != "none"}
    return SlurmSettings(frozenset(daemons), frozenset(uids), frozenset(private))
