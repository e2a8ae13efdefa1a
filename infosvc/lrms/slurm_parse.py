"""Slurm's machine-readable output -> the cluster model (infosvc/lrms/cluster.py): pure functions
of the text, so they are tested on Slurm's own output and fed to the reader.

- nodes: `sinfo --json` (its `nodes`, Slurm 21.08 and later);
- partitions: `scontrol show partition -o` (one KEY=VALUE line each: this Slurm's `sinfo --json`
  has no partitions and its scontrol no --json);
- jobs: `squeue -h -r -o SQUEUE_FORMAT`, one line a job (array tasks each on their own):
  ten times faster than `squeue --json` at 10,000 jobs (bench/slurm_read.py); a pending job's
  start is Slurm's forecast, the START_TIME `squeue --start` shows.

A field of the wrong type is a SlurmUnavailable that names it: a Slurm whose output changed shape
must say so, not publish zeros.
"""

from __future__ import annotations

import calendar
import re
import time
from functools import lru_cache
from typing import Any, Final, Iterable

from infosvc.lrms.cluster import GpuKind, SlurmJob, SlurmNode, SlurmPartition
from infosvc.lrms.slurm_commands import SlurmUnavailable, key_values

#: gpu[:TYPE]:COUNT, then perhaps (S:0-1) or (IDX:0,2)
_GRES = re.compile(r"^gpu(?::(?P<type>[^:(]+))?:(?P<count>\d+)")


def _int(record: dict[str, Any], key: str, default: int | None = 0) -> int | None:
    value = record.get(key, default)
    if value is None:
        return default
    if isinstance(value, dict):  # Slurm 23.02+: {"set": true, "infinite": false, "number": N}
        if value.get("infinite") or not value.get("set", True):
            return None
        value = value.get("number", default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SlurmUnavailable(f"Slurm's {key!r} is not a number: {value!r}")
    return int(value)


def _text(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    return value if isinstance(value, str) else ""


def _words(value: object) -> tuple[str, ...]:
    if isinstance(value, list):
        return tuple(str(v) for v in value if str(v))
    if isinstance(value, str):
        return tuple(w for w in value.split(",") if w and w != "(null)")
    return ()


def gpus_of(gres: str, used: str = "") -> tuple[GpuKind, ...]:
    """A node's GPUs by type from its Gres and GresUsed (`gpu:2`, `gpu:a100:4(S:0-1)`, comma separated)."""
    counts, busy = _gpu_counts(gres), _gpu_counts(used)
    return tuple(GpuKind(model, count, min(count, busy.get(model, 0))) for model, count in counts.items() if count)


def _gpu_counts(gres: str) -> dict[str, int]:
    """GPUs by type in one Gres list (untyped ones as "gpu")."""
    counts: dict[str, int] = {}
    for item in gres.split(","):
        found = _GRES.match(item.strip())
        if found:
            model = found["type"] or "gpu"
            counts[model] = counts.get(model, 0) + int(found["count"])
    return counts


def node_of(record: dict[str, Any]) -> SlurmNode:
    """One of `sinfo --json`'s nodes."""
    state = record.get("state")
    if isinstance(state, list):  # later Slurms: one list of the base state and its flags
        words = [str(s).upper() for s in state]
        base, flags = (words[0].lower() if words else "unknown"), tuple(words[1:])
    else:
        base, flags = str(state or "unknown").lower(), tuple(str(f).upper() for f in record.get("state_flags") or ())
    name = _text(record, "name")
    if not name:
        raise SlurmUnavailable(f"sinfo --json gave a node without a name: {sorted(record)[:8]}")
    cpus = _int(record, "cpus") or 0
    os_text = _text(record, "operating_system")
    return SlurmNode(
        name=name, hostname=_text(record, "hostname") or name, state=base, flags=flags,
        reason=_text(record, "reason"), cpus=cpus, alloc_cpus=min(cpus, _int(record, "alloc_cpus") or 0),
        sockets=_int(record, "sockets") or 0, cores_per_socket=_int(record, "cores") or 0,
        threads_per_core=_int(record, "threads") or 0, real_memory=_int(record, "real_memory") or 0,
        alloc_memory=_int(record, "alloc_memory") or 0, features=_words(record.get("features")),
        gpus=gpus_of(_text(record, "gres"), _text(record, "gres_used")), partitions=_words(record.get("partitions")),
        architecture=_text(record, "architecture") or None, operating_system=os_text or None)


def nodes_of(records: Iterable[dict[str, Any]]) -> tuple[SlurmNode, ...]:
    """`sinfo --json`'s nodes, each once (sinfo lists a node once per partition in some versions)."""
    found: dict[str, SlurmNode] = {}
    for record in records:
        if not isinstance(record, dict):
            raise SlurmUnavailable("sinfo --json gave a node that is not an object")
        node = node_of(record)
        found.setdefault(node.name, node)
    return tuple(found.values())


@lru_cache(maxsize=1024)
def minutes_of(text: str) -> int | None:
    """A Slurm time limit ([D-]HH:MM:SS, MM:SS, MM, UNLIMITED) in minutes; None: unlimited.
    Memoized: a queue's jobs share a few limits."""
    text = text.strip()
    if text.upper() in ("UNLIMITED", "INFINITE", "NONE", "", "N/A", "INVALID", "NOT_SET"):
        return None
    days = 0
    if "-" in text:
        day, _, text = text.partition("-")
        days = int(day)
    parts = [int(p) for p in text.split(":")]
    if len(parts) == 3:
        hours, minutes, seconds = parts
    elif len(parts) == 2:
        hours, (minutes, seconds) = 0, parts
    else:
        hours, minutes, seconds = 0, parts[0], 0
    return days * 1440 + hours * 60 + minutes + (1 if seconds else 0)


def partitions_of(text: str, nodes: Iterable[SlurmNode]) -> tuple[SlurmPartition, ...]:
    """`scontrol show partition -o`'s lines; each partition's nodes as the nodes name it."""
    members: dict[str, list[str]] = {}
    for node in nodes:
        for part in node.partitions:
            members.setdefault(part, []).append(node.name)
    found = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = key_values(line.strip())
        name = values.get("PartitionName")
        if not name:
            raise SlurmUnavailable(f"scontrol show partition gave a line without PartitionName: {line[:80]!r}")
        try:
            max_time = minutes_of(values.get("MaxTime", "UNLIMITED"))
            max_nodes_text = values.get("MaxNodes", "UNLIMITED")
            max_nodes = None if max_nodes_text.upper() == "UNLIMITED" else int(max_nodes_text)
            total = int(values.get("TotalCPUs", "0"))
        except ValueError as exc:
            raise SlurmUnavailable(f"scontrol show partition {name}: {exc}") from None
        qos = values.get("QoS", "N/A")
        accounts = values.get("AllowAccounts", "ALL")
        found.append(SlurmPartition(
            name=name, state=values.get("State", "UP").upper(), nodes=tuple(members.get(name, ())),
            total_cpus=total, max_time=max_time, max_nodes=max_nodes, default=values.get("Default") == "YES",
            qos=None if qos in ("N/A", "") else qos,
            allow_accounts=() if accounts == "ALL" else tuple(a for a in accounts.split(",") if a)))
    return tuple(found)


#: squeue's one line a job (-h -r -o): id, partition, state, user, account, CPUs, nodes, time limit,
#: start (a pending job's: Slurm's forecast), submit time, node list, reason (last: free text)
SQUEUE_FORMAT: Final = "%i|%P|%T|%u|%a|%C|%D|%l|%S|%V|%N|%r"
_FIELDS: Final = SQUEUE_FORMAT.count("|") + 1


@lru_cache(maxsize=4096)
def instant_of(text: str) -> float:
    """squeue's time (`2026-11-27T07:02:37`, in UTC as the reader runs it) as a POSIX time; 0: none.
    Memoized: jobs submitted together share their times, and strptime costs ~10 us a call."""
    if text in ("N/A", "Unknown", "NONE", "", "(null)"):
        return 0.0
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        raise SlurmUnavailable(f"squeue gave a time that is none: {text!r}") from None


def jobs_of(text: str) -> tuple[SlurmJob, ...]:
    """`squeue -h -r -o SQUEUE_FORMAT`'s lines (run with TZ=UTC): one job, or array task, a line."""
    found = []
    for line in text.splitlines():
        if not line:
            continue
        fields = line.split("|", _FIELDS - 1)
        if len(fields) != _FIELDS:
            raise SlurmUnavailable(f"squeue gave a line of {len(fields)} fields, not {_FIELDS}: {line[:80]!r}")
        ident, partition, state, user, account, cpus, nodes, limit, start, submit, node_list, reason = fields
        try:
            found.append(SlurmJob(
                id=ident, partition=partition.split(",")[0], state=state.upper(), user=user,
                account="" if account == "(null)" else account, cpus=int(cpus), nodes=int(nodes),
                time_limit=minutes_of(limit), submit_time=instant_of(submit), start_time=instant_of(start),
                reason=reason, node_list=node_list))
        except ValueError as exc:
            raise SlurmUnavailable(f"squeue gave a line that does not read ({exc}): {line[:80]!r}") from None
    return tuple(found)
