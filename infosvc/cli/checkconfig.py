"""`infosvc check-config FILE`: the site config read as `serve` reads it (exit 1 with the
error), then what a grid client would miss and the upstreams' files this user cannot use, as
warnings (exit 0)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infosvc.config import SiteConfig


def run(path: str) -> int:
    """`infosvc check-config FILE`: 0 and what it holds, with warnings; 1 and the error."""
    from infosvc.codec.gridformat import grid_gaps
    from infosvc.config import load_config
    from infosvc.config import ConfigError

    try:
        config = load_config(path)
    except ConfigError as exc:
        print(f"infosvc check-config: {exc}", file=sys.stderr)
        return 1
    clusters, ces = len(config.clusters), len(config.computing_elements)
    print(f"{path}: valid ({clusters} cluster{'s' * (clusters != 1)}, "
          f"{ces} computing element{'s' * (ces != 1)})")
    # valid, but not yet what a grid site publishes (docs/grid.md): said, and still exit 0
    for gap in grid_gaps(config.service.information_service_url,
                         (ce.access_control for ce in config.computing_elements)):
        print(f"{path}: warning: {gap}", file=sys.stderr)
    for gap in _upstream_gaps(config):
        print(f"{path}: warning: {gap}", file=sys.stderr)
    return 0


def _upstream_gaps(config: SiteConfig) -> list[str]:
    """The upstreams' token and CA files this user cannot use, as a pull would read them (the
    service's user may be another: under the packaged unit a transient one, which reads a file of
    root's only when handed it as a credential, deploy/infosvc.service)."""
    import ssl

    from infosvc.config import read_token

    gaps = []
    for up in config.federation.upstreams:
        try:
            read_token(up)
        except ValueError as exc:
            gaps.append(f"upstream {up.label}: {exc}")
        if up.ca_file is not None:
            try:
                ssl.create_default_context(cafile=up.ca_file)
            except (OSError, ssl.SSLError) as exc:
                gaps.append(f"upstream {up.label}: ca_file {up.ca_file} cannot be used: "
                            f"{getattr(exc, 'strerror', None) or exc}")
    return gaps
