"""What one submission may make: its jobs together have at most MAX_TASKS tasks, name at most
MAX_NODES hosts by Node ranges and lists, and come to at most MAX_EXPANDED_BYTES of text once a
JobGroup's JobDefaults and a TaskCount are applied (a few kilobytes could ask for millions of tasks,
a minute of expanding host names, or hundreds of megabytes stored); each charged before it is made.
And which documents are read on the event loop: a small one that can expand into none of that."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from infosvc.errors import DocumentError
from infosvc.model.noderef import NodeRef
from infosvc.queue import jobqueue, submissions
from infosvc.queue.submissions import Filer, prepare, read_inline
from infosvc.sched.request import MAX_EXPANDED_BYTES, MAX_NODES, MAX_TASKS

from test_queue import Site_


def read(document: str) -> list[Any]:
    prepared, _ = prepare(document.encode(), "application/xml", Filer("alice"))
    return prepared


def group(defaults: str, jobs: int, job: str = "") -> str:
    return (f"<JobGroup><Id>g</Id><JobDefaults><Executable>/bin/true</Executable>{defaults}</JobDefaults>"
            + "".join(f"<Job><Id>j{i}</Id>{job}</Job>" for i in range(jobs)) + "</JobGroup>")


def counted(count: int) -> str:
    return f"<TaskGroup><TaskCount>{count}</TaskCount><Task><Id>t</Id></Task></TaskGroup>"


def test_the_tasks_of_a_group_s_jobs_count_together() -> None:
    half = MAX_TASKS // 2
    assert sum(len(p.request.tasks) for p in read(group("", 2, counted(half)))) == MAX_TASKS
    with pytest.raises(DocumentError, match=f"the job group's jobs have more than {MAX_TASKS} tasks in all"):
        read(group("", 3, counted(half)))
    with pytest.raises(DocumentError, match=f"the job has more than {MAX_TASKS} tasks"):
        read(f"<Job><Id>j</Id><Executable>/bin/true</Executable>{counted(MAX_TASKS + 1)}</Job>")


def test_host_names_are_charged_before_they_are_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    expanded: list[int] = []
    names = NodeRef.names

    def counting(ref: NodeRef) -> list[str]:
        found = names(ref)
        expanded.append(len(found))
        return found
    monkeypatch.setattr(NodeRef, "names", counting)
    ranged = f"<Requested><Node aggregation='Range'>n[1-{MAX_NODES // 2}]</Node></Requested>"
    assert len(read(group(ranged, 2))) == 2
    expanded.clear()
    # JobDefaults copy the range into every job: 150 jobs would expand 7.5 million names
    with pytest.raises(DocumentError, match=f"name more than {MAX_NODES} hosts in all"):
        read(group(ranged, 150))
    assert expanded == [MAX_NODES // 2] * 2  # the third job was refused before its range was expanded
    listed = "<Requested><Node aggregation='List'>" + ",".join(f"h{i}" for i in range(1000)) + "</Node></Requested>"
    with pytest.raises(DocumentError, match="hosts in all"):
        read(group(listed, MAX_NODES // 1000 + 1))
    required = f"<Extension name='RequiredNodes'>n[1-{MAX_NODES // 2}]</Extension>"
    with pytest.raises(DocumentError, match="hosts in all"):
        read(group(required, 3))


def test_a_list_of_another_delimiter_is_charged_by_its_delimiter() -> None:
    # a list was charged by its commas: one of semicolons was one name, whatever it held
    listed = ("<Requested><Node aggregation='List' delimiter=';'>" + ";".join(f"h{i}" for i in range(1000))
              + "</Node></Requested>")
    assert len(read(group(listed, MAX_NODES // 1000))) == MAX_NODES // 1000
    with pytest.raises(DocumentError, match="hosts in all"):
        read(group(listed, MAX_NODES // 1000 + 1))


def test_text_copied_into_each_job_and_task_is_bounded() -> None:
    name = "x" * 100_000
    with pytest.raises(DocumentError, match="once its defaults and task counts are applied"):
        read(group(f"<Name>{name}</Name>", MAX_EXPANDED_BYTES // 100_000 + 1))
    assert len(read(group(f"<Name>{name}</Name>", 10))) == 10
    environment = "<Environment>" + "".join(f"<Variable name='V{i}'>{'v' * 1000}</Variable>"
                                            for i in range(10)) + "</Environment>"
    with pytest.raises(DocumentError, match="once its defaults and task counts are applied"):
        read(f"<Job><Id>j</Id><Executable>/bin/true</Executable>{environment}{counted(MAX_TASKS)}</Job>")
    [job] = read(f"<Job><Id>j</Id><Executable>/bin/true</Executable>{environment}{counted(100)}</Job>")
    assert len(job.request.tasks) == 100 and len(job.request.tasks[99].environment) == 10


@pytest.mark.parametrize("document, inline", [
    ("<Job><Id>j</Id><Executable>/bin/true</Executable></Job>", True),
    (f"<Job><Id>j</Id><Executable>/bin/true</Executable>{counted(10)}</Job>", False),
    ("<Job><Id>j</Id><Executable>/bin/true</Executable><Requested><Node aggregation='&#82;ange'>n[1-9]</Node>"
     "</Requested></Job>", False),  # a character reference writes "Range": the element's name is what is looked for
    (group("", 2), False),
    ('<Job xmlns="http://www.microsoft.com/ComputeCluster/" Name="c"><Tasks><Task CommandLine="x"/></Tasks></Job>', True),
    ("<Job><Id>j</Id><Executable>/bin/true</Executable><Name>" + "x" * 5000 + "</Name></Job>", False),  # large
])
def test_which_documents_are_read_on_the_loop(document: str, inline: bool) -> None:
    assert read_inline(document.encode()) is inline


def test_a_small_document_with_a_task_count_is_read_off_the_loop(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    site = Site_(tmp_path / "q.sqlite")
    threads: list[bool] = []
    real = submissions.prepare

    def where(*args: Any) -> Any:
        threads.append(threading.current_thread() is threading.main_thread())
        return real(*args)
    monkeypatch.setattr(jobqueue, "prepare", where)
    try:
        site.submit("<Job><Id>a</Id><Executable>/bin/true</Executable></Job>")
        site.submit(f"<Job><Id>b</Id><Executable>/bin/true</Executable>{counted(1000)}</Job>")
        assert threads == [True, False]  # the loop runs in the main thread here
    finally:
        site.close()
    assert asyncio.iscoroutinefunction(site.queue.submit)
