"""A real Slurm cluster for tests and benchmarks: Debian's slurm-wlm (22.05) with munge, one
slurmctld and several `slurmd -N NAME` daemons on this machine, each emulated node on its own
loopback port, all configured in a throwaway directory.

Every cluster picks free ports and a ClusterName of its own, so two pytest workers (or two people
on one machine) can each run one at once. The daemons run in the foreground (`-D`) as children of
the test, so each is stopped by its own pid, never by name: other clusters may be running. munged
is shared: one that answers is reused, else it is started as the munge user (and left running,
as the system's own would be).

The default layout (`Layout()`): four compute nodes c1-c4 (4 CPUs: 2 sockets x 2 cores, 1000 MB,
features intel,ib) and one GPU node g1 (4 CPUs, 1000 MB, `Gres=gpu:2` on /dev/null and /dev/zero,
feature gpu); partitions `batch` (default, every node, no limits) and `short` (c1, c2, g1; MaxTime
30 minutes, MaxNodes 2); c4 drained with the reason "disk replaced".

Without Slurm a test skips locally and fails under CI (`binary`, as tests/support/slapd.py's):
.ci/run installs slurm-wlm and munge.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from support import programs
MUNGE_SOCKET = Path("/run/munge/munge.socket.2")
#: how long start-up, a node's registration or a controller's return may take on a loaded machine
WAIT_SECONDS = 60.0


def binary(name: str) -> str:
    """The installed Slurm or munge program `name`; a test without it skips, unless under CI, where it fails."""
    return programs.binary(name, "slurm-wlm munge")


@dataclass(frozen=True)
class Node:
    name: str
    cpus: int = 4
    sockets: int = 2
    cores_per_socket: int = 2
    threads_per_core: int = 1
    memory_mb: int = 1000
    features: tuple[str, ...] = ()
    gpus: int = 0  # at most 2: each is a device file that exists everywhere (/dev/null, /dev/zero)


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: tuple[str, ...]  # () = every node
    default: bool = False
    max_time_minutes: int | None = None  # None: UNLIMITED
    max_nodes: int | None = None


@dataclass(frozen=True)
class Layout:
    nodes: tuple[Node, ...] = (
        *(Node(f"c{i}", features=("intel", "ib")) for i in range(1, 5)),
        Node("g1", sockets=1, cores_per_socket=4, features=("gpu",), gpus=2))
    partitions: tuple[Partition, ...] = (
        Partition("batch", (), default=True),
        Partition("short", ("c1", "c2", "g1"), max_time_minutes=30, max_nodes=2))
    #: node -> reason, drained once the cluster is up
    drained: dict[str, str] = field(default_factory=lambda: {"c4": "disk replaced"})


def many_nodes(count: int, cpus: int = 10) -> Layout:
    """`count` plain nodes n0001... in one default partition `main`, none drained (for benchmarks)."""
    nodes = tuple(Node(f"n{i:04d}", cpus=cpus, sockets=1, cores_per_socket=cpus) for i in range(1, count + 1))
    return Layout(nodes, (Partition("main", (), default=True),), {})


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):  # held together, so no two are the same
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def ensure_munged() -> None:
    """A munged answering on the default socket: reused when one answers, else started."""
    munge, unmunge = binary("munge"), binary("unmunge")

    def answers() -> bool:
        made = subprocess.run([munge, "-n"], capture_output=True, timeout=10)
        return made.returncode == 0 and subprocess.run([unmunge], input=made.stdout, capture_output=True,
                                                       timeout=10).returncode == 0
    if MUNGE_SOCKET.exists() and answers():
        return
    munged = binary("munged")
    key = Path("/etc/munge/munge.key")
    if not key.exists():
        subprocess.run([binary("mungekey"), "--create"], check=True, capture_output=True, timeout=30)
        shutil.chown(key, "munge", "munge")
    MUNGE_SOCKET.parent.mkdir(parents=True, exist_ok=True)
    shutil.chown(MUNGE_SOCKET.parent, "munge", "munge")
    subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", munged], check=True, capture_output=True, timeout=30)
    deadline = time.monotonic() + WAIT_SECONDS
    while not answers():
        if time.monotonic() > deadline:
            raise RuntimeError("munged did not answer")
        time.sleep(0.1)


@dataclass
class SlurmCluster:
    """One running cluster: its slurm.conf, its daemons, and the commands run against it."""

    directory: Path
    layout: Layout = field(default_factory=Layout)
    name: str = field(default_factory=lambda: "t" + secrets.token_hex(4))
    controller_port: int = 0
    node_ports: dict[str, int] = field(default_factory=dict)
    controller: subprocess.Popen[bytes] | None = None
    daemons: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.directory / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment the Slurm commands need to reach this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    @property
    def bin_dir(self) -> str:
        return str(Path(binary("sinfo")).parent)

    def lrms(self, **settings: object) -> dict[str, object]:
        """The server's `[lrms]` for this cluster, with `settings` beside its own."""
        return {"type": "slurm", "slurm_conf": str(self.conf), "bin_dir": self.bin_dir, **settings}

    def run(self, *args: str, check: bool = True, timeout: float = 60) -> str:
        """A Slurm command (`sinfo`, `squeue`, `scontrol` ...) against this cluster; its stdout."""
        # in the cluster's directory: sbatch writes a job's slurm-ID.out where it was submitted from
        done = subprocess.run([binary(args[0]), *args[1:]], env=self.env, capture_output=True, text=True,
                              timeout=timeout, cwd=self.directory)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
        return done.stdout

    def sbatch(self, *args: str) -> int:
        """A batch job submitted directly (`sbatch --parsable ARGS`); its id."""
        return int(self.run("sbatch", "--parsable", *args).strip().split(";")[0])

    def drain(self, node: str, reason: str) -> None:
        self.run("scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}")

    def down(self, node: str, reason: str) -> None:
        self.run("scontrol", "update", f"nodename={node}", "state=down", f"reason={reason}")

    def resume(self, node: str) -> None:
        self.run("scontrol", "update", f"nodename={node}", "state=resume")

    def set_partition(self, partition: str, state: str) -> None:
        self.run("scontrol", "update", f"partitionname={partition}", f"state={state}")

    def cancel_all(self, wait: bool = True) -> None:
        """Every job of this cluster cancelled; with `wait`, until squeue lists none."""
        ids = self.run("squeue", "-h", "-o", "%i").split()
        if ids:
            self.run("scancel", *ids, check=False)
        deadline = time.monotonic() + WAIT_SECONDS
        while wait and self.run("squeue", "-h", "-o", "%i").split():
            if time.monotonic() > deadline:
                raise RuntimeError("jobs still listed after scancel")
            time.sleep(0.2)

    # --- start and stop ------------------------------------------------------------------------

    def write_config(self) -> None:
        for sub in ("state", "spool", "log"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        ports = _free_ports(1 + len(self.layout.nodes))
        self.controller_port = ports[0]
        self.node_ports = {n.name: p for n, p in zip(self.layout.nodes, ports[1:])}
        d, host = self.directory, socket.gethostname()
        lines = [
            f"ClusterName={self.name}", f"SlurmctldHost={host}", "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", "CredType=cred/munge", f"SlurmctldPort={self.controller_port}",
            f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd-%n.log",
            "SlurmctldDebug=info", "SlurmdDebug=error", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU", "SchedulerType=sched/backfill",
            "SchedulerParameters=bf_interval=5,bf_max_job_test=20000,default_queue_depth=20000",
            "AccountingStorageType=accounting_storage/none", "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none", "MpiDefault=none", "ReturnToService=2", "SlurmdParameters=config_overrides",
            "MaxJobCount=200000", "MinJobAge=5", "SlurmdTimeout=300", "SlurmctldTimeout=120", "InactiveLimit=0",
            "KillWait=2", "GresTypes=gpu",
        ]
        gres = []
        for node in self.layout.nodes:
            extra = f" Feature={','.join(node.features)}" if node.features else ""
            if node.gpus:
                extra += f" Gres=gpu:{node.gpus}"
                gres += [f"NodeName={node.name} Name=gpu File={dev}" for dev in ("/dev/null", "/dev/zero")[:node.gpus]]
            lines.append(f"NodeName={node.name} NodeHostname={host} NodeAddr=127.0.0.1 Port={self.node_ports[node.name]}"
                         f" CPUs={node.cpus} Sockets={node.sockets} CoresPerSocket={node.cores_per_socket}"
                         f" ThreadsPerCore={node.threads_per_core} RealMemory={node.memory_mb}{extra} State=UNKNOWN")
        for part in self.layout.partitions:
            limits = f" MaxTime={part.max_time_minutes if part.max_time_minutes is not None else 'INFINITE'}"
            if part.max_nodes is not None:
                limits += f" MaxNodes={part.max_nodes}"
            nodes = ",".join(part.nodes) if part.nodes else "ALL"
            lines.append(f"PartitionName={part.name} Nodes={nodes} Default={'YES' if part.default else 'NO'}"
                         f"{limits} State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        (self.directory / "gres.conf").write_text("\n".join(gres) + "\n")

    def start(self) -> SlurmCluster:
        ensure_munged()
        self.write_config()
        self.start_controller()
        slurmd = binary("slurmd")
        for node in self.layout.nodes:
            log = open(self.directory / "log" / f"slurmd-{node.name}.out", "wb")
            self.daemons[node.name] = subprocess.Popen([slurmd, "-D", "-f", str(self.conf), "-N", node.name],
                                                       stdout=log, stderr=subprocess.STDOUT, env=self.env)
        self.wait_for_nodes()
        for node, reason in self.layout.drained.items():
            self.drain(node, reason)
        return self

    def wait_for_nodes(self) -> None:
        """Until every node has registered (none unknown, down or not responding)."""
        deadline = time.monotonic() + WAIT_SECONDS + len(self.layout.nodes) * 0.5
        while True:
            states = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False).split("\n")
            pending = [line for line in states if line and not line.split()[1].rstrip("*~#!%$@^-").endswith(
                ("idle", "mixed", "allocated", "drained", "draining"))]
            if not pending and states != [""]:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"nodes not up: {pending[:5]} (logs in {self.directory / 'log'})")
            time.sleep(0.2)

    def start_controller(self) -> None:
        """slurmctld started (again: the state saved in the directory is read back), and answering."""
        log = open(self.directory / "log" / "slurmctld.out", "ab")
        self.controller = subprocess.Popen([binary("slurmctld"), "-D", "-f", str(self.conf)], stdout=log,
                                           stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + WAIT_SECONDS
        while "is UP" not in self.run("scontrol", "ping", check=False):
            if self.controller.poll() is not None:
                raise RuntimeError(f"slurmctld exited: {(self.directory / 'log' / 'slurmctld.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("slurmctld did not answer")
            time.sleep(0.1)

    def stop_controller(self) -> None:
        """slurmctld stopped (its pid), the nodes and their jobs left running, as in a controller's outage."""
        if self.controller is not None:
            _stop(self.controller)
            self.controller = None

    def stop(self) -> None:
        """Every job cancelled (so no job step outlives its slurmd), then every daemon stopped by its pid."""
        if self.controller is not None:
            try:
                self.cancel_all()
            except (AssertionError, RuntimeError, subprocess.TimeoutExpired):
                pass
        for process in self.daemons.values():
            _stop(process)
        self.daemons.clear()
        self.stop_controller()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def running(directory: Path, layout: Layout | None = None) -> Iterator[SlurmCluster]:
    """A started cluster with its files in `directory`, every daemon stopped at the end."""
    cluster = SlurmCluster(directory, layout or Layout())
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@contextmanager
def readable(prefix: str) -> Iterator[SlurmCluster]:
    """A started cluster whose directory (its slurm.conf) other accounts may read, as they read
    /etc/slurm (pytest's own directories are root's alone): for a server that runs sbatch as a pool
    account or an owner's own; removed at the end."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    directory.chmod(0o755)
    try:
        with running(directory) as cluster:
            yield cluster
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """The default layout's cluster, shared by a test module's tests (each leaves no job behind)."""
    with running(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster
