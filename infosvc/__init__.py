"""infosvc: a resource information service for clusters and grids."""

__version__ = "0.1.0"
