"""How a match ranks the hosts that fit: by score, then the CCS resource sort (memory size, then
processor speed), largest first, then by host id. The per-host way groups the fitting hosts by
the first three as it finds them (`Groups`, `in_order`); the columns take their rows in the CCS
order the columns keep and then stably by score (`by_score`): the same order either way."""

from __future__ import annotations

from typing import Any

import numpy as np

from infosvc.matching.result import Found

__all__ = ["Groups", "Rank", "in_order", "by_score"]

#: What orders a fitting host before its id: (score, memory size, processor speed), a host without
#: a memory size or a speed ranking as 0 (the per-host way builds it inline: one per fitting host).
Rank = tuple[float, int, int]
#: Fitting hosts grouped by their Rank, each group in the order found.
Groups = dict[Rank, list[Found]]


def in_order(groups: Groups) -> list[Found]:
    """The fitting hosts best first. The same order as sorting every host on its whole key (rank,
    then id), cheaper: the groups are few, and the ids (unique) are strings compared by the C sort."""
    ordered: list[Found] = []
    for key in sorted(groups, reverse=True):  # distinct keys: reversed is descending, exactly
        group = groups[key]
        if len(group) > 1:
            group.sort()  # by id: the ids are unique, so no comparison reaches the Host
        ordered.extend(group)
    return ordered


def by_score(order: Any, score: Any) -> tuple[Any, Any]:
    """Rows already in the CCS order (infosvc.matching.hostcolumns' `ccs_order`) and their scores
    (numpy arrays), ordered by score, largest first; rows of equal score keep the CCS order."""
    if len(order) > 1 and not (score == score[0]).all():
        descending = np.argsort(-score, kind="stable")
        return order[descending], score[descending]
    return order, score
