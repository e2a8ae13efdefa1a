"""The batch script of a job submitted through Slurm (infosvc.lrms.sbatch): its tasks' programs,
arguments and environments, every word quoted for the shell, nothing of the document run as shell
text.

A job of one task runs its program from the script itself, as any sbatch script does (Slurm starts
the script once, on the allocation's first node; a parallel program launches its own ranks with
srun or mpirun). A job of several tasks runs each as a job step (`srun --ntasks=1 --exact`) with its
own streams, working directory and environment: the tasks no other task waits for first, all at
once, then those that waited for them, and so on; a task that fails ends the job with its exit
status once its round has ended (the service's own queue fails such a job too). sbatch is run with `--export=NONE`, so the job sees
its own environment and never the service's.
"""

from __future__ import annotations

import re
import shlex
from typing import Final

from infosvc.errors import DocumentError, excerpt
from infosvc.sched.request import JobRequest, TaskRequest

__all__ = ["batch_script", "refuse", "stream_options", "stream_path", "waves"]

#: A variable name the shell can export.
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: What a job finds on its PATH when its environment names none (sbatch --export=NONE gives it none).
DEFAULT_PATH: Final = "/usr/local/bin:/usr/bin:/bin"


def refuse(field: str, why: str) -> DocumentError:
    """The refusal of one field: a 400 whose detail names it (infosvc.lrms.sbatch's too)."""
    return DocumentError(f"{field}: {why}; Slurm cannot be asked this, so the job is refused", element=field)


def stream_path(field: str, value: str) -> str:
    """A stream's path; a grid job's `file://` URL is the file it names, any other URL is refused
    (nothing is staged); `%` is written `%%` (sbatch reads `%j` and the like in a file name)."""
    path = value
    if "://" in value:
        scheme, _, rest = value.partition("://")
        if scheme.lower() != "file":
            raise refuse(field, f"a {excerpt(scheme)} URL; Slurm opens local files only, nothing is staged")
        path = rest[rest.index("/"):] if "/" in rest else ""
    if not path or not path.isprintable():
        raise refuse(field, f"{excerpt(value)!r} names no file")
    return path.replace("%", "%%")



def _command(task: TaskRequest) -> list[str]:
    if not task.executable:
        return [":"]  # a task with nothing to run finishes at once, as in the service's own queue
    if not task.executable.isprintable():
        raise refuse("Executable", f"{excerpt(task.executable)!r} holds control characters")
    try:
        arguments = shlex.split(task.arguments)
    except ValueError as exc:
        raise refuse("Arguments", f"{excerpt(task.arguments)!r}: {exc}") from None
    return [shlex.quote(word) for word in [task.executable, *arguments]]


def _exports(task: TaskRequest) -> list[str]:
    lines = []
    for name, value in task.environment:
        if not _NAME.fullmatch(name):
            raise refuse("Environment", f"{excerpt(name)!r} is not a variable name a shell can export")
        if "\0" in value:
            raise refuse("Environment", f"{name} holds a NUL")
        lines.append(f"{name}={shlex.quote(value)}; export {name}")
    return lines


def waves(tasks: tuple[TaskRequest, ...]) -> list[list[TaskRequest]]:
    """The tasks in rounds: each task in the round after the last of those it waits for."""
    depth: dict[int, int] = {}
    for task in sorted(tasks, key=lambda t: t.index):
        depth[task.index] = 0
    changed = True
    while changed:  # the request has no cycle (infosvc.sched.request); at most len(tasks) passes
        changed = False
        for task in tasks:
            wanted = max((depth[other] + 1 for other in task.after), default=0)
            if wanted > depth[task.index]:
                depth[task.index], changed = wanted, True
    rounds: list[list[TaskRequest]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for task in tasks:
        rounds[depth[task.index]].append(task)
    return rounds


def stream_options(task: TaskRequest) -> list[str]:
    """A task's streams as sbatch's or srun's options (they share the names); no input is /dev/null."""
    options = [f"{option}={stream_path(name, value)}" for name, option, value in (
        ("InputFile", "--input", task.stdin), ("OutputFile", "--output", task.stdout),
        ("ErrorFile", "--error", task.stderr)) if value]
    if not task.stdin:
        options.append("--input=/dev/null")
    return options


def _step(task: TaskRequest) -> str:
    """One task of several as a job step in a subshell of its own: its environment, its directory."""
    srun = ["srun", "--ntasks=1", f"--cpus-per-task={task.processors}", "--exact", f"--job-name={task.name}"]
    srun += stream_options(task)
    parts = _exports(task)
    if task.workdir:
        parts.append(f"cd {shlex.quote(task.workdir)} || exit 1")
    parts.append("exec " + " ".join([*(shlex.quote(word) for word in srun), "--", *_command(task)]))
    return "( " + "\n  ".join(parts) + "\n) &"


def batch_script(request: JobRequest, shell: str = "/bin/sh") -> str:
    """The script sbatch reads on its standard input."""
    lines = [f"#!{shell}", "# written by infosvc: the job's tasks, each word quoted",
             f': "${{PATH:={DEFAULT_PATH}}}"; export PATH']
    tasks = request.tasks
    if len(tasks) <= 1:
        task = tasks[0] if tasks else TaskRequest(0, "1")
        lines += _exports(task)
        lines.append("exec " + " ".join(_command(task)))
        return "\n".join(lines) + "\n"
    lines.append("failed=0")
    for number, round_ in enumerate(waves(tasks)):
        pids = []
        for task in round_:
            lines.append(_step(task))
            pids.append(f"p{task.index}")
            lines.append(f"p{task.index}=$!")
        lines += [f'wait "${pid}" || failed=$?' for pid in pids]
        lines.append(f'[ "$failed" = 0 ] || exit "$failed"  # round {number + 1} had a task fail: its exit status')
    return "\n".join(lines) + "\n"
