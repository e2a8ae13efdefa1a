"""Reading a submitted document into the queue's jobs (infosvc/queue/submissions.py): jobs that ask
alike get one compiled Requirements, whichever submission they came in; jobs that ask differently
get their own; the compiled ones kept are bounded; a job the matcher cannot compile is refused
every time, not remembered as compiled."""

from __future__ import annotations

from typing import Any

import pytest

from infosvc.errors import DocumentError
from infosvc.queue import submissions
from infosvc.queue.submissions import COMPILED_KEPT, Filer, prepare


def sss(feature: str, processors: int = 1) -> bytes:
    return (f"<Job><Id>j</Id><Executable>/bin/true</Executable><Requested><Feature>{feature}</Feature>"
            f"<Processors>{processors}</Processors></Requested></Job>").encode()


def requirements_of(document: bytes) -> object:
    prepared, _ = prepare(document, "application/xml", Filer("user"))
    assert len(prepared) == 1
    return prepared[0].requirements


def test_jobs_that_ask_alike_share_one_compiled_requirements() -> None:
    first, again = requirements_of(sss("gpu")), requirements_of(sss("gpu"))
    other = requirements_of(sss("bigmem"))
    assert first is not None and first is again
    assert other is not None and other is not first
    assert requirements_of(sss("gpu", processors=2)) is not first  # Processors are in the signature too


def test_the_compiled_requirements_kept_are_bounded() -> None:
    for i in range(COMPILED_KEPT + 10):
        requirements_of(sss(f"feature{i}"))
    assert len(submissions._compiled) == COMPILED_KEPT
    assert not any("feature0'" in key for key in submissions._compiled)  # the oldest went first


def test_a_job_the_matcher_refuses_is_refused_each_time() -> None:
    bad = (b'<Job><Id>j</Id><Executable>/bin/true</Executable><Requested>'
           b'<Node aggregation="Range">n[1-200000]</Node></Requested></Job>')  # the matcher's bound
    for _ in range(2):
        with pytest.raises(DocumentError, match="names more than"):
            prepare(bad, "application/xml", Filer("user"))


def test_a_job_of_more_terms_than_the_matcher_takes_is_refused_naming_the_bound() -> None:
    # The submission reads and compiles a job as POST /v1/match does: the same bound of terms.
    from infosvc.matching import MAX_TERMS

    def job(count: int) -> bytes:
        return (b"<Job><Id>j</Id><Executable>/bin/true</Executable><Requested>"
                + b"".join(b"<Feature>f%d</Feature>" % i for i in range(count)) + b"</Requested></Job>")

    assert requirements_of(job(MAX_TERMS)) is not None
    with pytest.raises(DocumentError, match=f"at most {MAX_TERMS}"):
        prepare(job(MAX_TERMS + 1), "application/xml", Filer("user"))


GROUP = (b"<JobGroup><Id>g</Id>"
         + b"".join(f"<Job><Id>j{i}</Id><Executable>/bin/true</Executable><Memory units='GB'>{i + 1}</Memory>"
                    f"<Feature>f{i}</Feature></Job>".encode() for i in range(3))
         + b"</JobGroup>")


@pytest.mark.parametrize("path", ["submission", "match"])
def test_each_job_is_read_once_by_one_preparation(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """POST /v1/jobs and POST /v1/match read a document the same way, in one place: each job's
    needs (what it wrote outside Requested) are read once, and both see what was read."""
    from infosvc.queue.dryrun import prepare_match

    read: list[str] = []
    real = submissions.read_needs

    def counted(job: Any) -> Any:
        read.append(job.id)
        return real(job)

    monkeypatch.setattr(submissions, "read_needs", counted)
    if path == "submission":
        prepared, _ = prepare(GROUP, "application/xml", Filer("user"))
        said = [item.request.read_as_requested for item in prepared]
        memory = [item.request.memory_mb for item in prepared]
        assert memory == [1024, 2048, 3072]
    else:
        match = prepare_match(GROUP, "application/xml")
        said = match.read_as_requested
    assert read == ["j0", "j1", "j2"]
    assert all("Memory" in " ".join(names) and "Feature" in " ".join(names) for names in said), said


def test_no_other_module_reads_needs_again() -> None:
    """The scheduler's request and the matcher take the needs as read (model.jobneeds.NeedsRead)."""
    import ast
    from pathlib import Path

    root = Path(submissions.__file__).resolve().parents[1]
    callers = sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                     if any(isinstance(node, ast.Name) and node.id == "read_needs"
                            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))))
    assert callers == ["queue/submissions.py"], callers
