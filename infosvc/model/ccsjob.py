"""A Windows Compute Cluster Server 2003 job and its tasks, as plain dataclasses.

Names follow the CCS job and task schemas (job.xsd, task.xsd of "How the Compute Cluster Server
works"); defaults are the schema's. Values are read into their meaning: a run time in seconds
(None for Infinite), software licenses as feature -> amount, asked nodes as a list, a task's
dependencies as the names of the tasks it waits for, its environment as a dict.

The CCS text forms (run time, license list, node list, dependency list) are parsed here, because
they belong to CCS, not to XML: the command line (/runtime:, /license:, /askednodes:, /depend:)
writes the same forms. Each parser raises ValueError saying what is wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final


class CcsPriority(StrEnum):
    """The five job priorities, lowest first; `rank` orders them."""

    LOWEST = "Lowest"
    BELOW_NORMAL = "BelowNormal"
    NORMAL = "Normal"
    ABOVE_NORMAL = "AboveNormal"
    HIGHEST = "Highest"

    @property
    def rank(self) -> int:
        """0 for Lowest .. 4 for Highest."""
        return _PRIORITY_RANK[self]


_PRIORITY_RANK: Final = {priority: rank for rank, priority in enumerate(CcsPriority)}


class JobState(StrEnum):
    """Job and task life-cycle states, named as the seed's life-cycle table names them: a CCS
    document's Status, and the scheduler's jobs and tasks (infosvc/sched/jobs.py) through their
    life cycle, which a job's JSON names by these values (SSS and GLUE map them: sched/jobs.py)."""

    NOT_SUBMITTED = "NotSubmitted"
    QUEUED = "Queued"
    RUNNING = "Running"
    FINISHED = "Finished"
    FAILED = "Failed"
    CANCELED = "Canceled"

    @classmethod
    def from_text(cls, text: str) -> JobState:
        """A state from any of the seed's spellings: the schema writes Completed and Cancelled."""
        return cls(_STATE_ALIASES.get(text, text))


_STATE_ALIASES: Final = {"Completed": "Finished", "Cancelled": "Canceled", "Not_Submitted": "NotSubmitted"}

#: The greatest processor count and id CCS can hold (Int32).
MAX_INT32: Final = 2_147_483_647
#: The greatest license amount (nine digits, as schemas/ccs-job.xsd allows).
MAX_LICENSE_AMOUNT: Final = 999_999_999
#: Run time bounds: one minute (a zero limit would cancel the job at once) to 99:23:59.
MIN_RUNTIME_SECONDS: Final = 60
MAX_RUNTIME_SECONDS: Final = ((99 * 24 + 23) * 60 + 59) * 60
INFINITE: Final = "Infinite"


@dataclass(slots=True)
class CcsTask:
    """One task: a discrete call to a user application, inside a job."""

    command_line: str
    name: str = ""
    id: int = 0
    parent_job_id: int = 0
    status: JobState = JobState.NOT_SUBMITTED
    exit_code: int = 0
    message: str = ""
    #: names of the tasks that must all complete before this one runs
    depend: list[str] = field(default_factory=list)
    is_rerunnable: bool = False
    is_exclusive: bool = False
    min_processors: int = 1
    max_processors: int = 1
    #: maximum run time in seconds; None is Infinite
    runtime: int | None = None
    asked_nodes: list[str] = field(default_factory=list)
    work_directory: str | None = None
    stdin: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    environment: dict[str, str] = field(default_factory=dict)
    extended_terms: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class CcsJob:
    """A CCS job: a resource request holding one or more tasks."""

    id: int = 0
    name: str = ""
    project: str = ""
    user: str = ""
    submitted_by: str = ""
    message: str = ""
    status: JobState = JobState.NOT_SUBMITTED
    priority: CcsPriority = CcsPriority.NORMAL
    is_exclusive: bool = True
    is_backfill: bool = False
    min_processors: int = 1
    max_processors: int = 1
    #: maximum run time in seconds; None is Infinite
    runtime: int | None = None
    run_until_cancelled: bool = False
    asked_nodes: list[str] = field(default_factory=list)
    allocated_nodes: list[str] = field(default_factory=list)
    #: software license feature -> amount
    licenses: dict[str, int] = field(default_factory=dict)
    extended_terms: dict[str, str] = field(default_factory=dict)
    tasks: list[CcsTask] = field(default_factory=list)

    def task_named(self, name: str) -> list[CcsTask]:
        """Every task called `name` (CCS allows several: a dependency waits for them all)."""
        return [task for task in self.tasks if task.name == name]


# --- the CCS text forms ----------------------------------------------------------------------

_RUNTIME: Final = re.compile(r"(?:(?:([0-9]{1,2}):)?([0-9]{1,2}):)?([0-9]{1,2})")


def parse_runtime(text: str) -> int | None:
    """`[[dd:]hh:]mm` as seconds, or None for `Infinite`; ValueError for anything else.

    Days 0-99, hours 0-23, minutes 0-59, and at least one minute in all.
    """
    text = text.strip()
    if text == INFINITE:
        return None
    match = _RUNTIME.fullmatch(text)
    if match is None:
        raise ValueError(f"run time {text!r} is not [[dd:]hh:]mm or Infinite")
    days, hours, minutes = (int(part) if part is not None else 0 for part in match.groups())
    if hours > 23:
        raise ValueError(f"run time {text!r} has {hours} hours; hours are 0-23")
    if minutes > 59:
        raise ValueError(f"run time {text!r} has {minutes} minutes; minutes are 0-59")
    seconds = ((days * 24 + hours) * 60 + minutes) * 60
    if seconds < MIN_RUNTIME_SECONDS:
        raise ValueError(f"run time {text!r} is zero; the least is one minute (00:01)")
    return seconds


def format_runtime(seconds: int | None) -> str:
    """The `dd:hh:mm` form of a run time in whole minutes (None: Infinite)."""
    if seconds is None:
        return INFINITE
    if seconds % 60 or not MIN_RUNTIME_SECONDS <= seconds <= MAX_RUNTIME_SECONDS:
        raise ValueError(f"{seconds} s is not a CCS run time (whole minutes, one minute .. 99:23:59)")
    minutes = seconds // 60
    return f"{minutes // 1440:02d}:{minutes // 60 % 24:02d}:{minutes % 60:02d}"


_LICENSE: Final = re.compile(r"([^:,\s]+):([0-9]+)")


def parse_licenses(text: str) -> dict[str, int]:
    """`feature:amount,...` as feature -> amount; empty text is no licenses.

    Amounts are positive integers; a feature named twice is an error.
    """
    licenses: dict[str, int] = {}
    text = text.strip()
    if not text:
        return licenses
    for item in text.split(","):
        match = _LICENSE.fullmatch(item.strip())
        if match is None:
            raise ValueError(f"license {item.strip()!r} is not feature:amount")
        feature, amount = match[1], int(match[2])
        if not 0 < amount <= MAX_LICENSE_AMOUNT:
            raise ValueError(f"license {feature!r} asks for {amount}; an amount is 1 .. {MAX_LICENSE_AMOUNT}")
        if feature in licenses:
            raise ValueError(f"license feature {feature!r} is named twice")
        licenses[feature] = amount
    return licenses


def format_licenses(licenses: dict[str, int]) -> str:
    return ",".join(f"{feature}:{amount}" for feature, amount in licenses.items())


_NODE_SEPARATORS: Final = re.compile(r"[\s,]+")


def parse_nodes(text: str) -> list[str]:
    """Node names separated by white space (the XML's form) or commas (the command line's).

    A node asked for twice is an error.
    """
    nodes = [name for name in _NODE_SEPARATORS.split(text) if name]
    seen: set[str] = set()
    for name in nodes:
        # Windows host names are case-insensitive.
        if name.casefold() in seen:
            raise ValueError(f"node {name!r} is named twice")
        seen.add(name.casefold())
    return nodes


def parse_depend(text: str) -> list[str]:
    """`name1,name2,...`: the names of the tasks a task waits for; empty text is none."""
    if not text.strip():
        return []
    names = [name.strip() for name in text.split(",")]
    if "" in names:
        raise ValueError(f"dependency list {text!r} has an empty name")
    if len(set(names)) != len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise ValueError(f"dependency list names {twice!r} twice")
    return names
