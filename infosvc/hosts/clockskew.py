"""Clock skew between each host's agent and this server (docs/reliability.md, Faults).

A report carries the agent's SampleTime (its wall clock when it sampled, `Agent` Extension); the
server knows when the report arrived. SampleTime minus that is the agent's clock offset less the
delivery delay, and the delay is never negative: a sample kept through an outage arrives minutes
late, one on a slow network a little late. So, as NTP filters for the least-delayed exchange, the
skew shown is the largest difference among the host's reports received in the last
WINDOW_SECONDS: the freshest sample decides, and a backlog delivered after an outage (which
arrives in a burst, behind the fresh reports from before it) does not pass for a slow clock. The
price: a clock set back is seen WINDOW_SECONDS late, one set forward at once. Positive: the
agent's clock is ahead of the server's. SampleTime has whole seconds, so the figure is good to
about a second.

A host whose skew passes THRESHOLD_SECONDS (either way) gets an audit line, and another when it
is back within; no line per report.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Final

from infosvc.model.node import Node

__all__ = ["THRESHOLD_SECONDS", "WINDOW_SECONDS", "ClockSkew", "sample_time"]

#: the audit log names a host whose skew is past this, either way
THRESHOLD_SECONDS: Final = 10.0
#: the reports of a host received this long before its newest still count
WINDOW_SECONDS: Final = 600.0
#: at most this many differences kept per host (a sliding maximum keeps few: see observe)
MAX_KEPT: Final = 16

audit = logging.getLogger("infosvc.audit")


def sample_time(node: Node) -> float | None:
    """The agent's SampleTime as Unix time; None without one or when it does not read as ISO 8601
    with a time zone (an agent's own word: not a reason to refuse the report)."""
    text = node.extension("SampleTime", "Agent")
    if text is None or len(text) > 40:
        return None
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        return None
    return stamp.timestamp() if stamp.tzinfo is not None else None


class ClockSkew:
    """Each host's differences (SampleTime - received) of the last WINDOW_SECONDS, and whether it is
    past the threshold; in memory only (a restart starts each host afresh)."""

    def __init__(self, threshold: float = THRESHOLD_SECONDS, window: float = WINDOW_SECONDS) -> None:
        self.threshold = threshold
        self.window = window
        #: host -> (received, difference), the differences decreasing: the window's maximum first. A
        #: list, not a deque: it holds a few pairs (at most MAX_KEPT), and an empty deque takes 600 B
        self._seen: dict[str, list[tuple[float, float]]] = {}
        self.beyond: set[str] = set()

    def observe(self, host: str, node: Node, received: float) -> float | None:
        """The host's skew with this report counted; None while no report of it had a SampleTime."""
        stamp = sample_time(node)
        seen = self._seen.get(host)
        if stamp is None:
            return seen[0][1] if seen else None
        if seen is None:
            seen = self._seen[host] = []
        difference = stamp - received
        # A sliding maximum: a difference no larger than this newer one can never be the maximum
        # again, so it goes; what is left decreases from the front, and is short.
        while seen and seen[-1][1] <= difference:
            seen.pop()
        seen.append((received, difference))
        while seen[0][0] < received - self.window:
            del seen[0]
        if len(seen) > MAX_KEPT:  # a clock falling behind, or SampleTime's whole seconds in a burst
            del seen[1]  # the maximum stays; its successor, for when it leaves the window, is one step shorter
        skew = seen[0][1]
        if abs(skew) > self.threshold and host not in self.beyond:
            self.beyond.add(host)
            audit.warning("host %s: clock skew %+.0f s (its agent's SampleTime against this server's clock), "
                          "past %g s", host, skew, self.threshold)
        elif abs(skew) <= self.threshold and host in self.beyond:
            self.beyond.discard(host)
            audit.info("host %s: clock skew back within %g s (%+.0f s)", host, self.threshold, skew)
        return skew

    def forget(self, host: str) -> None:
        self._seen.pop(host, None)
        self.beyond.discard(host)
