"""What a top level refuses of an upstream site's GLUE JSON (infosvc/codec/glue_read.py), beyond
each member's type: ids no directory or XML document can carry (lone surrogates, NUL, control
characters), references to a cluster the document does not publish, and lists whose repeats
multiply the union's output. Such a document is a GlueReadError: that site alone is marked failing
(its last good copy kept, stale), and the other sites stay published in every format.
A genuine site never publishes any of these: its config and roll-up make every id and reference."""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

from infosvc.codec import safexml
from infosvc.codec.glue_read import GlueReadError, read_glue
from infosvc.federation.tree import SiteTree
from support.server import Server, ServerFactory, wait_for
from support.sitedocs import body, fake_upstreams, site_document

CE = "ce.example.org:2119/jobmanager-batch"
CONFIG = f"""
[[clusters]]
id = "batch"
nodes = "n[1-2].example.org"
[[clusters]]
id = "gpu"
nodes = "g1.example.org"
[[computing_elements]]
id = "{CE}"
clusters = ["batch", "gpu"]
access_control = ["VO:atlas", "VOMS:/dteam/Role=x"]
"""
HOSTS = ("n1.example.org", "n2.example.org", "g1.example.org")

Document = dict[str, Any]


def document() -> Document:
    return copy.deepcopy(_DOCUMENT)


_DOCUMENT = site_document(CONFIG, HOSTS)


def index(items: list[Document], ident: str) -> int:
    return next(i for i, item in enumerate(items) if item["unique_id"] == ident)


def rename_cluster(doc: Document, old: str, new: str) -> None:
    """Cluster `old` as `new`, and every reference to it: a document still consistent."""
    for cluster in doc["clusters"]:
        if cluster["unique_id"] == old:
            cluster["unique_id"] = new
    for item in doc["subclusters"] + doc["hosts"]:
        if item["cluster"] == old:
            item["cluster"] = new
    for ce in doc["computing_elements"]:
        ce["clusters"] = [new if c == old else c for c in ce["clusters"]]


def rename_subcluster(doc: Document, old: str, new: str) -> None:
    for sub in doc["subclusters"]:
        if sub["unique_id"] == old:
            sub["unique_id"] = new
    for cluster in doc["clusters"]:
        cluster["subclusters"] = [new if s == old else s for s in cluster["subclusters"]]
    for host in doc["hosts"]:
        if host["subcluster"] == old:
            host["subcluster"] = new


def rename_host(doc: Document, old: str, new: str) -> None:
    for host in doc["hosts"]:
        if host["unique_id"] == old:
            host["unique_id"] = new
    for sub in doc["subclusters"]:
        sub["hosts"] = [new if h == old else h for h in sub["hosts"]]


def sub_of(doc: Document, cluster: str) -> str:
    return str(next(s["unique_id"] for s in doc["subclusters"] if s["cluster"] == cluster))


def test_the_site_document_as_made_is_read() -> None:
    tree = SiteTree.of_document(read_glue(body(document())))
    assert [c.unique_id for c in tree.clusters()] == ["batch", "gpu"] and len(tree.hosts) == 3


# --- ids a directory or an XML document cannot carry ---------------------------------------------

#: each: a lone surrogate, NUL, C0 controls (a line break among them), DEL, a C1 control, a line separator
UNCARRIABLE = ["\ud800", "\udfff", "\x00", "\x01", "\n", "\r", "\t", "\x7f", "\x9b", "\u2028"]

def _bad_ce(doc: Document, bad: str) -> str:
    doc["computing_elements"][0]["unique_id"] = f"ce{bad}x"
    return "computing_elements[0]: 'unique_id'"


def _bad_cluster(doc: Document, bad: str) -> str:
    rename_cluster(doc, "gpu", f"gpu{bad}x")
    return f"clusters[{index(doc['clusters'], f'gpu{bad}x')}]: 'unique_id'"


def _bad_subcluster(doc: Document, bad: str) -> str:
    sub = sub_of(doc, "batch")
    rename_subcluster(doc, sub, f"{sub}{bad}x")
    return f"subclusters[{index(doc['subclusters'], f'{sub}{bad}x')}]: 'unique_id'"


def _bad_host(doc: Document, bad: str) -> str:
    rename_host(doc, "g1.example.org", f"g1{bad}x")
    return f"hosts[{index(doc['hosts'], f'g1{bad}x')}]: 'unique_id'"


def _bad_rule(doc: Document, bad: str) -> str:
    doc["computing_elements"][0]["access_control_base"]["rules"][1] = f"VOMS:/dteam{bad}/Role=x"
    return "computing_elements[0].access_control_base.rules[1]"


#: each: the id made bad, and where the error must say it is
ID_CHANGES: dict[str, Callable[[Document, str], str]] = {
    "CE": _bad_ce, "cluster": _bad_cluster, "subcluster": _bad_subcluster, "host": _bad_host, "access rule": _bad_rule}


@pytest.mark.parametrize("bad", UNCARRIABLE, ids=[f"U+{ord(c):04X}" for c in UNCARRIABLE])
@pytest.mark.parametrize("kind", list(ID_CHANGES))
def test_an_id_holding_a_character_no_directory_or_xml_carries_is_refused(kind: str, bad: str) -> None:
    doc = document()
    where = ID_CHANGES[kind](doc, bad)
    with pytest.raises(GlueReadError) as info:
        read_glue(body(doc))
    message = str(info.value)
    assert message.startswith(where), message
    # the error is shown in /healthz and the log: it quotes the id escaped, never the character itself
    assert bad not in message and message.isprintable()


@pytest.mark.parametrize("blank", ["", " ", "  "])
def test_a_blank_id_or_rule_is_refused(blank: str) -> None:
    doc = document()
    rename_cluster(doc, "gpu", blank)
    with pytest.raises(GlueReadError, match=r"clusters\[1\]: 'unique_id'"):
        read_glue(body(doc))
    doc = document()
    doc["computing_elements"][0]["access_control_base"]["rules"].append(blank)
    with pytest.raises(GlueReadError, match=r"computing_elements\[0\].access_control_base.rules\[2\]"):
        read_glue(body(doc))


def test_a_very_long_bad_id_is_quoted_in_part() -> None:
    doc = document()
    doc["computing_elements"][0]["unique_id"] = "\x00" * 100_000
    with pytest.raises(GlueReadError) as info:
        read_glue(body(doc))
    assert len(str(info.value)) < 1000


def test_names_and_other_free_text_are_not_ids() -> None:
    # a CE's name, a host's OS: shown, never keys (their escaping is the renderers' matter)
    doc = document()
    doc["computing_elements"][0]["name"] = "All\tof it"
    doc["hosts"][0]["name"] = "a\x01b"
    read_glue(body(doc))


# --- references to clusters the document does not publish ------------------------------------------

def test_a_ce_naming_a_cluster_the_document_does_not_publish_is_refused() -> None:
    doc = document()
    doc["computing_elements"][0]["clusters"].append("nobody")
    with pytest.raises(GlueReadError, match=r"computing_elements\[0\].clusters\[2\]: no cluster 'nobody'"):
        read_glue(body(doc))


def test_a_subcluster_or_host_in_a_cluster_the_document_does_not_publish_is_refused() -> None:
    doc = document()
    i = index(doc["subclusters"], sub_of(doc, "gpu"))
    doc["subclusters"][i]["cluster"] = "elsewhere"
    with pytest.raises(GlueReadError, match=rf"subclusters\[{i}\]: 'cluster': no cluster 'elsewhere'"):
        read_glue(body(doc))
    doc = document()
    h = index(doc["hosts"], "g1.example.org")
    doc["hosts"][h]["cluster"] = "elsewhere"
    with pytest.raises(GlueReadError, match=rf"hosts\[{h}\]: 'cluster': no cluster 'elsewhere'"):
        read_glue(body(doc))


def test_a_reference_differing_only_in_case_is_no_reference() -> None:
    # the tree's lookups are exact: `Batch` names no cluster of a document that publishes `batch`
    doc = document()
    doc["computing_elements"][0]["clusters"][0] = "Batch"
    with pytest.raises(GlueReadError, match="no cluster 'Batch'"):
        read_glue(body(doc))


# --- repeats that multiply the union's output ---------------------------------------------------

def test_a_ce_listing_a_cluster_twice_is_refused() -> None:
    # each ComputingShare names every ExecutionEnvironment of every cluster its CE lists, each
    # ExecutionEnvironment every share that lists its cluster: 122 kB of upstream JSON gave 88 MB of LDIF
    doc = document()
    doc["computing_elements"][0]["clusters"] = ["batch", "gpu", "batch"]
    with pytest.raises(GlueReadError, match=r"computing_elements\[0\].clusters\[2\]: 'batch' is listed twice"):
        read_glue(body(doc))


@pytest.mark.parametrize("member", ["clusters", "subclusters", "computing_elements", "hosts"])
def test_an_id_longer_than_any_site_s_is_refused(member: str) -> None:
    # each id is written once per pair of a share and an environment in GLUE 2.0, escaped there:
    # 400 CEs over 250 subclusters of 100-character ids of '/' were 0.47 MB of JSON, 161 MB of LDIF
    doc = document()
    long = "/" * 256
    if member == "clusters":
        rename_cluster(doc, "gpu", long)
    elif member == "subclusters":
        rename_subcluster(doc, doc["subclusters"][-1]["unique_id"], long)
    elif member == "hosts":
        rename_host(doc, "g1.example.org", long)
    else:
        doc["computing_elements"][0]["unique_id"] = long
    with pytest.raises(GlueReadError, match="256 characters long, more than the 255"):
        read_glue(body(doc))
    doc = document()
    doc["computing_elements"][0]["access_control_base"]["rules"] = ["VO:" + "a" * 300]
    with pytest.raises(GlueReadError, match="303 characters long"):
        read_glue(body(doc))


def test_more_kinds_of_accelerator_than_a_site_s_are_refused() -> None:
    # GLUE 2.1 writes a share's figures per kind of accelerator and CE: 400 CEs and 1,000 kinds
    # (0.29 MB of JSON) were 103 MB of glue2-json, 7 s to render at each read
    doc = document()
    sub = next(s for s in doc["subclusters"] if s["cluster"] == "gpu")
    sub["accelerators"] = [{"type": f"kind{k}", "model": "m", "count": 1} for k in range(17)]
    with pytest.raises(GlueReadError, match="17 types, more than the 16"):
        read_glue(body(doc))
    sub["accelerators"] = sub["accelerators"][:16]
    read_glue(body(doc))


def test_ces_times_subclusters_past_a_site_s_are_refused() -> None:
    # each of many CEs over one cluster of many subclusters: every share lists every execution
    # environment and each environment every share, so 400 CEs over 300 subclusters (under 0.5 MB
    # of JSON, every id distinct) made 120,000 pairs, written twice in GLUE 2.0 at each read
    doc = document()
    (sub,) = [s for s in doc["subclusters"] if s["cluster"] == "gpu"]
    subs = []
    for k in range(300):
        twin = copy.deepcopy(sub)
        twin["unique_id"] = f"gpu-{k}"
        twin["hosts"] = []
        subs.append(twin)
    doc["subclusters"] = [s for s in doc["subclusters"] if s["cluster"] != "gpu"] + subs
    doc["hosts"] = [h for h in doc["hosts"] if h["cluster"] != "gpu"]
    for cluster in doc["clusters"]:
        if cluster["unique_id"] == "gpu":
            cluster["subclusters"] = [s["unique_id"] for s in subs]
    (ce,) = doc["computing_elements"]
    doc["computing_elements"] = [{**copy.deepcopy(ce), "unique_id": f"{CE}-{k}", "clusters": ["gpu"]}
                                 for k in range(400)]
    assert len(body(doc)) < 512 * 1024
    with pytest.raises(GlueReadError, match=r"120,000 .*more than the 100,000"):
        read_glue(body(doc))
    doc["computing_elements"] = doc["computing_elements"][:300]  # 90,000: a site's may be that large
    read_glue(body(doc))


@pytest.mark.parametrize(("member", "where"), [
    ("clusters", "clusters[2]: cluster 'gpu' is listed twice"),
    ("subclusters", "subclusters[2]: subcluster '{sub}' is listed twice"),
    ("computing_elements", f"computing_elements[1]: computing element '{CE}' is listed twice"),
])
def test_an_entity_listed_twice_is_refused(member: str, where: str) -> None:
    # a cluster listed n times rendered all its subclusters (and their hosts) n times
    doc = document()
    last = {"clusters": "gpu", "subclusters": doc["subclusters"][-1]["unique_id"],
            "computing_elements": CE}[member]
    doc[member].append(copy.deepcopy(doc[member][index(doc[member], last)]))
    with pytest.raises(GlueReadError) as info:
        read_glue(body(doc))
    assert str(info.value) == where.format(sub=last)


@pytest.mark.parametrize("member", ["clusters", "subclusters", "computing_elements"])
def test_ids_of_one_kind_differing_only_in_case_are_refused(member: str) -> None:
    # a directory compares GLUE ids ignoring case: the second entry of the two is refused by
    # ldapadd ("Already exists"); a site's config refuses such ids, so a site publishing them is broken
    doc = document()
    twin = copy.deepcopy(doc[member][-1])
    twin["unique_id"] = twin["unique_id"].upper()
    doc[member].append(twin)
    with pytest.raises(GlueReadError, match=f"{member}\\[{len(doc[member]) - 1}\\]: .* differs only in case or spaces from"):
        read_glue(body(doc))


def test_access_rules_differing_only_in_case_or_spaces_are_refused() -> None:
    # as the site's config refuses them: one value twice for a directory, which refuses the CE's entry
    doc = document()
    doc["computing_elements"][0]["access_control_base"]["rules"].append("vo:ATLAS")
    with pytest.raises(GlueReadError, match=r"rules\[2\]: 'vo:ATLAS' repeats 'VO:atlas'"):
        read_glue(body(doc))


# --- at a top level: that site failing, the others published -------------------------------------

def _top(serve: ServerFactory, urls: dict[str, str]) -> Server:
    top = serve(start=False)
    lines = ["[federation]", "interval_seconds = 0.3", "timeout_seconds = 2", "delete_delay_seconds = 60"]
    for name, url in urls.items():
        lines += ["[[federation.upstreams]]", f'url = "{url}"', f'name = "{name}"']
    top.config_file.write_text("\n".join(lines) + "\n")
    return top.start()


FORMATS = ("json", "xml", "ldif&schema=1.3", "ldif&schema=2.0", "glue2-xml", "glue2-json")


def _pulled(top: Server, names: set[str]) -> dict[str, Any]:
    """The union's JSON once every site was pulled (good or failing) and the union rebuilt since."""
    def ready() -> dict[str, Any] | None:
        reply = top.get("/v1/glue?format=json")
        assert reply.status == 200, reply.body[:500]
        tree = reply.json()
        sites = {s["name"]: s for s in tree["sites"]}
        done = set(sites) == names and all(s["last_success"] or s.get("error") for s in sites.values())
        good = {h["site"] for h in tree["hosts"]}
        return tree if done and "good" in good else None
    found: dict[str, Any] = wait_for(ready, timeout=20, message="every site pulled, the good one published")
    return found


def _answers(top: Server) -> dict[str, bytes]:
    found = {}
    for fmt in FORMATS:
        reply = top.get(f"/v1/glue?format={fmt}")
        assert reply.status == 200, (fmt, reply.status, reply.body[:300])
        found[fmt] = reply.body
    return found


def test_a_site_publishing_uncarriable_ids_is_failing_and_the_others_stay_published(serve_app: ServerFactory) -> None:
    evil = document()
    evil["computing_elements"][0]["unique_id"] = "ce\x00x\ud800,y=z"
    rename_cluster(evil, "batch", "c\nGlueCEUniqueID: injected")
    evil["computing_elements"][0]["access_control_base"]["rules"] = ["VO:atlas\n\ndn: o=evil"]
    with fake_upstreams() as upstreams:
        upstreams.documents["good"] = body(site_document("", ("good1.example.org",)))
        upstreams.documents["evil"] = body(evil)
        top = _top(serve_app, {"good": upstreams.url("good"), "evil": upstreams.url("evil")})
        tree = _pulled(top, {"good", "evil"})
        sites = {s["name"]: s for s in tree["sites"]}
        assert sites["good"]["state"] == "ok"
        assert sites["evil"]["state"] == "failing" and sites["evil"]["last_success"] is None
        assert sites["evil"]["error"].startswith("not a GLUE document: ") and "'unique_id'" in sites["evil"]["error"]
        assert {h["site"] for h in tree["hosts"]} == {"good"}
        for fmt, answer in _answers(top).items():
            if fmt != "json":  # whose `sites` quote the error, the id escaped
                assert b"injected" not in answer and b"o=evil" not in answer, fmt
        health = top.get("/healthz")
        assert health.status == 200 and {u["name"]: u["state"] for u in health.json()["upstreams"]}["evil"] == "failing"


def test_a_site_whose_ce_names_another_site_s_cluster_is_failing(serve_app: ServerFactory) -> None:
    # b's CE names a-batch, which only a publishes, and `nobody`; b's subcluster and host say they
    # are in a-batch. Read as published, a's GLUE 1.3 cluster listed b's CE, b's GLUE 2 share
    # pointed at a's execution environment, and `nobody` broke the GLUE 1.1 XML's keyref.
    a = site_document('[[clusters]]\nid = "a-batch"\nnodes = "a[1-2].example.org"\n'
                      '[[computing_elements]]\nid = "cea"\nclusters = ["a-batch"]\n', ("a1.example.org",))
    b = site_document('[[clusters]]\nid = "b-batch"\nnodes = "b[1-2].example.org"\n'
                      '[[computing_elements]]\nid = "ceb"\nclusters = ["b-batch"]\n', ("b1.example.org",))
    b["computing_elements"][0]["clusters"] = ["a-batch", "nobody"]
    b["subclusters"][0]["cluster"] = "a-batch"
    b["hosts"][0]["cluster"] = "a-batch"
    good = site_document("", ("good1.example.org",))
    with fake_upstreams() as upstreams:
        for name, doc in (("a", a), ("b", b), ("good", good)):
            upstreams.documents[name] = body(doc)
        top = _top(serve_app, {name: upstreams.url(name) for name in ("a", "b", "good")})
        tree = _pulled(top, {"a", "b", "good"})
        sites = {s["name"]: s for s in tree["sites"]}
        assert sites["a"]["state"] == "ok" and sites["b"]["state"] == "failing"
        assert "no cluster 'a-batch'" in sites["b"]["error"]
        assert {ce["unique_id"]: ce["clusters"] for ce in tree["computing_elements"]}.get("ceb") is None
        answers = _answers(top)
        safexml.validate(safexml.parse(answers["xml"]), safexml.schema("glue-ce-1.1.xsd"))
        assert b"ceb" not in answers["ldif&schema=1.3"] and b"ceb" not in answers["glue2-json"]


def test_a_site_whose_ce_lists_one_cluster_many_times_is_failing_not_amplified(serve_app: ServerFactory) -> None:
    evil = site_document('[[clusters]]\nid = "c"\nnodes = "c1.example.org"\n'
                         '[[computing_elements]]\nid = "ce0"\nclusters = ["c"]\n', ("c1.example.org",))
    sub = evil["subclusters"][0]
    for i in range(1, 100):  # subclusters without hosts: a few hundred bytes each
        twin = copy.deepcopy(sub)
        twin.update(unique_id=f"c-{i:06d}", hosts=[], host_count=0, live_hosts=0, total_cpus=0, free_cpus=0)
        evil["subclusters"].append(twin)
    evil["computing_elements"][0]["clusters"] = ["c"] * 200
    with fake_upstreams() as upstreams:
        upstreams.documents["good"] = body(site_document("", ("good1.example.org",)))
        upstreams.documents["evil"] = body(evil)
        assert len(upstreams.documents["evil"]) < 100_000
        top = _top(serve_app, {"good": upstreams.url("good"), "evil": upstreams.url("evil")})
        tree = _pulled(top, {"good", "evil"})
        sites = {s["name"]: s for s in tree["sites"]}
        assert sites["evil"]["state"] == "failing" and "'c' is listed twice" in sites["evil"]["error"]
        answers = _answers(top)
        assert max(len(answer) for answer in answers.values()) < 100_000, {f: len(a) for f, a in answers.items()}


def test_a_site_failing_on_a_later_pull_keeps_its_last_good_copy(serve_app: ServerFactory) -> None:
    good = site_document("", ("good1.example.org",))
    site = document()
    with fake_upstreams() as upstreams:
        upstreams.documents["good"] = body(good)
        upstreams.documents["site"] = body(site)
        top = _top(serve_app, {"good": upstreams.url("good"), "site": upstreams.url("site")})
        first = _pulled(top, {"good", "site"})
        assert {s["name"]: s["state"] for s in first["sites"]} == {"good": "ok", "site": "ok"}
        site["computing_elements"][0]["clusters"].append("nobody")
        upstreams.documents["site"] = body(site)
        stale = wait_for(lambda: (t := top.get("/v1/glue?format=json").json())
                         and {s["name"]: s for s in t["sites"]}["site"]["stale"] and t, timeout=20,
                         message="the site stale on its broken document")
        assert "no cluster 'nobody'" in {s["name"]: s for s in stale["sites"]}["site"]["error"]
        assert {h["unique_id"] for h in stale["hosts"]} >= set(HOSTS)  # its last good copy, still published
