"""Running Slurm's commands for the service (infosvc/lrms/slurm_commands.py) against a real Slurm
(tests/support/slurm.py): output, the path and SLURM_CONF from the config, and every failure one
clear error in Slurm's words."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from infosvc.config import LrmsConfig
from infosvc.lrms.slurm_commands import SlurmUnavailable, key_values, parse_json, program, run, run_json, version
from support.slurm import SlurmCluster, slurm  # noqa: F401  (the module's cluster)


def config_of(cluster: SlurmCluster, **changes: object) -> LrmsConfig:
    return dataclasses.replace(LrmsConfig(type="slurm", bin_dir=cluster.bin_dir, slurm_conf=str(cluster.conf)),
                               **changes)  # type: ignore[arg-type]


def test_a_command_reads_the_configured_cluster(slurm: SlurmCluster) -> None:  # noqa: F811
    nodes, ran = run_json(config_of(slurm), "sinfo", key="nodes")
    assert sorted(n["name"] for n in nodes) == ["c1", "c2", "c3", "c4", "g1"]
    assert ran.wall_seconds > 0 and ran.cpu_seconds >= 0
    assert version(config_of(slurm)).startswith(("2", "1"))
    lines = run(config_of(slurm), "scontrol", "show", "partition", "-o").stdout.splitlines()
    parts = {p["PartitionName"]: p for p in map(key_values, lines)}
    assert parts["short"]["MaxTime"] == "00:30:00" and parts["short"]["MaxNodes"] == "2"


def test_a_controller_that_does_not_answer_is_said(slurm: SlurmCluster) -> None:  # noqa: F811
    slurm.stop_controller()
    try:
        with pytest.raises(SlurmUnavailable, match=r"^squeue failed \(exit 1\): .*(connect|Unable to contact)"):
            run(config_of(slurm, timeout_seconds=60.0), "squeue")
    finally:
        slurm.start_controller()
    run(config_of(slurm), "squeue")


def test_the_time_limit(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    slow = bin_dir / "sinfo"
    slow.write_text("#!/bin/sh\nexec sleep 5\n")
    slow.chmod(0o755)
    with pytest.raises(SlurmUnavailable, match=r"^sinfo did not finish within 0.2 s \(\[lrms\] timeout_seconds\)$"):
        run(LrmsConfig(type="slurm", bin_dir=str(bin_dir), timeout_seconds=0.2), "sinfo")


def test_programs_are_found_or_said_missing(tmp_path: Path) -> None:
    with pytest.raises(SlurmUnavailable, match=r"^squeue: not found as an executable in \[lrms\] bin_dir"):
        program(LrmsConfig(bin_dir=str(tmp_path)), "squeue")
    with pytest.raises(ValueError, match="not a Slurm program"):
        program(LrmsConfig(), "rm")


@pytest.mark.parametrize("argument", ["a\nb", "a\0b", "\x1b[2J"])
def test_arguments_are_plain_text(argument: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="printable text"):
        run(LrmsConfig(bin_dir=str(tmp_path)), "sinfo", argument)


@pytest.mark.parametrize("text, message", [
    ("nonsense", "sinfo --json gave no JSON"),
    ("[1]", "sinfo --json gave no JSON object"),
    ('{"errors": [{"description": "Unable to contact slurm controller"}]}',
     "sinfo --json reported: Unable to contact slurm controller"),
])
def test_bad_json_is_said(text: str, message: str) -> None:
    with pytest.raises(SlurmUnavailable, match=message):
        parse_json("sinfo", text)


def test_key_values_keeps_spaces_of_a_value() -> None:
    assert key_values("NodeName=c4 OS=Linux 6.1 #1 SMP RealMemory=1000 Reason=disk replaced [root@2026]") == {
        "NodeName": "c4", "OS": "Linux 6.1 #1 SMP", "RealMemory": "1000", "Reason": "disk replaced [root@2026]"}
