"""The node life cycle of CCS: Pending, Ready, Paused, Unreachable.

A host's state is a pure function of what is known about it and of the time: whether an admin
approved it (only asked for when the config requires approval), whether an admin paused it,
and how long ago it last reported, against the heartbeat interval times the heartbeats it may
miss. An unapproved host stays Pending whatever it does; a host that stopped reporting is
Unreachable even when paused (and Paused again once it reports).
"""

from __future__ import annotations

from enum import StrEnum


class NodeState(StrEnum):
    PENDING = "Pending"
    READY = "Ready"
    PAUSED = "Paused"
    UNREACHABLE = "Unreachable"


def node_state(*, approved: bool, paused: bool, last_report: float, now: float,
               heartbeat_seconds: float, missed_heartbeats: int) -> NodeState:
    if not approved:
        return NodeState.PENDING
    if now - last_report > heartbeat_seconds * missed_heartbeats:
        return NodeState.UNREACHABLE
    if paused:
        return NodeState.PAUSED
    return NodeState.READY


def unreachable_at(last_report: float, heartbeat_seconds: float, missed_heartbeats: int) -> float:
    """The moment a host that last reported at `last_report` becomes Unreachable."""
    return last_report + heartbeat_seconds * missed_heartbeats
