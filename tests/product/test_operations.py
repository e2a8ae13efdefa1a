"""docs/operations.md, checked: online backups of a running server's SQLite file restore whole."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from support.documents import node_document

from support.server import ServerFactory

HOSTS = [f"node{i:03d}" for i in range(1, 21)]


def backup_with_cli(db: Path, out: Path, command: str) -> None:
    if shutil.which("sqlite3") is None:
        pytest.skip("the sqlite3 command is not installed")
    done = subprocess.run(["sqlite3", str(db), command.format(out=out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def backup_with_python(db: Path, out: Path, command: str) -> None:
    source = sqlite3.connect(db)
    target = sqlite3.connect(out)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


@pytest.mark.parametrize("how, command", [
    (backup_with_cli, ".backup {out}"),
    (backup_with_cli, "VACUUM INTO '{out}'"),
    (backup_with_python, ""),
])
def test_online_backup_restores_hosts_decisions_and_bindings(serve_app: ServerFactory, tmp_path: Path,
                                                             how: Callable[[Path, Path, str], None],
                                                             command: str) -> None:
    server = serve_app({"lifecycle": {"require_approval": True}})
    tokens = {host: server.agent_token() for host in HOSTS[:5]}
    for host, token in tokens.items():
        server.report(host, token)
    server.admin("node001", "approve")
    server.admin("node002", "approve")
    server.admin("node002", "pause")

    out = tmp_path / "backup.sqlite"
    how(server.db, out, command)  # while the server runs
    server.report("node001", tokens["node001"])  # and goes on taking reports

    restored = serve_app({"lifecycle": {"require_approval": True}}, start=False)
    shutil.copyfile(out, restored.db)
    restored.tokens_file.write_bytes(server.tokens_file.read_bytes())  # the same tokens file
    restored.start()
    assert sorted(restored.node_ids()) == HOSTS[:5]
    assert restored.state_of("node001") == "Ready" and restored.state_of("node002") == "Paused"
    assert restored.state_of("node003") == "Pending"
    # The bindings came along: node003's token still reports for node003 only.
    assert restored.report("node003", tokens["node003"]).status == 200
    assert restored.post_node(node_document("node004"), tokens["node003"]).is_error(403)
