"""Licenses and consumables of the site config (infosvc/config/resources.py): which hosts have what,
and what the roll-up publishes of them (GLUE JSON, validated with schemas/glue.schema.json)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from support.documents import make_node
from infosvc.codec.glue_json import JsonDocuments, cluster_json, host_json, subcluster_json
from infosvc.model.glue import Resources
from infosvc.config.site import SiteConfig, parse_config
from infosvc.config.resources import LicensePools, cluster_licenses, license_pools, resources_of
from infosvc.hosts.rollup import Rollup, host_from_node

SCHEMA: dict[str, Any] = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "glue.schema.json").read_text())
REGISTRY: Registry[Any] = Registry().with_resource(SCHEMA["$id"], DRAFT202012.create_resource(SCHEMA))
WHEN = "2026-01-01T00:00:00Z"

SITE = """
[[clusters]]
id = "compute"
nodes = "cn[01-08]"

[[clusters]]
id = "gpu"
nodes = "gpu[1-4]"

[[resources]]
nodes = "cn01"
licenses = { matlab = 1 }      # node-locked: a pool of one host

[[resources]]
clusters = ["compute"]
licenses = { matlab = 4, ansys = 2 }

[[resources]]
nodes = "gpu[1-2]"
consumables = { gpu = 2, scratch_gb = 500.5 }

[[resources]]                  # every host: the site's license server
licenses = { fluent = 10, ansys = 9 }
consumables = { gpu = 0.5 }
"""


def config() -> SiteConfig:
    return parse_config(tomllib.loads(SITE))


def valid(document: object, definition: str) -> Any:
    value = json.loads(document) if isinstance(document, bytes) else document
    validator = Draft202012Validator({"$ref": f"{SCHEMA['$id']}#/$defs/{definition}"}, registry=REGISTRY)
    validator.validate(value)
    return value


def test_a_host_takes_each_name_from_the_first_entry_giving_it() -> None:
    entries = config().resources
    assert resources_of(entries, "cn01", "compute") == Resources(
        (("matlab", 1), ("ansys", 2), ("fluent", 10)), (("gpu", 0.5),))
    assert resources_of(entries, "cn02", "compute") == Resources(
        (("matlab", 4), ("ansys", 2), ("fluent", 10)), (("gpu", 0.5),))
    assert resources_of(entries, "gpu1", "gpu") == Resources(
        (("fluent", 10), ("ansys", 9)), (("gpu", 2), ("scratch_gb", 500.5)))
    assert resources_of(entries, "other", "default") == Resources((("fluent", 10), ("ansys", 9)), (("gpu", 0.5),))
    assert resources_of((), "cn01", "compute") is None
    # the pools each host draws from: entry 0 for cn01's matlab, entry 1 for the rest of the cluster
    assert license_pools(entries, "cn01", "compute") == (("matlab", 0), ("ansys", 1), ("fluent", 3))
    assert license_pools(entries, "cn05", "compute") == (("matlab", 1), ("ansys", 1), ("fluent", 3))
    pools = LicensePools(entries)
    assert pools.sizes == [1, 4, 2, 10, 9]  # (entry, feature) in file order
    assert pools.of("cn05", "compute") == (("matlab", 1), ("ansys", 2), ("fluent", 3))
    assert pools.of("gpu3", "gpu") == (("fluent", 3), ("ansys", 4))
    assert LicensePools(()).of("cn01", "compute") == ()
    # a cluster publishes the pools of entries naming it by clusters, or naming every host
    assert cluster_licenses(entries, "compute") == (("matlab", 4), ("ansys", 2), ("fluent", 10))
    assert cluster_licenses(entries, "gpu") == (("fluent", 10), ("ansys", 9))


def test_the_rollup_publishes_licenses_and_consumables() -> None:
    site = config()
    rollup = Rollup(site)
    for name in ("cn01", "cn02", "cn03", "gpu1", "gpu3"):
        rollup.update(host_from_node(make_node(name), "Ready", site, WHEN))
    cn01, cn02, gpu1 = rollup.hosts["cn01"], rollup.hosts["cn02"], rollup.hosts["gpu1"]
    assert cn02.resources is not None and dict(cn02.resources.licenses) == {"matlab": 4, "ansys": 2, "fluent": 10}
    # what a host is given is in the homogeneity key: cn01 (its own matlab) and gpu1 (its GPUs) stand apart
    sub = {host: rollup.subcluster_of(host) for host in rollup.hosts}
    assert sub["cn02"] is sub["cn03"] and sub["cn01"] is not sub["cn02"] and sub["gpu1"] is not sub["gpu3"]
    assert len(rollup.subclusters) == 4

    host = valid(host_json(gpu1, sub["gpu1"].unique_id), "Host")  # type: ignore[union-attr]
    assert host["licenses"] == {"fluent": 10, "ansys": 9}
    assert host["consumables"] == {"gpu": 2, "scratch_gb": 500.5}
    assert valid(host_json(cn01, None), "Host")["licenses"] == {"matlab": 1, "ansys": 2, "fluent": 10}
    subcluster = sub["cn02"]
    assert subcluster is not None and subcluster.resources == cn02.resources
    document = valid(subcluster_json(subcluster, None, ["cn02", "cn03"]), "SubCluster")
    assert document["licenses"] == {"matlab": 4, "ansys": 2, "fluent": 10} and document["consumables"] == {"gpu": 0.5}
    clusters = {c.unique_id: c for c in rollup.clusters()}
    assert valid(cluster_json(clusters["compute"], []), "Cluster")["licenses"] == {"matlab": 4, "ansys": 2,
                                                                                  "fluent": 10}
    tree = json.loads(JsonDocuments().tree(rollup, lambda host, sub_id: host_json(host, sub_id)))
    Draft202012Validator(SCHEMA, registry=REGISTRY).validate(tree)
    assert {c["unique_id"]: c.get("licenses") for c in tree["clusters"]} == {
        "compute": {"matlab": 4, "ansys": 2, "fluent": 10}, "gpu": {"fluent": 10, "ansys": 9}}


def test_without_resources_nothing_is_published_and_ids_stay() -> None:
    bare, given = SiteConfig(), parse_config({"resources": [{"licenses": {"matlab": 2}}]})
    plain = Rollup(bare)
    plain.update(host_from_node(make_node("n1"), "Ready", bare, WHEN))
    (sub,) = plain.subclusters.values()
    # the id of a subcluster without resources is what it was before resources were in the key
    assert sub.unique_id == "default-82e05fa852"
    host = valid(host_json(plain.hosts["n1"], sub.unique_id), "Host")
    assert "licenses" not in host and "consumables" not in host
    assert "licenses" not in valid(cluster_json(plain.clusters()[0], []), "Cluster")
    licensed = Rollup(given)
    licensed.update(host_from_node(make_node("n1"), "Ready", given, WHEN))
    assert set(licensed.subclusters) != set(plain.subclusters)


def test_the_schema_refuses_bad_amounts() -> None:
    validator = Draft202012Validator({"$ref": f"{SCHEMA['$id']}#/$defs/Licenses"}, registry=REGISTRY)
    assert validator.is_valid({"matlab": 4})
    for bad in ({"matlab": 0}, {"matlab": 1.5}, {"mat lab": 1}, {"a:b": 1}):
        assert not validator.is_valid(bad), bad
    consumables = Draft202012Validator({"$ref": f"{SCHEMA['$id']}#/$defs/Consumables"}, registry=REGISTRY)
    assert consumables.is_valid({"gpu": 2, "scratch_gb": 0.5})
    assert not consumables.is_valid({"gpu": 0}) and not consumables.is_valid({"gpu": "2"})
