"""Processors: static CPU facts read once, busy CPUs averaged between samples, and each CPU's
time per mode (the counters of node_exporter's node_cpu_seconds_total), both from /proc/stat.

The static facts come from /proc/cpuinfo, /sys/devices/system/cpu and (once, because it is
slow) py-cpuinfo. A sample reads the "cpu" lines at the top of /proc/stat. A /proc/stat whose
first line is not the aggregate "cpu" line raises ValueError.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Final

from infosvc_agents.collectors._files import ProcFile, is_live_root, read_attr, read_text

log = logging.getLogger("infosvc_agents.collectors.processors")

# MIDR implementer codes (Arm ARM); aarch64 /proc/cpuinfo gives only the code.
_ARM_IMPLEMENTERS: Final[dict[int, str]] = {
    0x41: "ARM", 0x42: "Broadcom", 0x43: "Cavium", 0x46: "Fujitsu", 0x48: "HiSilicon",
    0x4E: "NVIDIA", 0x50: "APM", 0x51: "Qualcomm", 0x53: "Samsung", 0x56: "Marvell",
    0x61: "Apple", 0xC0: "Ampere",
}
_SIZE_UNITS: Final[dict[str, int]] = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@dataclass(frozen=True, slots=True)
class ProcessorInfo:
    """What the processors are; read once at construction."""

    logical: int
    physical: int | None
    sockets: int | None
    vendor: str | None
    model: str | None
    version: str | None
    clock_mhz: float | None
    isa: str | None
    flags: tuple[str, ...]
    caches: dict[str, int]


@dataclass(frozen=True, slots=True)
class ProcessorUsage:
    """Average number of busy logical CPUs over the last `seconds` of wall time."""

    busy: float
    seconds: float


#: /proc/stat's columns after "cpuN", in order; guest and guest_nice are also counted in user and nice.
STAT_MODES: Final = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
#: An idle counter this far behind the last one is a CPU taken offline and back, not jitter (as node_exporter).
_JUMP_BACK_SECONDS: Final = 3.0


@dataclass(frozen=True, slots=True)
class CpuTimes:
    """One logical CPU's seconds in each of STAT_MODES since boot, never smaller than the last sample's."""

    cpu: str  # the N of /proc/stat's "cpuN"
    seconds: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class ProcessorSample:
    info: ProcessorInfo
    usage: ProcessorUsage
    times: tuple[CpuTimes, ...] = ()


def parse_cpu_list(text: str) -> list[int]:
    """CPU numbers from a kernel CPU list such as "0-3,8,10-11"."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        first, dash, last = part.partition("-")
        cpus.extend(range(int(first), int(last) + 1) if dash else (int(first),))
    return cpus


def parse_cpuinfo(text: str) -> list[dict[str, str]]:
    """/proc/cpuinfo as one dict per block; aarch64 and others may add a block with no "processor"."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if current:
                blocks.append(current)
                current = {}
            continue
        current[key.strip()] = value.strip()
    if current:
        blocks.append(current)
    return blocks


def parse_size(text: str) -> int:
    """A sysfs or py-cpuinfo size such as "32K", "8192K", "512 KiB" or "1 MB" in bytes."""
    value = text.strip().upper().replace(" ", "").removesuffix("B").removesuffix("I")
    number = value.rstrip("KMG")
    return int(float(number) * _SIZE_UNITS[value[len(number):]])


def parse_stat_cpu(text: str) -> tuple[int, int]:
    """(total, busy) jiffies from the aggregate "cpu" line of /proc/stat.

    The total is user+nice+system+idle+iowait+irq+softirq+steal: guest and guest_nice are
    already counted inside user and nice, so adding them would count guest time twice.
    """
    line = text[: text.find("\n")] if "\n" in text else text
    fields = line.split()
    if not fields or fields[0] != "cpu" or len(fields) < 5:
        raise ValueError(f"/proc/stat does not start with an aggregate cpu line: {line[:80]!r}")
    try:
        values = [int(v) for v in fields[1:9]]
    except ValueError:
        raise ValueError(f"/proc/stat cpu line has a non-integer field: {line[:80]!r}") from None
    values += [0] * (8 - len(values))  # kernels before 2.6 stop after idle
    total = sum(values)
    return total, total - values[3] - values[4]


def parse_stat_cpus(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """(N, jiffies in STAT_MODES order) for each "cpuN" line of /proc/stat, in the file's order.

    Only the CPUs online are listed. Columns a kernel does not have yet (steal, guest, ...) are 0;
    a line with a non-integer column is left out rather than failing the whole sample.
    """
    found: list[tuple[str, tuple[int, ...]]] = []
    width = len(STAT_MODES)
    start = text.find("\n") + 1  # past the aggregate line; the per-CPU lines follow it, before "intr"
    while start and text.startswith("cpu", start):
        end = text.find("\n", start)
        fields = text[start: end if end >= 0 else len(text)].split()
        start = end + 1
        cpu = fields[0][3:]
        if not cpu.isdigit():
            continue
        try:
            values = tuple(map(int, fields[1:width + 1]))
        except ValueError:
            continue
        found.append((cpu, values + (0,) * (width - len(values))))
    return found


class ProcessorCollector:
    """Static processor facts plus busy CPUs since the previous sample (or since boot)."""

    name = "processors"

    def __init__(self, proc_root: str = "/proc", sys_root: str = "/sys",
                 cpuinfo: Callable[[], dict[str, Any]] | None = None) -> None:
        self._stat = ProcFile(os.path.join(proc_root, "stat"))
        if cpuinfo is None:
            # py-cpuinfo describes the machine we run on, so it is only asked when the roots
            # are that machine's: on a fixture tree it would mix in facts of the wrong host.
            cpuinfo = _py_cpuinfo if is_live_root(proc_root) else dict
        self.info = read_processor_info(proc_root, sys_root, cpuinfo)
        self._hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._last: tuple[int, int] | None = None
        self._usage: ProcessorUsage | None = None
        self._cpu_jiffies: dict[str, tuple[int, ...]] = {}

    def collect(self) -> ProcessorSample:
        text = self._stat.read()
        total, busy = parse_stat_cpu(text)
        times = self._times(text)
        last = self._last
        if last is None:
            d_total, d_busy = total, busy  # first sample: the average since boot
        else:
            d_total, d_busy = total - last[0], busy - last[1]
            if d_total <= 0 and self._usage is not None:
                # Two samples inside one jiffy (or idle jitter making the total step back):
                # nothing new to average, so repeat the last answer and keep the old baseline.
                return ProcessorSample(self.info, self._usage, times)
        self._last = (total, busy)
        logical = self.info.logical
        usage = ProcessorUsage(
            busy=min(max(d_busy, 0), d_total) / d_total * logical if d_total > 0 else 0.0,
            seconds=max(d_total, 0) / logical / self._hz,
        )
        self._usage = usage
        return ProcessorSample(self.info, usage, times)

    def _times(self, text: str) -> tuple[CpuTimes, ...]:
        """Each CPU's counters, kept from going backwards as node_exporter keeps them: the kernel's idle
        and iowait can step back a little (NO_HZ accounting), which a counter must not; a big step
        back in idle is a CPU that went offline and came back, so its counters start over."""
        kept = self._cpu_jiffies
        jump_back = _JUMP_BACK_SECONDS * self._hz
        idle = STAT_MODES.index("idle")
        times = []
        for cpu, values in parse_stat_cpus(text):
            last = kept.get(cpu)
            if last is not None and last[idle] - values[idle] < jump_back and last != values:
                values = tuple(map(max, values, last))
            kept[cpu] = values
            times.append(CpuTimes(cpu, tuple(v / self._hz for v in values)))
        return tuple(times)


def _py_cpuinfo() -> dict[str, Any]:
    """py-cpuinfo's answer, asked of a child process once: imported, it would stay in the agent
    for its whole life (2.7 MiB of its resident memory, with ctypes and multiprocessing) for an
    answer needed at start alone. Isolated (-I): the agent runs as root, and a child that put its
    working directory (or PYTHONPATH, or the user's site) on sys.path would run a cpuinfo.py planted
    there; the installed py-cpuinfo, in the interpreter's own site-packages, is found all the same."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-I", "-m", "cpuinfo", "--json"], capture_output=True, timeout=60,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode("utf-8", "replace").strip()[-200:] or f"exit {done.returncode}")
    answer = json.loads(done.stdout)
    if not isinstance(answer, dict):
        raise ValueError("not a JSON object")
    return answer


def read_processor_info(proc_root: str, sys_root: str, cpuinfo: Callable[[], dict[str, Any]]) -> ProcessorInfo:
    """ProcessorInfo: vendor, model, version, clock and ISA from py-cpuinfo where it has them,
    else /proc/cpuinfo (and sysfs); counts, flags and caches from /proc/cpuinfo and sysfs."""
    try:
        py: dict[str, Any] = dict(cpuinfo() or {})
    except Exception as exc:  # noqa: BLE001 - py-cpuinfo fails in odd ways (subprocess, cpuid)
        log.warning("py-cpuinfo failed, using /proc/cpuinfo only: %s: %s", type(exc).__name__, exc)
        py = {}
    try:
        blocks = parse_cpuinfo(read_text(os.path.join(proc_root, "cpuinfo")))
    except OSError as exc:
        log.warning("cannot read /proc/cpuinfo: %s", exc)
        blocks = []
    cpus = [b for b in blocks if "processor" in b]
    first = _first_cpu(blocks)
    cpu_dir = os.path.join(sys_root, "devices", "system", "cpu")

    online_text = read_attr(os.path.join(cpu_dir, "online"))
    online = parse_cpu_list(online_text) if online_text else []
    logical = len(online) or len(cpus) or len(blocks) or (os.cpu_count() or 1)
    if not online:
        online = [int(b["processor"]) for b in cpus if b["processor"].isdigit()]

    physical, sockets = _topology(cpus, cpu_dir, online)
    return ProcessorInfo(
        logical=logical,
        physical=physical,
        sockets=sockets,
        vendor=_str(py.get("vendor_id_raw")) or first.get("vendor_id") or _arm_vendor(first),
        model=_str(py.get("brand_raw")) or first.get("model name") or first.get("Processor") or None,
        version=_py_version(py) or _cpuinfo_version(first),
        # The nominal clock, never /proc/cpuinfo's "cpu MHz": frequency scaling moves that one,
        # and identical hosts would scatter across subclusters with it.
        clock_mhz=(_rated_clock(_str(py.get("brand_raw"))) or _rated_clock(first.get("model name"))
                   or _sysfs_clock(cpu_dir, online)),
        isa=_str(py.get("arch_string_raw")) or _isa(first, proc_root),
        # The kernel's flag names (and only flags it lets us use) first; py-cpuinfo adds cpuid synonyms.
        flags=tuple(sorted(set((first.get("flags") or first.get("Features") or "").split() or py.get("flags") or ()))),
        caches=_sysfs_caches(cpu_dir, online) or _py_caches(py),
    )


def _topology(cpus: list[dict[str, str]], cpu_dir: str, online: list[int]) -> tuple[int | None, int | None]:
    pairs = {(b["physical id"], b["core id"]) for b in cpus if "physical id" in b and "core id" in b}
    if pairs:
        return len(pairs), len({package for package, _ in pairs})
    # aarch64 and some VMs leave the topology out of /proc/cpuinfo; sysfs still has it.
    sys_pairs: set[tuple[int, int]] = set()
    for cpu in online:
        topology = os.path.join(cpu_dir, f"cpu{cpu}", "topology")
        package = read_attr(os.path.join(topology, "physical_package_id"))
        core = read_attr(os.path.join(topology, "core_id"))
        if package is None or core is None:
            return None, None
        try:
            sys_pairs.add((int(package), int(core)))
        except ValueError:
            return None, None
    if not sys_pairs:
        return None, None
    packages = {package for package, _ in sys_pairs}
    return len(sys_pairs), (None if -1 in packages else len(packages))


def _str(value: Any) -> str | None:
    return (value.strip() or None) if isinstance(value, str) else None


def _arm_vendor(block: dict[str, str]) -> str | None:
    code = block.get("CPU implementer")
    try:
        return _ARM_IMPLEMENTERS.get(int(code, 0)) if code else None
    except ValueError:
        return None


def _py_version(py: dict[str, Any]) -> str | None:
    family, model, stepping = py.get("family"), py.get("model"), py.get("stepping")
    if isinstance(family, int) and isinstance(model, int) and isinstance(stepping, int):
        return f"family {family} model {model} stepping {stepping}"
    return None


def _cpuinfo_version(block: dict[str, str]) -> str | None:
    if all(key in block for key in ("cpu family", "model", "stepping")):
        return f"family {block['cpu family']} model {block['model']} stepping {block['stepping']}"
    arm = [(label, block.get(key)) for label, key in (
        ("implementer", "CPU implementer"), ("architecture", "CPU architecture"), ("variant", "CPU variant"),
        ("part", "CPU part"), ("revision", "CPU revision"))]
    if any(value for _, value in arm):
        return " ".join(f"{label} {value}" for label, value in arm if value)
    return None


#: A model name's rating: "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz", "... @ 800MHz".
_RATING = re.compile(r"@\s*(\d+(?:\.\d+)?)\s*([GM])Hz", re.IGNORECASE)


def _rated_clock(model: str | None) -> float | None:
    """The clock a model name is rated at, in MHz (py-cpuinfo's own "advertised" clock falls back
    to the current one when the name has none, so the name is read here)."""
    found = _RATING.search(model or "")
    if found is None:
        return None
    value = float(found.group(1)) * (1000 if found.group(2).upper() == "G" else 1)
    return round(value, 3) if value > 0 else None


def _sysfs_clock(cpu_dir: str, online: list[int]) -> float | None:
    # aarch64 /proc/cpuinfo has no clock at all; cpufreq's base (or else maximum) is the nominal one.
    cpufreq = os.path.join(cpu_dir, f"cpu{online[0] if online else 0}", "cpufreq")
    for attr in ("base_frequency", "cpuinfo_max_freq"):
        khz = read_attr(os.path.join(cpufreq, attr))
        if khz and khz.isdigit() and int(khz) > 0:
            return int(khz) / 1000
    return None


def _first_cpu(blocks: list[dict[str, str]]) -> dict[str, str]:
    """The first processor's block of /proc/cpuinfo (else its first block): the one read for the model."""
    return next((b for b in blocks if "processor" in b), blocks[0] if blocks else {})


def _cpuinfo_isa(block: dict[str, str]) -> str | None:
    """The architecture a /proc/cpuinfo block implies, in uname's names; None when it does not say."""
    if "vendor_id" in block and "flags" in block:
        return "x86_64" if "lm" in block["flags"].split() else "i686"
    arch = block.get("CPU architecture", "")
    if arch.startswith("8") or arch.startswith("AArch64"):
        return "aarch64"
    if arch.isdigit():
        return f"armv{arch}l"
    isa = block.get("isa", "")
    if isa.startswith("rv64"):
        return "riscv64"
    return None


def _kernel_arch(proc_root: str) -> str | None:
    """The root's kernel's own machine name (/proc/sys/kernel/arch, Linux 6.1 and later)."""
    return read_attr(os.path.join(proc_root, "sys", "kernel", "arch")) or None


def _live_machine(proc_root: str) -> str | None:
    """uname's machine, for this machine's own /proc only: a tree read through --proc-root is
    another host, which this machine's uname does not describe."""
    return (os.uname().machine or None) if is_live_root(proc_root) else None


def _isa(block: dict[str, str], proc_root: str) -> str | None:
    return _cpuinfo_isa(block) or _kernel_arch(proc_root) or _live_machine(proc_root)


def root_machine(proc_root: str) -> str | None:
    """The machine (uname's name for the architecture) of the host whose /proc is `proc_root`: its
    kernel's, else what its /proc/cpuinfo implies, else (this machine's own /proc only) uname's;
    None when none says. Read once, when a collector is made."""
    try:
        block = _first_cpu(parse_cpuinfo(read_text(os.path.join(proc_root, "cpuinfo"))))
    except OSError:
        block = {}
    return _kernel_arch(proc_root) or _cpuinfo_isa(block) or _live_machine(proc_root)


def _sysfs_caches(cpu_dir: str, online: list[int]) -> dict[str, int]:
    cache_dir = os.path.join(cpu_dir, f"cpu{online[0] if online else 0}", "cache")
    try:
        indexes = sorted(entry for entry in os.listdir(cache_dir) if entry.startswith("index"))
    except OSError:
        return {}
    caches: dict[str, int] = {}
    for index in indexes:
        level = read_attr(os.path.join(cache_dir, index, "level"))
        kind = read_attr(os.path.join(cache_dir, index, "type"))
        size = read_attr(os.path.join(cache_dir, index, "size"))
        if not level or not kind or not size:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        try:
            caches[f"L{level}{suffix}"] = parse_size(size)
        except (ValueError, KeyError):
            log.warning("unreadable cache size %r in %s", size, os.path.join(cache_dir, index))
    return caches


def _py_caches(py: dict[str, Any]) -> dict[str, int]:
    # Only a fallback: py-cpuinfo's L2/L3 may be totals over all instances, not per instance.
    caches: dict[str, int] = {}
    for name, key in (("L1d", "l1_data_cache_size"), ("L1i", "l1_instruction_cache_size"),
                      ("L2", "l2_cache_size"), ("L3", "l3_cache_size")):
        value = py.get(key)
        try:
            size = value if isinstance(value, int) else parse_size(value) if isinstance(value, str) else 0
        except (ValueError, KeyError):
            size = 0
        if size > 0:
            caches[name] = size
    return caches
