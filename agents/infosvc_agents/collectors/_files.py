"""Small, fast readers for /proc and /sys files, shared by the collectors."""

from __future__ import annotations

import os

_CHUNK = 65536


def read_text(path: str) -> str:
    """The whole file as text; OSError (missing file, EINVAL from sysfs) propagates.

    Raw os.open/os.read instead of open(): procfs and sysfs files are small and are read
    every sample, and skipping the buffered text-I/O layers makes each read several times
    cheaper. surrogateescape keeps odd bytes (e.g. in mount paths) round-trippable to the OS.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, _CHUNK)
        if data:
            # seq_file/sysfs hand out at most one buffer per read; loop until EOF for big files.
            more = os.read(fd, _CHUNK)
            if more:
                chunks = [data, more]
                while more := os.read(fd, _CHUNK):
                    chunks.append(more)
                data = b"".join(chunks)
    finally:
        os.close(fd)
    return data.decode("utf-8", "surrogateescape")


def read_attr(path: str) -> str | None:
    """A one-value sysfs attribute, stripped; None when it is missing or unreadable.

    One read is enough: sysfs hands out an attribute (at most a page) in a single read.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 4096).decode("utf-8", "surrogateescape").strip()
    except OSError:
        return None
    finally:
        os.close(fd)


def is_live_proc(path: str) -> bool:
    """Whether a path is in the kernel's own /proc (not a fixture tree standing in for it)."""
    return os.path.realpath(path).startswith("/proc/")


def is_live_root(proc_root: str) -> bool:
    """Whether a --proc-root is this machine's own /proc: only then may uname or py-cpuinfo, which
    describe the machine we run on, stand in for what the root's files say."""
    return os.path.realpath(proc_root) == "/proc"


class ProcFile:
    """A procfs file read whole every sample.

    In the live /proc the file is opened once and re-read from offset 0 with pread, as top
    and friends do: procfs regenerates the content on every read at offset 0, and this saves
    an open and a close per sample. Other files (fixture trees, which tests rewrite or
    replace between samples) are opened afresh each time. Not for use from several threads.
    """

    __slots__ = ("path", "_keep", "_fd", "_chunk")

    def __init__(self, path: str, keep: bool | None = None) -> None:
        self.path = path
        self._keep = is_live_proc(path) if keep is None else keep
        self._fd = -1
        self._chunk = _CHUNK

    @property
    def fd(self) -> int:
        """The held descriptor, opened on first use; -1 when this file is not kept open."""
        if self._keep and self._fd < 0:
            self._fd = os.open(self.path, os.O_RDONLY)
        return self._fd

    def read(self) -> str:
        if not self._keep:
            return read_text(self.path)
        try:
            fd = self.fd
            data = os.pread(fd, self._chunk, 0)
            while len(data) >= self._chunk:
                # Bigger than the buffer (e.g. /proc/stat on a large machine): grow and re-read,
                # since a pread from offset 0 is the only way to get one consistent snapshot.
                self._chunk *= 4
                data = os.pread(fd, self._chunk, 0)
        except OSError:
            # A stale descriptor (e.g. inherited over a fork): start over with a fresh one.
            self.close()
            return read_text(self.path)
        return data.decode("utf-8", "surrogateescape")

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass
