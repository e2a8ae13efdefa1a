"""A site for the grid renderings' tests (GLUE 1.3 / 2.0 LDIF, GLUE 2.0 XML and JSON): clusters,
computing elements of every status, benchmarks, software with awkward names, hosts of three kinds
and every life-cycle state, built through the real SSS -> GLUE roll-up; and the same site with CE
figures from a queue, as a resource BDII's provider prints it (tests/publish/test_slapd.py,
test_grid_joins.py)."""

from __future__ import annotations

import json
from typing import Any

from infosvc.codec.gridformat import GridOptions
from infosvc.model.glue import Host
from infosvc.config.site import SiteConfig, parse_config
from infosvc.hosts.rollup import Rollup, host_from_node
from infosvc.publish.glue import Glue
from infosvc.queue.cestate import CEFigures, CEQueues
from support.documents import GPUs, make_node

WHEN = "2024-05-01T12:00:00Z"
#: the CE that serves every cluster, has a queue's figures and (by default) access rules
CE_ALL = "ce.example.org:2119/jobmanager-infosvc-all"
#: the site id the LDIF is printed for (`infosvc ldif --site`)
SITE = "EXAMPLE-SITE"

CONFIG: dict[str, Any] = {
    "service": {"information_service_url": "https://glue.example.org:8443/v1/glue"},
    "clusters": [
        {"id": "alpha", "name": "Alpha, the main one", "nodes": "a[001-100]"},
        {"id": "beta=2", "nodes": "b[01-10]"},
        {"id": "empty", "name": "Nothing here yet", "nodes": "z[1-4]"},
    ],
    "computing_elements": [
        {"id": CE_ALL, "name": "All", "queue": "all",
         "clusters": ["alpha", "beta=2", "empty"], "lrms_version": "1.0", "gram_version": "2",
         "host_name": "ce.example.org", "gatekeeper_port": 2119, "access_control": ["VO:atlas", "VOMS:/dteam/Role=x"],
         "policy": {"max_wall_clock_time": 2880, "max_cpu_time": 1440, "max_total_jobs": 1000,
                    "max_running_jobs": 500, "priority": -5}},
        {"id": "ce-beta", "clusters": ["beta=2"], "status": "Draining"},
        {"id": "ce-none", "status": "Closed"},
    ],
    "benchmarks": [{"nodes": "a[001-020]", "si00": 1500, "sf00": 1400}],
    "software": [{"nodes": "a[001-100]", "runtime_environment": ["LCG-2", "R 4.3 <beta>, \u00e9t\u00e9"]},
                 {"nodes": "b[01-10]", "runtime_environment": ["MPI"]}],
}

STATES = ("Ready", "Ready", "Ready", "Pending", "Paused", "Unreachable")


def site_config(**service: Any) -> SiteConfig:
    raw = json.loads(json.dumps(CONFIG))
    raw["service"].update(service)
    return parse_config(raw)


def site_hosts(config: SiteConfig, big_memory: int = 5, gpu_hosts: int = 2) -> list[Host]:
    """40 hosts a001.. of 16 GB, of which 20 benchmarked; `big_memory` hosts b01.. of 256 GB; and
    `gpu_hosts` ..b10 like them with 4 GPUs each, the first idle, the next with one busy, ..."""
    hosts = []
    for i in range(1, 41):
        node = make_node(f"a{i:03d}", processors=8, free_processors=4, memory_mb=16000, os_name="Debian GNU/Linux",
                         os_release="12")
        hosts.append(host_from_node(node, STATES[i % len(STATES)], config, WHEN))
    for i in range(1, big_memory + 1):
        node = make_node(f"b{i:02d}", processors=64, free_processors=60, memory_mb=256000, model="EPYC 7302")
        hosts.append(host_from_node(node, "Ready", config, WHEN))
    for i in range(1, gpu_hosts + 1):  # the big hosts' processors and memory, and 4 GPUs: a subcluster of their own
        node = make_node(f"b{10 - gpu_hosts + i:02d}", processors=64, free_processors=60, memory_mb=256000,
                         model="EPYC 7302", gpus=GPUs(busy=i - 1))
        hosts.append(host_from_node(node, "Ready", config, WHEN))
    return hosts


def site_rollup(config: SiteConfig | None = None, big_memory: int = 5) -> Rollup:
    config = config or site_config()
    rollup = Rollup(config)
    for host in site_hosts(config, big_memory):
        rollup.update(host)
    return rollup


def config_with_rules(rules: dict[str, list[str]]) -> SiteConfig:
    """The site's configuration with each CE's access rules replaced by `rules` (none where absent)."""
    raw = json.loads(json.dumps(CONFIG))
    for ce in raw["computing_elements"]:
        ce["access_control"] = rules.get(ce["id"], [])
    return parse_config(raw)


def queue_site(config: SiteConfig | None = None) -> Rollup:
    """The test site, with small hosts (4 GB) beside the big ones, and CE figures from a queue."""
    config = config or site_config()
    rollup = site_rollup(config)
    for i in range(50, 54):
        rollup.update(host_from_node(make_node(f"a{i:03d}", memory_mb=4096, model="Atom"), "Ready", config, WHEN))
    rollup.read_queue(CEQueues(clock=lambda: 1000.0, figures={
        CE_ALL: CEFigures(running_jobs=3, waiting_jobs=5, held_cpus=24, estimated_start=1600.0, worst_start=4600.0)}))
    return rollup


def resource_ldif(rollup: Rollup) -> str:
    """The site's GLUE 1.3 and 2.0 LDIF with the BDII's base entries, as `infosvc ldif --base --site` prints it."""
    return Glue(rollup).rendering("ldif", GridOptions(base=True, site=SITE)).tree().decode()
