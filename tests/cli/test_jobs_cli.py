"""`infosvc submit`, `jobs`, `cancel` and `why` as a user runs them: the real command against a
server on loopback, with token files; and the pure functions that print them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infosvc.cli.jobs import clock, content_type_of, jobs_table, submitted, why
from support.jobsite import job_site
from support.server import InProcessServer, ServerFactory, free_port, wait_for

XML_JOB = """<Job><Id>{name}</Id><Name>{name}</Name><Executable>/bin/true</Executable>
<Requested><Processors>{procs}</Processors>{more}</Requested></Job>"""


def document(name: str, procs: int = 1, more: str = "") -> str:
    return XML_JOB.format(name=name, procs=procs, more=more)


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "infosvc", *args], capture_output=True, text=True, timeout=60,
                          input=stdin)


class User:
    """One user at a shell: a token file and the server's URL."""

    def __init__(self, server: InProcessServer, token_name: str, directory: Path) -> None:
        self.server = server
        self.token = directory / f"{token_name}.token"
        self.token.write_text(server.tokens[token_name] + "\n")
        self.directory = directory

    def __call__(self, command: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return cli(command, "--server", self.server.url, "--token-file", str(self.token), *args, stdin=stdin)

    def submit(self, text: str, name: str = "job.xml") -> subprocess.CompletedProcess[str]:
        path = self.directory / name
        path.write_text(text)
        return self("submit", str(path))


@pytest.fixture
def site(serve_app: ServerFactory) -> InProcessServer:
    return job_site(serve_app)


@pytest.fixture
def alice(site: InProcessServer, tmp_path: Path) -> User:
    return User(site, "alice", tmp_path)


@pytest.fixture
def bob(site: InProcessServer, tmp_path: Path) -> User:
    return User(site, "bob", tmp_path)


def states(site: InProcessServer) -> dict[str, str]:
    return {job["id"]: job["state"] for job in site.get("/v1/jobs").json()["jobs"]}


def test_submit_in_each_format_and_a_group(site: InProcessServer, alice: User) -> None:
    done = alice.submit(document("one", more="<Duration>600</Duration>"))
    assert done.returncode == 0, done.stderr
    assert done.stdout in ("job 1 submitted (Queued)\n", "job 1 submitted (Running)\n")
    grid = json.dumps({"version": 2, "executable": "/bin/true", "count": 1})
    done = alice.submit(grid, "job.json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("job 2 submitted")
    group = ("<JobGroup><Id>g</Id>" + document("g.1")
             + document("g.2").replace("<Executable>", "<Dependency>g.1</Dependency><Executable>") + "</JobGroup>")
    done = alice("submit", "-", stdin=group)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "job group 3 submitted: jobs 3-4\n"
    done = alice("submit", "--json", str(alice.directory / "job.xml"))
    assert json.loads(done.stdout)["id"] == "5" and json.loads(done.stdout)["owner"] == "alice"


def test_submit_refusals_are_one_clear_line(site: InProcessServer, alice: User, tmp_path: Path) -> None:
    bad = alice.submit(document("bad").replace("<Requested>", "<Priority>Urgent</Priority><Requested>"))
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.startswith(f"infosvc submit: {site.url}/v1/jobs: 400 ") and "Priority" in bad.stderr
    missing = alice("submit", str(tmp_path / "nope.xml"))
    assert missing.returncode == 1 and "nope.xml: cannot read" in missing.stderr
    (tmp_path / "empty.xml").write_text("  \n")
    assert "empty" in alice("submit", str(tmp_path / "empty.xml")).stderr
    anonymous = cli("submit", "--server", site.url, str(tmp_path / "job.xml"))
    assert anonymous.returncode == 1 and ": 401 " in anonymous.stderr
    nowhere = cli("jobs", "--server", f"http://127.0.0.1:{free_port()}")
    assert nowhere.returncode == 1 and nowhere.stderr.startswith("infosvc jobs: cannot reach ")
    for output in (bad, missing, anonymous, nowhere):
        assert "Traceback" not in output.stderr
    assert states(site) == {}


def test_jobs_lists_the_live_queue_like_squeue(site: InProcessServer, alice: User, bob: User) -> None:
    for name in ("a1", "a2", "a3"):
        assert alice.submit(document(name, more="<Duration>3600</Duration>")).returncode == 0
    assert bob.submit(document("b1", 64)).returncode == 0
    wait_for(lambda: states(site) == {"1": "Running", "2": "Running", "3": "Queued", "4": "Queued"})
    # the pass that reserves for the head comes within 2 s of submissions that cannot start
    wait_for(lambda: "reserved" in (site.get("/v1/jobs/3").json()["reason"] or ""))
    done = alice("jobs")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["JOBID", "NAME", "USER", "STATE", "PRIORITY", "TIME", "LIMIT", "PROCS",
                                "HOSTS(REASON)"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert list(rows) == ["1", "2", "3", "4"]
    assert rows["1"].split()[1:8] == ["a1", "alice", "Running", "Normal", rows["1"].split()[5], "1:00:00", "4"]
    assert rows["1"].split()[8] in ("n0", "n1")
    assert "(first in the queue: waiting for 1 processor, 0 free on idle hosts; reserved to start at" in rows["3"]
    assert rows["4"].split()[2:4] == ["bob", "Queued"] and "needs 64 processors; the hosts it may use have 8" in rows["4"]
    assert [line.split()[0] for line in alice("jobs", "--user", "bob").stdout.splitlines()[1:]] == ["4"]
    assert [line.split()[0] for line in alice("jobs", "--state", "Running").stdout.splitlines()[1:]] == ["1", "2"]
    listed = json.loads(alice("jobs", "--json").stdout)
    assert [job["id"] for job in listed["jobs"]] == ["1", "2", "3", "4"] and listed["truncated"] is False
    assert alice("jobs", "--state", "Finished").stdout == "(no jobs)\n"
    wrong = alice("jobs", "--state", "Sleeping")
    assert wrong.returncode == 1 and "no job state" in wrong.stderr


def test_cancel_own_jobs_only(site: InProcessServer, alice: User, bob: User) -> None:
    assert alice.submit(document("mine", 64)).returncode == 0
    refused = bob("cancel", "1")
    assert refused.returncode == 1 and ": 403 " in refused.stderr
    done = alice("cancel", "1", "99")
    assert done.returncode == 1
    assert done.stdout == "job 1 canceled\n" and ": 404 " in done.stderr
    assert states(site) == {"1": "Canceled"}
    assert alice("jobs").stdout == "(no jobs)\n"
    assert alice("jobs", "--all").stdout.splitlines()[1].split()[3] == "Canceled"


def test_why_says_what_a_job_waits_for(site: InProcessServer, alice: User) -> None:
    group = ("<JobGroup><Id>fat</Id>" + document("fat.1", 64)
             + document("fat.2").replace("<Executable>", "<Dependency>fat.1</Dependency><Executable>")
             + document("gpu", more="<Feature>BigMem</Feature>") + "</JobGroup>")
    assert alice("submit", "-", stdin=group).returncode == 0
    wait_for(lambda: all(job["reason"] for job in site.get("/v1/jobs").json()["jobs"]))
    first = alice("why", "1").stdout.splitlines()
    assert first[0] == ("job 1 (fat.1) is Queued: first in the queue: needs 64 processors; the hosts it may use "
                        "have 8; no running job's end frees enough")
    assert first[2] == "  asks 64 processor(s), exclusive hosts, run time limit none, priority Normal"
    second = alice("why", "2").stdout.splitlines()
    assert second[0] == "job 2 (fat.2) is Queued: held: dependency fat.1 not completed (job 1)"
    assert "  depends on: fat.1 completed" in second
    third = alice("why", "3").stdout.splitlines()
    assert third[0].startswith("job 3 (gpu) is Queued: ") and "no usable host meets its requirements" in third[0]
    assert third[-2:][0] == "  hosts its requirements rule out:"
    assert third[-1].startswith("    n[0-1]: ") and "BigMem" in third[-1]
    assert json.loads(alice("why", "3", "--json").stdout)["rejected_hosts"][0].startswith("n[0-1]: ")
    missing = alice("why", "42")
    assert missing.returncode == 1 and ": 404 " in missing.stderr


def test_why_for_a_running_and_an_ended_job(site: InProcessServer, alice: User) -> None:
    assert alice.submit(document("run", more="<Duration>90</Duration>")).returncode == 0
    wait_for(lambda: states(site) == {"1": "Running"})
    running = alice("why", "1").stdout.splitlines()
    assert running[0].startswith("job 1 (run) is Running on n") and " since 20" in running[0]
    assert running[1].startswith("  its run time limit (1:30) ends it at 20")
    alice("cancel", "1")
    ended = alice("why", "1").stdout.splitlines()
    assert ended[0].startswith("job 1 (run) is Canceled since 20") and ended[0].endswith(": canceled")


def test_a_job_name_cannot_forge_rows_or_drive_the_terminal(site: InProcessServer, alice: User, bob: User) -> None:
    """Another user's job name with a newline, CR, C1 and bidi characters is shown escaped: one row
    per job in `jobs`, one line per fact in `why`, nothing for the terminal to act on."""
    forged = "x&#10;99  sneaky  root  Running  Normal&#13;&#x9B;2J&#x202E;&#x2066;"
    assert bob.submit(document(forged, 64)).returncode == 0
    assert alice.submit(document("plain", 64)).returncode == 0
    wait_for(lambda: len(states(site)) == 2)
    listed = alice("jobs")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["1", "2"]
    assert lines[1].split()[1].startswith("x\\n99")
    explained = alice("why", "1")
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.splitlines()[0].startswith("job 1 (x\\n99  sneaky  root  Running  Normal\\r\\x9b2J\\u202e\\u2066) is Queued")
    for output in (listed.stdout, explained.stdout):
        assert not any(char in output for char in "\r\x9b\u202e\u2066")


# --- the printing, without a server --------------------------------------------------------------

def test_clock_is_squeue_s() -> None:
    assert [clock(s) for s in (None, 0, 59.9, 61, 3600, 90061, -5)] == [
        "-", "0:00", "0:59", "1:01", "1:00:00", "1-01:01:01", "0:00"]


def test_content_type_by_the_first_character() -> None:
    assert content_type_of(b'\xef\xbb\xbf  {"version": 2}') == "application/json"
    assert content_type_of(b"\n<Job/>") == "application/xml"
    assert content_type_of(b"<?xml version='1.0'?><Job/>") == "application/xml"


def test_printing_an_empty_queue_and_a_group() -> None:
    assert jobs_table([], 0.0) == "(no jobs)"
    assert submitted({"group": "7", "jobs": [{"id": "7"}, {"id": "8"}, {"id": "9"}]}) == \
        "job group 7 submitted: jobs 7-9"
    job = {"id": "1", "name": None, "state": "Queued", "reason": None, "reserved": None,
           "submitted": None, "processors": {"min": 2, "max": 4, "held": 0}, "run_time_limit_seconds": None,
           "exclusive": False, "priority": "Highest"}
    assert why(job, 0.0).splitlines() == [
        "job 1 is Queued: waiting for the next scheduling pass",
        "  asks 2 to 4 processor(s), shared hosts, run time limit none, priority Highest"]
    assert jobs_table([job | {"owner": "x"}], 0.0).splitlines()[1].split() == [
        "1", "-", "x", "Queued", "Highest", "0:00", "UNLIMITED", "2-4"]


def test_tables_and_why_escape_every_control_and_bidi_character() -> None:
    nasty = "a\nb\rc\td\x1b[31me\x00\x7f\x85\x9b\u202a\u202e\u2066\u2069\u200e\u200f\u061c\u2028z"
    job = {"id": "1", "name": nasty, "owner": "o\x1bp", "state": "Failed", "reason": "r\nforged", "ended": None,
           "processors": {"min": 1, "max": 1, "held": 0}, "run_time_limit_seconds": None, "priority": "Normal"}
    table_lines = jobs_table([job], 0.0).splitlines()
    assert len(table_lines) == 2
    assert "a\\nb\\rc\\td\\x1b[31me\\x00\\x7f\\x85\\x9b\\u202a\\u202e" in table_lines[1]  # the name's first 24
    assert "o\\x1bp" in table_lines[1] and "(r\\nforged)" in table_lines[1]
    told = why(job, 0.0)
    assert len(told.splitlines()) == 2
    assert ("a\\nb\\rc\\td\\x1b[31me\\x00\\x7f\\x85\\x9b\\u202a\\u202e\\u2066\\u2069\\u200e\\u200f"
            "\\u061c\\u2028z") in told
    for text in (told, "\n".join(table_lines)):
        assert all(char.isprintable() for line in text.splitlines() for char in line)
    # what is safe is shown as it is: accents, CJK, emoji
    assert "é漢😀" in jobs_table([job | {"name": "é漢😀", "reason": None}], 0.0)
