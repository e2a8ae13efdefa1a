"""GLUE JSON read back into the model (infosvc/codec/glue_read.py), as a top level reads a site,
and the union of sites' trees (infosvc/federation/tree.py): a site's tree read from its JSON
renders the very same JSON and XML; what is no GLUE JSON is refused, saying where; clashing
ids become SITE/ID whatever the order of the sites."""

from __future__ import annotations

import dataclasses

import json
import tomllib
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from infosvc.codec.glue_read import GlueReadError, read_glue
from infosvc.federation.tree import SiteTree, UnionTree
from infosvc.publish.glue import Glue
from infosvc.config.site import SiteConfig, parse_config
from infosvc.hosts.rollup import Rollup, host_from_node
from support.documents import make_node
from support.readings import untimed

CONFIG = """
[service]
information_service_url = "https://site.example.org/v1/glue"
[[clusters]]
id = "gpu"
nodes = "g[1-3].example.org"
[[clusters]]
id = "rest"
[[computing_elements]]
id = "ce.example.org:2119/jobmanager-pbs-long"
queue = "long"
clusters = ["gpu", "rest"]
gatekeeper_port = 2119
access_control = ["VO:atlas"]
[computing_elements.policy]
priority = -5
max_wall_clock_time = 2880
[[benchmarks]]
nodes = "g[1-3].example.org"
si00 = 1500
[[software]]
nodes = "g[1-2].example.org"
runtime_environment = ["CUDA-12.4", "MPI"]
[[resources]]
clusters = ["gpu"]
licenses = { matlab = 4 }
consumables = { gpu = 2.5 }
"""


def site(prefix: str = "", config: SiteConfig | None = None) -> Rollup:
    config = config or parse_config(tomllib.loads(CONFIG))
    rollup = Rollup(config)
    for i, state in enumerate(("Ready", "Paused", "Unreachable", "Pending", "Ready")):
        host = f"{prefix}g{i + 1}.example.org" if i < 3 else f"{prefix}n{i}.example.org"
        node = make_node(host, processors=8 * (i + 1), free_processors=i, model="EPYC" if i % 2 else "Xeon",
                         state="Offline" if i == 4 else "Idle")
        rollup.update(host_from_node(node, state, config, "2026-01-02T03:04:05Z", paused=state == "Paused",
                                     reason="maintenance <tonight>" if i == 1 else None))
    return rollup


def test_a_site_read_back_renders_the_same_documents() -> None:
    rollup = site()
    body = Glue(rollup).json.tree()
    # rendered with its final newline: web/pretty.py then sends it as it is, no copy of the tree
    assert body.endswith(b"}\n") and Glue(rollup).xml.tree().endswith(b"</Glue>\n")
    tree = SiteTree.of_document(read_glue(body))
    again = Glue(tree)
    assert untimed(again.json.tree()) == untimed(body)  # each Glue takes its own snapshot, and its time
    assert untimed(again.xml.tree()) == untimed(Glue(rollup).xml.tree())
    assert tree.information_service_url == "https://site.example.org/v1/glue"
    for host in rollup.hosts.values():
        assert tree.hosts[host.unique_id] == host


def test_an_unchanged_host_keeps_its_object() -> None:
    body = Glue(site()).json.tree()
    first = read_glue(body)
    data = json.loads(body)
    data["hosts"][0]["state"] = "Unreachable"
    second = read_glue(json.dumps(data).encode(), first)
    changed = data["hosts"][0]["unique_id"]
    assert second.hosts[changed] is not first.hosts[changed] and second.hosts[changed].state == "Unreachable"
    assert all(second.hosts[h] is first.hosts[h] for h in first.hosts if h != changed)


@pytest.mark.parametrize(("change", "where"), [
    (lambda d: d.update(hosts={}), "hosts: expected an array"),
    (lambda d: d["hosts"][0].update(state="Up"), "hosts[0]: 'state'"),
    (lambda d: d["hosts"][1].update(total_cpus=True), "hosts[1]: 'total_cpus': expected an integer"),
    (lambda d: d["hosts"][1].update(total_cpus=-1), "hosts[1]: 'total_cpus'"),
    (lambda d: d["hosts"][2].pop("unique_id"), "hosts[2]: 'unique_id' is required"),
    (lambda d: d["hosts"][2]["file_systems"].append({"root": 7}), "hosts[2].file_systems: 'root'"),
    (lambda d: d["hosts"].append(d["hosts"][0]), "is listed twice"),
    (lambda d: d["subclusters"][0].update(states=[]), "subclusters[0].states: expected an object"),
    (lambda d: d["computing_elements"][0]["state"].update(status="Open"), "computing_elements[0].state: 'status'"),
    (lambda d: d["clusters"][0].update(licenses={"matlab": 0}), "clusters[0].licenses"),
])
def test_what_is_no_glue_json_is_refused_saying_where(change: object, where: str) -> None:
    data = json.loads(Glue(site()).json.tree())
    change(data)  # type: ignore[operator]
    with pytest.raises(GlueReadError) as info:
        read_glue(json.dumps(data).encode())
    assert where in str(info.value)


@pytest.mark.parametrize("body", [b"", b"[", b"[]", b"\xff\xfe", b"[" * 100_000 + b"]" * 100_000])
def test_no_json_is_refused(body: bytes) -> None:
    with pytest.raises(GlueReadError):
        read_glue(body)


def test_too_many_hosts_are_refused() -> None:
    with pytest.raises(GlueReadError, match="more than the 3"):
        read_glue(Glue(site()).json.tree(), max_hosts=3)
    with pytest.raises(GlueReadError, match="^hosts: more than the 3 entities a site may publish"):
        read_glue(b'{"hosts":[{},{},{},{}]}', max_hosts=3)


def tree_of(rollup: Rollup) -> SiteTree:
    return SiteTree.of_document(read_glue(Glue(rollup).json.tree()))


def test_the_union_renames_every_clashing_id_whatever_the_order() -> None:
    a, b, c = tree_of(site()), tree_of(site()), tree_of(site("c-", SiteConfig()))
    one, two = UnionTree([("a", a), ("b", b), ("c", c)]), UnionTree([("c", c), ("b", b), ("a", a)])
    assert set(one.hosts) == set(two.hosts)
    # a and b publish the same hosts, clusters, subclusters and CE: each is SITE/ID; c's hosts are its own
    assert "a/g1.example.org" in one.hosts and "b/g1.example.org" in one.hosts and "g1.example.org" not in one.hosts
    assert "c-g1.example.org" in one.hosts and one.site_of["hosts"]["c-g1.example.org"] == "c"
    assert one.hosts["a/g1.example.org"].cluster == "a/gpu" and one.cluster("a/gpu") is not None
    assert one.computing_element("b/ce.example.org:2119/jobmanager-pbs-long").clusters == ("b/gpu", "b/rest")
    # `default` is c's alone: kept; its subclusters clash with no one (another config, other hosts)
    assert one.cluster("default") is not None and one.site_of["clusters"]["default"] == "c"
    for sub in one.subclusters.values():
        assert all(one.subcluster_of(h.unique_id) is sub for h in one.hosts_of(sub.unique_id))
        assert sub in one.subclusters_of(sub.cluster)
    assert len(one.hosts) == 15 and sum(s.host_count for s in one.subclusters.values()) == 15


def test_no_site_s_id_takes_the_place_of_another_s_renamed_one() -> None:
    # evil publishes a's host id (a clash: both renamed) and also `a/g1.example.org` itself, a's
    # renamed id: it took a's place in the union (hosts, clusters, CEs alike)
    a, evil = tree_of(site()), tree_of(site())
    forged = {f"a/{h}": dataclasses.replace(host, unique_id=f"a/{h}", name="FORGED BY EVIL")
              for h, host in evil.hosts.items()}
    evil = SiteTree(list(evil.clusters()) + [dataclasses.replace(c, unique_id=f"a/{c.unique_id}")
                                             for c in evil.clusters()],
                    [(sub, list(evil.hosts_of(sub.unique_id))) for sub in evil.subclusters.values()],
                    list(evil.computing_elements()), None, [*evil.hosts.values(), *forged.values()])
    for order in ([("a", a), ("evil", evil)], [("evil", evil), ("a", a)]):
        union = UnionTree(order)
        assert union.hosts["a/g1.example.org"].name == a.hosts["g1.example.org"].name != "FORGED BY EVIL"
        assert union.site_of["hosts"]["a/g1.example.org"] == "a"
        assert union.hosts["evil/a/g1.example.org"].name == "FORGED BY EVIL"
        assert union.site_of["clusters"]["a/gpu"] == "a" and union.cluster("evil/a/gpu") is not None
        assert len(union.hosts) == len(a.hosts) + 2 * len(a.hosts)  # nothing merged, nothing lost


def test_a_union_without_clashes_keeps_the_sites_objects() -> None:
    a, c = tree_of(site()), tree_of(site("c-", SiteConfig()))
    union = UnionTree([("a", a), ("c", c)])
    assert union.clashes == []
    assert all(union.hosts[h] is a.hosts[h] for h in a.hosts)
    # a clash renames; when it is gone again, the ids come back as they were
    b = tree_of(site())
    clashing = UnionTree([("a", a), ("b", b), ("c", c)], renamed_before=union.renamed_trees)
    again = UnionTree([("a", a), ("b", b), ("c", c)], renamed_before=clashing.renamed_trees)
    assert again.hosts["a/g1.example.org"] is clashing.hosts["a/g1.example.org"]  # kept: nothing changed
    assert UnionTree([("a", a), ("c", c)]).hosts["g1.example.org"] is a.hosts["g1.example.org"]
    assert replace(a.hosts["g1.example.org"]) == a.hosts["g1.example.org"]


def test_the_unions_document_kept_by_site_is_the_document_of_the_whole() -> None:
    """The union's JSON, composed of each site's kept share, is the JSON of the union as one tree,
    after a site changed too; and it validates against schemas/glue.schema.json."""
    from pathlib import Path

    from jsonschema import Draft202012Validator

    from infosvc.federation.documents import FederatedJson, site_status
    from infosvc.federation.pull import Federation
    from infosvc.publish.glue import Rendering
    from infosvc.config.federation import FederationConfig, upstream

    config = FederationConfig(tuple(upstream(f"http://{n}.example.org", n) for n in ("a", "b", "c")))
    federation = Federation(config, Rollup(SiteConfig()))
    for state, rollup in zip(federation.sites, (site(), site(), site("c-", SiteConfig()))):
        state.tree, state.last_success = tree_of(rollup), 1.7e9
    documents = FederatedJson(federation)
    rendering = Rendering(federation, documents)
    schema = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "glue.schema.json").read_text())
    for _ in range(2):
        body = rendering.tree()
        assert body == b"".join(documents.whole(federation.union, rendering.fragment, site_status(federation)))
        assert body.endswith(b"}\n")  # the union's tens of megabytes are not copied for a newline
        Draft202012Validator(schema).validate(json.loads(body))
        changed = site()
        changed.update(replace(changed.hosts["g1.example.org"], state="Unreachable"))
        federation.sites[1].tree = tree_of(changed)
        federation.changed()
        federation.rebuild()  # what the app's publisher does in a worker thread
    hosts = {h["unique_id"]: h for h in json.loads(body)["hosts"]}
    assert hosts["b/g1.example.org"]["state"] == "Unreachable" and hosts["a/g1.example.org"]["state"] == "Ready"


@pytest.mark.parametrize("body", [
    b"", b"{", b'{"hosts":[{"unique_id":"a"}', b'{"hosts":[1,]}', b'{"hosts":[1],}', b'{"hosts" [1]}', b"{1:[2]}",
    b'{"hosts":[1] "x":2}', b'{"hosts":[]} []', b'{"hosts":[}', b"[1", b'{"a":NaN', b'\xff{"hosts":[]}'])
def test_a_document_read_in_steps_refuses_what_json_refuses(body: bytes) -> None:
    """A site's arrays are decoded an element at a time (the event loop's turn between two): the
    reading is json.loads' all the same, broken documents refused."""
    from infosvc.codec.glue_read import loads_in_steps

    with pytest.raises(ValueError):
        json.loads(body)
    with pytest.raises(ValueError):
        loads_in_steps(body)


@pytest.mark.parametrize("body", [
    b"{}", b' { "hosts" : [ ] , "clusters" : { "c" : [1] } } ', b'{"hosts":[{"x":1}, [2], "s", null],"hosts":[3]}',
    b"[1,2]", b'"x"', '{"\u00e9":[1, {"\u00fc": []}]}'.encode("utf-16"), b'{"n":[1e400, -0.0, NaN]}'])
def test_a_document_read_in_steps_is_what_json_reads(body: bytes) -> None:
    from infosvc.codec.glue_read import loads_in_steps

    assert repr(loads_in_steps(body)) == repr(json.loads(body))


def test_one_value_too_large_to_decode_in_one_step_is_refused() -> None:
    # json's decoder holds the GIL for the whole of a value it decodes: a 64 MB member held a top
    # level's event loop 1.7 s, and `[{}, {}, ...]` under a member name took 50 s and 1.7 GB
    from infosvc.codec.glue_read import MAX_ITEM_CHARS, loads_in_steps

    big = b"[" + b"0," * (MAX_ITEM_CHARS // 2) + b"0]"
    for body in (b'{"hosts":[],"x":{"y":' + big + b"}}", b'{"hosts":[' + big + b"]}", b'{"junk":' + big + b"}",
                 b'{"hosts":[{"unique_id":"' + b"a" * MAX_ITEM_CHARS + b'"}]}'):
        with pytest.raises(ValueError, match=f"larger than {MAX_ITEM_CHARS:,} characters"):
            loads_in_steps(body)
    near = b"[" + b"0," * (MAX_ITEM_CHARS // 4) + b"0]"  # within the bound: read as json reads it
    assert loads_in_steps(b'{"hosts":[' + near + b"]}") == json.loads(b'{"hosts":[' + near + b"]}")


def test_an_array_of_more_elements_than_a_site_may_publish_is_refused_as_it_is_read() -> None:
    from infosvc.codec.glue_read import loads_in_steps

    body = b'{"hosts":[' + b",".join([b"{}"] * 1001) + b"]}"
    with pytest.raises(ValueError, match="hosts: more than the 1,000 entities a site may publish"):
        loads_in_steps(body, max_items=1000)
    with pytest.raises(GlueReadError, match="more than the 1,000 entities"):
        read_glue(body, max_hosts=1000)


def test_a_wrong_value_past_the_first_window_is_said_so_not_taken_for_a_large_one() -> None:
    from infosvc.codec.glue_read import loads_in_steps

    body = b'{"hosts":[{"a":"' + b"x" * 10_000 + b'",,"b":1}' + b',{"c":2}' * 100_000 + b"]}"
    with pytest.raises(ValueError, match="Expecting property name enclosed in double quotes at character 10018"):
        loads_in_steps(body)


@pytest.mark.parametrize("cut", [1, 7, 4094, 4095, 4096, 4097, 8190, 8192, 40_000])
def test_values_across_the_decoding_windows_are_read_whole(cut: int) -> None:
    # a number or a string cut at a window's edge is not taken for the whole value
    body = ('{"hosts":["' + "s" * cut + '", 123456789012, -0.5e-7, "' + "t" * (cut * 3) + '", {"k": [1, 2.5]}, '
            '"' + "u" * cut + '\\u00e9\\n", [true, false, null], "' + "v" * cut + '"],'
            '"clusters":' + "[" * 3 + str(10 ** 30) + "]" * 3 + ', "n": 12345678901234567890}').encode()
    from infosvc.codec.glue_read import loads_in_steps
    assert repr(loads_in_steps(body)) == repr(json.loads(body))


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
                     lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
                     max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(document=st.dictionaries(st.sampled_from(["hosts", "clusters", "x", "subclusters"]), _JSON, max_size=4),
       window=st.integers(1, 64), spaced=st.booleans())
def test_any_document_read_through_small_windows_is_what_json_reads(document: dict[str, object], window: int,
                                                                    spaced: bool) -> None:
    # windows of a few characters cut every kind of value somewhere: each is read whole all the same
    from infosvc.codec import glue_read

    body = json.dumps(document, indent=1 if spaced else None, ensure_ascii=spaced).encode()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(glue_read, "_FIRST_WINDOW", window)
        assert repr(glue_read.loads_in_steps(body)) == repr(json.loads(body))
        cut = body[:-1]  # and what json refuses, it refuses
        with pytest.raises(ValueError):
            glue_read.loads_in_steps(cut)
