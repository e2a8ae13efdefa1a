"""The agent's spool: the samples it has not seen acknowledged, one file each, so that they
outlive the agent (`infosvc-agent --spool DIR`).

Without it the kept samples live in the agent's memory, and an agent restarted during an outage
of the aggregator (an upgrade, a crash, the host rebooted) loses them. With it every sample is on
disk before it is first sent, and its file goes once the server has answered for it; the next
start reads what is left, oldest first, and sends it before anything new.

The order is the whole point. The aggregator stores a sample sent again once only when it is the
host's newest (infosvc/hosts/aggregator.py, `_repeat_of`). The agent sends one sample at a time,
oldest first, and each file's removal is on disk before the next sample is sent, so after any
crash the oldest file is at most the newest sample the server holds: the one sample that may go
out again is one the server recognises.

A file is written whole or not at all: to a temporary name, synced, renamed, and the directory
synced. Names are a zero-padded sequence number, so that they sort oldest first; a crash
mid-write leaves only a temporary file, removed at the next start. The directory is locked
(flock) while an agent uses it: two agents sending from one spool would each send the other's
samples. Stdlib only, as the whole agent package.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import stat

log = logging.getLogger("infosvc_agents.spool")

#: a sample's file, and its temporary name while it is written
SAMPLE = re.compile(r"^(\d{20})\.sample$")
TEMPORARY = re.compile(r"^(\d{20})\.tmp$")
#: the largest sample file read back (a host's sample is some KiB; a larger file is not the agent's)
MAX_SAMPLE_BYTES = 4 << 20


class SpoolError(Exception):
    """The spool directory cannot be used (made, written, locked): the agent does not start."""


class Spool:
    """The spool in `directory`, opened: made (0700) if missing, checked the agent's own, locked,
    checked writable, its temporary files removed. `load()` returns what an earlier run left; `add`
    and `remove` keep the files as the samples come and go."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            # Not through a symbolic link (a trailing slash would follow one): see _check_own.
            self._fd = os.open(directory.rstrip("/") or "/",
                               os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileExistsError:  # makedirs' word for a file of that name
            raise SpoolError(f"spool {directory}: not a directory") from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(directory.rstrip("/") or "/"):
                raise SpoolError(f"spool {directory} is a symbolic link: refused; give the directory itself") from None
            raise SpoolError(f"spool {directory}: {exc.strerror or exc}") from None
        try:
            self._check_own()
        except SpoolError:
            os.close(self._fd)
            raise
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise SpoolError(f"spool {directory} is in use by another agent") from None
            raise SpoolError(f"spool {directory}: cannot lock it: {exc.strerror or exc}") from None
        self._next = 1
        try:
            self._sweep()
            self._probe()
        except OSError as exc:
            os.close(self._fd)
            raise SpoolError(f"spool {directory}: {exc.strerror or exc}") from None

    def _check_own(self) -> None:
        """The agent (root, as a rule) sends what the spool holds with its token: a directory
        another account owns, or may write in, could hand it samples of that account's making (or
        a FIFO to hang it at start). Refused, as an error at start."""
        info = os.fstat(self._fd)
        euid = os.geteuid()
        if info.st_uid != euid:
            raise SpoolError(f"spool {self.directory} is owned by uid {info.st_uid}, not by the agent's ({euid}): "
                             "refused; make it 0700, owned by the agent's account")
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise SpoolError(f"spool {self.directory} is writable by group or others (mode "
                             f"{stat.S_IMODE(info.st_mode):04o}): refused; make it 0700, owned by the agent's account")

    def _sweep(self) -> None:
        """Remove what a crash mid-write left; note the highest number in use, so that new names
        sort after every file there."""
        for name in os.listdir(self._fd):
            match = SAMPLE.match(name) or TEMPORARY.match(name)
            if match is None:
                continue
            self._next = max(self._next, int(match[1]) + 1)
            if TEMPORARY.match(name):
                try:
                    os.unlink(name, dir_fd=self._fd)
                    log.warning("spool %s: removed %s, a sample a crash left half-written", self.directory, name)
                except OSError as exc:  # a directory of that name, say: not ours to remove
                    log.warning("spool %s: cannot remove %s (%s): left alone", self.directory, name,
                                exc.strerror or exc)

    def _probe(self) -> None:
        """A directory that cannot be written is an error now, not a warning with every sample:
        write and remove a file as `add` would."""
        name = self._write(b"")
        os.unlink(name, dir_fd=self._fd)
        os.fsync(self._fd)

    def load(self) -> list[tuple[str, bytes]]:
        """The samples an earlier run left, (name, document), oldest first. A file that cannot be
        read is left where it is, an empty one (no sample is) removed, files that are not ours
        left alone: each with a log line. A sample's name on anything but a regular file of the
        agent's own account, of at most MAX_SAMPLE_BYTES, is not the agent's: left alone, not sent
        (opened without following a link, and without waiting on a FIFO)."""
        found: list[tuple[str, bytes]] = []
        try:
            names = sorted(os.listdir(self._fd))
        except OSError as exc:  # listed a moment ago at the start: a failing disk
            log.error("spool %s: cannot list it (%s): what it holds is not sent", self.directory, exc.strerror or exc)
            return found
        for name in names:
            if not SAMPLE.match(name):
                if not TEMPORARY.match(name):
                    log.warning("spool %s: %s is not a sample of this agent's: left alone", self.directory, name)
                continue
            try:
                document = self._read(name)
            except OSError as exc:
                log.warning("spool %s: cannot read %s (%s): left alone, not sent", self.directory, name,
                            exc.strerror or exc)
                continue
            if document is None:
                continue
            if not document:
                log.warning("spool %s: %s is empty: removed", self.directory, name)
                self.remove(name)
                continue
            found.append((name, document))
        return found

    def _read(self, name: str) -> bytes | None:
        """The sample in file `name`; None (with a log line) when the file is not one of the agent's."""
        # Looked at before it is opened (a FIFO or a device is not opened at all), then again once open
        # (what was looked at may have been replaced meanwhile).
        why = self._not_a_sample(os.stat(name, dir_fd=self._fd, follow_symlinks=False))
        if why is None:
            fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self._fd)
            try:
                why = self._not_a_sample(os.fstat(fd))
                if why is None:
                    with os.fdopen(fd, "rb", closefd=False) as handle:
                        document = handle.read(MAX_SAMPLE_BYTES + 1)
                    if len(document) <= MAX_SAMPLE_BYTES:
                        return document
                    why = f"over {MAX_SAMPLE_BYTES} bytes"
            finally:
                os.close(fd)
        log.warning("spool %s: %s is %s: not a sample of this agent's, left alone, not sent", self.directory, name,
                    why)
        return None

    @staticmethod
    def _not_a_sample(info: os.stat_result) -> str | None:
        """Why a file of that status cannot be one of the agent's samples; None when it can."""
        if not stat.S_ISREG(info.st_mode):
            return "not a regular file"
        if info.st_uid != os.geteuid():
            return f"owned by uid {info.st_uid}, not by the agent's"
        if info.st_size > MAX_SAMPLE_BYTES:
            return f"{info.st_size} bytes, over {MAX_SAMPLE_BYTES}"
        return None

    def add(self, document: bytes) -> str | None:
        """Write a sample before it is first sent; its file's name, or None when it could not be
        written (a full disk): then the sample is kept in memory only, as without a spool, which
        is better than not keeping it."""
        try:
            return self._write(document)
        except OSError as exc:
            log.warning("spool %s: cannot write a sample (%s): kept in memory only", self.directory,
                        exc.strerror or exc)
            return None

    def _write(self, document: bytes) -> str:
        number = self._next
        self._next += 1
        temporary, name = f"{number:020d}.tmp", f"{number:020d}.sample"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=self._fd)
        try:
            try:
                view = memoryview(document)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(temporary, name, src_dir_fd=self._fd, dst_dir_fd=self._fd)
        except OSError:
            try:
                os.unlink(temporary, dir_fd=self._fd)
            except OSError:
                pass
            raise
        try:
            os.fsync(self._fd)  # the rename itself on disk: the sample is there before it is sent
        except OSError as exc:
            # The file is there (it may or may not survive a crash): tracked by its name, so that
            # it is removed once acknowledged, not sent again at the next start after newer ones.
            log.warning("spool %s: cannot sync the directory (%s): %s may not outlive a crash", self.directory,
                        exc.strerror or exc, name)
        return name

    def remove(self, name: str) -> None:
        """The sample is acknowledged (or dropped): its file goes, and the removal is on disk before
        the next sample is sent (see the module's docstring)."""
        try:
            os.unlink(name, dir_fd=self._fd)
            os.fsync(self._fd)
        except FileNotFoundError:
            pass  # removed by hand: nothing left to send again
        except OSError as exc:
            # It would be sent again at the next start, after newer ones the server stored.
            log.error("spool %s: cannot remove %s (%s): remove it by hand before the agent's next start",
                      self.directory, name, exc.strerror or exc)

    def close(self) -> None:
        """Release the directory (and its lock); the files stay for the next start."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
