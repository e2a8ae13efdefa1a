"""`infosvc status` against a real server: the table, --json, and a clear error when there is none."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support.documents import make_node

from support.server import Server, ServerFactory, free_port
from infosvc.codec.node_xml import node_to_xml
from infosvc.model.node import Consumable
from infosvc.cli.status import age, status_of

SITE = """
[[clusters]]
id = "compute"
nodes = "cn[01-08]"

[[clusters]]
id = "gpu"
nodes = "gpu[01-02]"

[[computing_elements]]
id = "ce.example.org:2119/jobmanager-slurm-long"
queue = "long"
clusters = ["compute", "gpu"]

[[computing_elements]]
id = "ce.example.org:2119/jobmanager-slurm-gpu"
queue = "gpu"
status = "Draining"
clusters = ["gpu"]
"""


def status(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "infosvc", "status", *args], capture_output=True, text=True,
                          timeout=timeout)


def report_loaded(server: Server, host: str, load: float, **kwargs: Any) -> None:
    node = make_node(host, **kwargs)
    for span in ("1min", "5min", "15min"):
        node.utilized.add(Consumable("Resource", load, metric="Average", name="Load", type=span))
    reply = server.post_node(node_to_xml(node), server.agent_token())
    assert reply.status == 200, reply.body


@pytest.fixture
def site(serve_app: ServerFactory) -> Server:
    server = serve_app(start=False)
    server.config_file.write_text(SITE)
    server.start()
    report_loaded(server, "cn01", 1.5, processors=8, free_processors=6, memory_mb=16384, free_memory_mb=12288)
    report_loaded(server, "cn02", 0.25, processors=8, memory_mb=16384)
    server.report("gpu01", server.agent_token(), processors=32, free_processors=32, memory_mb=262144,
                  model="EPYC 7543")
    assert server.admin("cn02", "pause").status == 200
    return server


def test_table(site: Server) -> None:
    done = status("--server", site.url, "--hosts")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["HOST", "STATE", "CPUS(F/T)", "CPUS(A/I/O/T)", "MEMORY(F/T)", "LOAD1", "AGE", "REASON"]
    rows = {line.split()[0]: line.split() for line in lines[1:4]}
    # no host runs an executor here: the scheduler places nothing, every processor is `other`
    assert rows["cn01"][:6] == ["cn01", "Ready", "6/8", "0/0/8/8", "12.0G/16.0G", "1.50"]
    assert rows["cn02"][:6] == ["cn02", "Paused", "0/8", "0/0/8/8", "8.0G/16.0G", "0.25"]  # a Paused host has none free
    assert rows["gpu01"][:6] == ["gpu01", "Ready", "32/32", "0/0/32/32", "128.0G/256.0G", "-"]  # no load reported
    assert all(row[6].endswith("s") for row in rows.values())  # seconds old
    text = done.stdout
    assert "SUBCLUSTER" in text and "CE" in text
    ce_lines = {line.split()[0]: line.split() for line in lines if line.startswith("ce.example.org")}
    assert ce_lines["ce.example.org:2119/jobmanager-slurm-long"][1:] == ["long", "Production", "compute,gpu", "3", "38/48"]
    assert ce_lines["ce.example.org:2119/jobmanager-slurm-gpu"][1:] == ["gpu", "Draining", "gpu", "1", "32/32"]


def test_json(site: Server) -> None:
    done = status("--server", site.url + "/", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)  # one object
    assert set(data) == {"server", "hosts", "subclusters", "computing_elements"}
    hosts = {h["host"]: h for h in data["hosts"]}
    assert list(hosts) == ["cn01", "cn02", "gpu01"]
    assert hosts["cn01"] | {"reported_at": None, "age_seconds": None, "subcluster": None} == {
        "host": "cn01", "state": "Ready", "cpus_free": 6, "cpus_total": 8, "memory_free_mb": 12288,
        "memory_total_mb": 16384, "load_1min": 1.5, "reported_at": None, "age_seconds": None,
        "cluster": "compute", "subcluster": None, "subcluster_name": "x86_64 8cpu Xeon Gold 6130 2100MHz 16GiB Rocky "
        "Linux 9.3", "reported_state": "Idle", "paused": False, "reason": None,
        "cpus_allocated": 0, "cpus_idle": 0, "cpus_other": 8}
    assert 0 <= hosts["cn01"]["age_seconds"] < 60
    subs = {s["cluster"]: s for s in data["subclusters"]}
    assert subs["compute"] | {"subcluster": None} == {"subcluster": None, "name": hosts["cn01"]["subcluster_name"],
                                                      "cluster": "compute", "hosts": 2, "live_hosts": 2,
                                                      "cpus_free": 6, "cpus_total": 16}
    assert subs["compute"]["subcluster"] == hosts["cn01"]["subcluster"]
    ces = {c["queue"]: c for c in data["computing_elements"]}
    assert ces["long"] == {"computing_element": "ce.example.org:2119/jobmanager-slurm-long", "queue": "long",
                           "status": "Production", "clusters": ["compute", "gpu"], "hosts": 3,
                           "cpus_free": 38, "cpus_total": 48}


def test_empty_site(serve_app: ServerFactory) -> None:
    server = serve_app()
    done = status("--server", server.url)
    assert done.returncode == 0, done.stderr
    assert "(no hosts have reported)" in done.stdout
    assert json.loads(status("--server", server.url, "--json").stdout)["hosts"] == []


def test_no_server_is_a_clear_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for args in ([], ["--json"]):
        done = status("--server", url, *args)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.startswith(f"infosvc status: cannot reach {url}: "), done.stderr
        assert "Traceback" not in done.stderr


def test_refusals_and_bad_urls_are_clear_errors(serve_app: ServerFactory) -> None:
    server = serve_app({"service": {"read_token_required": True}})
    done = status("--server", server.url)
    assert done.returncode == 1 and "401" in done.stderr and "Traceback" not in done.stderr
    token = server.directory / "reader"
    token.write_text(server.tokens["admin"] + "\n")
    done = status("--server", server.url, "--token-file", str(token))
    assert done.returncode == 0, done.stderr
    for url in ("not a url", "ftp://127.0.0.1/", "127.0.0.1:8080"):
        done = status("--server", url)
        assert done.returncode == 1, url
        assert done.stderr == f"infosvc status: the server must be an http:// or https:// URL, not {url!r}\n"


def test_default_server_is_loopback_8080() -> None:
    from infosvc.cli import parser

    assert parser().parse_args(["status"]).server == "http://127.0.0.1:8080"


def test_ages_and_loads_from_a_glue_tree() -> None:
    assert [age(s) for s in (None, 0, 59.9, 60, 3599, 3600, 86400 * 3)] == ["-", "0s", "59s", "1m", "59m", "1h", "3d"]
    now = time.time()
    host = {"unique_id": "h", "state": "Ready", "total_cpus": 4, "free_cpus": 4, "reported_at": "1970-01-01T00:01:40Z",
            "smp_load": {"last_1min": -50, "last_5min": 0, "last_15min": 0}, "cluster": "c", "subcluster": "s"}
    (row,) = status_of({"hosts": [host], "subclusters": [], "computing_elements": []}, "x", now).hosts
    assert row.load_1min == 4.5  # overloaded: SMPLoad is (CPUs - load) x 100
    assert row.age_seconds == round(now - 100, 1)


def test_folded_summary_filters_and_reasons(site: Server) -> None:
    for host in ("cn03", "cn04", "cn05", "cn07"):
        site.report(host, site.agent_token(), processors=8, memory_mb=16384)
    reply = site.request("POST", "/v1/admin/hosts/cn%5B04-05%5D/pause?reason=fan%20swap", b"",
                         token=site.tokens["admin"])
    assert reply.status == 200, reply.body
    done = status("--server", site.url)
    assert done.returncode == 0, done.stderr
    rows = [line.split("  ") for line in done.stdout.splitlines()]
    cells = [[c.strip() for c in row if c.strip()] for row in rows]
    assert cells[0] == ["CLUSTER", "SUBCLUSTER", "STATE", "HOSTS", "CPUS(F/T)", "CPUS(A/I/O/T)", "NODELIST"]
    compute = [c for c in cells if c and c[0] == "compute"]
    name = "x86_64 8cpu Xeon Gold 6130 2100MHz 16GiB Rocky Linux 9.3"  # the GLUE name, not the hash id
    assert [name, "Paused", "3", "0/24", "0/0/24/24", "cn[02,04-05]"] in [c[1:] for c in compute]
    assert [name, "Ready", "3", "22/24", "0/0/24/24", "cn[01,03,07]"] in [c[1:] for c in compute]  # cn01: 6 of 8 free
    assert ["REASON", "NODELIST"] in cells and ["fan swap", "cn[04-05]"] in cells
    # filtered by the server: a state, a cluster, a NodeSet
    only = status("--server", site.url, "--state", "Paused", "--json")
    assert sorted(h["host"] for h in json.loads(only.stdout)["hosts"]) == ["cn02", "cn04", "cn05"]
    only = status("--server", site.url, "--cluster", "gpu", "--json")
    assert [h["host"] for h in json.loads(only.stdout)["hosts"]] == ["gpu01"]
    only = status("--server", site.url, "cn[03-05]", "-N")
    assert [line.split()[0] for line in only.stdout.splitlines()[1:4]] == ["cn03", "cn04", "cn05"]
    assert "fan swap" in only.stdout
    bad = status("--server", site.url, "--state", "Sleepy")
    assert bad.returncode == 1 and "Sleepy" in bad.stderr and "Traceback" not in bad.stderr



def test_a_filter_that_matches_nothing_says_so(site: Server) -> None:
    """The site has hosts: a NodeSet (or state, or cluster) that names none of them is not a site
    where no host has reported."""
    for args, said in ((["cn[90-99]"], "(no host matches cn[90-99])"),
                       (["cn[90-99]", "-N"], "(no host matches cn[90-99])"),
                       (["--state", "Unreachable"], "(no host matches --state Unreachable)"),
                       (["gpu01", "--cluster", "compute"], "(no host matches gpu01 --cluster compute)")):
        done = status("--server", site.url, *args)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == said, done.stdout
        assert "no hosts have reported" not in done.stdout
    shown = status("--server", site.url, "cn[01-02]")
    assert "no host matches" not in shown.stdout and "cn01" in shown.stdout and "cn02" in shown.stdout
