"""A top level's upstreams in GET /metrics: the families below, appended to the site's own
exposition (infosvc/publish/prometheus.py), each upstream labelled by its name (`site`) and URL.
docs/api.md lists them."""

from __future__ import annotations

from typing import Final

from infosvc.federation.pull import Federation
from infosvc.publish.prometheus import float_text as floatToGoString

#: name, type, help: every family of a top level, in the order exposed
FAMILIES: Final = (
    ("infosvc_federation_site_up", "gauge", "1 when the site's last pull succeeded, else 0."),
    ("infosvc_federation_site_stale", "gauge",
     "1 while the site's last good copy is published after a failed pull (until delete_delay_seconds)."),
    ("infosvc_federation_site_hosts", "gauge", "Hosts of the site in the union (0 once dropped)."),
    ("infosvc_federation_site_last_success_timestamp_seconds", "gauge",
     "When the site's last good pull ended (Unix time); absent before the first."),
    ("infosvc_federation_site_pull_duration_seconds", "gauge", "How long the site's last pull took."),
    ("infosvc_federation_pulls_total", "counter", "Pulls of the site, by result (ok, failed)."),
)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def exposition(federation: Federation) -> bytes:
    """The families of FAMILIES, in Prometheus' text format."""
    lines: list[str] = []
    for name, kind, help_ in FAMILIES:
        lines.append(f"# HELP {name} {help_}\n# TYPE {name} {kind}\n")
        for site in federation.sites:
            labels = f'site="{_label(site.name)}",url="{_label(site.upstream.url)}"'
            if name == "infosvc_federation_pulls_total":
                lines.append(f'{name}{{{labels},result="ok"}} {floatToGoString(site.pulls_ok)}\n'
                             f'{name}{{{labels},result="failed"}} {floatToGoString(site.pulls_failed)}\n')
                continue
            value: float | None = {
                "infosvc_federation_site_up": float(site.error is None and site.last_success is not None),
                "infosvc_federation_site_stale": float(site.stale),
                "infosvc_federation_site_hosts": float(site.hosts),
                "infosvc_federation_site_last_success_timestamp_seconds": site.last_success,
                "infosvc_federation_site_pull_duration_seconds": site.last_duration,
            }[name]
            if value is not None:
                lines.append(f"{name}{{{labels}}} {floatToGoString(value)}\n")
    return "".join(lines).encode()
