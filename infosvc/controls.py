"""Control and bidirectional characters made visible, for what a person reads: the text logs (the
server's and the host agent's) and the command line's tables and lines. A value from a client or a server (a request's path, a job's
name, a host's reason) may hold a newline that starts a line of its own choosing, an ESC or C1
sequence that the terminal acts on, or a bidi control that shows the line in another order; each
is written as an escape instead (\\n, \\x1b, \\u202e), so one value stays on its line and reads as it is.

What is escaped: C0 (U+0000-U+001F: newline, CR, tab and ESC among them), DEL, C1 (U+0080-U+009F),
the line and paragraph separators (U+2028, U+2029: line breaks to Unicode-aware viewers), and the
bidi controls (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C). A backslash is left as it
is: a value that holds the text `\\n` reads like an escaped newline, but it cannot start a line.
Standard library only, as the command line and the host agent are (both import it: it sits below
every part of the package).

`VisibleFormatter` is the one text log formatter: each record one line, made visible, then a
traceback's lines, each begun with "  | ", so that none of them can pass for a record either.
"""

from __future__ import annotations

import logging
import re
from typing import Final, Iterable

__all__ = ["CONTINUATION", "CONTROLS", "VisibleFormatter", "visible", "visible_lines"]

#: Every character `visible` escapes.
CONTROLS: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(found: re.Match[str]) -> str:
    char = found.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with its control and bidi characters escaped; the rest (accents, CJK, emoji) as it is."""
    return CONTROLS.sub(_escape, text)


def visible_lines(lines: Iterable[str]) -> str:
    """Lines, each made visible, joined by newlines: a newline inside one of them cannot start another."""
    return "\n".join(visible(line) for line in lines)


#: What begins each line of a traceback in a text log.
CONTINUATION: Final = "  | "


class VisibleFormatter(logging.Formatter):
    """A %-style format (`fmt`) made one visible line a record: whatever a value holds (a client's
    path, a job's file name, a server's answer) stays on its record's line; a traceback follows
    on lines of its own, each marked with CONTINUATION."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        line = visible(self.formatMessage(record))
        more = []
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            more.append(record.exc_text)
        if record.stack_info:
            more.append(self.formatStack(record.stack_info))
        for text in more:
            line += "".join(f"\n{CONTINUATION}{visible(part)}" for part in text.split("\n"))
        return line
