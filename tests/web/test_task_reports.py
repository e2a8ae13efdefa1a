"""An executor's task reports that must not change a job (a review's findings): a late end of a
requeued task's first run that names no attempt ended the new run (the job Failed, 143); a body
nested past the parser's depth was a 500 with a traceback logged for each."""

from __future__ import annotations

from support.jobsite import job_site
from support.server import InProcessServer, ServerFactory
from test_job_controls_api import control, ok, sss, submit
from test_jobs_api import job, state_becomes


def test_a_late_end_of_a_requeued_task_that_names_no_attempt_ends_nothing(serve_app: ServerFactory) -> None:
    site = job_site(serve_app)
    submit(site, sss("again"), token="alice")
    host = state_becomes(site, "1", "Running")["hosts"]
    first = site.tokens[f"exec{host[1]}"]
    assert site.request("POST", "/v1/jobs/1/tasks/0/events", b'{"event": "started"}', token=first).status == 200
    ok(control(site, "1", "requeue", token="alice"))
    again = state_becomes(site, "1", "Running")
    executor = site.tokens[f"exec{again['hosts'][1]}"]
    late = site.request("POST", "/v1/jobs/1/tasks/0/events", b'{"event": "ended", "exit_code": 143}', token=executor)
    assert late.status == 400 and "attempt" in late.json()["error"], late.body
    assert job(site, "1")["state"] == "Running"
    named = b'{"event": "started", "attempt": 2}'
    assert site.request("POST", "/v1/jobs/1/tasks/0/events", named, token=executor).status == 200


def test_a_report_nested_past_the_parser_s_depth_is_a_400(serve_app: ServerFactory) -> None:
    site: InProcessServer = job_site(serve_app)
    submit(site, sss("deep"), token="alice")
    host = state_becomes(site, "1", "Running")["hosts"]
    reply = site.request("POST", "/v1/jobs/1/tasks/0/events", b"[" * 1000, token=site.tokens[f"exec{host[1]}"])
    assert reply.status == 400 and reply.json()["error"], reply.body
    assert job(site, "1")["state"] == "Running"
