"""GET /metrics' per-host GPU series are bounded whatever a host reports (docs/security.md, What
one request may cost): their `model` and `gpu` label values come from the agent's report, so one
host of 1,000 GPU types renamed at each report made 2,000 series per scrape and new ones at each
report. Per model: only the models the roll-up counts GPUs of (a Configured `Resource name="GPU"`
of one or more), at most MAX_GPU_MODELS; per GPU: only ids of the agent's form (a PCI address, or a
MIG instance's), at most MAX_GPU_DEVICES; the rest is left out, and a log line says so."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.documents import GPUs, make_node

from infosvc.hosts.table import HostEntry
from infosvc.loglimit import LogLimiter
from infosvc.model.node import Consumable, Node
from infosvc.publish import gpu_series, prometheus
from infosvc.publish.prometheus import MAX_GPU_DEVICES, MAX_GPU_MODELS, host_lines

H100 = GPUs.model
GPU_FAMILIES = ("infosvc_host_gpus", "infosvc_host_gpus_available", "infosvc_host_gpus_utilized",
                "infosvc_host_gpu_memory_bytes", "infosvc_host_gpu_memory_used_bytes",
                "infosvc_host_gpu_utilization_ratio")


def entry(node: Node) -> HostEntry:
    return HostEntry(id=node.id, node=node, reported_at=0.0, first_seen=0.0, approved=True, paused=False)


def gpu_lines(node: Node) -> str:
    return "".join(host_lines(entry(node), "c", "s")[11:17])


def flood(host: str, round_: int, types: int = 1000) -> Node:
    """The review's report: `types` GPU types in Configured and Utilized, renamed each round, with
    as many GPUMemory and GPUUtilization of ids of no GPU, and 100 of real-looking PCI addresses."""
    node = make_node(host, gpus=GPUs(count=2, busy=1))
    for i in range(types):
        node.configured.add(Consumable("Resource", 1.0, name="GPU", type=f"r{round_}m{i}"))
        node.utilized.add(Consumable("Resource", 1.0, name="GPU", type=f"r{round_}m{i}"))
        node.configured.add(Consumable("Resource", 1.0, units="MB", name="GPUMemory", type=f"r{round_}d{i}"))
        node.utilized.add(Consumable("Resource", 50.0, units="%", name="GPUUtilization", type=f"r{round_}d{i}"))
    for i in range(100):
        address = f"{round_ + 1:04x}:{i:02x}:00.0"
        node.configured.add(Consumable("Resource", 1024.0, units="MB", name="GPUMemory", type=address))
        node.utilized.add(Consumable("Resource", 512.0, units="MB", name="GPUMemory", type=address))
    return node


def series(text: str, host: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name in GPU_FAMILIES and s.labels.get("node") == host}


def test_an_ordinary_gpu_host_keeps_its_series_byte_for_byte() -> None:
    node = make_node("g01", gpus=GPUs(count=2, busy=1))
    assert gpu_lines(node) == (
        f'infosvc_host_gpus{{model="{H100}",node="g01"}} 2.0\n'
        f'infosvc_host_gpus_available{{model="{H100}",node="g01"}} 1.0\n'
        f'infosvc_host_gpus_utilized{{model="{H100}",node="g01"}} 1.0\n'
        'infosvc_host_gpu_memory_bytes{gpu="0000:18:00.0",node="g01"} 8.5520809984e+10\n'
        'infosvc_host_gpu_memory_bytes{gpu="0000:19:00.0",node="g01"} 8.5520809984e+10\n'
        'infosvc_host_gpu_memory_used_bytes{gpu="0000:18:00.0",node="g01"} 4.2760404992e+10\n'
        'infosvc_host_gpu_memory_used_bytes{gpu="0000:19:00.0",node="g01"} 0.0\n'
        'infosvc_host_gpu_utilization_ratio{gpu="0000:18:00.0",node="g01"} 0.87\n'
        'infosvc_host_gpu_utilization_ratio{gpu="0000:19:00.0",node="g01"} 0.0\n')


def test_a_host_s_gpu_series_are_bounded_whatever_it_reports(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from infosvc.config.site import parse_config
    from infosvc.hosts.aggregator import Aggregator
    from infosvc.hosts.tokens import Tokens
    from infosvc.publish.prometheus import AggregatorCollector, Metrics
    from infosvc.store import Store
    from prometheus_client import CollectorRegistry, generate_latest

    agg = Aggregator(parse_config({}), Store(tmp_path / "m.sqlite"), Tokens())
    agg.clock = lambda: 1_800_000_000.0
    agg.table.report(make_node("plain", gpus=GPUs(count=2, busy=1)), 1_800_000_000.0)
    metrics = Metrics()
    metrics.watch(agg)
    plain = series(metrics.exposition().decode(), "plain")
    caplog.set_level(logging.WARNING, logger="infosvc.publish.prometheus")
    monkeypatch.setattr(gpu_series, "_cut_log", LogLimiter(gpu_series.log))  # none logged yet
    for round_ in range(3):
        agg.table.report(flood("evil", round_), 1_800_000_000.0)
        text = metrics.exposition().decode()
        registry = CollectorRegistry()
        registry.register(AggregatorCollector(agg, hosts=True))
        evil = series(text, "evil")
        assert evil == series(generate_latest(registry).decode(), "evil")  # both renderings bound them alike
        assert series(text, "plain") == plain
        per_family = {name: [key for key in evil if key[0] == name] for name in GPU_FAMILIES}
        # the models it has GPUs of (the flood's are 1 each: all but the cap are left out)
        for name in GPU_FAMILIES[:3]:
            models = {dict(labels)["model"] for _, labels in per_family[name]}
            assert len(models) <= MAX_GPU_MODELS and H100 in models, (name, len(models))
        assert all(key[0] != "infosvc_host_gpus_available" or dict(key[1])["model"] == H100 for key in evil)
        # GPUs by PCI address only, at most the cap of them; never the ids of no GPU
        for name in GPU_FAMILIES[3:]:
            ids = {dict(labels)["gpu"] for _, labels in per_family[name]}
            assert len(ids) <= MAX_GPU_DEVICES, (name, len(ids))
            assert all(gpu[4] == ":" for gpu in ids), ids
        assert len(evil) <= 3 * MAX_GPU_MODELS + 3 * MAX_GPU_DEVICES
        assert len(text.splitlines()) < 400
    # the GPUs it has (the sorted first are its own two) are there with their values
    assert evil["infosvc_host_gpus", (("model", H100), ("node", "evil"))] == 2
    assert evil["infosvc_host_gpu_memory_bytes", (("gpu", "0000:18:00.0"), ("node", "evil"))] == 81559 * 2**20
    # and the log says so, once for the burst (rate-limited)
    cut = [r for r in caplog.records if "GPU" in r.getMessage() and "evil" in r.getMessage()]
    assert len(cut) == 1, [r.getMessage() for r in caplog.records]


def test_only_the_models_the_host_has_gpus_of_and_ids_of_gpus_are_exported(caplog: pytest.LogCaptureFixture,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    node = make_node("g01")
    mig = f"{H100} MIG 1g.10gb"
    node.configured.add(Consumable("Resource", 81559.0, units="MB", name="GPUMemory", type="0000:3b:00.0"))
    node.configured.add(Consumable("Resource", 9856.0, units="MB", name="GPUMemory", type="0000:3b:00.0/gi7/ci0"))
    node.configured.add(Consumable("Resource", 1.0, units="MB", name="GPUMemory", type="00000000:3B:00.0"))
    node.configured.add(Consumable("Resource", 1.0, units="MB", name="GPUMemory", type="not a gpu"))
    node.configured.add(Consumable("Resource", 2.0, name="GPU", type=mig))
    node.configured.add(Consumable("Resource", 0.0, name="GPU", type="None of it"))
    node.configured.add(Consumable("Resource", "lots", name="GPU", type="Phantom"))  # type: ignore[arg-type]
    node.available.add(Consumable("Resource", 2.0, name="GPU", type=mig))
    node.available.add(Consumable("Resource", 5.0, name="GPU", type="Never configured"))
    node.utilized.add(Consumable("Resource", 0.0, name="GPU", type=mig))
    caplog.set_level(logging.WARNING, logger="infosvc.publish.prometheus")
    monkeypatch.setattr(gpu_series, "_cut_log", LogLimiter(gpu_series.log))
    lines = gpu_lines(node)
    assert lines == (f'infosvc_host_gpus{{model="{mig}",node="g01"}} 2.0\n'
                     f'infosvc_host_gpus_available{{model="{mig}",node="g01"}} 2.0\n'
                     f'infosvc_host_gpus_utilized{{model="{mig}",node="g01"}} 0.0\n'
                     'infosvc_host_gpu_memory_bytes{gpu="0000:3b:00.0",node="g01"} 8.5520809984e+10\n'
                     'infosvc_host_gpu_memory_bytes{gpu="0000:3b:00.0/gi7/ci0",node="g01"} 1.0334765056e+10\n'
                     'infosvc_host_gpu_memory_bytes{gpu="00000000:3B:00.0",node="g01"} 1.048576e+06\n')
    (record,) = [r for r in caplog.records if "g01" in r.getMessage()]
    assert "3 GPU models" in record.getMessage() and "1 GPU id" in record.getMessage(), record.getMessage()


def test_a_model_or_gpu_reported_twice_is_one_series() -> None:
    node = make_node("g01", gpus=GPUs(count=2))
    GPUs(count=1).add_to(node)  # the same model, and again 0000:18:00.0
    lines = gpu_lines(node)
    assert f'infosvc_host_gpus{{model="{H100}",node="g01"}} 3.0\n' in lines
    assert lines.count('infosvc_host_gpu_memory_bytes{gpu="0000:18:00.0"') == 1
    assert len(lines.splitlines()) == 3 + 3 * 2


def test_a_flooding_host_s_exposition_passes_promtool(tmp_path: Path) -> None:
    import shutil
    import subprocess

    from infosvc.config.site import parse_config
    from infosvc.hosts.aggregator import Aggregator
    from infosvc.hosts.tokens import Tokens
    from infosvc.publish.prometheus import Metrics
    from infosvc.store import Store

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (apt-get install prometheus)")
    agg = Aggregator(parse_config({}), Store(tmp_path / "m.sqlite"), Tokens())
    node = flood("evil", 0, types=200)
    GPUs(count=2).add_to(node)  # its model and GPUs again
    agg.table.report(node, agg.clock())
    metrics = Metrics()
    metrics.watch(agg)
    text = metrics.exposition()
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=60)
    assert checked.returncode == 0 and not checked.stdout.strip() and not checked.stderr.strip(), (
        checked.stdout.decode() + checked.stderr.decode())


def test_a_model_too_long_or_not_printable_makes_no_series(caplog: pytest.LogCaptureFixture,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A review's findings: a 15,000-character model went through /metrics to a real Prometheus, and a
    host that renamed its 8 models of 1,880 characters at each report made 24 new series of them at
    each. A model of more than MAX_GPU_MODEL_CHARS characters, or holding one that is not printable
    (a line break of any kind, a tab, a control or format character), has no series; the host's
    other models keep theirs."""
    fit = ["M" * 128, "Ünïcode GPU 中文 MIG 1g.10gb"]
    unfit = ["L" * 129, "L" * 15000, 'A\nfake{x="y"} 42', "A\tB", "A\rB", "A\u2028B", "A\x85B", "A\x00B",
             "A\u200bB", "A\x1b[31mB"]
    caplog.set_level(logging.WARNING, logger="infosvc.publish.prometheus")
    monkeypatch.setattr(gpu_series, "_cut_log", LogLimiter(gpu_series.log))
    seen = set()
    for round_ in range(3):  # renamed at each report, as the review's host did
        node = make_node("g01", gpus=GPUs(count=2, busy=1))
        for model in [*fit, *(f"{model}{round_}" for model in unfit)]:
            GPUs(model=model, count=1).add_to(node)
        lines = gpu_lines(node)
        models = {s.labels["model"] for family in text_string_to_metric_families(lines) for s in family.samples
                  if "model" in s.labels}
        assert models == {H100, *fit}, models
        assert max(map(len, lines.splitlines())) < 300
        seen |= {line for line in lines.splitlines() if "model=" in line}
    assert len(seen) == 3 * 3  # the same 9 series at each report: none new
    (record, *_) = [r for r in caplog.records if "g01" in r.getMessage()]
    assert f"{len(unfit)} GPU models" in record.getMessage(), record.getMessage()
    from infosvc.publish.gpu_series import MAX_GPU_MODEL_CHARS
    assert MAX_GPU_MODEL_CHARS == len(fit[0])
