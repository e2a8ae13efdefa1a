"""The accounts of Slurm's own daemons (`scontrol show config`'s SlurmUser, SlurmdUser), which no
job's owner is submitted as: a review had a portal's token file a job for owner `slurm` (Debian's
SlurmUser, uid 64030, within run_as_owner's uids then), which ran as Slurm's operator account and
cancelled another user's job."""

from __future__ import annotations

import pwd

import pytest

from infosvc.lrms.slurm_settings import parse_settings
from infosvc_agents.accounts import AccountError, AccountPolicy

#: lines of a real `scontrol show config` (Slurm 22.05, Debian's packages)
SHOWN = """Configuration data as of 2026-11-28T03:50:12
AccountingStorageBackupHost = (null)
SlurmctldTimeout        = 120 sec
SlurmUser               = slurm(64030)
SlurmdUser              = root(0)
PrivateData             = jobs,usage,users
SlurmdTimeout           = 300 sec
"""


def test_the_daemons_accounts_and_what_slurm_keeps_private_are_read_from_scontrol() -> None:
    shown = parse_settings(SHOWN)
    assert shown.daemons == {"slurm", "root"} and shown.private == {"jobs", "usage", "users"} and shown.private_jobs
    assert shown.daemon_uids == {64030, 0}
    assert parse_settings("SlurmUser=munge-slurm(990)\n").daemons == {"munge-slurm"}
    bare = parse_settings("Configuration data as of ...\nPrivateData             = none\n")
    assert bare.daemons == frozenset() and bare.private == frozenset() and not bare.private_jobs
    assert parse_settings("PrivateData = All\n").private_jobs


def test_an_owner_named_as_a_daemon_s_account_is_submitted_as_the_pool_s() -> None:
    try:
        pwd.getpwnam("slurm")
    except KeyError:
        pytest.skip("no local account slurm here")
    # uids wide enough to take slurm's 64030 for an owner's own: the daemons' names keep it out
    policy = AccountPolicy("nobody", own_accounts=True, max_uid=64999, never=parse_settings(SHOWN).daemons)
    assert policy.resolve("slurm").name == "nobody"
    with pytest.raises(AccountError, match="runs no task"):
        AccountPolicy(mapping={"alice": "slurm"}, never=parse_settings(SHOWN).daemons).resolve("alice")
