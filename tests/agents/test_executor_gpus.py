"""GPUs end to end on a real agent: a host whose tree has 8 NVIDIA H100s (tests/fixtures/gpu-nvidia8
over host1's files) reports them, the scheduler gives jobs GPUs on it and never more than it has,
and the executor tells each task its own (CUDA_VISIBLE_DEVICES), disjoint from every other job's;
a job that asks none sees none."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest

from support.executors import reachable_base, start_agent, task_directory
from support.server import Server, ServerFactory, wait_for
from test_executor import job, sh

HOST = "gpu01"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def gpu_site(serve_app: ServerFactory, tmp_path: Path) -> Iterator[tuple[Server, Path]]:
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURES / "host1", tree, symlinks=True)
    shutil.copytree(FIXTURES / "gpu-nvidia8", tree, symlinks=True, dirs_exist_ok=True)
    server = serve_app(agents=1, executors={"exec": HOST})
    base = reachable_base()
    work = task_directory(next(base), "work")
    agent = start_agent(server, HOST, server.tokens["exec"], tmp_path / "agent", tmp_path / "agent.log",
                        fixture=str(tree))
    try:
        wait_for(lambda: server.node_ids() == [HOST], timeout=30, message="the GPU host reporting")
        yield server, work
    finally:
        agent.terminate()
        agent.wait(timeout=30)
        base.close()


def gpu_job(name: str, gpus: int, work: Path, seconds: float) -> bytes:
    script = f'echo "$CUDA_VISIBLE_DEVICES" > {name}.gpus; sleep {seconds}'
    return sh(name, script, work, more=f'<Resource name="GPU">{gpus}</Resource>' if gpus else "").replace(
        "<Requested>", '<Extension name="IsExclusive">false</Extension><Requested>').encode()


def test_jobs_get_disjoint_gpus_and_never_more_than_the_host_has(gpu_site: tuple[Server, Path]) -> None:
    server, work = gpu_site
    glue = server.get("/v1/glue").json()
    assert glue["hosts"][0]["accelerators"][0]["count"] == 8
    token = server.tokens["submit"]
    for name, gpus, seconds in (("a", 4, 3), ("b", 3, 3), ("c", 2, 0), ("none", 0, 0)):
        assert server.request("POST", "/v1/jobs", gpu_job(name, gpus, work, seconds), token=token).status == 201
    wait_for(lambda: (work / "a.gpus").exists() and (work / "b.gpus").exists(), timeout=30, message="a and b running")
    a, b = ((work / f"{n}.gpus").read_text().split()[0].split(",") for n in ("a", "b"))
    assert len(a) == 4 and len(b) == 3 and not set(a) & set(b)
    assert set(a) | set(b) <= {str(i) for i in range(8)}
    # c asks 2 while 1 is free: it waits, and says why
    waiting = job(server, "3")
    assert waiting["state"] == "Queued" and "GPU" in waiting["reason"], waiting
    assert job(server, "1")["gpus_per_host"] == 4
    # a job asking none runs beside them, and is given none
    wait_for(lambda: (work / "none.gpus").exists(), timeout=30, message="the job without GPUs")
    assert (work / "none.gpus").read_text() == "\n"
    wait_for(lambda: (work / "c.gpus").exists(), timeout=60, message="c once a or b ended")
    c = (work / "c.gpus").read_text().split()[0].split(",")
    assert len(c) == 2
    for number in ("1", "2", "3", "4"):
        wait_for(lambda: job(server, number)["state"] == "Finished", timeout=60, message=f"job {number}'s end")
