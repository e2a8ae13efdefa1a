"""The host table's entries: what a host keeps in memory, and its renderings."""

from __future__ import annotations

import json

from infosvc.codec.node_xml import node_to_xml, parse_node
from infosvc.config.site import SiteConfig
from infosvc.hosts.table import HostTable

REPORT = (b"<?xml version='1.0' encoding='UTF-8'?>\n<Node><Id>h1</Id>   <Name>h1</Name><State>Idle</State>"
          b'<Extension type="Agent" name="SampleId">s-1</Extension>'
          b'<Configured><Processors>04</Processors><Memory units="MB">2048.0</Memory></Configured></Node>')


def test_an_entry_keeps_its_node_not_the_bytes_it_came_in() -> None:
    table = HostTable(SiteConfig())
    entry = table.report(parse_node(REPORT), 1714564800.0)
    assert not hasattr(entry, "__dict__") and "document" not in type(entry).__slots__
    # the document, written from the node: what the host sent once read, not byte for byte
    assert entry.document == node_to_xml(entry.node) != REPORT
    assert parse_node(entry.document) == parse_node(REPORT)
    body = json.loads(entry.json())
    assert (body["id"], body["configured"][0], body["reported_at"]) == (
        "h1", {"kind": "Processors", "value": 4}, "2024-05-01T12:00:00Z")
    assert entry.xml() == entry.document[entry.document.index(b"<Node>"):].rstrip()
