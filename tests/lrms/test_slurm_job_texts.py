"""A job's own texts, as squeue prints them: raw, newlines and separators included. A user who
submits to Slurm directly chooses a job's name, account, comment and constraint; none of them may
forge a job in GET /v1/jobs or in the published cluster, nor make a listing or a cluster read fail.

No Slurm needed: a stand-in squeue formats a fixed queue as Slurm 22.05's does (each `%X` of `-o`,
or of SQUEUE_FORMAT where no -o is given, replaced by the job's text as it is, one record a line),
beside the saved sinfo and scontrol output (tests/fixtures/slurm). The same jobs submitted to a
real Slurm: tests/lrms/test_slurm_submit.py."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from infosvc.config import LrmsConfig
from infosvc.lrms.reader import read_cluster
from infosvc.lrms.slurm_jobs import read_jobs
from support import FIXTURES

SUBMITTED = "2026-11-27T07:02:35"
#: one job as squeue's format letters print it (TZ=UTC)
PLAIN = {"i": "1", "P": "batch", "T": "PENDING", "u": "bob", "a": "atlas", "C": "1", "D": "1", "l": "UNLIMITED",
         "S": "N/A", "V": SUBMITTED, "e": "N/A", "N": "", "E": "(null)", "y": "0", "r": "JobHeldUser", "j": "plain",
         "f": "(null)", "k": "(null)", "h": "OK"}
#: a name that, printed raw, ended the listing's line and wrote one more: a job 424242 of root's,
#: running on 64 CPUs (the listing's format up to the name, then `|#|` and the features)
FORGING_NAME = ("innocent|#|(null)\n424242|RUNNING|root|root|64|UNLIMITED|2026-11-27T07:02:35|2026-11-27T07:02:37|"
                "N/A|c1|batch|(null)|0|None|root-maintenance")
#: a name whose second line does not read (NaN CPUs): every GET /v1/jobs was a 503
BREAKING_NAME = "x|#|(null)\n424244|RUNNING|u|a|NaN|UNLIMITED|N/A|N/A|N/A||batch|(null)|0|None|y"
#: an account that completed the cluster read's line and wrote one more: a job running in batch
FORGING_ACCOUNT = f"atlas|1|1|UNLIMITED|N/A|{SUBMITTED}||None\n424243|batch|RUNNING|root|root"
#: each beside a plain job, apart: what it did alone
HOSTILE = {
    "forging-name": {**PLAIN, "i": "2", "j": FORGING_NAME},
    "breaking-name": {**PLAIN, "i": "3", "j": BREAKING_NAME},
    "account-with-separator": {**PLAIN, "i": "4", "a": "x|y"},  # sbatch takes it where accounting does not check
    "forging-account": {**PLAIN, "i": "5", "a": FORGING_ACCOUNT},
    "texts-with-separators": {**PLAIN, "i": "6", "j": "a|#|b\nc", "f": "intel|gpu", "k": "x\n6|RUNNING",
                              "E": "afterok:1(unfulfilled)"},
}
JOBS = [PLAIN, *HOSTILE.values()]

SQUEUE = """\
import json, os, re, sys
args = sys.argv[1:]
form = args[args.index("-o") + 1] if "-o" in args else os.environ.get("SQUEUE_FORMAT")
if form is None:
    sys.exit("squeue: this stand-in prints the -o form only (set by -o or SQUEUE_FORMAT)")
for job in json.load(open(sys.argv[0] + ".json")):
    print(re.sub(r"%\\.?[0-9]*([A-Za-z])", lambda found: job[found[1]], form))
"""


def stand_in(tmp_path: Path, jobs: list[dict[str, str]]) -> LrmsConfig:
    """A bin_dir whose squeue prints `jobs`, and whose sinfo and scontrol print the saved output."""
    (tmp_path / "squeue").write_text(f"#!{sys.executable}\n{SQUEUE}")
    (tmp_path / "squeue.json").write_text(json.dumps(jobs))
    for name, text in (("sinfo", f"cat {FIXTURES / 'slurm' / 'sinfo.json'}"),
                       ("scontrol", f"cat {FIXTURES / 'slurm' / 'partitions.txt'}")):
        (tmp_path / name).write_text(f"#!/bin/sh\n{text}\n")
    for name in ("squeue", "sinfo", "scontrol"):
        (tmp_path / name).chmod(0o755)
    return LrmsConfig(type="slurm", bin_dir=str(tmp_path))


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_jobs_texts_forge_no_job_in_the_listing(hostile: str, tmp_path: Path) -> None:
    jobs = [PLAIN, HOSTILE[hostile]]
    records = {str(record["job_id"]): record for record in read_jobs(stand_in(tmp_path, jobs))}
    assert sorted(records) == [job["i"] for job in jobs], sorted(records)
    for job in jobs:
        record = records[job["i"]]
        assert (record["name"], record["account"], record["user_name"], record["job_state"], record["cpus"]) == (
            job["j"], job["a"], "bob", "PENDING", 1), record
        assert (record["features"], record["dependency"]) == (job["f"].replace("(null)", ""),
                                                              job["E"].replace("(null)", ""))


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_jobs_texts_forge_no_job_in_the_cluster_read(hostile: str, tmp_path: Path) -> None:
    jobs = [PLAIN, HOSTILE[hostile]]
    read = {job.id: job for job in read_cluster(stand_in(tmp_path, jobs)).jobs}
    assert sorted(read) == [job["i"] for job in jobs], sorted(read)
    assert all((job.state, job.user, job.cpus) == ("PENDING", "bob", 1) for job in read.values())
    assert [read[job["i"]].account for job in jobs] == [job["a"] for job in jobs]


def test_a_record_that_does_not_read_is_left_out_and_said(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm's own field in a form no Slurm writes (CPUs "many"): that job is left out, once a
    while in the log; the read of the others stands."""
    from infosvc.loglimit import LogLimiter
    from infosvc.lrms import slurm_parse

    monkeypatch.setattr(slurm_parse, "_LEFT_OUT", LogLimiter(logging.getLogger("infosvc.lrms")))  # none said yet
    config = stand_in(tmp_path, [*JOBS, *[{**PLAIN, "i": "9", "C": "many"}] * 3])
    with caplog.at_level(logging.WARNING, logger="infosvc.lrms"):
        assert sorted({str(record["job_id"]) for record in read_jobs(config)}) == [job["i"] for job in JOBS]
        assert sorted({job.id for job in read_cluster(config).jobs}) == [job["i"] for job in JOBS]
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 2 and all("'many'" in line for line in said), said
