"""py-cpuinfo is asked in a child Python (`-m cpuinfo`), by an agent that runs as root: without -I
that child put its working directory first on sys.path (and read PYTHONPATH), so a cpuinfo.py
planted in the directory the agent was started from ran as root. Isolated, it finds only the
installed py-cpuinfo."""

from __future__ import annotations

from pathlib import Path

import pytest

from infosvc_agents.collectors.processors import _py_cpuinfo

PLANTED = """\
import pathlib
pathlib.Path(__file__).with_name("RAN").write_text("planted cpuinfo.py ran")
print('{"brand_raw": "planted"}')
"""


def test_a_cpuinfo_py_in_the_working_directory_or_pythonpath_is_not_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cwd, path = tmp_path / "cwd", tmp_path / "pythonpath"
    for where in (cwd, path):
        where.mkdir()
        (where / "cpuinfo.py").write_text(PLANTED)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PYTHONPATH", str(path))
    answer = _py_cpuinfo()
    assert not (cwd / "RAN").exists() and not (path / "RAN").exists()
    assert answer.get("brand_raw") != "planted" and "cpuinfo_version" in answer  # the installed py-cpuinfo's
