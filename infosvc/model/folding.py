"""Host names written back as a NodeSet expression (`cn[01-12,15]`), with the standard library
only: the command line folds the lists it prints where only the agent is installed, and
ClusterShell is the server's dependency (infosvc/model/nodeset.py reads NodeSets with it)."""

from __future__ import annotations

from typing import Iterable


def fold(names: Iterable[str]) -> str:
    """A NodeSet expression naming exactly `names`, folded on the last number of each name
    (`cn[01-03,07]`, `r1n[1-2]`): a sort and one pass, where ClusterShell's folding of names of
    several numbers grows far faster (minutes for 10,000 two-number names). Not always the
    shortest expression; always a correct one. Names must hold no NodeSet operator or bracket."""
    numbered: dict[tuple[str, str, int], list[int]] = {}  # (prefix, suffix, zero-padded width)
    plain: list[str] = []
    for name in names:
        end = len(name)
        while end and not ("0" <= name[end - 1] <= "9"):
            end -= 1
        start = end
        while start and "0" <= name[start - 1] <= "9":
            start -= 1
        if start == end:
            plain.append(name)
            continue
        digits = name[start:end]
        width = len(digits) if digits[0] == "0" and len(digits) > 1 else 0
        numbered.setdefault((name[:start], name[end:], width), []).append(int(digits))
    # An unpadded number as long as a padded group's numbers is one of them (`cn15` joins
    # `cn[01-03]`), as ClusterShell folds them.
    for (prefix, suffix, width), numbers in list(numbered.items()):
        if width == 0:
            kept = []
            for number in numbers:
                padded = numbered.get((prefix, suffix, len(str(number))))
                if padded is not None and len(str(number)) > 1:
                    padded.append(number)
                else:
                    kept.append(number)
            if kept:
                numbered[(prefix, suffix, 0)] = kept
            else:
                del numbered[(prefix, suffix, 0)]
    terms = sorted(set(plain))
    for (prefix, suffix, width), numbers in sorted(numbered.items()):
        runs: list[str] = []
        ordered = sorted(set(numbers))
        first = previous = ordered[0]
        for number in ordered[1:] + [-2]:
            if number == previous + 1:
                previous = number
                continue
            runs.append(f"{first:0{width}d}" if first == previous else f"{first:0{width}d}-{previous:0{width}d}")
            first = previous = number
        if len(runs) == 1 and "-" not in runs[0]:
            terms.append(f"{prefix}{runs[0]}{suffix}")
        else:
            terms.append(f"{prefix}[{','.join(runs)}]{suffix}")
    return ",".join(terms)
