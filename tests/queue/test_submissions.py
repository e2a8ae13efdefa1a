"""Reading a submitted document into the queue's jobs (infosvc/queue/submissions.py): jobs that ask
alike get one compiled Requirements, whichever submission they came in; jobs that ask differently
get their own; the compiled ones kept are bounded; a job the matcher cannot compile is refused
every time, not remembered as compiled."""

from __future__ import annotations

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
