"""The site config's `[lrms]` table: which batch system runs the site's jobs. `type = ""` (the
default) is the service's own queue and executors; `type = "slurm"` makes the service read a Slurm
cluster (its nodes as hosts, its partitions as computing elements: infosvc/lrms/) through Slurm's
commands, found in `bin_dir` and pointed at `slurm_conf`.

`[lrms.accounts]` maps Slurm accounts to the VOs they are published under (a CE's per-VO views).
Which CE a partition is published as: a `[[computing_elements]]` entry whose `queue` is the
partition's name takes it (its id, name, host, access rules from the config; its state and
figures from Slurm); a partition no entry names is a CE of its own, its id and queue the
partition's name. Read by infosvc/config/site.py through the typed table reader
(infosvc/config/table.py), so unknown keys and wrong types name the key.
"""

from __future__ import annotations

import pwd
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Mapping

from infosvc.config.table import DAY_SECONDS, ConfigError, Setting, TomlTable
from infosvc_agents.accounts import AccountError, read_map

LRMS_TYPES: Final = ("", "slurm")
#: a Slurm account's, or a VO's, name: what sacctmgr and VOMS accept, without spaces or separators
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _absolute_or_empty(value: str) -> None:
    if value and not Path(value).is_absolute():
        raise ValueError(f"an absolute path, or \"\" for none, got {value!r}")


def _http_url_or_empty(value: str) -> None:
    if value and not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", value):
        raise ValueError(f"an http(s) URL, or \"\" for none, got {value!r}")


#: The plain keys of `[lrms]`, as infosvc.config.site's SETTINGS declares the other tables'.
SETTINGS: Final = (
    Setting("type", "", "the batch system: \"\" the service's own queue and executors, \"slurm\" a Slurm cluster "
            "read (and fed) through its commands", choices=LRMS_TYPES),
    Setting("bin_dir", "", "the directory of sinfo, squeue, scontrol, sbatch and scancel (\"\": found on PATH)",
            check=_absolute_or_empty),
    Setting("slurm_conf", "", "the slurm.conf the commands read, passed as SLURM_CONF (\"\": Slurm's default)",
            check=_absolute_or_empty),
    Setting("interval_seconds", 30.0, "how often the cluster is read (the longest the published state lags "
            "behind is this plus one read's time)", maximum=DAY_SECONDS),
    Setting("timeout_seconds", 20.0, "the time one Slurm command may take; past it that read fails and the last "
            "good state stays published, marked stale", maximum=DAY_SECONDS),
    Setting("run_as", "", "the pool account sbatch runs as for an owner with no account of its own here (\"\": none)"),
    Setting("run_as_owner", False, "submit as the owner's own account of the same name where its uid is from "
            "min_uid to max_uid"),
    Setting("min_uid", 1000, "the least uid an owner's own account may have with run_as_owner", minimum=1),
    Setting("max_uid", 59999, "the greatest uid an owner's own account may have with run_as_owner (above it: "
            "packages' fixed uids, Slurm's own account among them, and nobody)", minimum=1),
    Setting("run_as_map", "", "a file of `OWNER ACCOUNT` lines: the account each owner submits as (\"\": none)",
            check=_absolute_or_empty),
    Setting("restd_url", "", "slurmrestd's base URL (not yet used: the commands are)", check=_http_url_or_empty),
    Setting("restd_token_file", "", "a file holding slurmrestd's token (not yet used)", check=_absolute_or_empty),
)


def _default(key: str) -> str | float:
    return next(s.default for s in SETTINGS if s.key == key)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class LrmsConfig:
    type: str = str(_default("type"))
    bin_dir: str = str(_default("bin_dir"))
    slurm_conf: str = str(_default("slurm_conf"))
    interval_seconds: float = float(_default("interval_seconds"))
    timeout_seconds: float = float(_default("timeout_seconds"))
    run_as: str = str(_default("run_as"))
    run_as_owner: bool = bool(_default("run_as_owner"))
    min_uid: int = int(_default("min_uid"))
    max_uid: int = int(_default("max_uid"))
    run_as_map: str = str(_default("run_as_map"))
    restd_url: str = str(_default("restd_url"))
    restd_token_file: str = str(_default("restd_token_file"))
    #: Slurm account -> the VO its jobs are published under
    accounts: Mapping[str, str] = field(default_factory=dict)

    @property
    def slurm(self) -> bool:
        return self.type == "slurm"

    def vo_of(self, account: str) -> str | None:
        """The VO the site maps `account` to; None: the account is in no VO's view."""
        return self.accounts.get(account)


def parse_lrms(top: TomlTable) -> LrmsConfig:
    """`[lrms]` of the config, read from the top-level table."""
    t = top.table("lrms")
    accounts = t.table("accounts")
    mapping: dict[str, str] = {}
    for account, vo in accounts.data.items():
        if not _NAME.fullmatch(account):
            raise ConfigError(f"{accounts.where}: {account!r} is no Slurm account name (letters, digits, . _ -)")
        if not isinstance(vo, str) or not _NAME.fullmatch(vo):
            raise ConfigError(f"{accounts.where}.{account}: a VO name (letters, digits, . _ -), got {vo!r}")
        mapping[account] = vo
    accounts.data.clear()
    config = LrmsConfig(**t.settings(SETTINGS), accounts=mapping)
    if config.min_uid > config.max_uid:
        raise ConfigError(f"{t.where}: min_uid {config.min_uid} is above max_uid {config.max_uid}: no owner would "
                          "have an account of its own")
    return config


def owner_map(config: LrmsConfig) -> dict[str, str]:
    """The `run_as_map` file of a Slurm site read (OWNER -> ACCOUNT; {} without one): ConfigError
    naming the key, the file and its line where it cannot be read or a line is not two words."""
    if not (config.slurm and config.run_as_map):
        return {}
    try:
        return read_map(config.run_as_map)
    except OSError as exc:
        raise ConfigError(f"lrms.run_as_map: cannot read {config.run_as_map}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"lrms.run_as_map: {config.run_as_map} is not UTF-8 text") from None
    except AccountError as exc:
        raise ConfigError(f"lrms.run_as_map: {exc}") from None
    except ValueError as exc:  # a NUL in the path
        raise ConfigError(f"lrms.run_as_map: cannot read {config.run_as_map!r}: {exc}") from None


def check_lrms_host(config: LrmsConfig) -> None:
    """What a Slurm site's `[lrms]` asks of this host, which parse_config (the TOML alone) cannot
    see: the run_as_map readable and well formed, the run_as pool account one that exists. Called
    by load_config, so check-config refuses what serve would stop on."""
    owner_map(config)
    if config.slurm and config.run_as:
        try:
            found = pwd.getpwnam(config.run_as).pw_name == config.run_as  # exactly: see infosvc_agents.accounts
        except (KeyError, ValueError):  # ValueError: a NUL in the name
            found = False
        if not found:
            raise ConfigError(f"lrms.run_as: no account {config.run_as!r} on this host")
