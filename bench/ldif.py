"""Benchmark of the grid's renderings at 10,000 hosts, and of slapd serving them.

The target: LDIF for 10,000 hosts in both schemas (GLUE 1.3 and 2.0) under 1 s.

(a) In process: 10,000 synthetic hosts (tests/support/documents.make_node) in 10 clusters, of 5
    processor models x 5 memory sizes x 4 CPU counts, so ~1,000 subclusters (a real site has
    tens: this is the hard case for these formats, which publish per subcluster, not per host),
    3 computing elements, benchmarks and software by NodeSet. Timed: the roll-up from cold (what
    the aggregator keeps anyway), then each rendering from the live roll-up, as GET /v1/glue makes
    it: LDIF 1.3, LDIF 2.0, both, GLUE 2.0 XML and JSON (median of --repeat runs).
(b) Debian's slapd, configured as a BDII's (tests/support/slapd.py), when installed: the LDIF
    loaded with ldapadd, the two queries grid clients make timed with ldapsearch (median of
    --repeat runs, the process included, as a client sees it), then 10% of the hosts change and
    the diff (infosvc.codec.ldif.changes) is applied with ldapmodify.

Run under the shared lock: `flock /tmp/heavy.lock .venv/bin/python bench/ldif.py [--hosts 10000]`;
prints a table and writes bench/results/ldif.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from infosvc.codec import ldif  # noqa: E402
from infosvc.codec.gridformat import GridOptions  # noqa: E402
from infosvc.publish.glue import Glue  # noqa: E402
from infosvc.queue.cestate import CEFigures, CEQueues  # noqa: E402
from infosvc.config.site import SiteConfig, parse_config  # noqa: E402
from infosvc.hosts.rollup import Rollup, host_from_node  # noqa: E402
from support.documents import make_node  # noqa: E402
from support.programs import find  # noqa: E402
from support.slapd import SUFFIXES, Slapd, by_suffix  # noqa: E402

MODELS = ("Xeon Gold 6130", "Xeon Gold 6338", "EPYC 7302", "EPYC 9654", "Xeon Max 9480")
MEMORY_MB = (4096, 8192, 16384, 65536, 262144)
CPUS = (8, 16, 32, 64)
PRODUCTION_CES = "(&(objectClass=GlueCE)(GlueCEStateStatus=Production))"
BIG_MEMORY = "(&(objectClass=GLUE2ExecutionEnvironment)(GLUE2ExecutionEnvironmentMainMemorySize>=8192))"


def config(hosts: int) -> SiteConfig:
    per = max(1, hosts // 10)
    clusters = [{"id": f"cluster{k}", "nodes": f"n[{k * per:05d}-{(k + 1) * per - 1:05d}]"} for k in range(10)]
    ces = [{"id": f"ce{k}.example.org:8443/infosvc-q{k}", "queue": f"q{k}",
            "clusters": [f"cluster{c}" for c in range(10) if c % 3 == k], "status": "Production" if k else "Draining",
            # a grid site's CEs name the VOs they serve: GLUE 1.3 then has a GlueVOView per VO
            "access_control": ["VO:atlas", "VO:cms", "VOMS:/lhcb/Role=production", "VO:ops"]}
           for k in range(3)]
    return parse_config({"service": {"information_service_url": "https://infosvc.example.org:8443"},
                         "clusters": clusters, "computing_elements": ces,
                         "benchmarks": [{"nodes": c["nodes"], "si00": 1000 + 100 * i, "sf00": 900 + 100 * i}
                                        for i, c in enumerate(clusters[:5])],
                         "software": [{"nodes": f"n[00000-{hosts // 2:05d}]",
                                       "runtime_environment": ["VO-atlas-release-24", "MPI", "R-4.3"]}]})


def node(i: int, memory_shift: int = 0) -> Any:
    return make_node(f"n{i:05d}", processors=CPUS[i % 4], free_processors=(i * 7) % (CPUS[i % 4] + 1),
                     memory_mb=MEMORY_MB[(i // 5 + memory_shift) % 5], model=MODELS[i % 5])


def median_seconds(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--hosts", type=int, default=10_000)
    args.add_argument("--repeat", type=int, default=5)
    opts = args.parse_args()
    results: dict[str, Any] = {"hosts": opts.hosts}
    site = config(opts.hosts)
    nodes = [node(i) for i in range(opts.hosts)]
    start = time.perf_counter()
    rollup = Rollup(site)
    for n in nodes:
        rollup.update(host_from_node(n, "Ready", site, "2026-01-01T00:00:00Z"))
    results["rollup_from_cold_s"] = time.perf_counter() - start
    results["subclusters"] = len(rollup.subclusters)
    now = time.time()
    ce_ids = [ce.unique_id for ce in rollup.computing_elements()]
    rollup.read_queue(CEQueues({ce: CEFigures(120, 40, 960, now + 600, now + 3600) for ce in ce_ids}, clock=time.time))
    glue = Glue(rollup)
    options = GridOptions(base=True, site="BENCH-SITE")
    for fmt in ("ldif-1.3", "ldif-2.0", "ldif", "glue2-xml", "glue2-json"):
        rendering = glue.rendering(fmt, options)
        body = rendering.tree()
        results[f"{fmt}_bytes"] = len(body)
        results[f"{fmt}_s"] = median_seconds(rendering.tree, opts.repeat)
    text = glue.rendering("ldif", options).tree().decode()
    results["ldif_entries"] = len(ldif.parse(text))

    tools = {name: find(name) for name in ("slapd", "ldapadd", "ldapmodify", "ldapsearch")}
    if all(tools.values()):
        with tempfile.TemporaryDirectory() as tmp:
            slapd = Slapd(Path(tmp), str(tools.pop("slapd")), tools={k: str(v) for k, v in tools.items()}).start()
            try:
                start = time.perf_counter()
                slapd.add(text)
                results["ldapadd_s"] = time.perf_counter() - start
                for name, base, query in (("ces", "mds-vo-name=resource,o=grid", PRODUCTION_CES),
                                          ("big_memory_ees", "GLUE2GroupID=resource,o=glue", BIG_MEMORY)):
                    results[f"ldapsearch_{name}_entries"] = len(slapd.search(base, query))
                    results[f"ldapsearch_{name}_s"] = median_seconds(lambda: slapd.search(base, query), opts.repeat)
                # 10% of the hosts change their memory: they move subclusters; the CE figures move
                for i in range(0, opts.hosts, 10):
                    rollup.update(host_from_node(node(i, memory_shift=1), "Ready", site, "2026-01-01T00:01:00Z"))
                rollup.read_queue(CEQueues({ce: CEFigures(130, 20, 1040, time.time() + 300, time.time() + 1800)
                                            for ce in ce_ids}, clock=time.time))
                start = time.perf_counter()
                second = glue.rendering("ldif", options).tree().decode()
                old, new = by_suffix(ldif.parse(text)), by_suffix(ldif.parse(second))
                changes = {s: ldif.changes(ldif.parse(old[s]), ldif.parse(new[s])) for s in SUFFIXES}
                results["diff_s"] = time.perf_counter() - start
                results["diff_records"] = sum(c.count("changetype:") for c in changes.values())
                start = time.perf_counter()
                for suffix, change in changes.items():
                    slapd.modify(suffix, change)
                results["ldapmodify_s"] = time.perf_counter() - start
            finally:
                slapd.stop()
    else:
        results["slapd"] = "not installed (apt-get install slapd ldap-utils)"

    width = max(map(len, results))
    for key, value in results.items():
        print(f"{key:<{width}}  {value:.4f}" if isinstance(value, float) else f"{key:<{width}}  {value}")
    both = results["ldif-1.3_s"] + results["ldif-2.0_s"]
    verdict = "met" if both < 1 else "NOT met"
    print(f"LDIF of both schemas from the live roll-up: {both:.3f} s (target < 1 s: {verdict})")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "ldif.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
