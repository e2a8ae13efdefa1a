"""The site config (TOML), read and checked: what the service, its hosts and its queue are told.
This is the package's face: other packages import from here, not from its modules."""

from infosvc.config.addresses import ANY_ORIGIN, listen_address
from infosvc.config.federation import LOCAL_SITE, FederationConfig, Upstream, read_token, with_upstreams
from infosvc.config.lrms import LrmsConfig, owner_map
from infosvc.config.resources import LicensePools, cluster_licenses, resources_of
from infosvc.config.site import (
    ComputingElementConfig, ReportsConfig, ServiceConfig, SiteConfig, load_config, parse_config,
)
from infosvc.config.table import ConfigError

__all__ = ["ANY_ORIGIN", "LOCAL_SITE", "ComputingElementConfig", "ConfigError", "FederationConfig", "LicensePools", "LrmsConfig",
           "ReportsConfig", "ServiceConfig", "SiteConfig", "Upstream", "cluster_licenses", "listen_address",
           "load_config", "owner_map", "parse_config", "read_token", "resources_of", "with_upstreams"]
