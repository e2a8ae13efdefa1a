"""Every metric of GET /metrics, declared once: its name, type, labels and help text, in the order
exposed (infosvc/publish/prometheus.py renders them; docs/api.md lists them)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["METRICS", "MetricSpec"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str  # as exposed, counters with their _total
    type: str  # gauge, counter, histogram
    labels: tuple[str, ...]
    help: str


def _spec(name: str, type_: str, labels: str, help_: str) -> MetricSpec:
    return MetricSpec(name, type_, tuple(labels.split()), help_)


#: Every metric of GET /metrics, in the order exposed.
METRICS: tuple[MetricSpec, ...] = (
    _spec("infosvc_host_info", "gauge", "node cluster subcluster",
          "Always 1: the host's cluster and subcluster, to join per-host metrics with."),
    _spec("infosvc_host_state", "gauge", "node state",
          "1 for the host's current life-cycle state (Pending, Ready, Paused, Unreachable), 0 for the others."),
    _spec("infosvc_host_processors_configured", "gauge", "node", "Processors the host has (Configured)."),
    _spec("infosvc_host_processors_available", "gauge", "node", "Processors free for work per the host's agent (Available)."),
    _spec("infosvc_host_processors_utilized", "gauge", "node", "Processors in use, averaged (Utilized)."),
    _spec("infosvc_host_memory_configured_bytes", "gauge", "node", "Main memory of the host (Configured), in bytes."),
    _spec("infosvc_host_memory_available_bytes", "gauge", "node", "Main memory available (Available), in bytes."),
    _spec("infosvc_host_memory_utilized_bytes", "gauge", "node", "Main memory in use (Utilized), in bytes."),
    _spec("infosvc_host_load1", "gauge", "node", "Load average over 1 minute, as the host reported it."),
    _spec("infosvc_host_load5", "gauge", "node", "Load average over 5 minutes, as the host reported it."),
    _spec("infosvc_host_load15", "gauge", "node", "Load average over 15 minutes, as the host reported it."),
    _spec("infosvc_host_gpus", "gauge", "node model",
          "GPUs (or MIG instances) of the model a job can be given (Configured)."),
    _spec("infosvc_host_gpus_available", "gauge", "node model", "GPUs of the model not in use (Available)."),
    _spec("infosvc_host_gpus_utilized", "gauge", "node model", "GPUs of the model busy (Utilized)."),
    _spec("infosvc_host_gpu_memory_bytes", "gauge", "node gpu",
          "Memory of the GPU at PCI address gpu, in bytes (DCGM_FI_DEV_FB_TOTAL, in MiB there)."),
    _spec("infosvc_host_gpu_memory_used_bytes", "gauge", "node gpu",
          "Memory of the GPU in use, in bytes (DCGM_FI_DEV_FB_USED, in MiB there)."),
    _spec("infosvc_host_gpu_utilization_ratio", "gauge", "node gpu",
          "Share of the last sample period the GPU was busy, 0 to 1 (DCGM_FI_DEV_GPU_UTIL, in percent there)."),
    _spec("infosvc_host_report_age_seconds", "gauge", "node", "Seconds since the host's last accepted report."),
    _spec("infosvc_subcluster_hosts", "gauge", "cluster subcluster state", "Hosts of the subcluster by life-cycle state."),
    _spec("infosvc_subcluster_cpus", "gauge", "cluster subcluster",
          "CPUs of the subcluster's live (Ready or Paused) hosts: GLUE TotalCPUs."),
    _spec("infosvc_subcluster_free_cpus", "gauge", "cluster subcluster", "CPUs free on the subcluster's Ready hosts."),
    _spec("infosvc_subcluster_memory_available_bytes", "gauge", "cluster subcluster",
          "Main memory available on the subcluster's live hosts, in bytes."),
    _spec("infosvc_cluster_hosts", "gauge", "cluster state", "Hosts of the cluster by life-cycle state."),
    _spec("infosvc_cluster_cpus", "gauge", "cluster", "CPUs of the cluster's live hosts."),
    _spec("infosvc_cluster_free_cpus", "gauge", "cluster", "CPUs free on the cluster's Ready hosts."),
    _spec("infosvc_computing_element_hosts", "gauge", "computing_element state",
          "Hosts of the computing element's clusters by life-cycle state."),
    _spec("infosvc_computing_element_cpus", "gauge", "computing_element", "GLUE TotalCPUs of the computing element."),
    _spec("infosvc_computing_element_free_cpus", "gauge", "computing_element", "GLUE FreeCPUs of the computing element."),
    _spec("infosvc_computing_element_running_jobs", "gauge", "computing_element",
          "GLUE RunningJobs of the computing element: jobs of the queue running on its hosts."),
    _spec("infosvc_computing_element_waiting_jobs", "gauge", "computing_element",
          "GLUE WaitingJobs of the computing element: queued jobs that may run on its hosts."),
    _spec("infosvc_computing_element_estimated_response_time_seconds", "gauge", "computing_element",
          "GLUE EstimatedResponseTime of the computing element: when a new job would start, from the plan."),
    _spec("infosvc_computing_element_worst_response_time_seconds", "gauge", "computing_element",
          "GLUE WorstResponseTime of the computing element: the same with every job running to its limit."),
    _spec("infosvc_reports_accepted_total", "counter", "", "Node reports accepted and stored."),
    _spec("infosvc_reports_rejected_total", "counter", "reason", "Node reports refused, by reason."),
    _spec("infosvc_report_ingest_duration_seconds", "histogram", "",
          "Time from a report's arrival to its answer, for accepted reports (body read, validation, durable commit)."),
    _spec("infosvc_store_size_bytes", "gauge", "", "Size of the SQLite store on disk (database and WAL file), in bytes."),
    _spec("infosvc_oldest_live_report_age_seconds", "gauge", "",
          "Age of the oldest last report among live (Ready or Paused) hosts; absent when there are none."),
    _spec("infosvc_metrics_collect_duration_seconds", "gauge", "", "Time taken to build this scrape's metrics."),
    _spec("infosvc_metrics_collect_success", "gauge", "", "1 when this scrape's metrics were built, 0 when that failed (see the log)."),
)
