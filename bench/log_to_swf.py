"""A batch system's own job log as a Standard Workload Format trace, for judging a policy on a
machine whose log is not in the Parallel Workloads Archive: Torque/PBS accounting files (the `E`
record of each job that ran) or Slurm's `sacct -X -P` output (a header line, `|` between fields).

The conventions, fixed before any converted log was simulated (tests/fixtures/traces/README.md):
- a job is one that ran: a Torque `E` record with its qtime, start and end; an sacct line whose
  Submit, Start and End are all times (a job cancelled before it started, or still pending or
  running, is left out), job steps (an id with a `.`) left out;
- a job submitted before the log's earliest end is left out: the jobs that ran beside it and ended
  before the log begins are not in the log, so its time would look emptier than it was;
- submit time from the first job kept (field 2), wait = start - submit, run = end - start;
- processors: Torque's `total_execution_slots` (allocated) and its `Resource_List.nodes`
  (requested: each `+` part's node count, or 1 for a named node, times its `ppn`, 1 where none);
  sacct's AllocCPUS where the dump has it, and ReqCPUS;
- requested time: Torque's `Resource_List.walltime`, sacct's Timelimit (`[D-]HH:MM:SS`, `MM:SS`;
  `UNLIMITED` and `Partition_Limit` as none, -1);
- users, groups and queues numbered from 1 in order of first appearance (no name is written: a
  dump may carry real login names); status 1 where Torque's Exit_status is 0, else 0, and 1 for
  every sacct job (the dump given has no State);
- jobs numbered from 1 in submission order (then by the log's id); the fields a log does not give
  are -1. sacct's times are read as UTC: only their differences matter, and a dump across a
  daylight-saving change would be off by an hour there (the header says the span).

Run: `python bench/log_to_swf.py --format torque|sacct LOG[.gz] --processors N [--computer TEXT]
> TRACE.swf`; prints to stderr how many records were read, kept and left out, and why.
"""

from __future__ import annotations

import argparse
import calendar
import gzip
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple, TextIO


class Job(NamedTuple):
    """One job as a log gives it, before numbering."""

    ident: str
    submit: int
    start: int
    end: int
    allocated: int
    requested: int
    limit: int  # seconds, -1 for none
    completed: bool
    user: str
    group: str
    queue: str


def seconds_of(text: str) -> int:
    """`[D-]HH:MM:SS`, `HH:MM:SS`, `MM:SS` or seconds as seconds; -1 for none or a word (UNLIMITED)."""
    text = text.strip()
    days = 0
    if "-" in text:
        head, text = text.split("-", 1)
        if not head.isdigit():
            return -1
        days = int(head)
    parts = text.split(":")
    if not text or len(parts) > 3 or not all(part.isdigit() for part in parts):
        return -1
    total = 0
    for part in parts:
        total = total * 60 + int(part)
    return days * 86400 + total


def requested_processors(nodes: str) -> int:
    """Torque's `Resource_List.nodes` (`2:ppn=16`, `c3:ppn=4+c4:ppn=4`, `1`) as processors; -1 if
    it cannot be read."""
    total = 0
    for part in nodes.split("+"):
        spec = part.split(":")
        count = int(spec[0]) if spec[0].isdigit() else 1  # a named node is one
        ppn = 1
        for prop in spec[1:]:
            if prop.startswith("ppn="):
                if not prop[4:].isdigit():
                    return -1
                ppn = int(prop[4:])
        total += count * ppn
    return total or -1


def exec_slots(exec_host: str) -> int:
    """The slots Torque's `exec_host` names (`c3/0-3+c4/0,2+c5/7`: 4 + 2 + 1); -1 if it cannot be read."""
    total = 0
    for part in exec_host.split("+"):
        _, _, slots = part.partition("/")
        for piece in slots.split(","):
            low, dash, high = piece.partition("-")
            if not low.isdigit() or (dash and not high.isdigit()):
                return -1
            total += int(high) - int(low) + 1 if dash else 1
    return total or -1


def torque_jobs(lines: Iterable[str], skipped: Counter[str]) -> Iterator[Job]:
    for line in lines:
        fields = line.rstrip("\n").split(";", 3)
        if len(fields) < 4 or fields[1] != "E":
            continue
        attrs = dict(item.split("=", 1) for item in fields[3].split() if "=" in item)
        try:
            submit, start, end = int(attrs["qtime"]), int(attrs["start"]), int(attrs["end"])
        except (KeyError, ValueError):
            skipped["an E record without qtime, start or end"] += 1
            continue
        slots = attrs.get("total_execution_slots", "")
        allocated = int(slots) if slots.isdigit() else exec_slots(attrs.get("exec_host", ""))
        requested = requested_processors(attrs["Resource_List.nodes"]) if "Resource_List.nodes" in attrs else -1
        limit = seconds_of(attrs.get("Resource_List.walltime", ""))
        yield Job(fields[2], submit, start, end, allocated, requested, limit, attrs.get("Exit_status") == "0",
                  attrs.get("user", ""), attrs.get("group", ""), attrs.get("queue", ""))


def _utc(text: str) -> int | None:
    try:
        return calendar.timegm(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def sacct_jobs(lines: Iterable[str], skipped: Counter[str]) -> Iterator[Job]:
    rows = iter(lines)
    header = next(rows, "").rstrip("\n").split("|")
    needed = ("User", "JobID", "Submit", "Start", "End", "Timelimit", "ReqCPUS")
    missing = [name for name in needed if name not in header]
    if missing:
        raise SystemExit(f"not sacct -P output with a header: no {', '.join(missing)} column")
    at = {name: header.index(name) for name in header}
    for line in rows:
        fields = line.rstrip("\n").split("|")
        if len(fields) != len(header):
            skipped["a line of another number of fields"] += 1
            continue
        if "." in fields[at["JobID"]]:
            skipped["a job step"] += 1
            continue
        submit, start, end = (_utc(fields[at[name]]) for name in ("Submit", "Start", "End"))
        if submit is None or start is None or end is None:
            skipped["never started, or not ended (Start or End not a time)"] += 1
            continue
        requested = int(fields[at["ReqCPUS"]]) if fields[at["ReqCPUS"]].isdigit() else -1
        alloc = fields[at["AllocCPUS"]] if "AllocCPUS" in at else ""
        yield Job(fields[at["JobID"]], submit, start, end, int(alloc) if alloc.isdigit() else requested, requested,
                  seconds_of(fields[at["Timelimit"]]), True, fields[at["User"]],
                  fields[at["Account"]] if "Account" in at else "", fields[at["Partition"]] if "Partition" in at else "")


def swf_lines(jobs: list[Job], skipped: Counter[str]) -> tuple[int, list[str]]:
    """The jobs kept, numbered, as SWF records, and the submission the times count from."""
    if not jobs:
        return 0, []
    first_end = min(job.end for job in jobs)
    kept = sorted((job for job in jobs if job.submit >= first_end), key=lambda job: (job.submit, job.ident))
    skipped["submitted before the log's earliest end"] += len(jobs) - len(kept)
    if not kept:
        return 0, []
    numbers: dict[str, dict[str, int]] = {"user": {}, "group": {}, "queue": {}}

    def number(kind: str, name: str) -> int:
        known = numbers[kind]
        return known.setdefault(name, len(known) + 1) if name else -1

    t0 = kept[0].submit
    records = []
    for n, job in enumerate(kept, 1):
        fields = [n, job.submit - t0, job.start - job.submit, job.end - job.start, job.allocated, -1, -1,
                  job.requested, job.limit, -1, 1 if job.completed else 0, number("user", job.user),
                  number("group", job.group), -1, number("queue", job.queue), -1, -1, -1]
        records.append(" ".join(str(field) for field in fields))
    return t0, records


def convert(lines: Iterable[str], fmt: str, processors: int, computer: str, source: str, out: TextIO) -> Counter[str]:
    """Write the SWF trace of `lines` (a `fmt` log) to `out`; what was read, kept and left out (by why)."""
    skipped: Counter[str] = Counter()
    jobs = list(torque_jobs(lines, skipped) if fmt == "torque" else sacct_jobs(lines, skipped))
    t0, records = swf_lines(jobs, skipped)
    out.write("; Version: 2.2\n")
    out.write(f"; Computer: {computer}\n")
    out.write(f"; Note: converted from {source} ({fmt} log) by bench/log_to_swf.py; conventions in its docstring\n")
    out.write(f"; UnixStartTime: {t0}\n")
    out.write(f"; MaxJobs: {len(records)}\n; MaxRecords: {len(records)}\n; MaxProcs: {processors}\n")
    for record in records:
        out.write(record + "\n")
    skipped["read"] = len(jobs)
    skipped["kept"] = len(records)
    return skipped


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("log", type=Path)
    p.add_argument("--format", choices=("torque", "sacct"), required=True)
    p.add_argument("--processors", type=int, required=True, help="the machine's processors (the header's MaxProcs)")
    p.add_argument("--computer", default="", help="the header's Computer line")
    args = p.parse_args()
    with args.log.open("rb") as head:
        opener = gzip.open if head.read(2) == b"\x1f\x8b" else open
    with opener(args.log, "rt", encoding="utf-8", errors="replace") as lines:
        counts = convert(lines, args.format, args.processors, args.computer, args.log.name, sys.stdout)
    read, kept = counts.pop("read"), counts.pop("kept")
    print(f"{args.log.name}: {read} jobs read, {kept} kept" + "".join(f"; {n} left out: {why}" for why, n in counts.items()),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
