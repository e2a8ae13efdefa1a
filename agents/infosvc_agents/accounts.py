"""Which local account runs a job owner's tasks on this host (`infosvc-agent --run-jobs`).

As batch systems do, the host decides, not the document: the job's owner is the USER its submit
token is bound to (the aggregator enforces that), and this host maps it to an account:

1. the site's map (`--run-as-map FILE`: `OWNER ACCOUNT` a line), which may name any account but root;
2. the owner's own account of the same name (`--run-as-owner`), where it exists and its uid is
   from `--min-uid` (1000: system accounts such as daemon or bin are never an owner's own) to
   `--max-uid` (59999: Debian's fixed uids of packages' accounts are 60000-64999, Slurm's `slurm`
   64030 among them, and `nobody` is 65534), or past 65535 (a directory's users: sssd, FreeIPA);
3. the default pool account (`--run-as USER`), for every other owner;
else the task is refused with a reason. Root, uid 0 or an account whose primary group is root, is
never an answer, whichever rule names it; nor are the accounts of `never` (the batch system's
daemons' own, SlurmUser: Slurm takes a job of that uid for an operator's). An agent not running as root runs every task as itself:
it cannot switch, so it accepts no other account.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Account", "AccountError", "AccountPolicy", "read_map"]

#: The last uid of the block above UID_MAX that packages and the system take (Debian: 60000-64999
#: fixed uids, 65000-65533 dynamic, 65534 nobody); uids past it are users' again (directories')
SYSTEM_BLOCK_END = 65535


class AccountError(ValueError):
    """The policy cannot run a task, or the policy itself is wrong; the message says why."""


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    uid: int
    gid: int
    home: str

    @classmethod
    def of(cls, entry: pwd.struct_passwd) -> Account:
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def _lookup(name: str) -> Account | None:
    """The account of exactly this name: an NSS that finds names without regard to case (sssd,
    winbind) answers `ALICE` with alice's entry, which is not the account of an owner `ALICE`."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return Account.of(entry) if entry.pw_name == name else None


def _unprivileged(account: Account, what: str) -> Account:
    if account.uid == 0 or account.gid == 0:
        raise AccountError(f"{what} {account.name} is root or in the root group: tasks never run as root")
    try:
        supplementary = os.getgrouplist(account.name, account.gid)
    except OSError:
        supplementary = []
    if 0 in supplementary:
        raise AccountError(f"{what} {account.name} is in the root group: tasks never run as root or with its group")
    return account


def read_map(path: str | Path) -> dict[str, str]:
    """`OWNER ACCOUNT` a line; '#' comments and blank lines skipped. Errors name the line, not secrets."""
    mapping: dict[str, str] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        fields = text.split()
        if len(fields) != 2:
            raise AccountError(f"{path}:{number}: want OWNER ACCOUNT, found {len(fields)} fields")
        if fields[0] in mapping:
            raise AccountError(f"{path}:{number}: owner {fields[0]} is mapped twice")
        mapping[fields[0]] = fields[1]
    return mapping


@dataclass(slots=True)
class AccountPolicy:
    default: str | None = None
    own_accounts: bool = False
    mapping: dict[str, str] = field(default_factory=dict)
    min_uid: int = 1000
    max_uid: int = 59999
    #: accounts that run no task whichever rule names them, by name or uid: the batch system's daemons'
    never: frozenset[str] = frozenset()
    never_uids: frozenset[int] = frozenset()

    def check(self) -> None:
        """At start: every account the policy names exists and is not root; an agent that is not
        root names none but itself."""
        if os.geteuid() != 0:
            me = pwd.getpwuid(os.geteuid()).pw_name
            others = {name for name in [self.default, *self.mapping.values()] if name and name != me}
            if others or self.own_accounts:
                raise AccountError(f"the agent runs as {me}, not root: it can run tasks only as itself")
            return
        if self.default is None and not self.mapping and not self.own_accounts:
            raise AccountError("--run-jobs as root needs --run-as USER, --run-as-owner or --run-as-map: "
                               "tasks never run as root")
        for name in [self.default, *self.mapping.values()]:
            if name is None:
                continue
            account = _lookup(name)
            if account is None:
                raise AccountError(f"no local account {name}")
            self._allowed(_unprivileged(account, "account"), "account")

    def resolve(self, owner: str | None) -> Account | None:
        """The account for `owner`'s tasks; None where the agent is not root (tasks run as the agent)."""
        if os.geteuid() != 0:
            return None
        if owner and owner in self.mapping:
            account = _lookup(self.mapping[owner])
            if account is None:
                raise AccountError(f"owner {owner} is mapped to {self.mapping[owner]}, which does not exist here")
            return self._allowed(_unprivileged(account, f"owner {owner}'s account"), f"owner {owner}'s account")
        if owner and self.own_accounts:
            account = _lookup(owner)
            if account is not None and self._owners_uid(account.uid) and account.gid != 0 and not self._never(account):
                return account
        if self.default is not None:
            account = _lookup(self.default)
            if account is None:
                raise AccountError(f"the default account {self.default} does not exist here")
            return self._allowed(_unprivileged(account, "the default account"), "the default account")
        raise AccountError(f"owner {owner or '(none)'} has no account on this host")

    def _owners_uid(self, uid: int) -> bool:
        """From min_uid to max_uid, or past 65535 (the uids directory services give users: sssd's and
        FreeIPA's ranges, Active Directory's mapped ones); between them, packages' fixed uids and nobody."""
        return self.min_uid <= uid and (uid <= self.max_uid or uid > SYSTEM_BLOCK_END)

    def _never(self, account: Account) -> bool:
        return account.name in self.never or account.uid in self.never_uids

    def _allowed(self, account: Account, what: str) -> Account:
        if self._never(account):
            raise AccountError(f"{what} {account.name} is the batch system's own and runs no task")
        return account
