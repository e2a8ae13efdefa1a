"""One life cycle for a CCS document's Status and the scheduler's jobs (infosvc.model.ccsjob.JobState):
the names a job's JSON, SSS and GLUE give each state, pinned, so that the two former enums' merge
(issue 25) and any later change to the enum shows here first."""

from __future__ import annotations

import dataclasses

from infosvc.codec.ccsjob_xml import parse_ccs_job
from infosvc.model.ccsjob import CcsJob, JobState
from infosvc.sched import jobs
from infosvc.sched.jobs import ENDED, JobRecord, glue_status, sss_state
from infosvc.sched.request import JobRequest, TaskRequest

#: state -> (its JSON value, SSS Job State, GLUE CE job status) for a job neither held nor reserved
NAMES = {
    JobState.NOT_SUBMITTED: ("NotSubmitted", "Idle", "SUBMITTED"),
    JobState.QUEUED: ("Queued", "Idle", "WAITING"),
    JobState.RUNNING: ("Running", "Running", "RUNNING"),
    JobState.FINISHED: ("Finished", "Completed", "DONE"),
    JobState.FAILED: ("Failed", "Completed", "ABORTED"),
    JobState.CANCELED: ("Canceled", "Completed", "CLEARED"),
}


def record(state: JobState) -> JobRecord:
    request = JobRequest(name="j", owner="u", tasks=(TaskRequest(0, "t"),))
    return JobRecord("1", request, 0.0, "u", state=state)


def test_the_six_states_and_what_each_rendering_names_them() -> None:
    assert list(JobState) == list(NAMES)
    for state, (value, sss, glue) in NAMES.items():
        assert (state.value, sss_state(record(state)), glue_status(record(state))) == (value, sss, glue)
    assert ENDED == {JobState.FINISHED, JobState.FAILED, JobState.CANCELED}


def test_the_scheduler_and_the_ccs_documents_share_the_one_enum() -> None:
    assert not hasattr(jobs, "CcsState") and jobs.JobState is JobState  # defined once, in the model
    types = {f.name: f.type for record_type in (CcsJob, JobRecord) for f in dataclasses.fields(record_type)}
    assert types["status"] == "JobState" and types["state"] == "JobState"
    document = (b'<Job xmlns="http://www.microsoft.com/ComputeCluster/" Status="Completed"><Tasks>'
                b'<Task CommandLine="x" Status="Cancelled"/></Tasks></Job>')
    job = parse_ccs_job(document)
    assert job.status is JobState.FINISHED and job.tasks[0].status is JobState.CANCELED
    assert sss_state(record(job.status)) == "Completed"
