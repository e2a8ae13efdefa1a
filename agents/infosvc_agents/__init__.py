"""Host agents that describe a machine as an SSS Node object."""
