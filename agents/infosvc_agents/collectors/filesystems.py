"""File systems: the host's real (block-backed or network/cluster) mounts with their space.

Mounts come from /proc/self/mountinfo; pseudo file systems, container plumbing, bind-mount
duplicates and FUSE mounts made by users other than root are left out, and of the rest at most
MAX_FILE_SYSTEMS, described in at most MAX_FILE_SYSTEM_BYTES, are kept (within_bounds): what the
host mounts never takes its report past what the aggregator takes. statvfs runs on a worker
thread and every answer is awaited for at most `timeout` seconds, so a hung NFS server costs one
sample one timeout, never the agent.
A mountinfo line that cannot be parsed is skipped with a warning; the other mounts stay.
The collector serves one sample at a time (the registry runs collectors in turn).
"""

from __future__ import annotations

import logging
import os
import posixpath
import queue
import re
import select
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Final


from infosvc_agents.collectors._files import ProcFile, read_text
from infosvc_agents.host_node import file_system_bytes, xml_safe

log = logging.getLogger("infosvc_agents.collectors.filesystems")

StatVFS = Callable[[str], Any]

REMOTE_TYPES: Final = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "cephfs", "fuse.ceph",
    "fuse.ceph-fuse", "glusterfs", "fuse.glusterfs", "fuse.sshfs", "sshfs", "afs", "openafs", "panfs",
    "pvfs2", "orangefs", "9p", "virtiofs", "gfs2", "ocfs2", "fuse.s3fs", "fuse.rclone", "fuse.gcsfuse",
    "fuse.cvmfs2", "cvmfs", "davfs", "fuse.davfs2", "ncpfs", "coda", "fhgfs", "mmfs", "wekafs",
})
LOCAL_TYPES: Final = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "vfat", "msdos", "exfat", "ntfs", "ntfs3", "fuseblk",
    "f2fs", "jfs", "reiserfs", "hfs", "hfsplus", "udf", "iso9660", "bcachefs", "nilfs2", "ufs", "minix",
})
PSEUDO_TYPES: Final = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "tmpfs", "ramfs", "rootfs", "cgroup", "cgroup2", "cpuset",
    "overlay", "aufs", "securityfs", "debugfs", "tracefs", "bpf", "mqueue", "hugetlbfs", "fusectl",
    "configfs", "pstore", "autofs", "squashfs", "erofs", "nsfs", "rpc_pipefs", "binfmt_misc", "efivarfs",
    "selinuxfs", "sockfs", "pipefs", "nfsd", "devfs", "usbfs", "xenfs", "fuse", "fuse.lxcfs",
    "fuse.gvfsd-fuse", "fuse.portal", "fuse.snapfuse", "zonefs", "ipathfs", "functionfs", "gadgetfs",
})
# In a container the root is an overlay (or aufs) and is the only root there is.
_ROOT_ONLY_TYPES: Final = frozenset({"overlay", "aufs"})
EXCLUDED_UNDER: Final = ("/proc", "/sys", "/dev", "/run/credentials", "/var/lib/docker",
                         "/var/lib/containers", "/var/lib/kubelet", "/run/containerd")
# Container runtimes bind single files of the host's disk here; they are not file systems.
EXCLUDED_AT: Final = frozenset({"/etc/hosts", "/etc/hostname", "/etc/resolv.conf"})

_OCTAL: Final = re.compile(rb"\\([0-7]{3})")

#: At most this many file systems are reported (and are on the agent's /metrics), and their part
#: of the report (host_node.file_system_bytes) at most this many bytes: whatever the host mounts,
#: a report stays within the aggregator's default [reports] caps (infosvc/config/site.py:
#: max_file_systems 256, max_file_system_chars 80 KiB, and the file systems' share of
#: max_extension_chars 96 KiB, max_resource_chars 48 KiB and max_body_bytes 256 KiB, which the
#: rest of the report shares). A report past one is refused whole (413), every one of them, and
#: the host goes Unreachable: 300 mounts did it. A large real host has 64 on long paths (~45 KB).
MAX_FILE_SYSTEMS: Final = 128
MAX_FILE_SYSTEM_BYTES: Final = 64 * 1024
#: A file system whose mount point (as reported: made XML-safe) is longer, or its device or type,
#: is left out, not cut short: its mount point names it in the report, its device and type label
#: its series, and a name cut short could be another's. PATH_MAX is 4,096; no real one nears these.
MAX_MOUNT_POINT_CHARS: Final = 1024
MAX_NAME_CHARS: Final = 256
#: The log says which file systems were left out at most once per this many seconds per collector
#: (the selection is made again at each change of the mount table, which users can make at will).
LEFT_OUT_LOG_SECONDS: Final = 600.0


@dataclass(frozen=True, slots=True)
class FileSystem:
    mount_point: str
    device: str
    fstype: str
    size: int
    free: int
    available: int
    read_only: bool
    remote: bool


@dataclass(frozen=True, slots=True)
class Mount:
    """One line of mountinfo, unescaped."""

    dev: str
    root: str
    mount_point: str
    fstype: str
    source: str
    read_only: bool
    #: the super options' user_id=N, which FUSE writes (the user who made the mount); None when absent
    user_id: int | None = None


def unescape(field: str) -> str:
    """Undo mountinfo's octal escapes (\\040 space, \\011 tab, \\012 newline, \\134 backslash)."""
    if "\\" not in field:
        return field
    # The escapes stand for bytes, so a UTF-8 name escaped byte by byte is rebuilt as bytes.
    raw = _OCTAL.sub(lambda m: bytes((int(m[1], 8),)), field.encode("utf-8", "surrogateescape"))
    return raw.decode("utf-8", "surrogateescape")


def parse_mountinfo(text: str, where: str = "mountinfo") -> list[Mount]:
    mounts: list[Mount] = []
    for line in text.splitlines():
        fields = line.split(" ")
        try:
            sep = fields.index("-", 6)
            dev, root, mount_point, options = fields[2], fields[3], fields[4], fields[5]
            fstype, source = fields[sep + 1], fields[sep + 2]
            if ":" not in dev or not mount_point.startswith("/"):
                raise ValueError
        except (ValueError, IndexError):
            if line.strip():
                log.warning("skipping malformed %s line: %r", where, line[:200])
            continue
        mounts.append(Mount(dev, unescape(root), unescape(mount_point), fstype, unescape(source),
                            "ro" in options.split(","), _user_id(fields[sep + 3] if len(fields) > sep + 3 else "")))
    return mounts


def _user_id(super_options: str) -> int | None:
    for option in super_options.split(","):
        if option.startswith("user_id="):
            try:
                return int(option[8:])
            except ValueError:
                return None
    return None


def parse_filesystems(text: str) -> dict[str, bool]:
    """/proc/filesystems as {type: is nodev}."""
    table: dict[str, bool] = {}
    for line in text.splitlines():
        flag, _, fstype = line.rpartition("\t")
        if fstype.strip():
            table[fstype.strip()] = flag.strip() == "nodev"
    return table


def is_remote(fstype: str) -> bool:
    return fstype in REMOTE_TYPES


def is_fuse(fstype: str) -> bool:
    """FUSE's types: fuse and fuseblk, fuse.<subtype> and fuseblk.<subtype> (the subtype is the
    mounter's to name)."""
    return fstype in ("fuse", "fuseblk") or fstype.startswith(("fuse.", "fuseblk."))


def made_by_a_user(mount: Mount) -> bool:
    """Whether a mount is a FUSE one that root did not make. Any user may mount FUSE file systems
    with the setuid fusermount, as many as they like, of a type they name (fuse.sshfs, in
    REMOTE_TYPES), with paths of any length: they are theirs, not the host's (300 of them had every
    report of the host refused), and their statvfs waits on whatever server they name. The kernel
    writes user_id= (the mounter's uid) in every FUSE mount's super options, allow_other or not (a
    user may ask for allow_other too, where fuse.conf has user_allow_other): only user_id=0 is
    root's. One without user_id is not the kernel's FUSE as we know it, so not trusted either."""
    return is_fuse(mount.fstype) and mount.user_id != 0


def is_real(mount: Mount, nodev: Callable[[str], bool | None]) -> bool:
    """Whether a mount is a real file system; `nodev(type)` is /proc/filesystems' word, or None."""
    fstype = mount.fstype
    if fstype in REMOTE_TYPES:
        return True
    if fstype in _ROOT_ONLY_TYPES:
        return mount.mount_point == "/"
    if fstype in PSEUDO_TYPES:
        return False
    if fstype in LOCAL_TYPES:
        return True
    marked = nodev(fstype)
    if marked is not None:
        return not marked
    # Unknown everywhere (e.g. a fuse subtype): device major 0 means no block device behind it.
    return not mount.dev.startswith("0:")


def _excluded(mount_point: str) -> bool:
    if mount_point in EXCLUDED_AT:
        return True
    return any(mount_point == top or mount_point.startswith(top + "/") for top in EXCLUDED_UNDER)


def select_mounts(mounts: list[Mount], nodev: Callable[[str], bool | None]) -> list[Mount]:
    """The real, non-excluded mounts, one per device, sorted by mount point."""
    # A later line mounted over the same point hides the earlier one; statvfs sees the top one.
    visible = {m.mount_point: m for m in mounts}
    best: dict[str, Mount] = {}
    for mount in visible.values():
        if _excluded(mount.mount_point) or made_by_a_user(mount) or not is_real(mount, nodev):
            continue
        kept = best.get(mount.dev)
        # Bind mounts share the device: prefer the one showing the file system's own root,
        # then the shortest (then alphabetically first) mount point.
        if kept is None or _rank(mount) < _rank(kept):
            best[mount.dev] = mount
    return sorted(best.values(), key=lambda m: m.mount_point)


def _rank(mount: Mount) -> tuple[bool, int, str]:
    return (mount.root != "/", len(mount.mount_point), mount.mount_point)


def within_bounds(mounts: list[Mount]) -> tuple[list[Mount], list[Mount]]:
    """(the mounts to report, sorted by mount point; those left out): at most MAX_FILE_SYSTEMS,
    their part of the report at most MAX_FILE_SYSTEM_BYTES, none of a name past MAX_MOUNT_POINT_CHARS
    or MAX_NAME_CHARS. The most useful are kept: local file systems first (the node's Disk), then
    network and cluster ones; within each, those that stand alone or nearly (the site's /home,
    /lustre/work, /cvmfs/<repository>) before a crowd of them in one directory (per-user
    automounted homes), then by mount point. The order depends on the set of mounts alone, not on
    mountinfo's order, so the same mounts give the same selection; one that does not fit what is
    left of the bytes is skipped and a smaller one after it may still be kept."""
    crowd = Counter(posixpath.dirname(mount.mount_point) for mount in mounts)
    kept: list[Mount] = []
    left_out: list[Mount] = []
    budget = MAX_FILE_SYSTEM_BYTES
    for mount in sorted(mounts, key=lambda m: (is_remote(m.fstype), crowd[posixpath.dirname(m.mount_point)],
                                               m.mount_point)):
        if (len(kept) >= MAX_FILE_SYSTEMS or len(xml_safe(mount.mount_point)) > MAX_MOUNT_POINT_CHARS
                or len(xml_safe(mount.source)) > MAX_NAME_CHARS or len(xml_safe(mount.fstype)) > MAX_NAME_CHARS
                or (cost := file_system_bytes(mount.mount_point, mount.source, mount.fstype)) > budget):
            left_out.append(mount)
            continue
        budget -= cost
        kept.append(mount)
    kept.sort(key=lambda m: m.mount_point)
    return kept, left_out


class _StatWorker:
    """A daemon thread doing the statvfs calls of each job in order.

    Once retired (the sample stopped waiting for it) it finishes the call it is stuck in,
    clears that mount's hung mark and exits without doing the rest of its job.
    """

    def __init__(self, statvfs: StatVFS, lock: threading.Lock, hung: set[str]) -> None:
        self.jobs: queue.SimpleQueue[tuple[list[str], queue.SimpleQueue[tuple[str, Any]]] | None] = queue.SimpleQueue()
        self.current: str | None = None
        self.retired = False
        self._statvfs = statvfs
        self._lock = lock
        self._hung = hung
        threading.Thread(target=self._run, name="infosvc-statvfs", daemon=True).start()

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            paths, results = job
            for path in paths:
                with self._lock:
                    if self.retired:
                        return
                    self.current = path
                try:
                    value: Any = self._statvfs(path)
                except Exception as exc:  # noqa: BLE001 - handed to the sample, which logs it
                    value = exc
                with self._lock:
                    self.current = None
                    if self.retired:
                        if path in self._hung:
                            self._hung.discard(path)
                            log.info("statvfs(%s) returned at last; it will be tried again next sample", path)
                        return
                    # Under the lock so that a sample that retires us sees every delivered result.
                    results.put((path, value))


class FileSystemCollector:
    name = "filesystems"

    def __init__(self, proc_root: str = "/proc", statvfs: StatVFS = os.statvfs, timeout: float = 1.0) -> None:
        self._mountinfo_file = ProcFile(os.path.join(proc_root, "self", "mountinfo"))
        self._poll: select.poll | None = None
        self._polled_fd = -1
        self._filesystems_path = os.path.join(proc_root, "filesystems")
        self._statvfs = statvfs
        self._timeout = timeout
        self._lock = threading.Lock()
        self._hung: set[str] = set()
        self._worker: _StatWorker | None = None
        self._mountinfo: str | None = None
        self._mounts: list[Mount] = []
        self._order: list[str] = []
        self._left_out_said = -LEFT_OUT_LOG_SECONDS  # when the last left-out line was written (monotonic)

    @property
    def hung(self) -> frozenset[str]:
        """Mount points whose statvfs has not returned yet; skipped until it does."""
        with self._lock:
            return frozenset(self._hung)

    def close(self) -> None:
        """Let the worker thread end (it is a daemon, so this is only tidiness)."""
        self._mountinfo_file.close()
        self._poll = None
        worker, self._worker = self._worker, None
        if worker is not None:
            with self._lock:
                worker.retired = True
            worker.jobs.put(None)

    def collect(self) -> tuple[FileSystem, ...]:
        text = self._read_mountinfo()
        if text is not None and text != self._mountinfo:
            # Mount tables rarely change; re-parse only when the text does. Bounded here, before any
            # statvfs, so that the report and /metrics (both made of what collect returns) have
            # the same file systems, and one left out costs nothing.
            self._mounts, left_out = within_bounds(
                select_mounts(parse_mountinfo(text, self._mountinfo_file.path), self._nodev_table()))
            if left_out:
                self._say_left_out(left_out)
            # Local file systems first: if a network one hangs, the calls still queued behind
            # it are lost for this sample, and those should be the other network ones.
            self._order = [m.mount_point for m in sorted(self._mounts, key=lambda m: is_remote(m.fstype))]
            self._mountinfo = text
        stats = self._stat_all(self._order)
        out: list[FileSystem] = []
        for mount in self._mounts:
            st = stats.get(mount.mount_point)
            if st is None:
                continue
            frsize = st.f_frsize or st.f_bsize
            out.append(FileSystem(
                mount_point=mount.mount_point, device=mount.source, fstype=mount.fstype,
                size=st.f_blocks * frsize, free=st.f_bfree * frsize, available=st.f_bavail * frsize,
                read_only=mount.read_only, remote=is_remote(mount.fstype),
            ))
        return tuple(out)

    def _say_left_out(self, left_out: list[Mount]) -> None:
        # The names are the mounter's, of any length: the first few, each cut short, make the line.
        named = ", ".join(xml_safe(m.mount_point if len(m.mount_point) <= 80 else m.mount_point[:77] + "...")
                          for m in left_out[:5])
        now = time.monotonic()
        if now - self._left_out_said < LEFT_OUT_LOG_SECONDS:
            return  # said already in this interval (the agent imports no module of the service's)
        self._left_out_said = now
        log.warning(
            "left out %d of the host's %d file systems from its reports and /metrics, so that a report "
            "stays within what the aggregator takes (at most %d file systems in %d bytes, mount points of at most "
            "%d characters, devices and types of %d; local ones first, then those alone in their directory before "
            "crowds): %s%s", len(left_out), len(left_out) + len(self._mounts), MAX_FILE_SYSTEMS,
            MAX_FILE_SYSTEM_BYTES, MAX_MOUNT_POINT_CHARS, MAX_NAME_CHARS, named, ", ..." if len(left_out) > 5 else "")

    def _read_mountinfo(self) -> str | None:
        """mountinfo's text, or None when the kernel says it has not changed since the last read.

        The live mountinfo signals POLLPRI|POLLERR once after every change of the mount
        table (proc(5)); generating the text costs more than the rest of the sample here.
        """
        if self._poll is not None and self._mountinfo is not None:
            events = self._poll.poll(0)
            if not events:
                return None
            if any(flags & select.POLLNVAL for _, flags in events):
                self._poll = None  # the descriptor was replaced; register the new one below
        text = self._mountinfo_file.read()
        fd = self._mountinfo_file.fd
        if fd >= 0 and (self._poll is None or fd != self._polled_fd):
            self._poll = select.poll()
            self._poll.register(fd, select.POLLPRI)
            self._polled_fd = fd
        return text

    def _nodev_table(self) -> Callable[[str], bool | None]:
        table: dict[str, bool] | None = None

        def nodev(fstype: str) -> bool | None:
            nonlocal table
            if table is None:
                # Read lazily: only types missing from the lists above need it.
                try:
                    table = parse_filesystems(read_text(self._filesystems_path))
                except OSError:
                    table = {}
            return table.get(fstype)

        return nodev

    def _stat_all(self, paths: list[str]) -> dict[str, Any]:
        with self._lock:
            hung = set(self._hung)
        if hung:
            log.debug("skipping mounts whose statvfs has not returned: %s", ", ".join(sorted(hung)))
            paths = [p for p in paths if p not in hung]
        if not paths:
            return {}
        worker = self._worker
        if worker is None:
            worker = self._worker = _StatWorker(self._statvfs, self._lock, self._hung)
        results: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        worker.jobs.put((paths, results))
        stats: dict[str, Any] = {}
        done: set[str] = set()
        for _ in paths:
            try:
                path, value = results.get(timeout=self._timeout)
            except queue.Empty:
                self._give_up(worker, results, paths, stats, done)
                break
            self._keep(path, value, stats, done)
        return stats

    def _give_up(self, worker: _StatWorker, results: queue.SimpleQueue[tuple[str, Any]], paths: list[str],
                 stats: dict[str, Any], done: set[str]) -> None:
        with self._lock:
            worker.retired = True
            stuck = worker.current
            if stuck is not None:
                self._hung.add(stuck)
        self._worker = None
        # Answers delivered before the worker was retired are still good.
        while True:
            try:
                path, value = results.get_nowait()
            except queue.Empty:
                break
            self._keep(path, value, stats, done)
        if stuck is not None:
            log.warning("statvfs(%s) did not return within %gs; skipping that mount until the call returns",
                        stuck, self._timeout)
        else:
            log.warning("the statvfs worker did not answer within %gs", self._timeout)
        owed = [p for p in paths if p not in done and p != stuck]
        if owed:
            log.warning("skipping %d mount(s) queued behind it this sample: %s", len(owed), ", ".join(owed))

    @staticmethod
    def _keep(path: str, value: Any, stats: dict[str, Any], done: set[str]) -> None:
        done.add(path)
        if isinstance(value, Exception):
            log.warning("skipping %s: statvfs failed: %s: %s", path, type(value).__name__, value)
        else:
            stats[path] = value
