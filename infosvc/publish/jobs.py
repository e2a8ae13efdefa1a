"""Jobs as JSON (GET/POST /v1/jobs, DELETE /v1/jobs/{id}, the executor's task list): the CCS state
with its SSS and GLUE names, where it runs, why it waits, its tasks. Bounded: a job's tasks are
listed up to MAX_TASKS_SHOWN, counted beyond."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Final

from infosvc.model.folding import fold
from infosvc.sched.jobs import Event, JobRecord, glue_status, sss_state
from infosvc.hosts import iso_time

__all__ = ["MAX_TASKS_SHOWN", "event_json", "job_json", "task_order_json"]

MAX_TASKS_SHOWN: Final = 1000


def _time(value: float | None) -> str | None:
    return None if value is None or not math.isfinite(value) else iso_time(value)


def job_json(job: JobRecord, *, detail: bool = False) -> dict[str, Any]:
    request = job.request
    answer: dict[str, Any] = {
        "id": job.id,
        "name": request.name or None,
        "state": job.state.value,
        "sss_state": sss_state(job),
        "glue_status": glue_status(job),
        "owner": job.owner,
        "priority": request.priority_name,
        "group": job.group,
        "submitted": _time(job.submitted),
        "started": _time(job.started),
        "ended": _time(job.ended),
        "exit_code": job.exit_code,
        "processors": {"min": request.min_processors, "max": request.max_processors,
                       "held": sum(job.hosts.values())},
        "gpus_per_host": request.gpus,
        "run_time_limit_seconds": None if math.isinf(request.estimate) else request.estimate,
        # the `predictive` policy's plan for it, from its owner's ended jobs: never above the limit
        "predicted_run_seconds": job.predicted if job.predicted is not None and math.isfinite(job.predicted) else None,
        "exclusive": request.exclusive,
        "read_as_requested": list(request.read_as_requested),
        # the SSS Job's own controls: its Holds, EligibleTime and Deadline
        "holds": list(request.holds),
        "eligible_time": _time(request.eligible),
        "deadline": _time(request.deadline),
        "hosts": fold(job.hosts) if job.hosts else None,
        "reason": job.reason or None,
        "tasks": dict(Counter(task.state.value for task in job.tasks)),
    }
    if job.reserved_at is not None:
        answer["reserved"] = {"at": _time(job.reserved_at), "hosts": fold(job.reserved_hosts)}
    if detail:
        answer["tasks"] = [_task_json(job, task.index) for task in job.tasks[:MAX_TASKS_SHOWN]]
        answer["tasks_not_shown"] = max(0, len(job.tasks) - MAX_TASKS_SHOWN)
        answer["rejected_hosts"] = list(job.rejected)
        answer["depends_on"] = [after.describe() for after in request.after]
        answer["held_on_hosts"] = job.hosts
    return answer


def _task_json(job: JobRecord, index: int) -> dict[str, Any]:
    task = job.tasks[index]
    spec = job.request.tasks[index]
    return {"index": index, "name": spec.name, "state": task.state.value, "host": task.host,
            "processors": spec.processors, "dispatched": _time(task.dispatched), "began": _time(task.began),
            "ended": _time(task.ended), "exit_code": task.exit_code, "attempts": task.attempts,
            "depends_on": list(spec.after), "rerunnable": spec.rerunnable}


def task_order_json(job: JobRecord, index: int) -> dict[str, Any]:
    """What an executor needs to run one task, and by when it must end."""
    spec = job.request.tasks[index]
    task = job.tasks[index]
    return {"job": job.id, "task": index, "attempt": task.attempts, "name": spec.name, "owner": job.owner,
            "executable": spec.executable, "arguments": spec.arguments, "environment": dict(spec.environment),
            "workdir": spec.workdir, "stdin": spec.stdin, "stdout": spec.stdout, "stderr": spec.stderr,
            "processors": spec.processors, "gpus": job.request.gpus, "began": _time(task.began),
            "deadline": None if math.isinf(job.limit_at) else job.limit_at}


def event_json(event: Event) -> dict[str, Any]:
    return {"at": _time(event.at), "task": event.task, "state": event.state.value, "detail": event.detail}
