"""`infosvc hold`, `release`, `requeue`, `priority` and `show` as users and an admin run them: the
real command against a server on loopback, with token files; and `show`'s printing as a pure
function of a job's JSON."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from infosvc.cli.jobcontrols import shown
from support.jobsite import job_site
from support.server import InProcessServer, ServerFactory, wait_for
from test_jobs_cli import User, alice, bob, document  # noqa: F401 - alice and bob are fixtures


@pytest.fixture
def site(serve_app: ServerFactory) -> InProcessServer:
    return job_site(serve_app, hosts=1)


@pytest.fixture
def admin(site: InProcessServer, tmp_path: Path) -> User:
    return User(site, "admin", tmp_path)


def state(site: InProcessServer, job_id: str) -> str:
    return str(site.get(f"/v1/jobs/{job_id}").json()["state"])


def test_hold_release_requeue_and_priority_from_the_shell(site: InProcessServer, alice: User, bob: User,
                                                          admin: User) -> None:
    assert alice.submit(document("wide", 4)).returncode == 0
    wait_for(lambda: state(site, "1") == "Running")
    assert alice.submit(document("next", 4), "next.xml").returncode == 0
    assert alice.submit(document("last", 4), "last.xml").returncode == 0
    held = alice("hold", "2", "3", "99")
    assert held.returncode == 1 and ": 404 " in held.stderr  # 99: no such job; the others are held
    assert held.stdout == "job 2 queued, holds: User\njob 3 queued, holds: User\n"
    refused = bob("release", "2")
    assert refused.returncode == 1 and ": 403 " in refused.stderr and refused.stdout == ""
    assert alice("hold", "--system", "2").returncode == 1  # an administrator's hold
    assert admin("hold", "--system", "2").stdout == "job 2 queued, holds: User, System\n"
    assert alice("release", "2", "3").stdout == "job 2 queued, holds: System\njob 3 queued, holds: none\n"
    assert alice("priority", "3", "Highest").returncode == 1  # an administrator's
    done = admin("priority", "3", "4")
    assert done.returncode == 0 and done.stdout == "job 3 priority Highest\n"
    requeued = alice("requeue", "1")
    assert requeued.returncode == 0 and requeued.stdout == "job 1 queued, holds: none\n"
    wait_for(lambda: state(site, "3") == "Running")  # Highest goes before job 1, back in its place
    assert state(site, "1") == "Queued" and state(site, "2") == "Queued"
    assert alice("requeue", "2").returncode == 1  # not running
    assert alice("priority", "1", "Urgent").returncode == 1
    wait_for(lambda: "held: System hold" in alice("why", "2").stdout)
    assert "  holds: System (`infosvc release 2` takes a User hold off)" in alice("why", "2").stdout.splitlines()


def test_show_prints_one_job_whole_with_its_events(site: InProcessServer, alice: User) -> None:
    eligible = int(time.time()) + 3600
    controls = f"<Hold>User</Hold><EligibleTime>{eligible}</EligibleTime><Deadline>{eligible + 60}</Deadline>"
    assert alice.submit(document("show", 2).replace("<Executable>", controls + "<Executable>")).returncode == 0
    assert alice("release", "1").returncode == 0
    wait_for(lambda: "EligibleTime" in alice("show", "1").stdout)
    lines = alice("show", "1").stdout.splitlines()
    assert lines[0] == "JobId=1 JobName=show"
    assert lines[2] == "Priority=Normal Holds=(null) Exclusive=True"
    assert lines[3].startswith("JobState=Queued SSSState=Idle GlueStatus=WAITING Reason=not eligible before ")
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(eligible))
    assert any(line.endswith(f"EligibleTime={when} Deadline={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(eligible + 60))}")
               for line in lines)
    assert "Task=0 Name=1 State=Queued Node=(null) Attempts=0 ExitCode=(null)" in lines
    events = lines[lines.index("Events:") + 1:]
    assert [event.strip().split(" ", 1)[1] for event in events] == ["Queued: submitted", "Queued: User hold released by alice"]
    assert json.loads(alice("show", "1", "--json").stdout)["holds"] == []
    missing = alice("show", "7")
    assert missing.returncode == 1 and ": 404 " in missing.stderr


def test_show_is_a_pure_function_of_the_job_and_makes_every_line_visible() -> None:
    job = {"id": "5", "name": "a\nJobId=6", "owner": "u", "group": None, "priority": "Normal", "holds": ["User"],
           "exclusive": False, "state": "Queued", "sss_state": "Hold", "glue_status": "WAITING",
           "reason": "held: User hold", "exit_code": None, "run_time_limit_seconds": 60,
           "predicted_run_seconds": None, "submitted": "2026-01-01T00:00:00Z", "eligible_time": None,
           "deadline": None, "started": None, "ended": None, "hosts": None, "ces": [], "read_as_requested": [],
           "depends_on": [], "processors": {"min": 1, "max": 2, "held": 0},
           "reserved": {"at": "2026-01-01T01:00:00Z", "hosts": "n[0-1]"},
           "tasks": [], "events": [{"at": "2026-01-01T00:00:00Z", "task": None, "state": "Queued", "detail": "x"}]}
    lines = shown(job).splitlines()
    assert lines[0] == "JobId=5 JobName=a\\nJobId=6"  # a name cannot forge a line
    assert "Holds=User" in lines[2] and "NumCPUs=1-2 HeldCPUs=0" in lines
    assert "ReservedAt=2026-01-01T01:00:00Z ReservedNodes=n[0-1]" in lines
    assert lines[-2:] == ["Events:", "  2026-01-01T00:00:00Z Queued: x"]
