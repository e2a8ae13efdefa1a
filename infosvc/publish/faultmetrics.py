"""The metrics of faults in the agents' path (docs/reliability.md, Faults): each host's clock skew
against the server, and the samples agents delivered again (an answer lost on the way), which
were acknowledged without being stored twice.

A prometheus_client collector of its own, registered beside `prometheus.Metrics`' in the app's
registry (web/app.py): `prometheus.METRICS` declares the families its own collector yields.
docs/api.md lists these with the others."""

from __future__ import annotations

from typing import Final, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from infosvc.hosts import Aggregator

__all__ = ["FAMILIES", "FaultCollector"]

CLOCK_SKEW: Final = "infosvc_host_clock_skew_seconds"
REPEATED: Final = "infosvc_reports_repeated_total"
#: name -> help, in the order exposed
FAMILIES: Final = {
    CLOCK_SKEW: "The host agent's clock less the server's, in seconds (from its reports' SampleTime; positive: "
                "ahead); absent until a report carries a SampleTime.",
    REPEATED: "Samples an agent delivered again (by their SampleId) and that were acknowledged without a second row.",
}


class FaultCollector:
    def __init__(self, aggregator: Aggregator) -> None:
        self.aggregator = aggregator

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        gauge, counter = self._families()
        for entry in self.aggregator.table:
            if entry.clock_skew is not None:
                gauge.add_metric([entry.id], entry.clock_skew)
        counter.add_metric([], self.aggregator.repeated)
        return [gauge, counter]

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, CounterMetricFamily]:
        return (GaugeMetricFamily(CLOCK_SKEW, FAMILIES[CLOCK_SKEW], labels=["node"]),
                CounterMetricFamily(REPEATED.removesuffix("_total"), FAMILIES[REPEATED]))
