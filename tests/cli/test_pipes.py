"""Every command ends quietly when what reads its output stops reading (`| head`): no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.documents import node_document


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    document = tmp_path / "node.xml"
    document.write_bytes(node_document("h1.example.org"))
    # far more than a pipe holds, so the writes go on after `head` has gone
    command = f"{sys.executable} -m infosvc validate --json {' '.join([str(document)] * 600)} | head -1"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith('{"file": ')
    assert done.stderr == "", done.stderr
