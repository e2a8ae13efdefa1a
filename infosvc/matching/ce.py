"""The terms that ask something of a computing element serving the host's cluster
(ResourceManagerType, Queue, Duration), and joining a conjunction's CE terms so that one CE must
meet them all (docs/job-formats.md, "CE terms go together")."""

from __future__ import annotations

from typing import Callable

from infosvc.errors import excerpt
from infosvc.matching.checks import Check, number_words
from infosvc.matching.errors import MatchError
from infosvc.matching.expression import CExpr, CLeaf
from infosvc.matching.patterns import fullmatch, guarded_regex
from infosvc.matching.view import CE, Site
from infosvc.model import durations
from infosvc.model.glue import Host
from infosvc.model.job import Op, Simple, Term
from infosvc.model.node import Node

__all__ = ["CE_TERMS", "ce_check", "ce_together"]

#: The simple properties asked of a computing element, not of the host.
CE_TERMS = ("Queue", "ResourceManagerType", "Duration")

def _duration_words(seconds: float) -> str:
    """A wall-clock time for people: 2 h, 90 min, 1 h 30 min, 45 s."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{number_words(seconds / 3600)} h"
    if seconds >= 3600 and seconds % 60 == 0:
        return f"{number_words(seconds // 3600)} h {number_words(seconds % 3600 / 60)} min"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{number_words(seconds / 60)} min"
    return f"{number_words(seconds)} s"


def _ce_words(ce: CE, with_wall_clock: bool) -> str:
    words = [ce.lrms_type, f"queue {ce.queue}"]
    if with_wall_clock:
        limit = ce.max_wall_clock_time
        words.append(f"at most {_duration_words(limit * 60)}" if limit else "no wall-clock limit")
    return f"{ce.id} ({', '.join(words)})"


def ce_check(term: Term, item: Simple) -> Check:
    """A term on one computing element (docs/job-formats.md): ResourceManagerType (the CE's LRMS
    type, without regard to case), Queue (the CE's queue, exactly: batch systems treat queue names
    so), Duration (the wall-clock time asked, in seconds or as an xsd:duration, against the CE's
    MaxWallClockTime in minutes; 0, not specified, is no limit). The host fits when some CE serving
    its cluster satisfies it; `ce_together` joins a level's CE terms so that one CE must satisfy
    them all."""
    name, value, op = item.name, item.value, term.effective_op
    op_text = op.value
    ce_test: Callable[[CE], bool]
    if name == "Duration":
        if op in (Op.NE, Op.MATCH):
            raise MatchError(f"op {op_text} does not apply to Duration: it is the wall-clock time the job asks")
        try:
            asked = durations.seconds(value)
        except ValueError as exc:
            raise MatchError(f"Duration: {exc}") from None
        # The job runs for (at most) that long, whatever the op: the CE must allow as much (GT: more).
        if op is Op.GT:
            def ce_test(ce: CE) -> bool:
                return not ce.max_wall_clock_time or ce.max_wall_clock_time * 60 > asked
        else:
            def ce_test(ce: CE) -> bool:
                return not ce.max_wall_clock_time or ce.max_wall_clock_time * 60 >= asked
        words = f"Duration {'more than ' if op is Op.GT else ''}{_duration_words(asked)}"
        want = f"Duration: asked {'more than ' if op is Op.GT else ''}{_duration_words(asked)}"

        def explain(n: Node, h: Host, s: Site) -> str:
            found = s.ces.get(h.cluster, ())
            if not found:
                return f"{want}, no CE serves cluster {h.cluster}"
            return f"{want}, " + ", ".join(
                f"CE {ce.id} allows at most {_duration_words(ce.max_wall_clock_time * 60)}" if ce.max_wall_clock_time
                else f"CE {ce.id} has no wall-clock limit" for ce in found)
    else:
        read: Callable[[CE], str] = (lambda ce: ce.queue) if name == "Queue" else (lambda ce: ce.lrms_type)
        if op is Op.MATCH:
            regex = guarded_regex(value, f"the {name} pattern")
            ce_test = lambda ce: fullmatch(regex, read(ce))  # noqa: E731
        elif op not in (Op.EQ, Op.NE):
            raise MatchError(f"op {op_text} does not apply to {name}: use EQ, NE or Match")
        else:
            if name == "Queue":
                equal: Callable[[CE], bool] = lambda ce: ce.queue == value  # noqa: E731
            else:
                wanted = value.casefold()
                equal = lambda ce: ce.lrms_type.casefold() == wanted  # noqa: E731
            ce_test = equal if op is Op.EQ else (lambda ce: not equal(ce))
        words = f"{name} {op_text} {excerpt(value)}"

        def explain(n: Node, h: Host, s: Site) -> str:
            have = list(dict.fromkeys(read(ce) for ce in s.ces.get(h.cluster, ())))
            return f"{name}: asked {op_text} {excerpt(value)}, host has " + (" / ".join(have) if have else "none")

    return Check(term, True, lambda n, h, s: any(ce_test(ce) for ce in s.ces.get(h.cluster, ())), explain,
                 ce_test=ce_test, ce_asked=(words,))


def ce_together(conjuncts: list[CExpr]) -> list[CExpr]:
    """The CE terms of a conjunction as one leaf, in the place of the first: what a task asks of a
    computing element (LRMS, queue, wall-clock time) must be met by one CE serving the host, not
    each by some CE or other (docs/job-formats.md, "CE terms go together")."""
    found = [e for e in conjuncts if isinstance(e, CLeaf) and e.check.ce_test is not None]
    if len(found) < 2:
        return conjuncts
    tests = tuple(e.check.ce_test for e in found if e.check.ce_test is not None)
    asked = tuple(words for e in found for words in e.check.ce_asked)
    wall_clock = any(e.check.term.name == "Duration" for e in found)

    def ce_test(ce: CE) -> bool:
        return all(test(ce) for test in tests)

    def explain(n: Node, h: Host, s: Site) -> str:
        ces = s.ces.get(h.cluster, ())
        have = "; ".join(_ce_words(ce, wall_clock) for ce in ces) if ces else f"none serves cluster {h.cluster}"
        return f"CE: asked {excerpt(', '.join(asked), 200)} of one CE, host's CEs: {have}"

    joined = CLeaf(Check(found[0].check.term, True, lambda n, h, s: any(ce_test(ce) for ce in s.ces.get(h.cluster, ())),
                         explain, ce_test=ce_test, ce_asked=asked))
    first = conjuncts.index(found[0])
    joined_ids = {id(f) for f in found}  # a set: a job of thousands of CE terms must not be quadratic
    rest = [e for e in conjuncts if id(e) not in joined_ids]
    return rest[:first] + [joined] + rest[first:]
