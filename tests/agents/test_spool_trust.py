"""What the agent, run as root, trusts of a spool directory it finds: nothing it did not make.
A directory another account owns or can write (0777), or a symbolic link, is refused at start;
in the spool, a file named like a sample is read only if it is a regular file of the agent's own,
not over the size cap (a FIFO hung the agent at start; a forged sample went out with its token)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from infosvc_agents import spool as spool_module
from infosvc_agents.spool import MAX_SAMPLE_BYTES, Spool, SpoolError


def _made(tmp_path: Path, mode: int) -> Path:
    directory = tmp_path / "spool"
    directory.mkdir()
    os.chmod(directory, mode)  # whatever the umask
    return directory


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770, 0o702, 0o720])
def test_a_spool_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    directory = _made(tmp_path, mode)
    with pytest.raises(SpoolError, match="writable by group or others"):
        Spool(str(directory))


@pytest.mark.parametrize("mode", [0o700, 0o750, 0o755])
def test_a_spool_of_its_own_that_only_it_writes_is_taken(tmp_path: Path, mode: int) -> None:
    Spool(str(_made(tmp_path, mode))).close()


def test_a_spool_that_is_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    target = _made(tmp_path, 0o700)
    link = tmp_path / "link"
    link.symlink_to(target)
    for path in (str(link), f"{link}/"):
        with pytest.raises(SpoolError, match="symbolic link"):
            Spool(path)


def test_a_spool_another_account_owns_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = _made(tmp_path, 0o700)
    if os.geteuid() == 0:
        os.chown(directory, 65534, 65534)
    else:  # the agent as another account than the directory's owner
        euid = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: euid + 1)
    with pytest.raises(SpoolError, match="owned by uid"):
        Spool(str(directory))


def test_the_agent_refuses_such_a_spool_at_start_in_one_line(tmp_path: Path) -> None:
    directory = _made(tmp_path, 0o777)
    token = tmp_path / "token"
    token.write_text("t" * 20 + "\n")
    done = subprocess.run([sys.executable, "-m", "infosvc_agents", "--server", "http://127.0.0.1:9", "--token-file",
                           str(token), "--spool", str(directory)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"infosvc-agent: spool {directory} is writable by group or others "
                                        "(mode 0777): refused; make it 0700, owned by the agent's account"]


def test_a_fifo_named_like_a_sample_is_left_alone_without_hanging(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    spool = Spool(str(tmp_path / "spool"))
    first = spool.add(b"<Node one/>")
    fifo = tmp_path / "spool" / "00000000000000000009.sample"
    os.mkfifo(fifo, 0o600)
    found: list[object] = []
    reader = threading.Thread(target=lambda: found.append(spool.load()), daemon=True)
    with caplog.at_level(logging.WARNING, logger="infosvc_agents.spool"):
        reader.start()
        reader.join(timeout=10)
    if reader.is_alive():  # let the hung open go, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=10)
        pytest.fail("load() hung on a FIFO named like a sample")
    assert found == [[(first, b"<Node one/>")]]
    assert fifo.exists() and "00000000000000000009.sample" in caplog.text and "not a regular file" in caplog.text
    spool.close()


def test_a_sample_another_account_planted_is_not_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    spool = Spool(str(tmp_path / "spool"))
    forged = spool.add(b"<Node id='forged'/>")
    assert forged is not None
    if os.geteuid() == 0:
        os.chown(tmp_path / "spool" / forged, 65534, 65534)
    else:  # the file is another account's to an agent of another euid than its owner's
        euid = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: euid + 1)
    with caplog.at_level(logging.WARNING, logger="infosvc_agents.spool"):
        assert spool.load() == []
    assert (tmp_path / "spool" / forged).exists() and forged in caplog.text and "owned by uid" in caplog.text
    spool.close()


def test_a_sample_over_the_size_cap_is_left_alone(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spool = Spool(str(tmp_path / "spool"))
    small = spool.add(b"<Node small/>")
    huge = spool.add(b"x" * (MAX_SAMPLE_BYTES + 1))
    last = spool.add(b"x" * MAX_SAMPLE_BYTES)  # at the cap: read
    with caplog.at_level(logging.WARNING, logger="infosvc_agents.spool"):
        assert spool.load() == [(small, b"<Node small/>"), (last, b"x" * MAX_SAMPLE_BYTES)]
    assert huge is not None and huge in caplog.text and "bytes" in caplog.text
    spool.close()


def test_samples_are_opened_without_following_links_or_blocking(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    spool = Spool(str(tmp_path / "spool"))
    spool.add(b"<Node/>")
    flags: list[int] = []
    real_open = os.open

    def watching(path: str, flag: int, *args: object, **kwargs: object) -> int:
        flags.append(flag)
        return real_open(path, flag, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(spool_module.os, "open", watching)
    assert len(spool.load()) == 1
    assert flags and all(f & os.O_NOFOLLOW and f & os.O_NONBLOCK for f in flags)
    spool.close()
