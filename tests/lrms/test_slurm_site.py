"""A Slurm cluster published by the real server (`[lrms] type = "slurm"`), against a real Slurm
(tests/support/slurm.py): its nodes as hosts and its partitions as CEs, each compared with what
sinfo, squeue and scontrol say in the same instant; a drained and a down node; jobs submitted with
sbatch, running and pending; an agent's host that is also a node; slurmctld stopped (the last
state stays, stale, and /healthz says why) and started again; every rendering valid."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from jsonschema import Draft202012Validator

from infosvc.codec import safexml
from support import ROOT
from support.gluevalidator import run as glue_validator
from support.gridcheck import GLUE13, GLUE20, check_ldif, glue2_validator, xml_valid
from support.server import Server, ServerFactory, wait_for
from support.slurm import SlurmCluster, slurm  # noqa: F401  (the module's cluster)

INTERVAL = 0.5


@pytest.fixture
def site(slurm: SlurmCluster, serve: ServerFactory) -> Iterator[Server]:  # noqa: F811
    server = serve({"lrms": slurm.lrms(interval_seconds=INTERVAL, timeout_seconds=30.0,
                                       accounts={"atlas_prod": "atlas", "cms": "cms"})})
    wait_for(lambda: lrms_health(server).get("state") == "fresh", timeout=30, message="a first read of Slurm")
    yield server
    slurm.cancel_all()


HEALTH = json.loads((ROOT / "schemas" / "openapi.json").read_text())["paths"]["/healthz"]["get"]["responses"]["200"]


def lrms_health(server: Server) -> dict[str, Any]:
    """/healthz's word on the batch system, checked against what /openapi.json says it is."""
    reply = server.get("/healthz")
    assert reply.status == 200, reply.body
    Draft202012Validator(HEALTH["content"]["application/json"]["schema"]).validate(reply.json())
    return dict(reply.json().get("lrms", {}))


def glue_of(server: Server) -> dict[str, Any]:
    reply = server.get("/v1/glue")
    assert reply.status == 200, reply.body[:300]
    return dict(reply.json())


def sinfo(slurm: SlurmCluster) -> dict[str, dict[str, Any]]:  # noqa: F811
    return {n["name"]: n for n in json.loads(slurm.run("sinfo", "--json"))["nodes"]}


def squeue(slurm: SlurmCluster) -> list[dict[str, Any]]:  # noqa: F811
    return list(json.loads(slurm.run("squeue", "--json"))["jobs"])


def published(server: Server, slurm: SlurmCluster) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:  # noqa: F811
    """The site as published and Slurm as it is, read at one instant: read again until a read of
    the server after Slurm's agrees with one before it (the service reads every INTERVAL)."""
    def agreeing() -> tuple[dict[str, Any], dict[str, Any], list[Any]] | None:
        nodes, jobs = sinfo(slurm), squeue(slurm)
        time.sleep(INTERVAL * 2.5)
        tree = glue_of(server)
        if sinfo(slurm) != nodes or squeue(slurm) != jobs:
            return None
        return tree, nodes, jobs
    return wait_for(agreeing, timeout=60, interval=0.1, message="a quiet instant of Slurm")


def hosts_of(tree: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["unique_id"]: h for h in tree["hosts"]}


def ces_of(tree: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {ce["queue"]: ce for ce in tree["computing_elements"]}


def ldif_of(server: Server, schema: str) -> str:
    reply = server.get(f"/v1/glue?format=ldif&schema={schema}")
    assert reply.status == 200, reply.body[:300]
    return reply.body.decode()


def vo_views(text: str) -> dict[tuple[str, str], tuple[int, int]]:
    """GLUE 1.3's VOViews: (CE, VO) -> (running, waiting)."""
    found = {}
    for dn, attrs in check_ldif(text, GLUE13).items():
        values = dict(attrs)
        if ("objectClass", "GlueVOView") in attrs:
            ce = dn.split("GlueCEUniqueID=", 1)[1].split(",", 1)[0]
            found[(ce, values["GlueVOViewLocalID"])] = (int(values["GlueCEStateRunningJobs"]),
                                                       int(values["GlueCEStateWaitingJobs"]))
    return found


def idle_cpus(node: dict[str, Any]) -> int:
    return int(node["cpus"]) - int(node["alloc_cpus"])


def usable(node: dict[str, Any]) -> bool:
    return node["state"] in ("idle", "mixed", "allocated") and not node["state_flags"]


# --- the tests -------------------------------------------------------------------------------

def test_each_node_is_a_host_with_slurms_facts(site: Server, slurm: SlurmCluster) -> None:  # noqa: F811
    tree, nodes, _ = published(site, slurm)
    hosts = hosts_of(tree)
    assert sorted(hosts) == sorted(nodes) == ["c1", "c2", "c3", "c4", "g1"]
    for name, node in nodes.items():
        host = hosts[name]
        assert host["total_cpus"] == node["cpus"] == 4
        assert host["available_cpus"] == idle_cpus(node)
        assert host["main_memory"]["ram_size"] == node["real_memory"] == 1000
        assert host["architecture"] == {"platform_type": node["architecture"], "smp_size": node["cpus"]}
        assert host["application_software"]["runtime_environment"] == node["features"].split(",")
    assert hosts["c4"]["state"] == "Paused" and hosts["c4"]["reason"] == nodes["c4"]["reason"] == "disk replaced"
    assert {h["state"] for n, h in hosts.items() if n != "c4"} == {"Ready"}
    gpu = next(s for s in tree["subclusters"] if s["hosts"] == ["g1"])
    assert gpu["accelerators"] == [{"type": "GPU", "model": "gpu", "count": 2}] and gpu["free_accelerators"] == 2
    assert site.get("/v1/glue/hosts/c4").json()["reason"] == "disk replaced"


def test_each_partition_is_a_computing_element(site: Server, slurm: SlurmCluster) -> None:  # noqa: F811
    tree, nodes, jobs = published(site, slurm)
    assert jobs == []
    parts = {line.split()[0]: line.split()[1:] for line in
             slurm.run("sinfo", "-h", "-o", "%R %a %l %D %C").splitlines()}
    ces = ces_of(tree)
    assert sorted(ces) == sorted(parts) == ["batch", "short"]
    assert parts["short"][:2] == ["up", "30:00"] and parts["batch"][:2] == ["up", "infinite"]
    assert ces["short"]["policy"]["max_wall_clock_time"] == 30 and ces["batch"]["policy"]["max_wall_clock_time"] == 0
    members = {"batch": ["c1", "c2", "c3", "c4", "g1"], "short": ["c1", "c2", "g1"]}
    for name, ce in ces.items():
        assert ce["state"]["status"] == "Production" and ce["info"]["lrms_type"] == "slurm"
        assert ce["info"]["lrms_version"] == slurm.run("sinfo", "--version").split()[-1]
        assert ce["info"]["total_cpus"] == sum(nodes[n]["cpus"] for n in members[name])
        assert ce["state"]["free_cpus"] == sum(idle_cpus(nodes[n]) for n in members[name] if usable(nodes[n]))
        assert (ce["state"]["running_jobs"], ce["state"]["waiting_jobs"]) == (0, 0)
        assert ce["state"]["estimated_response_time"] == ce["state"]["worst_response_time"] == 0
        assert ce["access_control_base"]["rules"] == ["VO:atlas", "VO:cms"]
    # A/I/O/T of sinfo's %C: the free CPUs of usable nodes, drained c4 apart
    assert ces["batch"]["state"]["free_cpus"] == 16 and ces["short"]["state"]["free_cpus"] == 12
    share = {s["MappingQueue"]: s for s in json.loads(site.get("/v1/glue?format=glue2-json").body)["ComputingShare"]}
    assert share["short"]["MaxSlotsPerJob"] == 8 and share["short"]["MaxWallTime"] == 30 * 60


def test_jobs_running_and_pending_are_the_ces_figures(site: Server, slurm: SlurmCluster) -> None:  # noqa: F811
    for short, batch in (("c1", "c3"), ("c2", "g1")):  # each node filled by one job, where it is meant to run
        slurm.sbatch("-p", "short", "-A", "atlas_prod", "-w", short, "-n4", "-t", "20", "--wrap", "sleep 300")
        slurm.sbatch("-p", "batch", "-w", batch, "-n4", "-t", "10", "--wrap", "sleep 300")
    wait_for(lambda: [j["job_state"] for j in squeue(slurm)].count("RUNNING") == 4, timeout=60,
             message="four jobs running, filling the usable nodes")
    waiting_short = slurm.sbatch("-p", "short", "-A", "atlas_prod", "-N1", "-n4", "-t", "20", "--wrap", "sleep 300")
    slurm.sbatch("-p", "batch", "-A", "cms", "-n2", "-t", "10", "--wrap", "sleep 300")
    wait_for(lambda: all(j["start_time"] and (j["job_state"] != "PENDING" or j["state_reason"] != "None")
                         for j in squeue(slurm)), timeout=60, message="Slurm's forecasts and reasons")
    tree, nodes, jobs = published(site, slurm)
    ces = ces_of(tree)
    for name, ce in ces.items():
        mine = [j for j in jobs if j["partition"] == name]
        assert ce["state"]["running_jobs"] == sum(j["job_state"] == "RUNNING" for j in mine) == 2
        assert ce["state"]["waiting_jobs"] == sum(j["job_state"] == "PENDING" for j in mine) == 1
        assert ce["state"]["free_cpus"] == 0
        assert {(j["local_id"], j["status"]) for j in ce["jobs"]} == {
            (str(j["job_id"]), "RUNNING" if j["job_state"] == "RUNNING" else "WAITING") for j in mine}
        forecast = max(j["start_time"] for j in mine if j["job_state"] == "PENDING")
        now = time.time()
        # Slurm's own forecast (squeue --start) of the partition's last pending job, from now
        assert abs(ce["state"]["estimated_response_time"] - (forecast - now)) <= 5, (name, ce["state"], forecast, now)
        assert ce["state"]["estimated_response_time"] <= ce["state"]["worst_response_time"] <= 20 * 60
    pending = next(j for j in ces["short"]["jobs"] if j["local_id"] == str(waiting_short))
    assert pending["scheduler_specific"] in ("Resources", "Priority")
    assert vo_views(ldif_of(site, "1.3")) == {("short", "atlas"): (2, 1), ("short", "cms"): (0, 0),
                                             ("batch", "atlas"): (0, 0), ("batch", "cms"): (0, 1)}
    hosts = hosts_of(tree)
    assert all(hosts[n]["available_cpus"] == 0 and hosts[n]["reported_state"] == "Busy" for n in ("c1", "c2", "g1"))


def test_a_drained_and_a_down_node(site: Server, slurm: SlurmCluster) -> None:  # noqa: F811
    slurm.drain("c3", "fan failure")
    slurm.down("c2", "power cut")
    try:
        tree, nodes, _ = published(site, slurm)
        hosts = hosts_of(tree)
        assert (hosts["c3"]["state"], hosts["c3"]["reason"]) == ("Paused", nodes["c3"]["reason"]) == \
            ("Paused", "fan failure")
        assert (hosts["c2"]["state"], hosts["c2"]["reason"]) == ("Unreachable", "power cut")
        assert nodes["c2"]["state"] == "down"
        ces = ces_of(tree)
        assert ces["short"]["info"]["total_cpus"] == 8  # c2 is down: c1 and g1
        assert ces["batch"]["state"]["free_cpus"] == 8  # c1 and g1: c2 down, c3 and c4 drained
    finally:
        slurm.resume("c2")
        slurm.resume("c3")
    tree, _, _ = published(site, slurm)
    assert hosts_of(tree)["c3"]["state"] == hosts_of(tree)["c2"]["state"] == "Ready"


def test_a_partition_state_is_the_ce_status(site: Server, slurm: SlurmCluster) -> None:  # noqa: F811
    expected = {"DRAIN": "Draining", "DOWN": "Closed", "INACTIVE": "Queueing", "UP": "Production"}
    for state, status in expected.items():
        slurm.set_partition("short", state)
        tree, _, _ = published(site, slurm)
        assert ces_of(tree)["short"]["state"]["status"] == status
        assert ces_of(tree)["short"]["state"]["free_cpus"] == (12 if state == "UP" else 0)


def test_an_agents_host_takes_slurms_state(site: Server, slurm: SlurmCluster) -> None:  # noqa: F811
    site.report("c1", site.agent_token(), processors=4, memory_mb=1024, model="EPYC 7302")
    slurm.drain("c1", "bad DIMM")
    try:
        tree, _, _ = published(site, slurm)
        hosts = hosts_of(tree)
        assert sorted(hosts) == ["c1", "c2", "c3", "c4", "g1"]  # one host, not two
        c1 = hosts["c1"]
        assert c1["processor"]["model"] == "EPYC 7302"  # the agent's facts
        assert (c1["state"], c1["reason"]) == ("Paused", "bad DIMM")  # Slurm's state
    finally:
        slurm.resume("c1")
    wait_for(lambda: hosts_of(glue_of(site))["c1"]["state"] == "Ready", timeout=30, message="c1 resumed")


@pytest.mark.serial
def test_a_controller_outage_keeps_the_last_state_stale(site: Server, slurm: SlurmCluster) -> None:  # noqa: F811
    before = hosts_of(glue_of(site))
    read_at = lrms_health(site)["read_at"]
    slurm.stop_controller()
    try:
        health = wait_for(lambda: (h := lrms_health(site))["state"] == "stale" and h, timeout=90,
                          message="the read to fail")
        assert health["read_at"] >= read_at and health["failed_at"] >= health["read_at"]
        # this Slurm's sinfo --json says only "Unspecified error": scontrol ping's word says why
        assert health["error"].startswith("sinfo --json reported: Unspecified error (Slurmctld(primary) at ") \
            and health["error"].endswith(" is DOWN)"), health
        assert site.get("/healthz").json()["status"] == "ok"
        tree = glue_of(site)
        assert hosts_of(tree).keys() == before.keys() and len(tree["computing_elements"]) == 2
    finally:
        slurm.start_controller()
    wait_for(lambda: lrms_health(site)["state"] == "fresh", timeout=90, message="a good read again")
    assert "error" not in lrms_health(site)


def test_every_rendering_is_valid(site: Server, slurm: SlurmCluster, tmp_path: Path) -> None:  # noqa: F811
    slurm.sbatch("-p", "short", "-A", "atlas_prod", "-N2", "-n8", "-t", "20", "--wrap", "sleep 300")
    slurm.sbatch("-p", "batch", "-n16", "-t", "10", "--wrap", "sleep 300")
    published(site, slurm)
    Draft202012Validator(json.loads((ROOT / "schemas" / "glue.schema.json").read_text())).validate(glue_of(site))
    xml = site.get("/v1/glue?format=xml").body
    safexml.validate(safexml.parse(xml, max_bytes=1 << 24, what="GLUE document"), safexml.schema("glue-ce-1.1.xsd"))
    assert b"<LRMSType>slurm</LRMSType>" in xml
    xml_valid(site.get("/v1/glue?format=glue2-xml").body)
    glue2_validator().validate(json.loads(site.get("/v1/glue?format=glue2-json").body))
    for schema, classes in (("1.3", GLUE13), ("2.0", GLUE20)):
        text = ldif_of(site, schema)
        check_ldif(text, classes)
        (tmp_path / f"site-{schema}.ldif").write_text(text)
    for suite, version in (("glue1", "1.3"), ("glue2", "2.0"), ("egi", "2.0")):
        report = glue_validator(suite, tmp_path / f"site-{version}.ldif")
        assert report.of("E") == [], (suite, report.of("E"))
    def metrics_say_what_squeue_says() -> bool:
        # read after the checks above, which take seconds: the partition's running jobs as Slurm has
        # them now (the module's other jobs may have started or ended meanwhile), once a read has passed
        running = sum(1 for job in squeue(slurm) if job["partition"] == "short" and job["job_state"] == "RUNNING")
        time.sleep(INTERVAL * 2.5)
        line = f'infosvc_computing_element_running_jobs{{computing_element="short"}} {float(running)}'
        return line in site.get("/metrics").body.decode()
    wait_for(metrics_say_what_squeue_says, timeout=60, interval=0.1, message="the CE's running jobs in /metrics")


def test_before_a_first_good_read_nothing_of_slurm_is_published(serve: ServerFactory, tmp_path: Path) -> None:
    """No Slurm where the config says: the service is up, says why, and publishes no CE."""
    server = serve({"lrms": {"type": "slurm", "bin_dir": str(tmp_path), "interval_seconds": INTERVAL}})
    health = wait_for(lambda: (h := lrms_health(server)).get("error") and h, timeout=30, message="a failed read")
    assert health["state"] == "unread" and "read_at" not in health
    assert health["error"] == f"sinfo: not found as an executable in [lrms] bin_dir {tmp_path}"
    assert server.get("/healthz").json()["status"] == "ok"
    tree = glue_of(server)
    assert tree["computing_elements"] == [] and tree["hosts"] == []
