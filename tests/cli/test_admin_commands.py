"""The small commands an operator reaches for instead of curl: `infosvc-agent --version`,
`infosvc check-config FILE`, `infosvc hosts ACTION NODESET` and `infosvc match FILE`, against a
real server on loopback where they need one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infosvc import __version__


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=60)


def test_agent_version() -> None:
    done = run("infosvc_agents", "--version")
    assert done.returncode == 0 and done.stdout == f"infosvc-agent {__version__}\n"


def test_check_config(tmp_path: Path) -> None:
    good = tmp_path / "site.toml"
    good.write_text('[[clusters]]\nid = "compute"\nnodes = "cn[01-08]"\n[scheduler]\npolicy = "fcfs"\n')
    done = run("infosvc", "check-config", str(good))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{good}: valid (1 cluster, 1 computing element)\n"
    bad = tmp_path / "bad.toml"
    bad.write_text('[scheduler]\npolicy = "sjf"\n')
    done = run("infosvc", "check-config", str(bad))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"infosvc check-config: {bad}: scheduler.policy: one of easy, fcfs, predictive, got 'sjf'\n"
    missing = run("infosvc", "check-config", str(tmp_path / "nope.toml"))
    assert missing.returncode == 1 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr


def test_check_config_says_what_a_grid_client_would_miss(tmp_path: Path) -> None:
    """Valid, but no service address and no CE's VOs: two warnings (exit 0); a grid site's config none."""
    bare = tmp_path / "bare.toml"
    bare.write_text('[[clusters]]\nid = "compute"\nnodes = "cn[01-08]"\n')
    done = run("infosvc", "check-config", str(bare))
    assert done.returncode == 0 and done.stdout == f"{bare}: valid (1 cluster, 1 computing element)\n"
    warnings = done.stderr.splitlines()
    assert len(warnings) == 2 and all(line.startswith(f"{bare}: warning: ") for line in warnings)
    assert "information_service_url" in warnings[0] and "access_control" in warnings[1]
    grid = tmp_path / "grid.toml"
    grid.write_text('[service]\ninformation_service_url = "https://bdii.example.org:8443/v1/glue"\n'
                    '[[computing_elements]]\nid = "ce.example.org:2119/jobmanager-infosvc-all"\n'
                    'access_control = ["VO:atlas"]\n')
    done = run("infosvc", "check-config", str(grid))
    assert done.returncode == 0 and done.stderr == ""



def test_check_config_says_an_upstream_s_token_or_ca_file_it_cannot_read(tmp_path: Path) -> None:
    # a review: under the packaged unit the service's transient user could not read a token of
    # root's, and every pull failed, while check-config said nothing
    token = tmp_path / "site-a.token"
    config = tmp_path / "top.toml"
    config.write_text('[service]\ninformation_service_url = "https://top.example.org:8443/v1/glue"\n'
                      '[[computing_elements]]\nid = "ce.example.org:2119/jobmanager-infosvc-all"\n'
                      'access_control = ["VO:atlas"]\n'
                      f'[[federation.upstreams]]\nurl = "https://site-a.example.org:8443"\nname = "site-a"\n'
                      f'token_file = "{token}"\nca_file = "{tmp_path / "missing-ca.pem"}"\n')
    done = run("infosvc", "check-config", str(config))
    assert done.returncode == 0, done.stderr
    warnings = done.stderr.splitlines()
    assert len(warnings) == 2 and all(line.startswith(f"{config}: warning: upstream site-a: ") for line in warnings)
    assert f"cannot read token_file {token}" in warnings[0] and "missing-ca.pem" in warnings[1]
    token.write_text("a-read-token\n")
    config.write_text("\n".join(line for line in config.read_text().splitlines() if not line.startswith("ca_file")))
    done = run("infosvc", "check-config", str(config))
    assert done.returncode == 0 and done.stderr == "", done.stderr


BAD_LISTENS = {
    "8080": "HOST:PORT", "localhost": "HOST:PORT", "127.0.0.1:": "HOST:PORT", "127.0.0.1:http": "HOST:PORT",
    "127.0.0.1:-1": "HOST:PORT", "127.0.0.1:65536": "1 to 65535", "127.0.0.1:99999999999": "1 to 65535",
    "127.0.0.1:+80": "HOST:PORT", "::1:8080": "in brackets", "[127.0.0.1]:8080": "IPv6",
    "[fe80::1:8080": "in brackets", "[not::an:address]:8080": "IPv6", "no host!:8080": "host",
    "a..b:8080": "host", "127.0.0.1:8080 ": "HOST:PORT",
}

#: Those `serve` is also run with: one of each kind of mistake, and the port it crashed on.
SERVED = ("8080", "127.0.0.1:65536", "::1:8080", "no host!:8080")


def test_check_config_and_serve_refuse_the_same_listen_naming_the_key(tmp_path: Path) -> None:
    """check-config passed a listen that serve then refused (or, for a port past 65535, crashed
    on): one check for both, whose message says which key, or which option, is wrong."""
    for number, (listen, said) in enumerate(BAD_LISTENS.items()):
        config = tmp_path / f"listen{number}.toml"
        config.write_text(f"[service]\nlisten = {json.dumps(listen)}\n")
        checked = run("infosvc", "check-config", str(config))
        assert checked.returncode == 1, (listen, checked.stdout)
        assert checked.stderr.startswith(f"infosvc check-config: {config}: service.listen: "), checked.stderr
        assert said in checked.stderr and repr(listen) in checked.stderr, (listen, checked.stderr)
        if listen not in SERVED:  # a Python start-up each: the check is one function, shown by a few
            continue
        served = run("infosvc", "serve", "--config", str(config), "--db", str(tmp_path / "db.sqlite"))
        assert served.returncode == 2, (listen, served.stderr)
        assert f"{config}: service.listen: " in served.stderr and "Traceback" not in served.stderr, served.stderr
        optioned = run("infosvc", "serve", "--listen", listen, "--db", str(tmp_path / "db.sqlite"))
        assert optioned.returncode == 2 and "Traceback" not in optioned.stderr, (listen, optioned.stderr)
        assert optioned.stderr.startswith("infosvc: --listen: ") and said in optioned.stderr, optioned.stderr


def test_check_config_and_serve_refuse_what_serve_could_not_start_with(tmp_path: Path) -> None:
    """check-config passed configs serve then stopped on with a traceback (a run_as_map it could
    not read, or read a line of three words from; TOML nested past Python's recursion limit) or
    served with no timeout (inf seconds), and a run_as account this host has not: both commands
    now say the key in one line (check-config exits 1, serve 2 as for any config error)."""
    bad_map = tmp_path / "map"
    bad_map.write_text("alice\n")
    configs = {
        f'[lrms]\ntype = "slurm"\nrun_as_map = "{tmp_path / "missing"}"\n': "lrms.run_as_map: cannot read",
        f'[lrms]\ntype = "slurm"\nrun_as_map = "{bad_map}"\n': f"lrms.run_as_map: {bad_map}:1: want OWNER ACCOUNT",
        '[lrms]\ntype = "slurm"\nrun_as = "nosuchuser-infosvc"\n': "lrms.run_as: no account 'nosuchuser-infosvc'",
        "a = " + "[" * 2000 + "]" * 2000 + "\n": "not valid TOML: arrays or inline tables nested too deeply",
        "[service]\nbody_timeout_seconds = inf\n": "service.body_timeout_seconds: must be a finite number",
    }
    for number, (text, said) in enumerate(configs.items()):
        config = tmp_path / f"site{number}.toml"
        config.write_text(text)
        checked = run("infosvc", "check-config", str(config))
        assert checked.returncode == 1 and checked.stdout == "", (said, checked.stdout)
        assert checked.stderr.startswith(f"infosvc check-config: {config}: {said}"), checked.stderr
        assert checked.stderr.count("\n") == 1, checked.stderr
        served = run("infosvc", "serve", "--config", str(config), "--db", str(tmp_path / "db.sqlite"),
                     "--listen", "127.0.0.1:0")
        assert served.returncode == 2, (said, served.stderr)
        assert served.stderr.endswith(f"infosvc: {config}: {checked.stderr.split(f'{config}: ', 1)[1]}"), served.stderr
        assert "Traceback" not in served.stderr, served.stderr


def test_listen_addresses_both_take() -> None:
    from infosvc.config.addresses import listen_address

    assert [listen_address(text) for text in ("127.0.0.1:8080", "0.0.0.0:1", "[::1]:65535", "[::]:80",
                                              "localhost:8080", "infosvc.example.org:443", ":8080", "127.0.0.1:0")] == [
        ("127.0.0.1", 8080), ("0.0.0.0", 1), ("::1", 65535), ("::", 80), ("localhost", 8080),
        ("infosvc.example.org", 443), ("127.0.0.1", 8080), ("127.0.0.1", 0)]  # 0: any free port
    for listen in BAD_LISTENS:
        with pytest.raises(ValueError):
            listen_address(listen)

def test_hosts_commands_take_a_nodeset_and_a_reason(serve_app: Any, tmp_path: Path) -> None:
    server = serve_app(agents=4)
    for number in range(1, 5):
        server.report(f"cn{number:02d}", server.agent_token(), processors=4)
    admin = tmp_path / "admin.token"
    admin.write_text(server.tokens["admin"] + "\n")
    common = ("--server", server.url, "--token-file", str(admin))
    done = run("infosvc", "hosts", "pause", "cn[02-03]", "--reason", "disk swap", *common)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "cn02: Paused (disk swap)\ncn03: Paused (disk swap)\n"
    assert {h["unique_id"]: h["state"] for h in server.get("/v1/glue").json()["hosts"]} == {
        "cn01": "Ready", "cn02": "Paused", "cn03": "Paused", "cn04": "Ready"}
    assert run("infosvc", "hosts", "resume", "cn03", *common).stdout == "cn03: Ready\n"
    done = run("infosvc", "hosts", "remove", "cn04", "--purge", *common)
    assert done.stdout == "cn04: Removed\n" and "cn04" not in server.node_ids()
    assert server.sql("SELECT count(*) FROM reports WHERE host_id = 'cn04'") == [(0,)]
    # refusals: one clear line, no traceback
    for args, said in ((("pause", "gpu[1-2]"), "404"), (("pause", "cn[1-"), "400"),
                       (("pause", "cn01", "--purge"), "--purge goes with remove")):
        done = run("infosvc", "hosts", *args, *common)
        assert done.returncode in (1, 2) and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    done = run("infosvc", "hosts", "pause", "cn01", "--server", server.url)  # no token
    assert done.returncode == 1 and "401" in done.stderr


def test_match_prints_the_dry_run_as_a_table(serve_app: Any, tmp_path: Path) -> None:
    server = serve_app(agents=3)
    server.report("big01", server.agent_token(), processors=16)
    server.report("small01", server.agent_token(), processors=2)
    server.report("small02", server.agent_token(), processors=2)
    job = tmp_path / "job.xml"
    job.write_text("<Job><Id>j</Id><Requested><Processors>8</Processors></Requested></Job>")
    done = run("infosvc", "match", str(job), "--server", server.url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["HOST", "CE", "SUBCLUSTER"] and lines[1].split()[0] == "big01"
    assert "NOT FITTING" in lines
    assert any(line.startswith("small[01-02]: ") and "Processors" in line for line in lines), lines
    as_json = run("infosvc", "match", str(job), "--server", server.url, "--json")
    assert [m["host"] for m in json.loads(as_json.stdout)["matches"]] == ["big01"]
    job.write_text("<Job><Requested><Processors>x</Processors></Requested></Job>")
    bad = run("infosvc", "match", str(job), "--server", server.url)
    assert bad.returncode == 1 and "400" in bad.stderr and "Traceback" not in bad.stderr
