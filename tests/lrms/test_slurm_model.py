"""Slurm's output read into the cluster model (infosvc/lrms/slurm_parse.py), and the model published
as hosts and CEs (infosvc/hosts/slurm_hosts.py, slurm_ces.py): pure functions, on output a real
Slurm 22.05 wrote (tests/fixtures/slurm: four nodes and a GPU node, c3 down, c4 drained, three jobs
running and one pending; squeue.txt its records in SQUEUE_JOBS's order, the token `fixture`), and on
the boundaries that output does not reach."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from typing import Any

import pytest

from infosvc.config import parse_config
from infosvc.hosts.slurm_ces import STATUS_OF, UNKNOWN_SECONDS, by_limits, computing_elements, response_times
from infosvc.hosts.slurm_hosts import SlurmWord, host_from_slurm, merged_state, word_of
from infosvc.lrms.cluster import ClusterState, GpuKind, SlurmJob, SlurmPartition
from infosvc.lrms.slurm_commands import SlurmUnavailable
from infosvc.lrms.slurm_parse import SQUEUE_JOBS, gpus_of, jobs_of, minutes_of, node_of, nodes_of, partitions_of
from infosvc.model.glue import directory_key
from support import FIXTURES

HERE = FIXTURES / "slurm"
NOW = 1795762960.0  # a few seconds after the fixture's jobs started (2026-11-27T07:02:37Z)
SAVED = SQUEUE_JOBS.with_token("fixture")


def records(*fields: str) -> str:
    """squeue's output in SAVED's format, a record each of `fields` ("|" between the fields; in the
    last, the account, a "|" of its own)."""
    return "".join(line.replace("|", "<fixture>", len(SAVED.keys) - 1) + "</fixture>\n" for line in fields)


def state() -> ClusterState:
    nodes = nodes_of(json.loads((HERE / "sinfo.json").read_text())["nodes"])
    parts = partitions_of((HERE / "partitions.txt").read_text(), nodes)
    jobs = jobs_of((HERE / "squeue.txt").read_text(), SAVED)
    return ClusterState(nodes, parts, jobs, "22.05.8", NOW)


def test_nodes_as_sinfo_wrote_them() -> None:
    nodes = {n.name: n for n in state().nodes}
    assert sorted(nodes) == ["c1", "c2", "c3", "c4", "g1"]
    c1, c3, c4, g1 = nodes["c1"], nodes["c3"], nodes["c4"], nodes["g1"]
    assert (c1.cpus, c1.alloc_cpus, c1.sockets, c1.cores_per_socket, c1.threads_per_core) == (4, 4, 2, 2, 1)
    assert c1.features == ("intel", "ib") and c1.partitions == ("batch", "short") and c1.real_memory == 1000
    assert c3.down and not c3.usable and c3.reason == "power cut"
    assert c4.drained and not c4.down and c4.reason == "disk replaced" and c4.idle_cpus == 4
    assert g1.gpus == (GpuKind("gpu", 2, 0),) and g1.usable and g1.idle_cpus == 0


def test_partitions_and_jobs_as_scontrol_and_squeue_wrote_them() -> None:
    read = state()
    short = read.partition("short")
    assert short is not None and (short.max_time, short.max_nodes, short.state, short.default) == (30, 2, "UP", False)
    assert short.nodes == ("c1", "c2", "g1") and short.total_cpus == 12
    batch = read.partition("batch")
    assert batch is not None and (batch.max_time, batch.max_nodes, batch.default) == (None, None, True)
    jobs = {j.id: j for j in read.jobs}
    assert (jobs["1"].partition, jobs["1"].time_limit, jobs["1"].running) == ("short", 20, True)
    assert (jobs["3"].account, jobs["3"].time_limit) == ("atlas", None)
    pending = jobs["4"]
    assert pending.pending and pending.reason == "Resources" and pending.cpus == 12
    assert pending.forecast(NOW) is None  # Slurm's placeholder a year ahead is no forecast


def test_ces_of_the_fixture() -> None:
    config = parse_config(tomllib.loads('[lrms]\ntype = "slurm"\n[lrms.accounts]\natlas = "atlas"'))
    ces = {ce.queue: ce for ce in computing_elements(state(), config, {}, now=NOW)}
    short, batch = ces["short"], ces["batch"]
    assert short.state.status == "Production" and short.info.lrms_version == "22.05.8"
    assert (short.state.running_jobs, short.state.waiting_jobs, short.state.free_cpus) == (2, 0, 0)
    assert short.info.total_cpus == 12 and short.max_slots_per_job == 8 and short.policy.max_wall_clock_time == 30
    assert batch.info.total_cpus == 16  # c3 is down
    assert (batch.state.running_jobs, batch.state.waiting_jobs) == (1, 1)
    # job 3 has no limit and the pending job needs its CPUs: no one can tell
    assert batch.state.estimated_response_time == batch.state.worst_response_time == UNKNOWN_SECONDS
    assert [(v.vo, v.running_jobs, v.waiting_jobs) for v in batch.by_vo] == [("atlas", 1, 0)]
    assert batch.access_control_rules == ("VO:atlas",) and short.access_control_rules == ("VO:atlas",)
    assert [j.status for j in batch.jobs] == ["RUNNING", "WAITING"] and batch.jobs[1].scheduler_specific == "Resources"


def test_a_configured_ce_names_its_partition() -> None:
    config = parse_config(tomllib.loads('[lrms]\ntype = "slurm"\n[[computing_elements]]\n'
                                        'id = "ce.example.org:2119/jobmanager-slurm-short"\nqueue = "short"\n'
                                        'host_name = "ce.example.org"\naccess_control = ["VO:dteam"]\n'
                                        '[computing_elements.policy]\nmax_running_jobs = 7\nmax_wall_clock_time = 999'))
    ces = {ce.queue: ce for ce in computing_elements(state(), config, {}, now=NOW)}
    short = ces["short"]
    assert short.unique_id == "ce.example.org:2119/jobmanager-slurm-short" and short.info.host_name == "ce.example.org"
    assert short.access_control_rules == ("VO:dteam",) and short.policy.max_running_jobs == 7
    assert short.policy.max_wall_clock_time == 30  # Slurm's MaxTime, not the config's
    assert ces["batch"].unique_id == "batch"


@pytest.mark.parametrize("configured", ["Batch", "batch", " BATCH "])
def test_a_partition_named_as_another_s_configured_ce_is_published_apart(configured: str) -> None:
    # the configured CE "Batch" serves partition short; partition batch has no entry and was a CE
    # "batch": one entry to a directory (GlueCEUniqueID ignores case), the second refused by ldapadd
    config = parse_config(tomllib.loads(f'[lrms]\ntype = "slurm"\n[[computing_elements]]\nid = "{configured}"\n'
                                        'queue = "short"'))
    ces = {ce.queue: ce for ce in computing_elements(state(), config, {}, now=NOW)}
    assert ces["short"].unique_id == configured.strip()
    assert ces["batch"].unique_id == "slurm/batch"
    keys = [directory_key(ce.unique_id) for ce in ces.values()]
    assert len(set(keys)) == len(keys)


def test_partitions_alike_but_for_case_are_published_apart() -> None:
    read = state()
    twin = dataclasses.replace(next(p for p in read.partitions if p.name == "batch"), name="BATCH")
    ces = computing_elements(dataclasses.replace(read, partitions=(*read.partitions, twin)), parse_config({}), {},
                             now=NOW)
    assert sorted(ce.unique_id for ce in ces) == ["batch", "short", "slurm/BATCH"]


@pytest.mark.parametrize("slurm_state, status", sorted(STATUS_OF.items()))
def test_partition_states(slurm_state: str, status: str) -> None:
    read = state()
    parts = tuple(dataclasses.replace(p, state=slurm_state) for p in read.partitions)
    ces = computing_elements(dataclasses.replace(read, partitions=parts), parse_config({}), {}, now=NOW)
    assert {ce.state.status for ce in ces} == {status}


def part(max_time: int | None = None) -> SlurmPartition:
    return SlurmPartition("p", "UP", (), 8, max_time, None)


def job(state: str, cpus: int, limit: int | None, start: float = NOW, ident: str = "1") -> SlurmJob:
    return SlurmJob(ident, "p", state, "u", "a", cpus, 1, limit, NOW - 100, start, "Resources")


@pytest.mark.parametrize("jobs, free, expected", [
    ([], 8, (0, 0)),  # nothing waits, a CPU is free
    ([job("RUNNING", 8, 10)], 0, (600, 600)),  # the full node's job ends by its limit
    ([job("RUNNING", 8, None)], 0, (UNKNOWN_SECONDS, UNKNOWN_SECONDS)),  # without a limit: nobody knows
    ([job("RUNNING", 4, 10), job("RUNNING", 4, 20, ident="2"), job("PENDING", 8, 30, 0.0, "3")], 0,
     (3000, 3000)),  # the pending job starts at 20 min, the new one after its 30
    ([job("RUNNING", 4, 10), job("PENDING", 8, 30, NOW + 900, "3")], 4, (900, 2400)),  # Slurm's forecast
    ([job("RUNNING", 8, 10), job("PENDING", 64, 30, 0.0, "3")], 0, (600, 600)),  # larger than the partition
])
def test_response_times(jobs: list[SlurmJob], free: int, expected: tuple[int, int]) -> None:
    assert response_times(part(), jobs, free, 8, NOW) == expected


def test_a_job_without_a_limit_runs_the_partitions_maxtime() -> None:
    assert by_limits(part(max_time=60), [job("RUNNING", 8, None)], 0, 8, NOW) == NOW + 3600


@pytest.mark.parametrize("text, minutes", [("UNLIMITED", None), ("INFINITE", None), ("00:30:00", 30),
                                           ("1-00:00:00", 1440), ("30:00", 30), ("45", 45), ("00:00:01", 1),
                                           ("2-12:30:00", 3630)])
def test_time_limits(text: str, minutes: int | None) -> None:
    assert minutes_of(text) == minutes


@pytest.mark.parametrize("gres, used, expected", [
    ("", "", ()), ("(null)", "", ()), ("gpu:2", "gpu:1(IDX:0)", (GpuKind("gpu", 2, 1),)),
    ("gpu:a100:4(S:0-1),gpu:t4:1", "gpu:a100:2(IDX:0-1),gpu:t4:0", (GpuKind("a100", 4, 2), GpuKind("t4", 1, 0))),
    ("gpu:0", "", ()), ("mps:100,gpu:1", "gpu:5", (GpuKind("gpu", 1, 1),)),
])
def test_gres(gres: str, used: str, expected: tuple[GpuKind, ...]) -> None:
    assert gpus_of(gres, used) == expected


@pytest.mark.parametrize("record, message", [
    ({"cpus": 4}, "sinfo --json gave a node without a name"),
    ({"name": "n1", "cpus": "four"}, "Slurm's 'cpus' is not a number: 'four'"),
    ({"name": "n1", "cpus": True}, "Slurm's 'cpus' is not a number: True"),
])
def test_a_node_slurm_did_not_write_is_refused(record: dict[str, Any], message: str) -> None:
    with pytest.raises(SlurmUnavailable, match=message):
        node_of(record)


def test_later_slurms_shapes() -> None:
    """Slurm 23.02+ writes the state as a list and numbers as {set, infinite, number}."""
    node = node_of({"name": "n1", "state": ["IDLE", "DRAIN"], "cpus": {"set": True, "infinite": False, "number": 8},
                    "reason": "x"})
    assert node.state == "idle" and node.drained and node.cpus == 8


def test_squeue_records() -> None:
    """A record ends at its token, not at a newline: an account (the submitter's) holding both."""
    (task, odd) = jobs_of(records("7_3|a,b|PENDING|ann|2|1|1-00:00:00|N/A|2026-11-27T07:02:35||Dependency|(null)",
                                  "8|a|RUNNING|bob|4|1|UNLIMITED|2026-11-27T07:02:37|2026-11-27T07:02:35|c1|None|"
                                  "cms|x\n9|a|RUNNING"), SAVED)
    assert (task.id, task.partition, task.account, task.time_limit, task.start_time) == ("7_3", "a", "", 1440, 0.0)
    assert task.pending and task.forecast(NOW) is None and task.reason == "Dependency"
    assert (odd.id, odd.account, odd.time_limit, odd.node_list, odd.reason) == ("8", "cms|x\n9|a|RUNNING", None, "c1",
                                                                              "None")
    assert odd.start_time == NOW - 3


GOOD = "1|a|RUNNING|u|4|1|5|N/A|N/A||x|(null)"


@pytest.mark.parametrize("record, message", [
    ("1|a|RUNNING", "not a record of 12 fields"),
    ("1|a|RUNNING|u|four|1|5|N/A|N/A||x|(null)", "invalid literal for int"),
    ("1|a|RUNNING|u|4|1|5|yesterday|N/A||x|(null)", "a time that is none: 'yesterday'"),
])
def test_squeue_records_slurm_did_not_write(record: str, message: str) -> None:
    """One such record is left out (and logged: tests/lrms/test_slurm_job_texts.py); a read of
    nothing else but such records fails (a Slurm whose output is not this format)."""
    assert [job.id for job in jobs_of(records(GOOD, record), SAVED)] == ["1"]
    with pytest.raises(SlurmUnavailable, match=message):
        jobs_of(records(record), SAVED)
    with pytest.raises(SlurmUnavailable, match="none of its 1 records reads"):  # its end is not this read's
        jobs_of(records(GOOD).replace("</fixture>", "</other>"), SAVED)


def test_a_partition_line_without_a_name_is_refused() -> None:
    with pytest.raises(SlurmUnavailable, match="without PartitionName"):
        partitions_of("MaxTime=UNLIMITED State=UP\n", ())


@pytest.mark.parametrize("own, word, expected", [
    (("Ready", False, None), None, ("Ready", False, None)),
    (("Ready", False, None), SlurmWord("Ready"), ("Ready", False, None)),
    (("Ready", False, None), SlurmWord("Paused", "bad DIMM"), ("Paused", True, "bad DIMM")),
    (("Paused", True, "an admin"), SlurmWord("Unreachable", "power cut"), ("Unreachable", True, "power cut")),
    (("Unreachable", False, None), SlurmWord("Paused", "bad DIMM"), ("Unreachable", True, "bad DIMM")),
    (("Pending", False, None), SlurmWord("Paused", "x"), ("Pending", True, "x")),
])
def test_slurms_word_on_an_agents_host(own: tuple[str, bool, str | None], word: SlurmWord | None,
                                       expected: tuple[str, bool, str | None]) -> None:
    assert merged_state(*own, word) == expected


def test_a_node_alone_is_a_host() -> None:
    nodes = {n.name: n for n in state().nodes}
    config = parse_config(tomllib.loads('[[clusters]]\nid = "gpu"\nnodes = "g[1-9]"\n[[software]]\nnodes = "g1"\n'
                                        'runtime_environment = ["CUDA-12"]'))
    g1 = host_from_slurm(nodes["g1"], "g1", config, "2026-11-27T06:43:50Z")
    assert (g1.cluster, g1.state, g1.total_cpus, g1.available_cpus, g1.physical_cpus) == ("gpu", "Ready", 4, 0, 1)
    assert g1.application_software is not None and g1.application_software.runtime_environment == ("CUDA-12", "gpu")
    assert g1.total_accelerators == 2 and g1.accelerators_available == 2 and g1.reported_state == "Busy"
    c3 = host_from_slurm(nodes["c3"], "c3", config, "x")
    assert (c3.state, c3.reason, c3.reported_state, c3.live) == ("Unreachable", "power cut", "Offline", False)
    assert word_of(nodes["c4"]) == SlurmWord("Paused", "disk replaced")


def test_what_slurm_keeps_private_is_not_published() -> None:
    # the reads are root's, which PrivateData does not filter: a review found each job's owner in
    # the published GLUE while a user's own squeue showed no job of another's
    config = parse_config(tomllib.loads('[lrms]\ntype = "slurm"'))
    open_ = {ce.queue: ce for ce in computing_elements(state(), config, {}, now=NOW)}
    assert any(job.local_owner for ce in open_.values() for job in ce.jobs)
    for private, owners in ((frozenset({"jobs"}), None), (frozenset({"all"}), None), (frozenset({"users"}), True)):
        # (PrivateData=users leaves squeue's user names shown to anyone: the owners stay)
        hidden = {ce.queue: ce for ce in computing_elements(dataclasses.replace(state(), private=private), config, {},
                                                             now=NOW)}
        for queue, ce in hidden.items():
            assert (ce.state.running_jobs, ce.state.waiting_jobs) == (open_[queue].state.running_jobs,
                                                                       open_[queue].state.waiting_jobs)
            if owners is None:
                assert ce.jobs == (), (private, ce.jobs)
            else:
                assert ce.jobs == open_[queue].jobs
