"""kill -9 of the real server, again and again, under load (docs/reliability.md, Faults): agents
report, a submitter submits and cancels jobs, executors end tasks, each client recording what the
server acknowledged; after every restart everything acknowledged is there and the queue is
consistent (ids unique, one state per job, tasks agreeing with their job, a Running job's hosts
known). KILLS and the phase length are parameters (INFOSVC_KILLS, INFOSVC_KILL_PHASE_SECONDS)."""

from __future__ import annotations

import http.client
import json
import os
import random
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from support.documents import node_document
from support.server import Server, ServerFactory, request

KILLS = int(os.environ.get("INFOSVC_KILLS", "10"))
#: how long the load runs between two kills (at least): long enough for every kind of change
PHASE_SECONDS = float(os.environ.get("INFOSVC_KILL_PHASE_SECONDS", "1.0"))
HOSTS = 4
ENDED = {"Finished", "Failed", "Canceled"}

SSS_JOB = (b"<Job><Id>j</Id><Executable>/bin/true</Executable><Requested><Processors>1</Processors>"
           b"</Requested></Job>")


@dataclass
class Acknowledged:
    """What the server answered with success, by kind; guarded by one lock."""

    reports: dict[str, list[bytes]] = field(default_factory=dict)
    jobs: set[str] = field(default_factory=set)
    canceled: set[str] = field(default_factory=set)
    task_ends: set[tuple[str, int]] = field(default_factory=set)
    refusals: Counter[str] = field(default_factory=Counter)  # unexpected answers, by route and status
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> Acknowledged:
        with self.lock:
            return Acknowledged({h: list(d) for h, d in self.reports.items()}, set(self.jobs), set(self.canceled),
                                set(self.task_ends), Counter(self.refusals))


class Load:
    """The clients, as threads that go on through the kills: a request that fails for want of a
    server is simply not acknowledged (and the next one is a new one)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.acked = Acknowledged()
        self.stop = threading.Event()
        self.go = threading.Event()  # cleared while the checks read a quiet server
        self.go.set()
        self.busy = 0
        self._busy_lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def call(self, method: str, path: str, body: bytes | None, token: str,
             headers: dict[str, str] | None = None) -> tuple[int, Any] | None:
        """One request between pauses; None when the server is not there (killed, restarting)."""
        self.go.wait()
        with self._busy_lock:
            self.busy += 1
        try:
            reply = request(self.server.port, method, path, body, token=token, headers=headers, timeout=10)
        except (OSError, http.client.HTTPException):
            time.sleep(0.05)
            return None
        finally:
            with self._busy_lock:
                self.busy -= 1
        try:
            data = reply.json() if reply.body else None
        except ValueError:
            data = None
        return reply.status, data

    def quiet(self) -> None:
        """Pause the clients and wait for the requests under way."""
        self.go.clear()
        deadline = time.monotonic() + 15
        while self.busy and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not self.busy, "requests still under way"

    def spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self.threads.append(thread)

    # --- the clients ---

    def agent(self, host: str, token: str, processors: int) -> None:
        for sequence in range(10**9):
            if self.stop.is_set():
                return
            document = node_document(host, sequence=sequence, processors=processors)
            answer = self.call("POST", "/v1/nodes", document, token)
            if answer is None:
                continue
            if answer[0] == 200:
                with self.acked.lock:
                    self.acked.reports.setdefault(host, []).append(document)
            else:
                self.note("report", answer[0])
            time.sleep(0.005)

    def submitter(self, token: str) -> None:
        while not self.stop.is_set():
            answer = self.call("POST", "/v1/jobs", SSS_JOB, token, {"Content-Type": "application/xml"})
            if answer is not None:
                if answer[0] == 201:
                    with self.acked.lock:
                        self.acked.jobs.add(answer[1]["id"])
                else:
                    self.note("submit", answer[0])
            time.sleep(0.03)
            with self.acked.lock:  # jobs not seen ending: most are still Queued or Running
                ended = {job_id for job_id, _ in self.acked.task_ends}
                candidates = sorted(self.acked.jobs - self.acked.canceled - ended)
            if candidates and random.random() < 0.3:
                job_id = random.choice(candidates)
                answer = self.call("DELETE", f"/v1/jobs/{job_id}", None, token)
                if answer is not None and answer[0] == 200:
                    assert answer[1]["state"] == "Canceled", answer
                    with self.acked.lock:
                        self.acked.canceled.add(job_id)
                elif answer is not None and answer[0] != 400:  # 400: it had ended already
                    self.note("cancel", answer[0])

    def executor(self, token: str) -> None:
        while not self.stop.is_set():
            answer = self.call("GET", "/v1/executor/tasks", None, token)
            if answer is None or answer[0] != 200:
                if answer is not None:
                    self.note("tasks", answer[0])
                continue
            for order in answer[1]["tasks"]:
                job_id, task = order["job"], order["task"]
                ended = self.call("POST", f"/v1/jobs/{job_id}/tasks/{task}/events", b'{"event":"ended","exit_code":0}',
                                  token, {"Content-Type": "application/json"})
                if ended is not None and ended[0] == 200:
                    with self.acked.lock:
                        self.acked.task_ends.add((job_id, task))
            time.sleep(0.05)

    def note(self, route: str, status: int) -> None:
        if status != 503:  # a restart's store may be busy: refused with nothing stored is honest
            with self.acked.lock:
                self.acked.refusals[f"{route} {status}"] += 1


def check(server: Server, acked: Acknowledged) -> dict[str, int]:
    """Everything acknowledged is stored and served; the queue is consistent. Returns counts."""
    # reports: every acknowledged one in the history, in order
    for host, documents in acked.reports.items():
        stored = [row[0] for row in server.sql("SELECT document FROM reports WHERE host_id = ? ORDER BY seq", host)]
        position = 0
        for number, document in enumerate(documents):  # a subsequence: unacknowledged ones may sit between
            assert document in stored[position:], f"{host}: acknowledged report {number} lost"
            position = stored.index(document, position) + 1
    # the queue as stored: one read, one snapshot
    conn = sqlite3.connect(f"file:{server.db}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute("SELECT id, state, hosts, tasks FROM jobs").fetchall()
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    stored_jobs = {str(job_id): (state, json.loads(hosts), [t[0] for t in json.loads(tasks)])
                   for job_id, state, hosts, tasks in rows}
    assert len(stored_jobs) == len(rows)
    # the queue as served
    listed = server.get("/v1/jobs?limit=10000").json()["jobs"]
    ids = [job["id"] for job in listed]
    assert len(ids) == len(set(ids)), "a job id listed twice"
    served = {job["id"]: job for job in listed}
    # The queue's pass goes on while the clients are quiet, so a job may start between two reads:
    # each filtered listing is checked on its own (one state per job is the one listing's ids above).
    for state in ("Queued", "Running"):
        filtered = server.get(f"/v1/jobs?state={state}&limit=10000").json()["jobs"]
        assert {job["state"] for job in filtered} <= {state}, (state, filtered)
        assert len(filtered) == len({job["id"] for job in filtered}), f"a job id listed twice among {state}"
    nodes = set(server.node_ids())
    missing = acked.jobs - served.keys()
    assert not missing, f"acknowledged jobs lost: {sorted(missing, key=int)}"
    assert not acked.jobs - stored_jobs.keys()
    for job_id in acked.canceled:
        assert served[job_id]["state"] == "Canceled" == stored_jobs[job_id][0], (job_id, served[job_id])
    for job_id, task in acked.task_ends:
        assert stored_jobs[job_id][2][task] == "Finished", (job_id, task, stored_jobs[job_id])
    for job_id, (state, hosts, tasks) in stored_jobs.items():
        job = served[job_id]
        if state in ENDED:  # an end is final: the service says the same
            assert job["state"] == state, (job_id, job, state)
        if state == "Queued":
            assert not hosts and set(tasks) <= {"Queued"}, (job_id, state, hosts, tasks)
        elif state == "Running":
            assert hosts and set(hosts) <= nodes, (job_id, hosts, nodes)
            assert set(tasks) <= {"Queued", "Running", "Finished", "Failed", "Canceled"}
        else:
            assert not set(tasks) & {"Queued", "Running"}, (job_id, state, tasks)
        if job["state"] == "Queued":
            assert set(job["tasks"]) <= {"Queued"}, job
        if job["state"] == "Running":
            detail = server.get(f"/v1/jobs/{job_id}").json()
            assert set(detail["held_on_hosts"]) <= nodes, detail
            assert all(t["host"] in detail["held_on_hosts"] for t in detail["tasks"] if t["state"] == "Running"), detail
        if job["state"] in ENDED:
            assert not set(job["tasks"]) & {"Queued", "Running"}, job
    return {"reports": sum(map(len, acked.reports.values())), "jobs": len(acked.jobs),
            "canceled": len(acked.canceled), "task_ends": len(acked.task_ends)}


def test_ten_kills_under_load_lose_nothing_acknowledged(serve: ServerFactory) -> None:
    executors = {f"exec{i}": f"h{i}" for i in range(HOSTS)}
    server = serve({"store": {"history_per_host": 100000}}, agents=HOSTS, executors=executors)
    load = Load(server)
    for i in range(HOSTS):
        load.spawn(load.agent, f"h{i}", server.agent_token(), 2)
    load.spawn(load.submitter, server.tokens["submit"])
    for name in executors:
        load.spawn(load.executor, server.tokens[name])
    figures: list[dict[str, int]] = []
    try:
        for kill in range(KILLS):
            before = load.acked.snapshot()
            time.sleep(PHASE_SECONDS)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # each phase sees reports, jobs and task ends acknowledged
                now = load.acked.snapshot()
                if (sum(map(len, now.reports.values())) > sum(map(len, before.reports.values())) + 20
                        and len(now.jobs) > len(before.jobs) and len(now.task_ends) > len(before.task_ends)):
                    break
                time.sleep(0.05)
            server.kill()
            server.start()
            load.quiet()
            figures.append(check(server, load.acked.snapshot()))
            load.go.set()
    finally:
        load.stop.set()
        load.go.set()
        for thread in load.threads:
            thread.join(timeout=20)
    final = load.acked.snapshot()
    figures.append(check(server, final))
    assert not final.refusals, final.refusals
    assert server.starts == KILLS + 1
    totals = figures[-1]
    assert totals["reports"] >= 20 * KILLS and totals["jobs"] >= KILLS and totals["task_ends"] >= KILLS, totals
    print(f"\n{KILLS} kills under load: acknowledged {totals}; 0 lost")
