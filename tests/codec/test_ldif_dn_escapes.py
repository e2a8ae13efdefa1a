"""DN values as the LDIF writes them (infosvc/codec/ldif.py `dn_value`, RFC 4514) and the order of the
change records bdii-update feeds ldapmodify (`changes`), for ids only an upstream site would send:
a CE id that starts or ends in a tab, newline or carriage return, a subcluster id that ends in a
backslash. Each is loaded into Debian's slapd (tests/support/slapd.py), which is what refused them.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import pytest
from hypothesis import given, settings, strategies as st

from infosvc.codec import ldif
from infosvc.codec.gridformat import GridOptions
from infosvc.federation.tree import SiteTree
from infosvc.publish.glue import Glue
from support.gridsite import CE_ALL, SITE, site_rollup
from support.slapd import SUFFIXES, Slapd, running, suffix_of

#: characters that tell a DN's escapes apart, white space at an edge, one beyond ASCII, a control beyond it
AWKWARD = st.text(alphabet=st.sampled_from(" \t\n\r\\,+=#0a\x00\x7f\x85\u00e9\u2028"), min_size=1, max_size=8)

#: ids whose white space at an edge slapd read as the space around a DN's value, not the value
EDGY = ["a\n", "b\t", "c\r", "\nd", "\te", "f\n\n", "\rg\r", "h\x0b", "i\x7f", "j\x1b", " k\n", "\\l\n"]


@pytest.fixture
def slapd(tmp_path: Path) -> Iterator[Slapd]:
    with running(tmp_path / "slapd") as server:
        yield server


def site_tree(ces: Sequence[str] = (), subs: Sequence[str] = ()) -> SiteTree:
    """The grid test site as a top level holds another site: its CE that serves every cluster under
    each of the ids `ces` in place of its CEs, its first subclusters named `subs`."""
    base = SiteTree.of_tree(site_rollup())
    every = [s for c in base.clusters() for s in base.subclusters_of(c.unique_id)]
    pairs = [(replace(sub, unique_id=subs[i]) if i < len(subs) else sub, list(base.hosts_of(sub.unique_id)))
             for i, sub in enumerate(every)]
    template = next(ce for ce in base.computing_elements() if ce.unique_id == CE_ALL)
    own = [replace(template, unique_id=ident) for ident in ces] or list(base.computing_elements())
    return SiteTree(base.clusters(), pairs, own, base.information_service_url)


def glue13(tree: SiteTree) -> str:
    return Glue(tree).rendering("ldif-1.3", GridOptions(site=SITE, base=True)).tree().decode()


def values(entries: Mapping[str, ldif.Attributes], attribute: str) -> list[str]:
    return sorted(v for attrs in entries.values() for n, v in attrs if n.lower() == attribute.lower())


# --- dn_value -------------------------------------------------------------------------------

@pytest.mark.parametrize("char", [chr(c) for c in [*range(0x20), 0x7f, *range(0x80, 0xa0)]])
def test_a_non_printable_character_is_hex_escaped(char: str) -> None:
    pairs = "".join(f"\\{byte:02x}" for byte in char.encode())  # RFC 4514's hex pairs are UTF-8's bytes
    assert [ldif.dn_value(t) for t in (f"{char}x", f"x{char}", f"x{char}y")] == [
        f"{pairs}x", f"x{pairs}", f"x{pairs}y"]


def unescaped(value: str) -> str:
    """A DN value as slapd reads it: unescaped white space (space, tab, newline, carriage return) at
    either end dropped as the space around the value, escapes and hex pairs (UTF-8's bytes) undone."""
    tokens = [t for t in re.split(r"(\\[0-9a-fA-F]{2}|\\.)", value, flags=re.S) if t]
    if tokens and not tokens[0].startswith("\\"):
        tokens[0] = tokens[0].lstrip(" \t\n\r")
    if tokens and not tokens[-1].startswith("\\"):
        tokens[-1] = tokens[-1].rstrip(" \t\n\r")
    out, run = [], bytearray()
    for token in tokens:
        if re.fullmatch(r"\\[0-9a-fA-F]{2}", token):
            run.append(int(token[1:], 16))
            continue
        out.append(run.decode("utf-8", "surrogatepass") + (token[1:] if token.startswith("\\") else token))
        run.clear()
    return "".join(out) + run.decode("utf-8", "surrogatepass")


@settings(max_examples=500)
@given(AWKWARD)
def test_a_dn_value_holds_only_printable_characters_and_reads_back(text: str) -> None:
    escaped = ldif.dn_value(text)
    assert escaped.isprintable() and unescaped(escaped) == text


def test_printable_text_is_escaped_as_before() -> None:
    # the ids a site publishes keep their DNs
    assert ldif.dn_value("ce.example.org:2119/jobmanager-infosvc-all") == "ce.example.org:2119/jobmanager-infosvc-all"
    assert ldif.dn_value("beta=2") == "beta\\=2" and ldif.dn_value("\u00e9t\u00e9") == "\u00e9t\u00e9"
    assert ldif.dn_value(" #a, b\\ ") == "\\ #a\\, b\\\\\\ " and ldif.dn_value("#x") == "\\#x"


def test_a_ce_id_with_white_space_at_an_edge_is_held_with_its_views(slapd: Slapd) -> None:
    # slapd took the unescaped newline at the end of `a\n` as white space around the RDN's value,
    # found it unlike the entry's GlueCEUniqueID and refused the CE (Naming violation), losing its
    # VO views with it
    text = glue13(site_tree(ces=EDGY))
    slapd.add(text)
    held = slapd.search("mds-vo-name=resource,o=grid", "(objectClass=GlueCE)", "GlueCEUniqueID")
    assert values(held, "GlueCEUniqueID") == sorted(ldif.ia5(i) for i in EDGY)
    views = slapd.search("mds-vo-name=resource,o=grid", "(objectClass=GlueVOView)", "GlueChunkKey")
    assert values(views, "GlueChunkKey") == sorted(f"GlueCEUniqueID={ldif.ia5(i)}" for i in EDGY for _ in range(2))


# --- the order of changes -------------------------------------------------------------------

#: values whose DN ends in what reads like an escaped comma to one who counts unescaped commas
#: without reading the escapes before them
AFTER_ESCAPES = ["s\\", "s\\\\", "s\\,", "s\\\n", "s\n", "s\\2c", "s,\\"]


def test_every_entry_is_added_after_its_parent() -> None:
    new: dict[str, ldif.Attributes] = {"o=grid": [("o", "grid")]}
    for n in range(20):  # the order of one depth is a set's: each pair had even odds
        for value in AFTER_ESCAPES:
            parent = f"cn={ldif.dn_value(f'c{n}{value}')},o=grid"
            new[parent] = [("cn", f"c{n}{value}")]
            new[f"cn={ldif.dn_value(f'sub{n}{value}')},{parent}"] = [("cn", f"sub{n}{value}")]
    order = list(ldif.parse(ldif.changes({}, new)))  # the records' DNs in order (some are base64)
    assert sorted(order) == sorted(new)
    for dn in order:
        for above in (p for p in order if dn.endswith("," + p)):
            assert order.index(above) < order.index(dn), (above, dn)


@settings(max_examples=300)
@given(st.lists(AWKWARD, min_size=1, max_size=4))
def test_a_parent_is_added_before_and_deleted_after_its_children(values: list[str]) -> None:
    chain = ["o=grid"]
    for value in values:
        chain.append(f"cn={ldif.dn_value(value)},{chain[-1]}")
    entries = {dn: [("description", "x")] for dn in reversed(chain)}
    assert list(ldif.parse(ldif.changes({}, entries))) == chain
    assert list(ldif.parse(ldif.changes(entries, {}))) == chain[::-1]


def test_a_subcluster_id_ending_in_a_backslash_is_added_after_its_cluster(slapd: Slapd) -> None:
    # as bdii-update applies the first run of a resource BDII: ldapmodify of the changes from
    # nothing, which stops at an entry whose parent is not there yet ("No such object")
    entries = ldif.parse(glue13(site_tree(subs=["sub0\\", "sub1\\", "sub2\\", "sub3\\"])))
    for suffix in SUFFIXES:
        part = {dn: attrs for dn, attrs in entries.items() if suffix_of(dn) == suffix}
        slapd.modify(suffix, ldif.changes({}, part))
    held = slapd.search("mds-vo-name=resource,o=grid", "(objectClass=GlueSubCluster)", "GlueSubClusterUniqueID")
    assert values(held, "GlueSubClusterUniqueID") == sorted(ldif.ia5(f"sub{i}\\") for i in range(4))
