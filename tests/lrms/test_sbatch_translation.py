"""Each mapping of a submitted job onto sbatch options and its batch script, and each refusal
(infosvc/lrms/sbatch.py, docs/slurm.md "Submitting through Slurm"): no Slurm needed."""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from infosvc.errors import DocumentError
from infosvc.lrms.sbatch import Batch, translate
from infosvc.queue.submissions import read_document
from infosvc.sched.request import read_request

FIXTURES = Path(__file__).parent.parent / "fixtures" / "jobs"


def batch(document: str | bytes, ids: dict[str, str] | None = None, position: int = 0,
          vo_accounts: dict[str, str] | None = None) -> Batch:
    body = document.encode() if isinstance(document, str) else document
    content_type = "application/json" if body.lstrip().startswith(b"{") else "application/xml"
    read = read_document(body, content_type, 100, lambda n: DocumentError(f"{n} jobs"))
    needs = read.needs[position]
    return translate(needs, read_request(needs, "alice"), slurm_ids=ids or {}, directory="/home/alice",
                     vo_accounts=vo_accounts)


def sss(inner: str) -> str:
    return f"<Job><Id>j1</Id><Executable>/bin/true</Executable>{inner}</Job>"


def refused(document: str, field: str) -> str:
    with pytest.raises(DocumentError) as caught:
        batch(document)
    assert caught.value.element == field, str(caught.value)
    assert "Slurm cannot be asked this" in str(caught.value)
    return str(caught.value)


def option(b: Batch, name: str) -> str | None:
    found = [o.split("=", 1)[1] if "=" in o else "" for o in b.options if o.split("=", 1)[0] == f"--{name}"]
    assert len(found) <= 1, b.options
    return found[0] if found else None


# --- the three formats ---------------------------------------------------------------------------

def test_an_sss_job_is_every_option_it_asks() -> None:
    b = batch((FIXTURES / "sss-job.xml").read_text().replace("<Priority>3</Priority>", "")
              .replace("<Requested>\n    <OperatingSystem>Linux</OperatingSystem>", "<Requested>"))
    assert b.options == ("--job-name=render frames", "--ntasks=4", "--time=0-01:00:00", "--mem=2048M",
                         "--constraint=ssd", "--account=animation", "--chdir=/home/alice/film",
                         "--output=render.out", "--error=render.err", "--input=/dev/null")
    assert b.script.splitlines()[-2:] == ["OMP_NUM_THREADS=4; export OMP_NUM_THREADS",
                                          "exec /opt/render/bin/render --frames 1-100 --out frames/"]


def test_a_ccs_job_of_two_tasks_runs_them_as_steps_in_their_order() -> None:
    b = batch((FIXTURES / "ccs-job.xml").read_text())
    # Minimum 2 Maximum 4 for the job, its tasks 2 and (unsaid) 1: each step takes its own
    assert option(b, "ntasks") == "2" and option(b, "cpus-per-task") == "2"
    assert option(b, "time") == "0-00:45:00"  # the smallest of the job's 1:30 and its task's 45 minutes
    assert option(b, "account") == "tools" and option(b, "job-name") == "nightly build"
    assert option(b, "chdir") == "/home/alice"  # each task cds to its own in the script
    assert option(b, "exclusive") is None  # IsExclusive false
    assert "--cpus-per-task=2" in b.script and "--cpus-per-task=1" in b.script
    lines = b.script.splitlines()
    first = next(i for i, line in enumerate(lines) if "build.exe" in line)
    second = next(i for i, line in enumerate(lines) if "runtests.exe" in line)
    assert first < lines.index('wait "$p0" || failed=$?') < second, b.script


def test_a_grid_job_is_refused_for_the_files_it_would_stage() -> None:
    message = refused((FIXTURES / "grid-job.json").read_text(), "input_files")
    assert "not staged" in message


def test_a_grid_job_without_files_is_two_steps_of_two_processors() -> None:
    grid = json.loads((FIXTURES / "grid-job.json").read_text())
    del grid["requirements"]
    grid["default_storage_base"] = "file:///scratch/alice/"  # a grid job's streams are URLs
    for task in grid["tasks"]:
        del task["definition"]["input_files"], task["definition"]["output_files"]
    b = batch(json.dumps(grid))
    assert option(b, "ntasks") == "2" and option(b, "cpus-per-task") == "2"
    assert "--output=/scratch/alice/runs/42/simulate.out" in b.script and "--seed 43" in b.script
    assert "OMP_NUM_THREADS=2; export OMP_NUM_THREADS" in b.script


def test_a_grid_jobs_streams_on_a_storage_element_are_refused() -> None:
    grid = json.loads((FIXTURES / "grid-job.json").read_text())
    del grid["requirements"]
    for task in grid["tasks"]:
        del task["definition"]["input_files"], task["definition"]["output_files"]
    assert "a gsiftp URL" in refused(json.dumps(grid), "OutputFile")


# --- each mapping --------------------------------------------------------------------------------

@pytest.mark.parametrize(("inner", "expected"), [
    ("<Processors>8</Processors>", ["--ntasks=8"]),
    ("<Requested><Processors op='GE'>2</Processors><Processors op='LE'>6</Processors></Requested>", ["--ntasks=2"]),
    ("<Requested><Duration>90</Duration></Requested>", ["--time=0-00:02:00"]),
    ("<Requested><Duration>P1DT1H</Duration></Requested>", ["--time=1-01:00:00"]),
    ("<Memory>1500</Memory>", ["--mem=1500M"]),
    ("<Memory units='GB'>1.5</Memory>", ["--mem=1536M"]),
    ("<Feature>ssd</Feature><Feature>ib</Feature>", ["--constraint=ssd&ib"]),
    ("<Requested><Feature aggregation='List'>a,b</Feature></Requested>", ["--constraint=a&b"]),
    ("<Requested><Resource name='GPU'>2</Resource></Requested>", ["--gres=gpu:2"]),
    ("<Requested><Resource name='GPU' type='a100'>1</Resource></Requested>", ["--gres=gpu:a100:1"]),
    ("<Requested><Resource name='License' type='matlab'>2</Resource></Requested>", ["--licenses=matlab:2"]),
    ("<Requested><Queue>short</Queue></Requested>", ["--partition=short"]),
    ("<Requested><Partition>long</Partition></Requested>", ["--partition=long"]),
    ("<Requested><Node>n3</Node></Requested>", ["--nodelist=n3"]),
    ("<Requested><Node op='NE' aggregation='List'>n1,n2</Node></Requested>", ["--exclude=n1,n2"]),
    ("<Requested><NodeCount>2</NodeCount></Requested>", ["--nodes=2"]),
    ("<Requested><NodeCount op='GE'>2</NodeCount></Requested>", ["--nodes=2-"]),
    ("<Requested><ResourceManagerType>SLURM</ResourceManagerType></Requested>", []),
    ("<Requested><QualityOfService>high</QualityOfService></Requested>", ["--qos=high"]),
    ("<Requested><Reservation>maint</Reservation></Requested>", ["--reservation=maint"]),
    ("<Account>physics</Account><Project>atlas</Project>", ["--account=physics"]),
    ("<Project>atlas</Project>", ["--account=atlas"]),
    ("<Hold>User</Hold>", ["--hold"]),
    ("<Hold>System</Hold>", ["--hold"]),  # and scontrol hold once it is in (tests/lrms/test_slurm_submit.py)
    ("<Priority>0</Priority>", ["--nice=200"]),
    ("<Priority>1</Priority>", ["--nice=100"]),
    ("<Priority>2</Priority>", []),
    ("<Restartable>false</Restartable>", ["--no-requeue"]),
    ("<Extension name='IsExclusive'>true</Extension>", ["--exclusive"]),
    ("<Extension name='RequiredNodes'>n[1-2]</Extension>", ["--nodelist=n1,n2"]),
    ("<InputFile>in.txt</InputFile>", ["--input=in.txt"]),
    ("<OutputFile>out-100%.txt</OutputFile>", ["--output=out-100%%.txt"]),
], ids=lambda value: value if isinstance(value, str) else None)
def test_each_mapping(inner: str, expected: list[str]) -> None:
    plain = set(batch(sss("")).options)
    b = batch(sss(inner))
    added = [o for o in b.options if o not in plain]
    assert added == expected, b.options


def test_a_job_named_nothing_is_named_by_its_id_and_runs_in_its_accounts_home() -> None:
    b = batch(sss(""))
    assert b.options == ("--job-name=j1", "--ntasks=1", "--chdir=/home/alice", "--input=/dev/null")
    assert b.script.endswith("exec /bin/true\n") and b.script.startswith("#!/bin/sh\n")


def test_a_shell_is_the_scripts_interpreter() -> None:
    assert batch(sss("<Shell>/bin/bash</Shell>")).script.startswith("#!/bin/bash\n")
    refused(sss("<Shell>bash -c</Shell>"), "Shell")


def test_a_project_is_the_account_the_site_maps_its_vo_to() -> None:
    assert option(batch(sss("<Project>atlas</Project>"), vo_accounts={"atlas": "atlas-prod"}), "account") == "atlas-prod"


def test_eligible_time_and_deadline_are_local_times_as_sbatch_reads_them() -> None:
    begin, end = 2_000_000_000, 2_000_003_600
    b = batch(sss(f"<EligibleTime>{begin}</EligibleTime><Deadline>{end}</Deadline>"))
    assert option(b, "begin") == time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(begin))
    assert option(b, "deadline") == time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(end))


GROUP = """<JobGroup><Id>g</Id>
  <Job><Id>first</Id><Name>prep</Name><Executable>/bin/true</Executable></Job>
  <Job><Id>second</Id><Executable>/bin/true</Executable>
    <Dependency condition="{condition}"{extra}>{target}</Dependency></Job>
</JobGroup>"""


@pytest.mark.parametrize(("condition", "extra", "target", "expected"), [
    ("OnSuccess", "", "first", "afterok:101"),
    ("OnFailure", "", "first", "afternotok:101"),
    ("OnExit", "", "first", "afterany:101"),
    ("OnSuccess", " designator='JobName'", "prep", "afterok:101"),
    ("OnSuccess", "", "4242", "afterok:4242"),  # a job submitted earlier: its id is Slurm's
])
def test_dependencies_name_the_slurm_ids(condition: str, extra: str, target: str, expected: str) -> None:
    document = GROUP.format(condition=condition, extra=extra, target=target)
    if target == "4242":
        document = f"<Job><Id>x</Id><Executable>/bin/true</Executable><Dependency>{target}</Dependency></Job>"
        assert option(batch(document), "dependency") == expected
        return
    assert option(batch(document, {"first": "101", "prep": "101"}, position=1), "dependency") == expected


# --- the script ----------------------------------------------------------------------------------

def test_no_word_of_the_document_is_read_by_the_shell_as_code(tmp_path: Path) -> None:
    """The script, run by a real shell, passes each argument and variable as written."""
    hostile = "$(touch PWNED); `id` ; 'quote' \"dq\" \\ * $HOME"
    document = sss("").replace("/bin/true", "/usr/bin/printf").replace(
        "</Job>", f"<Arguments>{shlex.join(['%s|', hostile])}</Arguments>"
                  f"<Environment><Variable name='X'>{hostile}</Variable></Environment></Job>")
    script = batch(document.replace("&", "&amp;")).script.replace("exec /usr/bin/printf", 'printf "%s|" "$X"; exec /usr/bin/printf')
    ran = subprocess.run(["/bin/sh", "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert ran.stdout == f"{hostile}|{hostile}|"
    assert not (tmp_path / "PWNED").exists()


def test_tasks_run_in_rounds_by_their_dependencies() -> None:
    document = """<Job><Id>flow</Id><TaskGroup><TaskCount>3</TaskCount>
      <Task><Id>a</Id><Executable>/bin/a</Executable></Task>
      <Task><Id>b</Id><Executable>/bin/b</Executable><Dependency>a</Dependency></Task>
      <Task><Id>c</Id><Executable>/bin/c</Executable></Task>
    </TaskGroup></Job>"""
    script = batch(document).script
    assert script.index("/bin/a") < script.index("/bin/c") < script.index('wait "$p2"') < script.index("/bin/b")
    assert script.count('exit "$failed"  # round') == 2


# --- each refusal ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("inner", "field"), [
    ("<Requested><OperatingSystem>Linux</OperatingSystem></Requested>", "OperatingSystem"),
    ("<Requested><Architecture>x86_64</Architecture></Requested>", "Architecture"),
    ("<Requested><Machine>big</Machine></Requested>", "Machine"),
    ("<Requested><Group>staff</Group></Requested>", "Group"),
    ("<Requested><Disk>100</Disk></Requested>", "Disk"),
    ("<Swap>100</Swap>", "Swap"),
    ("<Requested><Resource name='Bandwidth'>1</Resource></Requested>", "Resource Bandwidth"),
    ("<Requested><Resource name='GPU' op='LE'>1</Resource></Requested>", "Resource GPU"),
    ("<Requested><Memory op='LE'>100</Memory></Requested>", "Memory"),
    ("<Requested><Duration op='GE'>100</Duration></Requested>", "Duration"),
    ("<Requested><Feature op='NE'>gpu</Feature></Requested>", "Feature"),
    ("<Requested><Feature aggregation='Pattern'>g.*</Feature></Requested>", "Feature"),
    ("<Requested><Node aggregation='List'>n1,n2</Node></Requested>", "Node"),
    ("<Requested><Node aggregation='Pattern'>n.*</Node></Requested>", "Node"),
    ("<Requested><Feature>a</Feature><Feature conj='Or'>b</Feature></Requested>", "Feature"),
    ("<Requested><Feature preference='1'>ssd</Feature></Requested>", "Feature"),
    ("<Requested><ResourceManagerType>PBS</ResourceManagerType></Requested>", "ResourceManagerType"),
    ("<Requested><ResourceManagerType op='NE'>Slurm</ResourceManagerType></Requested>", "ResourceManagerType"),
    ("<Requested><Queue>a</Queue><Partition>b</Partition></Requested>", "Queue"),
    ("<Requested><Queue>a b</Queue></Requested>", "Queue"),
    ("<Requested><NodeCount op='GE'>3</NodeCount><NodeCount op='LE'>2</NodeCount></Requested>", "NodeCount"),
    ("<Requested><Resource name='GPU' type='a'>1</Resource><Resource name='GPU' type='b'>1</Resource></Requested>",
     "Resource GPU"),
    ("<Priority>4</Priority>", "Priority"),
    ("<Interactive>true</Interactive>", "Interactive"),
    ("<Checkpointable>true</Checkpointable>", "Checkpointable"),
    ("<CpuDuration>100</CpuDuration>", "CpuDuration"),
    ("<ResourceLimit name='core'>0</ResourceLimit>", "ResourceLimit"),
    ("<NotificationList uri='mailto:a@b'>JobEnd</NotificationList>", "NotificationList"),
    ("<TaskDistribution type='TasksPerNode'>2</TaskDistribution>", "TaskDistribution"),
    ("<Extension name='RuntillCancelled'>true</Extension>", "RuntillCancelled"),
    ("<Extension name='Mystery'>x</Extension>", "Mystery"),
    ("<Dependency condition='OnExit' code='3'>4242</Dependency>", "Dependency"),
    ("<Dependency>not-a-slurm-id</Dependency>", "Dependency"),
    ("<Environment><Variable name='A-B'>1</Variable></Environment>", "Environment"),
    ("<Arguments>'unclosed</Arguments>", "Arguments"),
    ("<InputFile>gsiftp://se/x</InputFile>", "InputFile"),
    ("<OutputFile>file://host</OutputFile>", "OutputFile"),
])
def test_each_refusal_names_its_field(inner: str, field: str) -> None:
    refused(sss(inner), field)


def test_a_job_asking_more_than_its_tasks_is_refused() -> None:
    message = refused((FIXTURES / "ccs-job.xml").read_text().replace(
        'MinimumNumberOfProcessors="2" MaximumNumberOfProcessors="4"', 'MinimumNumberOfProcessors="6" '
        'MaximumNumberOfProcessors="8"'), "Processors")
    assert "allocates a job's tasks" in message


def test_an_attached_file_as_the_program_is_refused() -> None:
    refused("<Job><Id>j</Id><Executable>#f</Executable></Job>".replace("</Job>", "<File id='f'>x</File></Job>"),
            "Executable")


# --- what one sbatch may be asked ----------------------------------------------------------------

def test_excluded_nodes_are_bounded_before_they_are_written_out() -> None:
    """A NE Range of a million names was expanded outside every budget (4 s and 250 MB from a
    200-byte body): it is refused at the bound of the job's other host-name lists, by its text."""
    started = time.perf_counter()
    message = refused(sss("<Requested><Node op='NE' aggregation='Range'>n[1-1000000]</Node></Requested>"), "Node")
    assert time.perf_counter() - started < 0.5, "refused before the names are made"
    assert "100000 hosts" in message, message
    # several terms together, as the request's own lists are charged
    two = "".join(f"<Node op='NE' aggregation='Range'>{prefix}[1-60000]</Node>" for prefix in ("a", "b"))
    assert "100000 hosts" in refused(sss(f"<Requested>{two}</Requested>"), "Node")
    many = ",".join(f"h{number}" for number in range(100_001))
    assert "100000 hosts" in refused(sss(f"<Requested><Node op='NE' aggregation='List'>{many}</Node></Requested>"),
                                     "Node")
    # a range sbatch could not be told, however short
    assert "bracket" in refused(sss("<Requested><Node op='NE' aggregation='Range'>n[5-</Node></Requested>"), "Node")


@pytest.mark.parametrize(("inner", "field"), [
    ("<Requested><Node op='NE' aggregation='Range'>node[1-20000]</Node></Requested>", "Node"),
    ("<Extension name='RequiredNodes'>node[1-20000]</Extension>", "Node"),
    ("<Requested><Feature aggregation='List'>" + ",".join(f"f{n}" for n in range(30_000)) + "</Feature></Requested>",
     "Feature"),
], ids=["exclude", "nodelist", "constraint"])
def test_an_option_longer_than_one_command_line_argument_is_refused(inner: str, field: str) -> None:
    """Linux refuses an argument over 128 KiB (E2BIG) to the sbatch it would run: a 400 that names
    the field, not a 503 from the submission."""
    message = refused(sss(inner), field)
    assert "128 KiB" in message, message


def test_an_argument_list_the_system_refuses_is_a_refusal_of_the_job(tmp_path: Path) -> None:
    """Past translation's bounds (a smaller ARG_MAX), execve's E2BIG is the job's, not Slurm's."""
    from infosvc.config import LrmsConfig
    from infosvc.lrms import slurm_jobs

    sbatch = tmp_path / "sbatch"
    sbatch.write_text("#!/bin/sh\necho 1\n")
    sbatch.chmod(0o755)
    config = LrmsConfig(type="slurm", bin_dir=str(tmp_path))
    huge = Batch(("--exclude=" + "n," * 100_000,), "#!/bin/sh\ntrue\n")
    with pytest.raises(DocumentError) as caught:
        slurm_jobs.submit(config, huge, None)
    assert "too long" in str(caught.value), str(caught.value)
    assert slurm_jobs.submit(config, Batch(("--exclude=n1",), "#!/bin/sh\ntrue\n"), None) == "1"
