"""What a job draws while it runs beside its processors and memory, read from its Requested terms
(the SSS Job model): software licenses from the site's pools, and GPUs on each of its hosts. A
level's consumable terms are `consumable_terms`' (infosvc.sched.request reads processors and
memory through it too)."""

from __future__ import annotations

import math

from infosvc.errors import DocumentError, excerpt
from infosvc.model.glue import GPU, LICENSE
from infosvc.model.job import Consumable, Context, Op, Term

__all__ = ["MAX_GPUS_PER_HOST", "consumable_terms", "gpus_per_host", "licenses_of"]


def consumable_terms(terms: list[Term], kind: str) -> list[tuple[Op, Consumable]]:
    return [(term.effective_op, term.item) for term in terms
            if isinstance(term.item, Consumable) and term.item.kind == kind
            and term.item.effective_context in (Context.AVAILABLE, Context.DEDICATED)]


def licenses_of(terms: list[Term]) -> tuple[tuple[str, int], ...]:
    """The job's own Requested `Resource name="License" type=feature` amounts (CCS SoftwareLicense
    is mapped so), the largest per feature: what it draws from a license pool while it runs."""
    found: dict[str, int] = {}
    for op, item in consumable_terms(terms, "Resource"):
        if item.name == LICENSE and item.type and op in (Op.EQ, Op.GE, Op.GT):
            try:
                value = float(item.value)
                count = math.floor(value) + 1 if op is Op.GT else math.ceil(value)
            except (OverflowError, ValueError):
                raise DocumentError(f"License {excerpt(item.type)}: {str(item.value)[:20]} is no count") from None
            found[item.type] = max(found.get(item.type, 0), count)
    return tuple((feature, count) for feature, count in found.items() if count > 0)


#: The most GPUs a job may take on one host
MAX_GPUS_PER_HOST = 1024


def gpus_per_host(terms: list[Term]) -> int:
    """The GPUs the job takes on each host: its Requested `Resource name="GPU"` (of any type: the
    type asks for a model, which the matcher checks), the largest when it says more than once."""
    most = 0
    for op, item in consumable_terms(terms, "Resource"):
        if item.name == GPU and op in (Op.EQ, Op.GE, Op.GT):
            try:
                value = float(item.value)
                count = math.floor(value) + 1 if op is Op.GT else math.ceil(value)
            except (OverflowError, ValueError):
                raise DocumentError(f"GPU: {str(item.value)[:20]} is no count") from None
            if count > MAX_GPUS_PER_HOST:
                raise DocumentError(f"GPU: {count} on a host; at most {MAX_GPUS_PER_HOST} are accepted")
            most = max(most, count)
    return most
