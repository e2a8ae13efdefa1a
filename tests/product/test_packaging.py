"""`pip install infosvc` is the host agent alone: installed into a fresh venv
from this checkout, it brings none of the aggregator's libraries, and `infosvc-agent --once` writes
a valid SSS Node document. The aggregator's commands there say which extra to install."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT
from infosvc.codec.node_xml import parse_node

SERVER_ONLY = {"aiohttp", "lxml", "sqlite-utils", "clustershell", "jsonschema", "numpy", "google-re2"}


@pytest.fixture(scope="module")
def agent_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("agent-only")
    source = work / "src"
    # A copy without the checkout's .venv and caches: pip builds the wheel from it.
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "var", "__pycache__",
                                                                   ".pytest_cache", ".hypothesis", "*.egg-info",
                                                                   ".mypy_cache", "build"))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", str(source)],
                   check=True, timeout=600)
    return venv


def test_the_agent_installs_alone(agent_venv: Path) -> None:
    listed = subprocess.run([str(agent_venv / "bin" / "pip"), "list", "--format=freeze"], capture_output=True,
                            text=True, check=True).stdout
    installed = {line.split("==")[0].lower() for line in listed.split()}
    assert "infosvc" in installed
    assert not installed & SERVER_ONLY, installed & SERVER_ONLY


def test_the_agent_alone_writes_a_valid_node(agent_venv: Path) -> None:
    done = subprocess.run([str(agent_venv / "bin" / "infosvc-agent"), "--once"], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    node = parse_node(done.stdout)  # validated against schemas/sss-node.xsd here, where lxml is
    assert node.id and node.configured.items


def test_server_commands_say_which_extra_to_install(agent_venv: Path) -> None:
    done = subprocess.run([str(agent_venv / "bin" / "infosvc"), "serve", "--db", "x.sqlite"], capture_output=True,
                          text=True, timeout=60, cwd=agent_venv)
    assert done.returncode == 2 and "pip install 'infosvc[server]'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_the_web_page_is_in_the_package(agent_venv: Path) -> None:
    """The page's files are package data: a wheel built from the checkout ships each one."""
    from infosvc.web.page import FILES

    installed = list(agent_venv.glob("lib/python*/site-packages/infosvc/web/static"))
    assert installed, "no infosvc/web/static in the installed package"
    assert sorted(path.name for path in installed[0].iterdir()) == sorted(FILES)
