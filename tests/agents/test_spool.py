"""The agent's spool (infosvc_agents/spool.py) on a real directory: samples written whole, named
oldest first, read back in order, removed; what a crash or a person leaves there; a directory it
cannot use; a disk that fills; and the push loop keeping its samples in it, bounded."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from support.documents import node_document
from support.server import ServerFactory, free_port
from infosvc.codec.node_xml import parse_node
from infosvc_agents.push import PushLoop, Sender
from infosvc_agents.spool import Spool, SpoolError


def samples_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".sample"))


def test_samples_are_files_named_oldest_first_read_back_in_order_and_removed(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    spool = Spool(str(directory))
    assert directory.stat().st_mode & 0o777 == 0o700  # made, private
    names = [spool.add(f"sample {i}".encode()) for i in range(12)]
    assert all(names) and names == sorted(names) == samples_in(directory)  # the 10th sorts after the 9th
    assert all((directory / str(name)).stat().st_mode & 0o777 == 0o600 for name in names)
    assert sorted(os.listdir(directory)) == names  # no temporary file left behind
    spool.remove(str(names[0]))
    spool.remove(str(names[0]))  # already gone: nothing to do
    spool.close()
    again = Spool(str(directory))
    assert [document for _, document in again.load()] == [f"sample {i}".encode() for i in range(1, 12)]
    newer = again.add(b"after the restart")
    assert newer is not None and newer > str(names[-1])  # numbering goes on after what is there
    again.close()


def test_what_a_crash_or_a_person_leaves_does_not_stop_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = tmp_path / "spool"
    spool = Spool(str(directory))
    first = spool.add(b"one")
    spool.close()
    (directory / "00000000000000000042.tmp").write_bytes(b"<Node half-writ")  # killed mid-write
    (directory / "00000000000000000043.tmp").mkdir()  # a directory with a temporary's name
    (directory / "README").write_text("notes\n")  # not ours
    (directory / "00000000000000000007.sample").write_bytes(b"")  # no sample is empty
    (directory / "00000000000000000008.sample").mkdir()  # cannot be read as a sample
    (directory / "00000000000000000009.sample").symlink_to(tmp_path / "elsewhere")  # not followed
    (tmp_path / "elsewhere").write_bytes(b"not a sample of ours")
    spool = Spool(str(directory))
    assert spool.load() == [(first, b"one")]
    left = sorted(os.listdir(directory))
    assert "00000000000000000042.tmp" not in left and "00000000000000000007.sample" not in left
    assert {"README", "00000000000000000043.tmp", "00000000000000000008.sample", "00000000000000000009.sample",
            first} <= set(left)
    said = caplog.text
    for name in ("00000000000000000042.tmp", "00000000000000000043.tmp", "README", "00000000000000000007.sample",
                 "00000000000000000008.sample", "00000000000000000009.sample"):
        assert name in said, name
    assert str(spool.add(b"two")) > "00000000000000000043"  # after every number there
    spool.close()


def test_a_directory_it_cannot_use_is_an_error_at_once(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for path, says in ((a_file, "not a directory"), (a_file / "spool", "Not a directory")):
        with pytest.raises(SpoolError, match=says):
            Spool(str(path))
    held = Spool(str(tmp_path / "spool"))
    with pytest.raises(SpoolError, match="in use by another agent"):
        Spool(str(tmp_path / "spool"))
    held.close()
    Spool(str(tmp_path / "spool")).close()  # released
    if os.geteuid() != 0:  # root writes anywhere
        read_only = tmp_path / "read-only"
        read_only.mkdir(mode=0o500)
        with pytest.raises(SpoolError, match="Permission denied"):
            Spool(str(read_only))


FULL = """
import resource, signal, sys
from infosvc_agents.spool import Spool
spool = Spool(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
print(spool.add(b"x" * 100), spool.add(b"y" * 5000), spool.add(b"z" * 100))
"""


def test_a_sample_it_cannot_write_is_kept_in_memory_only_and_nothing_half_written_stays(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    done = subprocess.run([sys.executable, "-c", FULL, str(directory)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    first, failed, third = done.stdout.split()
    assert failed == "None" and "cannot write a sample" in done.stderr and "kept in memory only" in done.stderr
    assert sorted(os.listdir(directory)) == [first, third]  # no temporary file of the failed one


def test_the_push_loop_keeps_its_samples_in_the_spool_bounded(tmp_path: Path) -> None:
    directory = tmp_path / "spool"
    loop = PushLoop(lambda: b"", Sender(f"http://127.0.0.1:{free_port()}", "t"), max_kept=3, spool=Spool(str(directory)))
    for i in range(7):
        loop.keep(str(i).encode())
    assert list(loop.kept) == [b"4", b"5", b"6"] and loop.dropped == 4
    assert [(directory / name).read_bytes() for name in samples_in(directory)] == [b"4", b"5", b"6"]
    assert loop.deliver() is False  # nothing listens: kept, on disk too
    assert len(samples_in(directory)) == 3 and loop.spooled() == 3
    assert loop.spool is not None
    loop.spool.close()
    # The next start, with a lower bound: the newest kept, the oldest file removed and counted.
    again = PushLoop(lambda: b"", Sender("http://127.0.0.1:9", "t"), max_kept=2, spool=Spool(str(directory)))
    assert list(again.kept) == [b"5", b"6"] and again.resumed == 2 and again.dropped == 1
    assert [(directory / name).read_bytes() for name in samples_in(directory)] == [b"5", b"6"]
    assert again.spool is not None
    again.spool.close()


def test_acknowledged_samples_leave_the_spool_and_what_was_left_goes_first(serve_app: ServerFactory,
                                                                          tmp_path: Path) -> None:
    server = serve_app(agents=1)
    token = server.agent_token()
    directory = tmp_path / "spool"
    spool = Spool(str(directory))
    for n in range(3):  # an earlier run's, not acknowledged
        spool.add(node_document("spooled", sequence=n))
    spool.close()
    count = iter(range(3, 1000))
    loop = PushLoop(lambda: node_document("spooled", sequence=next(count)), Sender(server.url, token, timeout=5),
                    interval=0.02, spool=Spool(str(directory)))
    assert loop.resumed == 3 and len(loop.kept) == 3
    thread = threading.Thread(target=loop.run, kwargs={"samples": 4}, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert loop.delivered == 7 and not loop.kept and samples_in(directory) == []
    stored = server.sql("SELECT document FROM reports WHERE host_id = 'spooled' ORDER BY seq")
    assert [parse_node(document).extension("Sequence", "Test") for document, in stored] == [str(n) for n in range(7)]
