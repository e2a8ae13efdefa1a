"""Dependencies between jobs as the queue resolves them at submission: each owner's job names, and
a submission's dependencies turned into the queue's ids. A name is looked up among its owner's
own jobs only: another user's job named alike would hold the job, or cancel it by failing."""

from __future__ import annotations

from dataclasses import replace
from typing import Container

from infosvc.errors import DocumentError, excerpt
from infosvc.sched.jobs import JobRecord
from infosvc.sched.request import After, JobRequest

__all__ = ["JobNames"]


class JobNames:
    """(owner, job name) -> the id of the owner's newest job of that name."""

    def __init__(self) -> None:
        self._newest: dict[tuple[str, str], str] = {}

    def add(self, job: JobRecord) -> None:
        if job.request.name:
            self._newest[job.owner, job.request.name] = job.id

    def newest(self, owner: str, name: str) -> str | None:
        """The id of `owner`'s newest job named `name`."""
        return self._newest.get((owner, name))

    def resolved(self, request: JobRequest, local: dict[str, str], owner: str, ids: Container[str]) -> tuple[After, ...]:
        """The job's dependencies with the queue's ids: a job of the same submission by its Id or
        Name first (`local`); else a JobId names a job of the queue by its id (`ids`: any job its
        owner may read), and a JobName, or a JobId that is no id, the newest of the owner's own jobs
        of that name."""
        resolved = []
        for after in request.after:
            job_id = local.get(after.job)
            if job_id is None and not after.by_name and after.job in ids:
                job_id = after.job
            if job_id is None:
                job_id = self._newest.get((owner, after.job))
            if job_id is None:
                raise DocumentError(f"the job depends on {excerpt(after.job)!r}, which is no job of this submission, "
                                    f"{'' if after.by_name else 'no id of the queue, '}nor a job of {excerpt(owner)!r} "
                                    "by that name (a name is looked up among the owner's own jobs)")
            resolved.append(replace(after, job=job_id, by_name=False, label=after.label or after.job))
        return tuple(resolved)
