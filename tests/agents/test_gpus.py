"""The GPU collector on fixture trees of real machines' files (an 8-GPU NVIDIA node with and without
MIG, an AMD node, a node with none), through the SSS Node document, the metrics and the command;
and its NVML layer over a minimal stand-in for pynvml (nvidia-ml-py is an optional extra)."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from infosvc.codec.node_xml import node_to_xml, parse_node
from infosvc.model.node import Node
from infosvc_agents.collectors import CollectorRegistry, CollectorRun, default_collectors
from infosvc_agents.collectors.gpus import GpuCollector, GpuSample, parse_information
from infosvc_agents.collectors.nvml import Nvml, bus_id
from infosvc_agents.host_node import build_node
from infosvc_agents.node_metrics import NodeMetrics
from test_agent_metrics import one, parse, scrape_agent

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NVIDIA8 = FIXTURES / "gpu-nvidia8"  # HGX H100: 8 GPUs, an NVSwitch, the BMC's display, an InfiniBand adapter
NVIDIA8_MIG = FIXTURES / "gpu-nvidia8-mig"  # the same, GPU 0 in seven MIG instances, GPU 1 in two
AMD = FIXTURES / "gpu-amd"  # four MI250X GCDs (one busy) beside the BMC's display
HOST1 = FIXTURES / "host1"  # no GPU
H100 = "NVIDIA H100 80GB HBM3"
MB = float(1 << 20)
NVIDIA_BUSES = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0",
                "0000:ba:00.0", "0000:db:00.0"]
AMD_BUSES = ["0000:c1:00.0", "0000:c6:00.0", "0000:c9:00.0", "0000:ce:00.0"]


def collector(root: Path, **kwargs: Any) -> GpuCollector:
    return GpuCollector(proc_root=str(root / "proc"), sys_root=str(root / "sys"), **kwargs)


def node_of(samples: tuple[GpuSample, ...]) -> Node:
    """Through the document, so what is checked is what the aggregator reads."""
    return parse_node(node_to_xml(build_node({"gpus": CollectorRun("gpus", facts=samples)}, host_id="g1")))


def gpu_counts(node: Node) -> dict[str, dict[str | None, float]]:
    return {category: {r.type: r.value for r in node.category(category).resources("GPU")}
            for category in ("Configured", "Available", "Utilized")}


def copy(root: Path, tmp_path: Path) -> Path:
    """A writable copy; links stay links (a device's driver is the name its driver link points at)."""
    return Path(shutil.copytree(root, tmp_path / root.name, symlinks=True))


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# --- an 8-GPU NVIDIA node, no vendor library -----------------------------------------------------------


def test_nvidia_gpus_are_found_from_procfs_and_pci_ids() -> None:
    samples = collector(NVIDIA8).collect()
    assert [s.gpu.bus_id for s in samples] == NVIDIA_BUSES  # the NVSwitch, the BMC's VGA and the HCA are no GPUs
    for minor, sample in enumerate(samples):
        gpu = sample.gpu
        info = parse_information((NVIDIA8 / "proc/driver/nvidia/gpus" / gpu.bus_id / "information").read_text())
        assert (gpu.vendor, gpu.pci_id, gpu.driver, gpu.model) == ("NVIDIA", "10de:2330", "nvidia", H100)
        assert (gpu.uuid, gpu.vbios, gpu.minor, gpu.index) == (info["GPU UUID"], "96.00.99.00.01", minor, minor)
        assert gpu.uuid is not None and gpu.uuid.startswith("GPU-")
        assert not gpu.excluded and gpu.mig == () and sample.failure is None
        # without NVML nothing says what a GPU is doing, nor its memory: neither is made up
        assert (gpu.memory_total, sample.use.memory_used, sample.state) == (None, None, "unknown")


def test_information_is_parsed_as_the_driver_writes_it() -> None:
    text = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 375\nBus Location: \t 0000:18:00.0\nGPU Excluded:\t No\n"
    assert parse_information(text) == {"Model": H100, "IRQ": "375", "Bus Location": "0000:18:00.0",
                                       "GPU Excluded": "No"}
    assert parse_information("no colon here\n\n") == {}


def test_nvidia_node_as_sss_resources() -> None:
    node = node_of(collector(NVIDIA8).collect())
    # unknown use counts as available: nothing on the host says a GPU is taken
    assert gpu_counts(node) == {"Configured": {H100: 8}, "Available": {H100: 8}, "Utilized": {H100: 0}}
    assert node.configured.resources("GPUMemory") == []
    gpu0 = node.extensions_of("GPU:0000:18:00.0")
    assert gpu0 == {"Vendor": "NVIDIA", "Model": H100, "PCIId": "10de:2330", "Driver": "nvidia",
                    "UUID": "GPU-6f1c2a3e-8d4b-5e6f-9a0b-1c2d3e4f5a60", "VideoBIOS": "96.00.99.00.01",
                    "Index": "0", "Minor": "0", "State": "unknown"}
    assert node.extensions_of("GPU:0000:db:00.0")["Index"] == "7"
    assert node.extensions_of("GPU:0000:05:00.0") == {}  # the NVSwitch


def test_mig_instances_are_the_gpus_a_job_is_given() -> None:
    samples = collector(NVIDIA8_MIG).collect()
    assert [len(s.gpu.mig) for s in samples] == [7, 2, 0, 0, 0, 0, 0, 0]
    assert [(m.gpu_instance, m.compute_instance) for m in samples[1].gpu.mig] == [(1, 0), (2, 0)]
    node = node_of(samples)
    mig = f"{H100} MIG"  # the profile is NVML's to name
    assert gpu_counts(node) == {"Configured": {H100: 6, mig: 9}, "Available": {H100: 6, mig: 9},
                                "Utilized": {H100: 0, mig: 0}}
    assert node.extensions_of("GPU:0000:18:00.0")["MIG"] == "enabled"
    assert "MIG" not in node.extensions_of("GPU:0000:3a:00.0")
    assert node.extensions_of("GPU:0000:18:00.0/gi13/ci0") == {"Model": mig, "State": "unknown"}


def test_an_excluded_gpu_is_configured_but_not_available(tmp_path: Path) -> None:
    root = copy(NVIDIA8, tmp_path)
    info = root / "proc/driver/nvidia/gpus/0000:2a:00.0/information"
    info.write_text(info.read_text().replace("GPU Excluded:\t No", "GPU Excluded:\t Yes"))
    samples = collector(root).collect()
    assert samples[1].gpu.excluded and samples[1].state == "excluded"
    assert [s.gpu.index for s in samples] == [0, None, 1, 2, 3, 4, 5, 6]  # CUDA does not count it
    assert gpu_counts(node_of(samples))["Available"] == {H100: 7}


def test_a_gpu_with_no_driver_is_found_but_not_usable(tmp_path: Path) -> None:
    root = copy(NVIDIA8, tmp_path)
    shutil.rmtree(root / "proc/driver/nvidia/gpus/0000:db:00.0")
    (root / "sys/bus/pci/devices/0000:db:00.0/driver").unlink()
    samples = collector(root).collect()
    last = samples[-1]
    # its own files name no model: its siblings of the same PCI id do
    assert (last.gpu.model, last.gpu.driver, last.gpu.index, last.state) == (H100, None, None, "no driver")
    counts = gpu_counts(node_of(samples))
    assert (counts["Configured"], counts["Available"]) == ({H100: 8}, {H100: 7})


def test_without_nvidias_procfs_the_pci_ids_name_the_gpus(tmp_path: Path) -> None:
    root = copy(NVIDIA8, tmp_path)
    shutil.rmtree(root / "proc")
    samples = collector(root).collect()
    assert [(s.gpu.model, s.gpu.driver, s.gpu.uuid) for s in samples] == [("NVIDIA [10de:2330]", "nvidia", None)] * 8
    assert [s.gpu.index for s in samples] == list(range(8))


def test_what_a_gpu_is_is_read_at_a_scan_not_every_sample(tmp_path: Path) -> None:
    root = copy(NVIDIA8, tmp_path)
    gpus = collector(root)
    first = gpus.collect()
    info = root / "proc/driver/nvidia/gpus/0000:18:00.0/information"
    info.write_text(info.read_text().replace(H100, "NVIDIA H200"))
    assert gpus.collect()[0].gpu is first[0].gpu  # the same object: nothing read again
    rescanning = collector(root, rescan=0.0)
    assert rescanning.collect()[0].gpu.model == "NVIDIA H200"


def test_an_unreadable_information_file_marks_that_gpu_alone(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    root = copy(NVIDIA8, tmp_path)
    info = root / "proc/driver/nvidia/gpus/0000:2a:00.0/information"
    info.unlink()
    info.mkdir()  # reading it fails (EISDIR)
    caplog.set_level(logging.INFO)
    samples = collector(root).collect()
    assert [s.failure is not None for s in samples] == [False, True] + [False] * 6
    assert "information" in (samples[1].failure or "")
    assert [m for m in warnings(caplog) if "0000:2a:00.0" in m] and len(warnings(caplog)) == 1
    node = node_of(samples)
    assert node.extensions_of("GPU:0000:2a:00.0")["State"] == "failed"
    assert "information" in node.extensions_of("GPU:0000:2a:00.0")["ProbeFailed"]
    counts = gpu_counts(node)
    assert counts["Configured"] == {H100: 8} and counts["Available"] == {H100: 7}


# --- an AMD node -------------------------------------------------------------------------------------


def test_amd_gpus_from_drm_cards() -> None:
    samples = collector(AMD).collect()
    assert [s.gpu.bus_id for s in samples] == AMD_BUSES  # card0 is the BMC's display; renderD* are no cards
    base = AMD / "sys/bus/pci/devices"
    for index, sample in enumerate(samples):
        gpu, use = sample.gpu, sample.use
        files = base / gpu.bus_id
        assert (gpu.vendor, gpu.pci_id, gpu.driver, gpu.index) == ("AMD", "1002:740c", "amdgpu", index)
        assert gpu.model == (files / "product_name").read_text().strip()
        assert gpu.memory_total == int((files / "mem_info_vram_total").read_text())
        assert use.memory_used == int((files / "mem_info_vram_used").read_text())
        assert use.utilization == int((files / "gpu_busy_percent").read_text())
    assert [s.state for s in samples] == ["idle", "busy", "idle", "idle"]


def test_amd_node_as_sss_resources() -> None:
    node = node_of(collector(AMD).collect())
    model = "AMD Instinct MI250X"
    assert gpu_counts(node) == {"Configured": {model: 4}, "Available": {model: 3}, "Utilized": {model: 1}}
    busy = "0000:c6:00.0"
    memory = {c: node.category(c).get("Resource", name="GPUMemory", type=busy) for c in
              ("Configured", "Available", "Utilized")}
    assert {c: (m.value, m.units) for c, m in memory.items() if m} == {
        "Configured": (68702699520 / MB, "MB"), "Available": ((68702699520 - 34359738368) / MB, "MB"),
        "Utilized": (34359738368 / MB, "MB")}
    utilization = node.utilized.get("Resource", name="GPUUtilization", type=busy)
    assert utilization is not None and (utilization.value, utilization.units) == (100, "%")
    assert node.extensions_of(f"GPU:{busy}")["State"] == "busy"


def test_a_failing_gpu_is_logged_once_marked_and_the_others_go_on(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    root = copy(AMD, tmp_path)
    gpus = collector(root)
    gpus.collect()
    used = root / "sys/bus/pci/devices/0000:c9:00.0/mem_info_vram_used"
    used.unlink()  # the GPU fell off the bus: what a sample reads is gone
    caplog.set_level(logging.INFO)
    first, second = gpus.collect(), gpus.collect()
    for samples in (first, second):
        assert [s.failure is not None for s in samples] == [False, False, True, False]
        assert samples[2].state == "failed" and samples[3].state == "idle"
    assert len([m for m in warnings(caplog) if "0000:c9:00.0" in m]) == 1  # on change, not every sample
    node = node_of(second)
    assert gpu_counts(node)["Configured"] == {"AMD Instinct MI250X": 4}
    assert gpu_counts(node)["Available"] == {"AMD Instinct MI250X": 2}
    assert "mem_info_vram_used" in node.extensions_of("GPU:0000:c9:00.0")["ProbeFailed"]
    used.write_text("11403264\n")
    caplog.clear()
    assert gpus.collect()[2].failure is None
    assert any("answers again" in r.getMessage() for r in caplog.records)


def test_a_malformed_value_marks_the_gpu(tmp_path: Path) -> None:
    root = copy(AMD, tmp_path)
    gpus = collector(root)
    gpus.collect()
    (root / "sys/bus/pci/devices/0000:c1:00.0/gpu_busy_percent").write_text("lots\n")
    assert "ValueError" in (gpus.collect()[0].failure or "")


# --- a node with none --------------------------------------------------------------------------------


def test_a_node_without_gpus_says_nothing_of_them() -> None:
    assert collector(HOST1).collect() == ()
    registry = CollectorRegistry()
    registry.extend(default_collectors(str(HOST1 / "proc"), str(HOST1 / "sys"), str(HOST1 / "etc")))
    runs = registry.run()
    assert runs["gpus"].ok and runs["gpus"].facts == ()
    node = build_node(runs, host_id="h1")
    assert [r for c in ("Configured", "Available", "Utilized") for r in node.category(c).items
            if r.name in ("GPU", "GPUMemory", "GPUUtilization")] == []
    assert not [e for e in node.extensions if (e.type or "").startswith("GPU")]


def test_this_host_is_probed_without_failing() -> None:
    runs = CollectorRegistry(collectors={"gpus": GpuCollector()}).run()
    assert runs["gpus"].ok, runs["gpus"].error
    assert all(sample.failure is None for sample in runs["gpus"].facts)


def test_a_sample_costs_little(tmp_path: Path) -> None:
    """The probe reads only what moves: nothing for NVIDIA without NVML, two small files per AMD GPU."""
    costs = {}
    for root in (HOST1, NVIDIA8, AMD):
        gpus = collector(root)
        gpus.collect()
        started = time.process_time()
        for _ in range(500):
            gpus.collect()
        costs[root.name] = (time.process_time() - started) / 500
    assert costs["host1"] < 0.00005 and costs["gpu-nvidia8"] < 0.0003, costs
    assert costs["gpu-amd"] < 0.001, costs


# --- the command, the metrics --------------------------------------------------------------------------


def test_the_agent_command_on_a_gpu_node_tree(tmp_path: Path) -> None:
    root = Path(shutil.copytree(HOST1, tmp_path / "node"))
    shutil.copytree(AMD / "sys", root / "sys", dirs_exist_ok=True, symlinks=True)
    done = subprocess.run([sys.executable, "-m", "infosvc_agents", "--once", "--proc-root", str(root / "proc"),
                           "--sys-root", str(root / "sys"), "--etc-root", str(root / "etc")],
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    node = parse_node(done.stdout)
    assert gpu_counts(node)["Configured"] == {"AMD Instinct MI250X": 4}
    assert node.extension("CollectorFailed") is None


def test_gpu_metrics() -> None:
    runs = {"gpus": CollectorRun("gpus", facts=collector(AMD).collect(), seconds=0.001)}
    samples, types_ = parse(scrape_agent(NodeMetrics(lambda: runs, sampled_at=lambda: None)))
    model = "AMD Instinct MI250X"
    assert one(samples, "infosvc_node_gpus", model=model, state="idle") == 3
    assert one(samples, "infosvc_node_gpus", model=model, state="busy") == 1
    assert one(samples, "infosvc_node_gpu_memory_total_bytes", gpu="0000:c6:00.0") == 68702699520
    assert one(samples, "infosvc_node_gpu_memory_used_bytes", gpu="0000:c6:00.0") == 34359738368
    assert one(samples, "infosvc_node_gpu_utilization_ratio", gpu="0000:c6:00.0") == 1.0
    assert one(samples, "infosvc_node_gpu_up", gpu="0000:c1:00.0") == 1
    assert one(samples, "infosvc_node_gpu_info", gpu="0000:ce:00.0", vendor="AMD", model=model, uuid="",
               driver="amdgpu", index="3") == 1
    assert "infosvc_node_gpu_processes" not in samples  # sysfs has no process list


# --- NVML, over a stand-in for pynvml --------------------------------------------------------------------


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND, GPU_IS_LOST = 3, 4, 6, 15


def fake_pynvml(gpus: list[dict[str, Any]], init_error: int | None = None) -> types.ModuleType:
    """The pynvml calls the wrapper makes, and nothing else, answering as nvidia-ml-py 12/13 do (bytes
    from nvmlDeviceGetUUID and PCI bus ids, NVMLError subclasses carrying `value`) for `gpus`: dicts
    of name, bus ("00000000:18:00.0"), uuid, total, used, util, procs, cc, and optional mig (a list of
    the same keys and gi, ci), lost (GPU_IS_LOST on every use query)."""
    nv = types.ModuleType("pynvml")
    nv.NVMLError = NVMLError  # type: ignore[attr-defined]
    nv.NVML_DEVICE_MIG_ENABLE = 1  # type: ignore[attr-defined]
    nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_NO_PERMISSION = NOT_SUPPORTED, NO_PERMISSION  # type: ignore[attr-defined]

    def init() -> None:
        if init_error is not None:
            raise NVMLError(init_error)

    def lost(handle: dict[str, Any]) -> dict[str, Any]:
        if handle.get("lost"):
            raise NVMLError(GPU_IS_LOST)
        return handle

    def util(handle: dict[str, Any]) -> Any:
        if "gi" in lost(handle) or handle.get("mig") is not None:
            raise NVMLError(NOT_SUPPORTED)
        return types.SimpleNamespace(gpu=handle["util"], memory=0)

    def mig_mode(handle: dict[str, Any]) -> list[int]:
        if handle.get("mig") is None:
            raise NVMLError(NOT_SUPPORTED)
        return [1, 1]

    def mig_device(handle: dict[str, Any], index: int) -> dict[str, Any]:
        if index >= len(handle["mig"]):
            raise NVMLError(NOT_FOUND)
        return handle["mig"][index]  # type: ignore[no-any-return]

    calls = {
        "nvmlInit": init,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": lambda index: gpus[index],
        "nvmlDeviceGetPciInfo": lambda h: types.SimpleNamespace(busId=h["bus"].encode()),
        "nvmlDeviceGetName": lambda h: h["name"],
        "nvmlDeviceGetUUID": lambda h: h["uuid"].encode(),
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(total=h["total"], used=lost(h)["used"],
                                                                   free=h["total"] - h["used"]),
        "nvmlDeviceGetCudaComputeCapability": lambda h: h["cc"],
        "nvmlDeviceGetUtilizationRates": util,
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [object()] * lost(h)["procs"],
        "nvmlDeviceGetMigMode": mig_mode,
        "nvmlDeviceGetMaxMigDeviceCount": lambda h: 7,
        "nvmlDeviceGetMigDeviceHandleByIndex": mig_device,
        "nvmlDeviceGetGpuInstanceId": lambda h: h["gi"],
        "nvmlDeviceGetComputeInstanceId": lambda h: h["ci"],
    }
    for name, call in calls.items():
        setattr(nv, name, call)
    return nv


GIB = 1 << 30


def h100(bus: str, *, used: int = 0, util: int = 0, procs: int = 0, **more: Any) -> dict[str, Any]:
    return {"name": H100, "bus": "0000" + bus, "uuid": f"GPU-{bus}", "total": 80 * GIB, "used": used,
            "util": util, "procs": procs, "cc": (9, 0)} | more


def mig_1g(gi: int, *, procs: int = 0) -> dict[str, Any]:
    return {"name": f"{H100} MIG 1g.10gb", "uuid": f"MIG-{gi}", "total": 10 * GIB, "used": GIB * procs,
            "procs": procs, "gi": gi, "ci": 0}


def nvml_gpus() -> list[dict[str, Any]]:
    gpus = [h100(bus, used=(40 * GIB if i == 2 else 0), util=(87 if i == 2 else 0), procs=(1 if i == 2 else 0))
            for i, bus in enumerate(NVIDIA_BUSES)]
    gpus[0]["mig"] = [mig_1g(gi, procs=1 if gi == 9 else 0) for gi in range(7, 14)]
    return gpus


@pytest.fixture
def pynvml(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    gpus = nvml_gpus()
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(gpus))
    return gpus


def test_nvml_bus_ids_are_sysfs_addresses() -> None:
    assert bus_id(b"00000000:18:00.0") == "0000:18:00.0"
    assert bus_id("00000001:DB:00.0") == "0001:db:00.0"
    assert bus_id("garbage") == "garbage"


def test_nvml_adds_memory_use_mig_profiles_and_compute_capability(pynvml: list[dict[str, Any]]) -> None:
    samples = collector(NVIDIA8_MIG, nvml=Nvml.load).collect()
    gpu0, gpu2 = samples[0], samples[2]
    assert (gpu2.gpu.memory_total, gpu2.gpu.compute_capability, gpu2.gpu.uuid) == (80 * GIB, "9.0", "GPU-0000:3a:00.0")
    assert (gpu2.use.memory_used, gpu2.use.utilization, gpu2.use.processes, gpu2.state) == (40 * GIB, 87.0, 1, "busy")
    assert samples[3].state == "idle"
    # NVML's MIG layout wins over the capability files: its instances, with their profiles
    assert gpu0.gpu.mig_enabled and [m.gpu_instance for m in gpu0.gpu.mig] == list(range(7, 14))
    assert gpu0.use.utilization is None  # NVML has none for a GPU in MIG mode: not an error
    assert [u.processes for u in gpu0.mig_use] == [0, 0, 1, 0, 0, 0, 0]
    assert not samples[1].gpu.mig  # NVML says GPU 1 is whole: the capability files were stale
    node = node_of(samples)
    mig = f"{H100} MIG 1g.10gb"
    assert gpu_counts(node) == {"Configured": {H100: 7, mig: 7}, "Available": {H100: 6, mig: 6},
                                "Utilized": {H100: 1, mig: 1}}
    assert node.extensions_of("GPU:0000:3a:00.0")["ComputeCapability"] == "9.0"
    assert node.extensions_of("GPU:0000:18:00.0/gi9/ci0") == {"Model": mig, "UUID": "MIG-9", "Memory": "10240",
                                                              "State": "busy"}
    used = node.utilized.get("Resource", name="GPUMemory", type="0000:3a:00.0")
    assert used is not None and used.value == 40 * 1024
    runs = {"gpus": CollectorRun("gpus", facts=samples)}
    metrics, _ = parse(scrape_agent(NodeMetrics(lambda: runs, sampled_at=lambda: None)))
    assert one(metrics, "infosvc_node_gpu_processes", gpu="0000:3a:00.0") == 1
    assert one(metrics, "infosvc_node_gpu_utilization_ratio", gpu="0000:3a:00.0") == 0.87


def test_a_lost_gpu_is_marked_and_the_others_still_answer(pynvml: list[dict[str, Any]],
                                                          caplog: pytest.LogCaptureFixture) -> None:
    gpus = collector(NVIDIA8, nvml=Nvml.load)
    gpus.collect()
    pynvml[5]["lost"] = True
    samples = gpus.collect()
    assert [s.failure is not None for s in samples] == [False] * 5 + [True] + [False] * 2
    assert "NVMLError" in (samples[5].failure or "") and samples[5].state == "failed"
    assert samples[2].state == "busy"
    assert any("0000:ab:00.0" in m for m in warnings(caplog))


def test_nvml_not_supported_is_unknown_not_a_failure(pynvml: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    module = sys.modules["pynvml"]

    def refused(handle: Any) -> Any:
        raise NVMLError(NO_PERMISSION)

    monkeypatch.setattr(module, "nvmlDeviceGetComputeRunningProcesses", refused)
    samples = collector(NVIDIA8, nvml=Nvml.load).collect()
    assert all(s.failure is None for s in samples)
    assert samples[2].use.processes is None and samples[2].state == "busy"  # by its utilisation, then


def test_nvml_that_does_not_start_leaves_sysfs(monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    from infosvc_agents.collectors import nvml

    monkeypatch.setattr(nvml, "_last_failure", None)  # as in a fresh agent
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([], init_error=9))  # DRIVER_NOT_LOADED
    assert Nvml.load() is None
    assert any("NVML" in m for m in warnings(caplog))
    samples = collector(NVIDIA8, nvml=Nvml.load).collect()
    assert len(samples) == 8 and all(s.failure is None and s.gpu.memory_total is None for s in samples)


def test_without_nvidia_ml_py_there_is_no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    assert Nvml.load() is None


def test_nvml_is_not_asked_on_a_host_without_nvidia_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = []

    def load() -> Nvml | None:
        asked.append(1)
        return None

    collector(AMD, nvml=load).collect()
    collector(HOST1, nvml=load).collect()
    assert asked == []
    collector(NVIDIA8, nvml=load).collect()
    assert asked == [1]


def test_a_fixture_tree_never_asks_this_machines_nvml(pynvml: list[dict[str, Any]]) -> None:
    samples = collector(NVIDIA8).collect()  # the default: NVML only for this machine's own /proc
    assert all(s.gpu.memory_total is None for s in samples)


def test_a_kept_sysfs_attribute_is_shown_afresh_at_each_read() -> None:
    """amdgpu's per-sample attributes are kept open in the live /sys and read again from offset 0:
    sysfs must show the value anew, not the one it showed first (checked on loopback's counter)."""
    import socket

    from infosvc_agents.collectors.gpus import _sysfs_file

    path = "/sys/class/net/lo/statistics/tx_packets"
    if not Path(path).exists():
        pytest.skip("no loopback statistics in this /sys")
    counter = _sysfs_file(path)
    try:
        assert counter.fd >= 0  # kept open: this machine's own /sys
        before = int(counter.read())
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for _ in range(5):
                sock.sendto(b"x", ("127.0.0.1", 9))
        assert int(counter.read()) >= before + 5
    finally:
        counter.close()
    assert _sysfs_file(str(AMD / "sys/bus/pci/devices/0000:c1:00.0/gpu_busy_percent")).fd == -1  # a tree: opened afresh


def test_nvml_failing_to_start_is_said_once_across_scans(monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    from infosvc_agents.collectors import nvml

    monkeypatch.setattr(nvml, "_last_failure", None)  # as in a fresh agent
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([], init_error=9))
    gpus = collector(NVIDIA8, nvml=Nvml.load, rescan=0.0)  # NVML asked again at every scan
    for _ in range(3):
        assert len(gpus.collect()) == 8
    assert len([m for m in warnings(caplog) if "NVML" in m]) == 1
