"""This host's metrics for Prometheus, from the agent's latest sample (`infosvc-agent --metrics-listen`).

Named as node_exporter names them where they mean the same thing (node_cpu_seconds_total{cpu,mode},
node_load1, node_memory_*_bytes, node_filesystem_*{device,fstype,mountpoint}, node_network_*{device},
node_uname_info, node_os_info), with its types and label names, so dashboards
and alerts written for node_exporter work on them; what node_exporter has no name for is
`infosvc_node_*` (the host: its GPUs too, in node_exporter's style of names and base units, bytes
and ratios, where DCGM exporter has MiB and percent) or `infosvc_agent_*` (the agent itself). Each metric's type, help and
labels are declared once, in METRICS, which docs/node-mapping.md lists.

The values are those of the newest sample, not read at scrape time: a scrape costs no /proc reads
and sees exactly what the agent last sent to the aggregator. Served by prometheus_client's own
HTTP server in a thread, so the agent stays free of any web framework: a thread a connection, each
connection's exchange within METRICS_TIMEOUT seconds and at most METRICS_CONNECTIONS of them at once
(clients that open connections and never finish a request cannot take the agent's descriptors), each
request's line and headers read up to METRICS_HEAD_BYTES (nor its memory).
"""

from __future__ import annotations

import http.client
import io
import socket
import sys
import threading
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Final, Iterator, cast
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app
from prometheus_client.registry import Collector

from infosvc_agents.collectors import CollectorRun
from infosvc_agents.host_node import xml_safe
from infosvc_agents.http1 import Deadline, DeadlineSocket

if TYPE_CHECKING:
    from infosvc_agents.push import PushLoop


@dataclass(frozen=True, slots=True)
class MetricSpec:
    type: str  # gauge or counter
    labels: tuple[str, ...]
    help: str


FS: Final = ("device", "fstype", "mountpoint")
#: node_exporter's modes of node_cpu_seconds_total, in /proc/stat's order; guest time, which the kernel
#: also counts in user and nice, is node_cpu_guest_seconds_total{mode="user"|"nice"} instead.
CPU_MODES: Final = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
GUEST_MODES: Final = ("user", "nice")
#: os-release's keys as node_os_info's labels, in node_exporter's order.
#: infosvc_node_gpu_info's labels: gpu is the PCI address, as every infosvc_node_gpu_* has it.
GPU_INFO: Final = ("gpu", "vendor", "model", "uuid", "driver", "index")
OS_RELEASE_LABELS: Final = ("build_id", "id", "id_like", "image_id", "image_version", "name", "pretty_name",
                            "variant", "variant_id", "version", "version_codename", "version_id")

METRICS: Final[dict[str, MetricSpec]] = {
    # node_exporter's names
    "node_cpu_seconds_total": MetricSpec("counter", ("cpu", "mode"), "Seconds the CPUs spent in each mode."),
    "node_cpu_guest_seconds_total": MetricSpec("counter", ("cpu", "mode"),
                                               "Seconds the CPUs spent in guests (VMs) for each mode."),
    "node_load1": MetricSpec("gauge", (), "1m load average."),
    "node_load5": MetricSpec("gauge", (), "5m load average."),
    "node_load15": MetricSpec("gauge", (), "15m load average."),
    "node_memory_MemTotal_bytes": MetricSpec("gauge", (), "Memory information field MemTotal_bytes."),
    "node_memory_MemAvailable_bytes": MetricSpec("gauge", (), "Memory information field MemAvailable_bytes."),
    "node_memory_SwapTotal_bytes": MetricSpec("gauge", (), "Memory information field SwapTotal_bytes."),
    "node_memory_SwapFree_bytes": MetricSpec("gauge", (), "Memory information field SwapFree_bytes."),
    "node_filesystem_size_bytes": MetricSpec("gauge", FS, "Filesystem size in bytes."),
    "node_filesystem_free_bytes": MetricSpec("gauge", FS, "Filesystem free space in bytes."),
    "node_filesystem_avail_bytes": MetricSpec("gauge", FS, "Filesystem space available to non-root users in bytes."),
    "node_filesystem_readonly": MetricSpec("gauge", FS, "Filesystem read-only status."),
    "node_network_receive_bytes_total": MetricSpec("counter", ("device",), "Network device statistic receive_bytes."),
    "node_network_transmit_bytes_total": MetricSpec("counter", ("device",), "Network device statistic transmit_bytes."),
    "node_network_receive_packets_total": MetricSpec("counter", ("device",),
                                                     "Network device statistic receive_packets."),
    "node_network_transmit_packets_total": MetricSpec("counter", ("device",),
                                                      "Network device statistic transmit_packets."),
    "node_network_mtu_bytes": MetricSpec("gauge", ("device",), "Network device property: mtu_bytes"),
    "node_network_speed_bytes": MetricSpec("gauge", ("device",), "Network device property: speed_bytes"),
    "node_network_up": MetricSpec("gauge", ("device",), "Value is 1 if operstate is 'up', 0 otherwise."),
    "node_uname_info": MetricSpec("gauge", ("domainname", "machine", "nodename", "release", "sysname", "version"),
                                  "Labeled system information as provided by the uname system call."),
    "node_os_info": MetricSpec("gauge", OS_RELEASE_LABELS,
                               f"A metric with a constant '1' value labeled by {', '.join(OS_RELEASE_LABELS)}."),
    # no node_exporter name: the host as the SSS Node has it
    "infosvc_node_processors": MetricSpec("gauge", (), "Logical CPUs online (SSS Configured Processors)."),
    "infosvc_node_processors_busy": MetricSpec(
        "gauge", (), "Busy logical CPUs averaged over the sample's span (SSS Utilized Processors, unrounded)."),
    "infosvc_node_gpus": MetricSpec("gauge", ("model", "state"),
                                    "GPUs (or MIG instances) a job can be given, by model and state "
                                    "(idle, busy, unknown, failed, excluded, no driver)."),
    "infosvc_node_gpu_info": MetricSpec("gauge", GPU_INFO, "A metric with a constant '1' value labeled by "
                                                           f"{', '.join(GPU_INFO)}."),
    "infosvc_node_gpu_up": MetricSpec("gauge", ("gpu",), "1 if the GPU's probe succeeded in the newest sample, 0 if not."),
    "infosvc_node_gpu_memory_total_bytes": MetricSpec("gauge", ("gpu",), "GPU memory in bytes."),
    "infosvc_node_gpu_memory_used_bytes": MetricSpec("gauge", ("gpu",), "GPU memory in use in bytes."),
    "infosvc_node_gpu_utilization_ratio": MetricSpec("gauge", ("gpu",),
                                                     "Fraction of the driver's last sample period the GPU was busy."),
    "infosvc_node_gpu_processes": MetricSpec("gauge", ("gpu",), "Compute processes running on the GPU."),
    # the agent itself
    "infosvc_agent_sample_timestamp_seconds": MetricSpec("gauge", (), "When the newest sample was taken (Unix time)."),
    "infosvc_agent_collector_success": MetricSpec("gauge", ("collector",),
                                                  "1 if the collector succeeded in the newest sample, 0 if it failed."),
    "infosvc_agent_collector_duration_seconds": MetricSpec("gauge", ("collector",),
                                                           "How long the collector took in the newest sample."),
    "infosvc_agent_samples_taken_total": MetricSpec("counter", (), "Samples taken."),
    "infosvc_agent_samples_delivered_total": MetricSpec("counter", (), "Samples the aggregator took."),
    "infosvc_agent_samples_refused_total": MetricSpec("counter", (), "Samples the aggregator refused (dropped)."),
    "infosvc_agent_samples_dropped_total": MetricSpec(
        "counter", (), "Kept samples dropped, oldest first, while the aggregator was unreachable."),
    "infosvc_agent_samples_kept": MetricSpec("gauge", (), "Samples waiting to be delivered."),
}


class _Families:
    """The families of one scrape, made on first use from METRICS."""

    def __init__(self) -> None:
        self.made: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}

    def add(self, name: str, value: float, *labels: str) -> None:
        family = self.made.get(name)
        if family is None:
            spec = METRICS[name]
            if spec.type == "counter":
                family = CounterMetricFamily(name, spec.help, labels=spec.labels)
            else:
                family = GaugeMetricFamily(name, spec.help, labels=spec.labels)
            self.made[name] = family
        # The host's names (a mount point, a device, an interface) may hold a byte that is not
        # UTF-8, which the exposition cannot encode: written as the Node writes them (\xfc).
        family.add_metric([xml_safe(label) for label in labels], value)


class NodeMetrics(Collector):
    """A prometheus_client collector over the newest collector runs that `runs()` gives."""

    def __init__(self, runs: Callable[[], dict[str, CollectorRun]], *, sampled_at: Callable[[], float | None],
                 loop: PushLoop | None = None) -> None:
        self.runs = runs
        self.sampled_at = sampled_at
        self.loop = loop

    def collect(self) -> Iterator[Metric]:
        out = _Families()
        runs = self.runs()  # one reference: the agent replaces the whole dict at each sample
        facts: dict[str, Any] = {name: run.facts for name, run in runs.items() if run.ok}
        if (processors := facts.get("processors")) is not None:
            for cpu in processors.times:
                for mode, seconds in zip(CPU_MODES, cpu.seconds):
                    out.add("node_cpu_seconds_total", seconds, cpu.cpu, mode)
                for mode, seconds in zip(GUEST_MODES, cpu.seconds[len(CPU_MODES):]):
                    out.add("node_cpu_guest_seconds_total", seconds, cpu.cpu, mode)
        if (load := facts.get("load")) is not None:
            out.add("node_load1", load.one)
            out.add("node_load5", load.five)
            out.add("node_load15", load.fifteen)
        if (memory := facts.get("memory")) is not None:
            out.add("node_memory_MemTotal_bytes", memory.total)
            out.add("node_memory_MemAvailable_bytes", memory.available)
            out.add("node_memory_SwapTotal_bytes", memory.swap_total)
            out.add("node_memory_SwapFree_bytes", memory.swap_free)
        for fs in facts.get("filesystems") or ():
            labels = (fs.device, fs.fstype, fs.mount_point)
            out.add("node_filesystem_size_bytes", fs.size, *labels)
            out.add("node_filesystem_free_bytes", fs.free, *labels)
            out.add("node_filesystem_avail_bytes", fs.available, *labels)
            out.add("node_filesystem_readonly", 1.0 if fs.read_only else 0.0, *labels)
        for nic in facts.get("network") or ():
            out.add("node_network_receive_bytes_total", nic.bytes_in, nic.name)
            out.add("node_network_transmit_bytes_total", nic.bytes_out, nic.name)
            out.add("node_network_receive_packets_total", nic.packets_in, nic.name)
            out.add("node_network_transmit_packets_total", nic.packets_out, nic.name)
            if nic.mtu is not None:
                out.add("node_network_mtu_bytes", nic.mtu, nic.name)
            if nic.speed_mbps:
                out.add("node_network_speed_bytes", nic.speed_mbps * 125_000, nic.name)  # Mbit/s -> bytes/s
            # node_exporter's meaning, operstate alone: lo's "unknown" is 0 here though the Node has it up
            out.add("node_network_up", 1.0 if nic.operstate == "up" else 0.0, nic.name)
        if (system := facts.get("system")) is not None:
            out.add("node_uname_info", 1.0, system.domainname or "", system.machine or "", system.hostname,
                    system.kernel_release, system.sysname, system.kernel_version)
            if system.release_fields:  # as node_exporter: every label, empty when os-release lacks its key
                out.add("node_os_info", 1.0, *(system.release_fields.get(key.upper(), "") for key in OS_RELEASE_LABELS))
        if processors is not None:
            out.add("infosvc_node_processors", processors.info.logical)
            out.add("infosvc_node_processors_busy", min(max(processors.usage.busy, 0.0), float(processors.info.logical)))
        if gpus := facts.get("gpus"):
            _gpu_metrics(out, gpus)
        if (stamp := self.sampled_at()) is not None:
            out.add("infosvc_agent_sample_timestamp_seconds", stamp)
        for name, run in sorted(runs.items()):
            out.add("infosvc_agent_collector_success", 1.0 if run.ok else 0.0, name)
            out.add("infosvc_agent_collector_duration_seconds", run.seconds, name)
        if self.loop is not None:
            out.add("infosvc_agent_samples_taken_total", self.loop.taken)
            out.add("infosvc_agent_samples_delivered_total", self.loop.delivered)
            out.add("infosvc_agent_samples_refused_total", self.loop.refused)
            out.add("infosvc_agent_samples_dropped_total", self.loop.dropped)
            out.add("infosvc_agent_samples_kept", len(self.loop.kept))
        yield from out.made.values()


def _gpu_metrics(out: _Families, samples: Any) -> None:
    units: dict[tuple[str, str], int] = {}
    for sample in samples:
        gpu, use = sample.gpu, sample.use
        for unit in sample.units():
            units[unit] = units.get(unit, 0) + 1
        bus_id = gpu.bus_id
        out.add("infosvc_node_gpu_info", 1.0, bus_id, gpu.vendor, gpu.model, gpu.uuid or "", gpu.driver or "",
                "" if gpu.index is None else str(gpu.index))
        out.add("infosvc_node_gpu_up", 0.0 if sample.failure else 1.0, bus_id)
        if gpu.memory_total is not None:
            out.add("infosvc_node_gpu_memory_total_bytes", gpu.memory_total, bus_id)
        if use.memory_used is not None:
            out.add("infosvc_node_gpu_memory_used_bytes", use.memory_used, bus_id)
        if use.utilization is not None:
            out.add("infosvc_node_gpu_utilization_ratio", use.utilization / 100.0, bus_id)
        if use.processes is not None:
            out.add("infosvc_node_gpu_processes", use.processes, bus_id)
    for (model, state), count in sorted(units.items()):
        out.add("infosvc_node_gpus", count, model, state)


def split_listen(listen: str) -> tuple[str, int]:
    """HOST:PORT ([::1]:9100 for IPv6); ValueError otherwise."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--metrics-listen must be HOST:PORT, not {listen!r}")
    return host.strip("[]"), int(port)


#: each connection's whole exchange (its request read, the answer written) ends within this many seconds
METRICS_TIMEOUT: Final = 10.0
#: at most this many connections are served at once; one more cuts the oldest
METRICS_CONNECTIONS: Final = 16


#: a request's line and headers, the blank line ending them included, are read up to this many
#: bytes; past it the answer is 431 (414 for the request line alone) and the connection is closed.
#: http.server's own limits are 100 header lines of 64 KiB each, kept until the request ends: 16
#: connections that never finished theirs held 100 MB of the agent's memory until their deadline.
#: A scrape's head (Prometheus') is a few hundred bytes.
METRICS_HEAD_BYTES: Final = 8 * 1024


class _Head(io.BufferedIOBase):
    """The connection's rfile while a request's head is read: lines within what is left of `limit`
    bytes, and http.client.LineTooLong past it (which http.server's parse_request answers with 431,
    Request Header Fields Too Large). Never reads more than one byte past the limit."""

    def __init__(self, rfile: io.BufferedIOBase, limit: int) -> None:
        super().__init__()
        self.rfile = rfile
        self.left = limit

    def readline(self, size: int | None = -1, /) -> bytes:
        want = self.left + 1 if size is None or size < 0 else min(size, self.left + 1)
        line = self.rfile.readline(want)
        self.left -= len(line)
        if self.left < 0:
            raise http.client.LineTooLong(f"a request's line and headers past {METRICS_HEAD_BYTES} bytes")
        return line


class _QuietHandler(WSGIRequestHandler):
    """One request a connection, as wsgiref serves them, its head within METRICS_HEAD_BYTES, and no
    log line for each."""

    def handle(self) -> None:
        # wsgiref's handle, the request line and the headers read through _Head: its own reads up to
        # 64 KiB of request line, and parse_request up to 100 header lines of 64 KiB.
        rfile = self.rfile
        head = _Head(rfile, METRICS_HEAD_BYTES)
        self.rfile = head
        try:
            try:
                self.raw_requestline = head.readline()
            except http.client.LineTooLong:
                self.requestline = self.request_version = self.command = ""
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
                return
            if not self.parse_request():  # it answered (431 past the limit)
                return
        finally:
            self.rfile = rfile  # the body, if any, is the application's to read (/metrics reads none)
        # the files as wsgiref passes them (typeshed has them BufferedIOBase here, IO[bytes] there)
        handler = ServerHandler(cast(BinaryIO, rfile), cast(BinaryIO, self.wfile), self.get_stderr(),
                                self.get_environ(), multithread=False)
        handler.request_handler = self  # type: ignore[attr-defined]  # as wsgiref's own handle: for its log
        app = cast(WSGIServer, self.server).get_app()
        assert app is not None  # serve_metrics sets it before serving
        handler.run(app)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class MetricsServer(ThreadingWSGIServer):
    """prometheus_client's server (a thread a connection), each connection within a deadline and
    at most `max_connections` of them at once: without either, clients that open connections and
    never finish a request held a thread and a descriptor each, until the agent had none left to
    push with. One connection more cuts the oldest served (its thread ends at once, its descriptor
    with it) rather than being refused: a scrape takes milliseconds, so the oldest is all but
    always a client that sends nothing, and a scrape is served while such clients hold every slot."""

    def __init__(self, address: tuple[str, int], handler: type[WSGIRequestHandler], *, timeout: float,
                 max_connections: int) -> None:
        self.exchange_seconds = timeout
        self.max_connections = max_connections
        self._lock = threading.Lock()
        self._served: dict[socket.socket, None] = {}  # in the order accepted: the oldest first
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = self.socket.accept()
        # Every read and write of the exchange within what is left of its deadline (a client that
        # sends a byte at a time, each in time, is cut all the same).
        sock = DeadlineSocket(conn.family, conn.type, conn.proto, fileno=conn.detach())
        sock.deadline = Deadline(self.exchange_seconds, self.exchange_seconds)
        sock.deadline.start()
        return sock, address

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            while len(self._served) >= self.max_connections:
                oldest = next(iter(self._served))
                del self._served[oldest]
                try:
                    oldest.shutdown(socket.SHUT_RDWR)  # its thread's read or write fails; it closes it
                except OSError:
                    pass  # ended meanwhile
            self._served[request] = None
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._forget(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._forget(request)

    def _forget(self, request: Any) -> None:
        with self._lock:
            self._served.pop(request, None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # a client cut at its deadline, or gone: nothing to say
            return
        super().handle_error(request, client_address)


def serve_metrics(listen: str, collector: Collector, *, timeout: float = METRICS_TIMEOUT,
                  max_connections: int = METRICS_CONNECTIONS) -> WSGIServer:
    """Serve /metrics on `listen` in a daemon thread, with a registry of `collector` alone; OSError if the
    address cannot be bound. Each connection within `timeout` seconds, `max_connections` at once."""
    host, port = split_listen(listen)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    # The address's own family (an IPv6 address is not bound as AF_INET), as prometheus_client finds it.
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]

    class Server(MetricsServer):
        address_family = family

    server = Server((str(address[0]), port), _QuietHandler, timeout=timeout, max_connections=max_connections)
    server.set_app(make_wsgi_app(registry))
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
