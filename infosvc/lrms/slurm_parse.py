"""Slurm's machine-readable output -> the cluster model (infosvc/lrms/cluster.py): pure functions
of the text, so they are tested on Slurm's own output and fed to the reader.

- nodes: `sinfo --json` (its `nodes`, Slurm 21.08 and later);
- partitions: `scontrol show partition -o` (one KEY=VALUE line each: this Slurm's `sinfo --json`
  has no partitions and its scontrol no --json);
- jobs: `squeue -h -r` in the format SQUEUE_JOBS (a `Marked` one), one record a job (array tasks
  each on their own): ten times faster than `squeue --json` at 10,000 jobs (bench/slurm_read.py);
  a pending job's start is Slurm's forecast, the START_TIME `squeue --start` shows.

A field of the wrong type is a SlurmUnavailable that names it: a Slurm whose output changed shape
must say so, not publish zeros. A job's record is the exception: a job's own texts are a user's
(`Marked`), so one record that does not read is left out and logged, and only a read none of whose
records reads fails.
"""

from __future__ import annotations

import calendar
import dataclasses
import logging
import re
import secrets
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Final, Iterable, Iterator, TypeVar

from infosvc.lrms.cluster import GpuKind, SlurmJob, SlurmNode, SlurmPartition
from infosvc.lrms.slurm_commands import SlurmUnavailable, key_values
from infosvc.loglimit import LogLimiter

T = TypeVar("T")
log = logging.getLogger("infosvc.lrms")
#: a job's record left out is logged at most once per interval for each command that read it: a
#: listing runs at any anonymous request, and the job is in every one while Slurm keeps it
_LEFT_OUT = LogLimiter(log)

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


@dataclass(frozen=True, slots=True)
class Marked:
    """A squeue format whose records and fields are told apart by a token drawn for the one call
    that uses it (`drawn`). squeue prints a job's own texts (its name, account, comment, constraint,
    dependency: what a user submitting to Slurm directly chooses) as they are, newlines and any
    separator included: read one line a record, split at "|", a name wrote a record of its own (a
    job of root's in GET /v1/jobs) or one that did not read (every listing failed), an account
    `x|y` failed every read of the cluster. Each field here ends with `<TOKEN>` and each record with
    `</TOKEN>` and the newline, which no job's text can hold: the token is passed in squeue's
    environment (SQUEUE_FORMAT, SQUEUE_FORMAT2), which no other user can read, not on its command
    line, which any can while it runs. Slurm's own fields come first and are split off at their
    count, the submitter's texts last: were the token ever in a text, it could not move those.
    `long`: -O's field names (SQUEUE_FORMAT2), else -o's letters."""

    #: (squeue's field, the key it is read under): Slurm's own words, then the submitter's texts
    own: tuple[tuple[str, str], ...]
    chosen: tuple[tuple[str, str], ...]
    long: bool = False
    token: str = ""

    def drawn(self) -> Marked:
        """The format with a token of its own, for one squeue."""
        return self.with_token(secrets.token_hex(16))

    def with_token(self, token: str) -> Marked:
        return dataclasses.replace(self, token=token)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(key for _, key in (*self.own, *self.chosen))

    def environment(self) -> dict[str, str | None]:
        """squeue's environment for this format, in UTC (its times are read as UTC); the other
        format variable unset, which would else win (22.05 takes SQUEUE_FORMAT over SQUEUE_FORMAT2)."""
        if not self.token or not self.chosen:
            raise ValueError("a Marked format needs a drawn token and a field of the submitter's last")
        sep, end = f"<{self.token}>", f"</{self.token}>"
        fields = [field for field, _ in (*self.own, *self.chosen)]
        if self.long:  # NAME:SIZE then the suffix: size 0 neither pads nor cuts
            text = ",".join(f"{field}:0{sep}" for field in fields[:-1]) + f",{fields[-1]}:0{end}"
            return {"SQUEUE_FORMAT2": text, "SQUEUE_FORMAT": None, "TZ": "UTC"}
        return {"SQUEUE_FORMAT": sep.join(fields) + end, "SQUEUE_FORMAT2": None, "TZ": "UTC"}

    def split(self, text: str) -> Iterator[tuple[str, dict[str, str] | None]]:
        """Each record's text, and its fields by key; None where it is not as this format writes it."""
        sep, end = f"<{self.token}>", f"</{self.token}>"
        keys, count = self.keys, len(self.own)
        records = text.split(end + "\n")
        rest = records.pop()  # after the last record's end: nothing, unless squeue's output was cut
        for record in records:
            own = record.split(sep, count)
            fields = [*own[:-1], *own[-1].split(sep)] if len(own) == count + 1 else own
            yield record, (dict(zip(keys, fields)) if len(fields) == len(keys) else None)
        if rest.strip():
            yield rest, None

    def shown(self, record: str) -> str:
        """A record's text for a log line: its fields apart at "|", at most 200 characters, quoted."""
        return repr(record.replace(f"<{self.token}>", "|")[:200])


def each_record(marked: Marked, text: str, what: str, read: Callable[[dict[str, str]], T | None]) -> list[T]:
    """`read` of each record of `text` (squeue's output in `marked`); None from it: a record passed
    over. A record not in the format, or one `read` refuses (ValueError, SlurmUnavailable), is left
    out, and logged, once a while for each `what`: one job's texts fail no read of the others. A
    SlurmUnavailable when no record reads: that is a Slurm whose output is not this format's."""
    found: list[T] = []
    read_well = left_out = 0
    why = ""
    for record, fields in marked.split(text):
        try:
            if fields is None:
                raise ValueError(f"not a record of {len(marked.keys)} fields and its end")
            value = read(fields)
        except (ValueError, SlurmUnavailable) as exc:
            left_out += 1
            why = f"{exc}: {marked.shown(record)}"
            _LEFT_OUT.warning(what, "%s: a job's record left out, as it does not read (%s)", what, why)
            continue
        read_well += 1
        if value is not None:
            found.append(value)
    if left_out and not read_well:
        raise SlurmUnavailable(f"{what}: none of its {left_out} records reads ({why})")
    return found


#: squeue's record of a job for the cluster read (-h -r): id, partition, state, user, CPUs, nodes,
#: time limit, start (a pending job's: Slurm's forecast), submit time, node list, reason; the account
#: last (a user's text: Slurm takes any where accounting does not check it)
SQUEUE_JOBS: Final = Marked(
    own=(("%i", "id"), ("%P", "partition"), ("%T", "state"), ("%u", "user"), ("%C", "cpus"), ("%D", "nodes"),
         ("%l", "limit"), ("%S", "start"), ("%V", "submit"), ("%N", "node_list"), ("%r", "reason")),
    chosen=(("%a", "account"),))


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


def jobs_of(text: str, marked: Marked) -> tuple[SlurmJob, ...]:
    """`squeue -h -r`'s records in `marked` (SQUEUE_JOBS with its token, run with TZ=UTC): one job,
    or array task, a record."""
    return tuple(each_record(marked, text, "squeue (the cluster read)", _job))


def _job(fields: dict[str, str]) -> SlurmJob:
    account = fields["account"]
    return SlurmJob(
        id=fields["id"], partition=fields["partition"].split(",")[0], state=fields["state"].upper(),
        user=fields["user"], account="" if account == "(null)" else account, cpus=int(fields["cpus"]),
        nodes=int(fields["nodes"]), time_limit=minutes_of(fields["limit"]), submit_time=instant_of(fields["submit"]),
        start_time=instant_of(fields["start"]), reason=fields["reason"], node_list=fields["node_list"])
