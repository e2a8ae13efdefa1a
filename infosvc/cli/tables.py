"""The plain-text tables the commands print (status, jobs, match): columns as wide as their widest
cell, two spaces apart, no trailing blanks. Every cell is made visible (infosvc/controls.py):
a cell is a server's string (another user's job name, a host's reason), and a newline or an escape
sequence in one must not make rows of its own. Standard library only, as the commands are."""

from __future__ import annotations

from infosvc.controls import visible


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """The header and the rows as lines, one line a row."""
    shown = [[visible(cell) for cell in line] for line in [header, *rows]]
    widths = [max(len(cell) for cell in column) for column in zip(*shown)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in shown]
