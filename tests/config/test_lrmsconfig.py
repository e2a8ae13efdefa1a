"""The site config's `[lrms]` table: the batch system, Slurm's commands and the account-to-VO mapping."""

from __future__ import annotations

import os
import pwd
import tomllib
from pathlib import Path

import pytest

from infosvc.config.lrms import LrmsConfig
from infosvc.config.site import ConfigError, load_config, parse_config


def lrms_of(text: str) -> LrmsConfig:
    return parse_config(tomllib.loads(text)).lrms


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(tomllib.loads(text))
    return str(info.value)


def test_without_the_table_the_service_runs_its_own_queue() -> None:
    lrms = lrms_of("")
    assert lrms == LrmsConfig() and lrms.type == "" and not lrms.slurm
    assert lrms.interval_seconds == 30.0 and lrms.timeout_seconds == 20.0 and lrms.accounts == {}


def test_a_slurm_site() -> None:
    lrms = lrms_of('[lrms]\ntype = "slurm"\nbin_dir = "/opt/slurm/bin"\nslurm_conf = "/etc/slurm/slurm.conf"\n'
                   'interval_seconds = 5\ntimeout_seconds = 2.5\n[lrms.accounts]\natlas_prod = "atlas"\ncms = "cms"')
    assert lrms.slurm and lrms.bin_dir == "/opt/slurm/bin" and lrms.slurm_conf == "/etc/slurm/slurm.conf"
    assert lrms.interval_seconds == 5.0 and lrms.timeout_seconds == 2.5
    assert lrms.vo_of("atlas_prod") == "atlas" and lrms.vo_of("cms") == "cms" and lrms.vo_of("other") is None


@pytest.mark.parametrize("text, message", [
    ('[lrms]\ntype = "pbs"', "lrms.type: one of , slurm, got 'pbs'"),
    ('[lrms]\ntype = "slurm"\ninterval = 30', "lrms: unknown key(s): interval"),
    ('[lrms]\nbin_dir = "bin"', "lrms.bin_dir: an absolute path, or \"\" for none, got 'bin'"),
    ('[lrms]\nslurm_conf = "slurm.conf"', "lrms.slurm_conf: an absolute path, or \"\" for none, got 'slurm.conf'"),
    ('[lrms]\ninterval_seconds = 0', "lrms.interval_seconds: must be greater than 0, got 0"),
    ('[lrms]\ntimeout_seconds = -1', "lrms.timeout_seconds: must be greater than 0, got -1"),
    ('[lrms]\ntimeout_seconds = "5"', "lrms.timeout_seconds: expected a number, got '5'"),
    ('[lrms]\nrestd_url = "slurmrestd:6820"', "lrms.restd_url: an http(s) URL, or \"\" for none, got 'slurmrestd:6820'"),
    ('[lrms]\nrestd_token_file = "token"', "lrms.restd_token_file: an absolute path, or \"\" for none, got 'token'"),
    ('[lrms.accounts]\n"a b" = "atlas"', "lrms.accounts: 'a b' is no Slurm account name (letters, digits, . _ -)"),
    ('[lrms.accounts]\natlas = 3', "lrms.accounts.atlas: a VO name (letters, digits, . _ -), got 3"),
    ('[lrms.accounts]\natlas = "at las"', "lrms.accounts.atlas: a VO name (letters, digits, . _ -), got 'at las'"),
    ('lrms = 1', "lrms: expected a table"),
])
def test_bad_values_are_named(text: str, message: str) -> None:
    assert error_of(text) == message


def test_a_restd_url_is_accepted_though_not_yet_used() -> None:
    lrms = lrms_of('[lrms]\ntype = "slurm"\nrestd_url = "http://head:6820"\nrestd_token_file = "/etc/t"')
    assert lrms.restd_url == "http://head:6820" and lrms.restd_token_file == "/etc/t"


# --- what serve reads beside the TOML: checked by load_config, for check-config and serve alike ----

def load(tmp_path: Path, text: str) -> LrmsConfig:
    path = tmp_path / "site.toml"
    path.write_text(text)
    return load_config(path).lrms


def load_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "site.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: lrms.") and "\n" not in message, message
    return message


def test_a_run_as_map_serve_could_not_read_is_a_config_error(tmp_path: Path) -> None:
    """serve read the map only as it started: a missing file was a FileNotFoundError traceback, a
    line of three words an AccountError one, after check-config had passed the config."""
    slurm = '[lrms]\ntype = "slurm"\n'
    missing = tmp_path / "missing"
    assert f"lrms.run_as_map: cannot read {missing}: No such file or directory" in load_error(
        tmp_path, f'{slurm}run_as_map = "{missing}"\n')
    assert "cannot read" in load_error(tmp_path, f'{slurm}run_as_map = "{tmp_path}"\n')  # a directory
    bad = tmp_path / "map"
    bad.write_text("# owner account\nalice alice\nbob bob extra\n")
    assert load_error(tmp_path, f'{slurm}run_as_map = "{bad}"\n').endswith(
        f"lrms.run_as_map: {bad}:3: want OWNER ACCOUNT, found 3 fields")
    bad.write_text("alice alice\nalice bob\n")
    assert f"{bad}:2: owner alice is mapped twice" in load_error(tmp_path, f'{slurm}run_as_map = "{bad}"\n')
    bad.write_bytes(b"alice \xff\n")
    assert "not UTF-8" in load_error(tmp_path, f'{slurm}run_as_map = "{bad}"\n')
    good = tmp_path / "good"
    good.write_text("alice alice  # her own\n\n")
    assert load(tmp_path, f'{slurm}run_as_map = "{good}"\n').run_as_map == str(good)
    # the TOML alone says nothing of the host: parse_config reads no file (docs' example names one)
    assert lrms_of(f'{slurm}run_as_map = "{missing}"\n').run_as_map == str(missing)
    # nor does a site that runs its own queue read it
    assert load(tmp_path, f'[lrms]\nrun_as_map = "{missing}"\n').run_as_map == str(missing)


def test_a_pool_account_that_does_not_exist_is_a_config_error(tmp_path: Path) -> None:
    """`run_as = "nosuchuser"` started without complaint; every job then had no account (403)."""
    assert load_error(tmp_path, '[lrms]\ntype = "slurm"\nrun_as = "nosuchuser-infosvc"\n').endswith(
        "lrms.run_as: no account 'nosuchuser-infosvc' on this host")
    existing = pwd.getpwuid(os.geteuid()).pw_name
    assert load(tmp_path, f'[lrms]\ntype = "slurm"\nrun_as = "{existing}"\n').run_as == existing
    assert lrms_of('[lrms]\ntype = "slurm"\nrun_as = "nosuchuser-infosvc"\n').run_as == "nosuchuser-infosvc"
