"""A top level: the union of site aggregators' GLUE, pulled from each site's GET /v1/glue on an
interval (pull.py), read into the model off the event loop (infosvc/codec/glue_read.py), and
published as one GLUE tree with the site's own renderers (tree.py, documents.py); docs/grid.md."""
