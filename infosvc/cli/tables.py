"""The plain-text tables the commands print (status, jobs, match): columns as wide as their widest
cell, two spaces apart, no trailing blanks. Standard library only, as the commands are."""

from __future__ import annotations


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """The header and the rows as lines."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in [header, *rows]]
