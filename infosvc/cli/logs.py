"""How `infosvc serve` writes its log: one line a record, as text for people or as one JSON
object (`--log-format json`: time, level, logger, message) for a log shipper. The audit trail is
the `infosvc.audit` logger: admin actions, refused tokens, hosts changing state."""

from __future__ import annotations

import json
import logging
import time

__all__ = ["JsonFormatter", "configure"]


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
                "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False)


def configure(level: int, fmt: str) -> None:
    """The root logger's one handler (stderr), text or JSON."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         logging.Formatter("infosvc: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
