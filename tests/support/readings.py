"""Two reads of the same document, compared: what may differ between them is a CE's response
times, counted from the instant of each read, and the time of a CE snapshot taken anew (two reads
a second apart differ by a second). `steady` and `steady_xml` leave out the response times,
`untimed` the snapshot's time, and nothing else."""

from __future__ import annotations

import re
from typing import Any

from lxml import etree

#: the JSON keys of a CE's response times (GLUE's WorstResponseTime and EstimatedResponseTime)
RESPONSE_TIMES = ("worst_response_time", "estimated_response_time")


def steady(document: Any) -> Any:
    """A JSON document without its CEs' response times."""
    if isinstance(document, dict):
        return {key: steady(value) for key, value in document.items() if key not in RESPONSE_TIMES}
    if isinstance(document, list):
        return [steady(value) for value in document]
    return document


def steady_xml(text: bytes, parser: etree.XMLParser | None = None) -> bytes:
    """An XML document (after its declaration), canonical, with its CEs' response times emptied."""
    root = etree.fromstring(text.split(b"?>", 1)[1] if text.startswith(b"<?xml") else text, parser)
    for element in root.iter("{*}WorstResponseTime", "{*}EstimatedResponseTime"):
        element.text = ""
    return etree.tostring(root, method="c14n")


def untimed(document: bytes) -> bytes:
    """A GLUE document (XML, or JSON as the service writes it) without its snapshot's time: a Glue
    of its own takes its own snapshot of the same figures, with the time read then."""
    return re.sub(rb'<SnapshotTime>[^<]*</SnapshotTime>|"snapshot_time":"[^"]*"', b"", document)
