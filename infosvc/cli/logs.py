"""How `infosvc serve` writes its log: one line a record, as text for people or as one JSON
object (`--log-format json`: time, level, logger, message) for a log shipper. The audit trail is
the `infosvc.audit` logger: admin actions, refused tokens, hosts changing state.

A record's values come from clients (a refused request's path, a host's id, a job's name): the
text formatter makes every record visible (infosvc/controls.py), so that no value can end the
line and write one that reads as another record, nor drive the terminal of whoever tails the log.
It does so for every logger, aiohttp's included, in the one place they all pass
(`controls.VisibleFormatter`, which the host agent's log uses too). A traceback follows its record
on lines of its own, each begun with "  | ", so none of them can pass for a record either. JSON escapes C0 itself; the JSON formatter escapes DEL, C1 and the bidi controls
too (as \\u escapes, so the message decodes to the same string)."""

from __future__ import annotations

import json
import logging
import re
import time

from infosvc.controls import CONTROLS, VisibleFormatter

__all__ = ["JsonFormatter", "TextFormatter", "configure"]


class TextFormatter(VisibleFormatter):
    """`infosvc: LEVEL LOGGER: MESSAGE`, one line, then a traceback's lines, if any, each marked."""

    def __init__(self) -> None:
        super().__init__("infosvc: %(levelname)s %(name)s: %(message)s")


def _json_escape(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
                "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        # json.dumps has escaped C0, quotes and backslashes; what is left of CONTROLS is raw
        return CONTROLS.sub(_json_escape, json.dumps(data, ensure_ascii=False))


def configure(level: int, fmt: str) -> None:
    """The root logger's one handler (stderr), text or JSON."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
