"""deploy/: the example site config is complete and valid, the systemd units verify, and the
Prometheus config is valid and finds the hosts through a real server's service discovery."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from support import ROOT

from support.server import ServerFactory, free_port, stop_process
from infosvc.config.site import load_config, parse_config
from support.configspy import Accepted, keys_of, path_of

DEPLOY = ROOT / "deploy"
SITE = DEPLOY / "site.example.toml"
UNITS = ("infosvc.service", "infosvc-agent.service")


# --- site.example.toml --------------------------------------------------------------------------

def test_site_example_parses() -> None:
    config = load_config(SITE)
    assert config == parse_config(tomllib.loads(SITE.read_text(encoding="utf-8")))
    assert config.service.listen == "0.0.0.0:8080"  # agents on other hosts must reach it
    assert [c.id for c in config.clusters] == ["compute", "gpu", "other"]


def test_site_example_sets_every_key(accepted: Accepted) -> None:  # noqa: F811
    data = tomllib.loads(SITE.read_text(encoding="utf-8"))
    every = {path_of(t, k) for t, keys in accepted.scalars.items() for k in keys} | accepted.tables
    assert keys_of(data) == every


def test_site_example_explains_every_key(accepted: Accepted) -> None:  # noqa: F811
    """Each `key = value` line has a comment right above it (the first entry of an array of tables)."""
    lines = SITE.read_text(encoding="utf-8").splitlines()
    explained: set[str] = set()
    table = ""
    for number, line in enumerate(lines):
        if heading := re.match(r"^\[{1,2}([a-z_.]+)\]{1,2}$", line):
            table = heading.group(1)
        elif (key := re.match(r"^([a-z_0-9]+) = ", line)) and lines[number - 1].startswith("#"):
            explained.add(path_of(table, key.group(1)))
    every = {path_of(t, k) for t, keys in accepted.scalars.items() for k in keys}
    assert every - explained == set()


# --- systemd units ------------------------------------------------------------------------------

def unit_text(name: str) -> str:
    return (DEPLOY / name).read_text(encoding="utf-8")


def directives(name: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in unit_text(name).splitlines():
        if (m := re.match(r"^([A-Za-z]+)=(.*)$", line)):
            found.setdefault(m.group(1), []).append(m.group(2))
    return found


@pytest.mark.parametrize("name", UNITS)
def test_units_are_hardened(name: str) -> None:
    d = directives(name)
    assert d["NoNewPrivileges"] == ["yes"] and d["CapabilityBoundingSet"] == [""]
    assert "@system-service" in d["SystemCallFilter"]
    assert d["RestrictAddressFamilies"][0].split()[:3] == ["AF_INET", "AF_INET6", "AF_UNIX"]
    (credential,) = d["LoadCredential"]
    assert "${CREDENTIALS_DIRECTORY}/" + credential.split(":")[0] in d["ExecStart"][0]
    assert d.get("User") != ["root"]


def test_aggregator_unit_keeps_its_file_in_the_state_directory() -> None:
    d = directives("infosvc.service")
    assert d["DynamicUser"] == ["yes"] and d["StateDirectory"] == ["infosvc"]
    assert d["ProtectSystem"] == ["strict"] and d["ProtectHome"] == ["yes"] and d["PrivateTmp"] == ["yes"]
    assert "--db ${STATE_DIRECTORY}/infosvc.sqlite" in d["ExecStart"][0]
    assert "--tokens ${CREDENTIALS_DIRECTORY}/tokens" in d["ExecStart"][0]


def test_agent_unit_sees_the_host_as_it_is() -> None:
    """psutil needs all of /proc; the file systems must not look read-only or hidden to it."""
    d = directives("infosvc-agent.service")
    assert d["ProtectProc"] == ["default"] and d["ProcSubset"] == ["all"]
    for hides in ("ProtectSystem", "ProtectHome", "PrivateTmp", "DynamicUser"):
        assert hides not in d, hides
    assert d["User"] == ["infosvc-agent"]
    assert "--token-file ${CREDENTIALS_DIRECTORY}/token" in d["ExecStart"][0]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_units_verify(tmp_path: Path) -> None:
    """`systemd-analyze verify`, with ExecStart= pointing at this checkout's installed commands
    (it checks that the command exists), and no warning about either unit."""
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "infosvc").exists() or not (bin_dir / "infosvc-agent").exists():
        pytest.skip(f"infosvc is not installed in {bin_dir}")
    paths = []
    for name in UNITS:
        path = tmp_path / name
        path.write_text(unit_text(name).replace("/opt/infosvc/bin/", f"{bin_dir}/"), encoding="utf-8")
        paths.append(str(path))
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", *paths], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    complaints = [line for line in done.stderr.splitlines() if any(name in line for name in UNITS)]
    assert complaints == []


def test_the_jobs_drop_in_runs_a_valid_agent_command(tmp_path: Path) -> None:
    """deploy/infosvc-agent-jobs.conf: its command line is one the agent accepts, tasks run as an
    account that is not root, and the agent keeps only the capabilities the executor uses; with the
    unit, it verifies."""
    from infosvc_agents.cli import parser

    d = directives("infosvc-agent-jobs.conf")
    assert d["ExecStart"][0] == "" and d["Delegate"] == ["yes"] and d["KillMode"] == ["process"]
    assert d["StateDirectoryMode"] == ["0711"]  # the accounts reach their jobs' directories below it
    assert set(d["CapabilityBoundingSet"][0].split()) == {"CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_KILL",
                                                          "CAP_DAC_OVERRIDE", "CAP_FOWNER"}
    assert "executor:/etc/infosvc/executor.token" in d["LoadCredential"]
    command = d["ExecStart"][1].replace("$INFOSVC_AGENT_ARGS", "")
    assert "--executor-token-file ${CREDENTIALS_DIRECTORY}/executor" in command
    args = parser().parse_args(command.split()[1:])
    assert args.run_jobs and args.run_as == "nobody" and args.task_state and args.work_root
    if shutil.which("systemd-analyze") is None:
        return
    bin_dir = Path(sys.executable).parent
    unit = tmp_path / "infosvc-agent.service"
    unit.write_text(unit_text("infosvc-agent.service").replace("/opt/infosvc/bin/", f"{bin_dir}/"), encoding="utf-8")
    (tmp_path / "infosvc-agent.service.d").mkdir()
    (tmp_path / "infosvc-agent.service.d" / "jobs.conf").write_text(
        unit_text("infosvc-agent-jobs.conf").replace("/opt/infosvc/bin/", f"{bin_dir}/"), encoding="utf-8")
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if "infosvc-agent" in line] == []


def test_units_verify_catches_a_typo(tmp_path: Path) -> None:
    """The check above would see a misspelt directive (verify only warns about those)."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    path = tmp_path / "typo.service"
    path.write_text("[Service]\nExecStart=/bin/true\nNoNewPrivilegez=yes\n", encoding="utf-8")
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert "typo.service" in done.stderr and "NoNewPrivilegez" in done.stderr


# --- prometheus.yml -----------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_prometheus_config_is_valid() -> None:
    done = subprocess.run(["promtool", "check", "config", str(DEPLOY / "prometheus.yml")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed")
def test_prometheus_discovers_the_hosts(serve_app: ServerFactory, tmp_path: Path) -> None:
    """deploy/prometheus.yml pointed at a real server: Prometheus reads /v1/prometheus/targets."""
    server = serve_app({"prometheus": {"exporter_port": 9199}})
    server.report("node001", server.agent_token())
    server.report("node002", server.agent_token())
    config = tmp_path / "prometheus.yml"
    config.write_text((DEPLOY / "prometheus.yml").read_text().replace("infosvc.example.org:8080",
                                                                      f"127.0.0.1:{server.port}"))
    port = free_port()
    with open(tmp_path / "prometheus.log", "wb") as log:
        prometheus = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        found: dict[str, Any] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(found) < 2:
            time.sleep(0.2)
            try:
                targets = get_json(f"http://127.0.0.1:{port}/api/v1/targets?state=active")["data"]["activeTargets"]
            except OSError:
                assert prometheus.poll() is None, (tmp_path / "prometheus.log").read_text()
                continue
            found = {t["labels"]["instance"]: t for t in targets if t["labels"]["job"] == "node"}
        assert sorted(found) == ["node001", "node002"], (tmp_path / "prometheus.log").read_text()[-3000:]
        target = found["node001"]
        assert target["scrapeUrl"] == "http://node001:9199/metrics"
        assert target["labels"]["cluster"] == "default" and target["labels"]["node"] == "node001"
        assert target["labels"]["subcluster"] and "__meta_infosvc_state" not in target["labels"]
        assert target["discoveredLabels"]["__meta_infosvc_state"] == "Ready"
    finally:
        stop_process(prometheus)


def test_aggregator_unit_has_files_for_the_default_connections() -> None:
    """LimitNOFILE= leaves room for service.max_connections and the files infosvc keeps for the rest."""
    from infosvc.web.connections import RESERVED_FILES, connection_cap
    from infosvc.config.site import ServiceConfig

    (limit,) = directives("infosvc.service")["LimitNOFILE"]
    default = ServiceConfig().max_connections
    assert int(limit) >= default + RESERVED_FILES
    assert connection_cap(default, int(limit)) == default
