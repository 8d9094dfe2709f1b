"""Log lines: one JSON object per line (or ``key=value`` text), the same for gunicorn's own messages.

``configure`` sets up the ``hooks`` logger once per process; every hook call
is one line from ``hooks.calls`` (``Call.fields``: hook, request id, parent
namespace/name/uid/generation, status, outcome, reason, children, phase,
duration).  Request bodies, children and tokens are never logged.
"""

from __future__ import annotations

import logging
import re
import sys
import uuid
from datetime import datetime, timezone
from typing import IO, Any

import orjson
from gunicorn import glogging

LOGGER = "hooks"
CALL_LOGGER = "hooks.calls"
REQUEST_ID_HEADER = "X-Request-Id"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:+=/-]{1,128}$")


def request_id(header: str | None) -> str:
    """The caller's request id when it is a short token, otherwise a fresh one."""
    if header and _REQUEST_ID.match(header):
        return header
    return uuid.uuid4().hex


def _time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "msg", ...fields, "exception"?}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    """``<time> <level> <logger>: <msg> key=value ...`` for people reading a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_time(record)} {record.levelname.lower()} {record.name}: {record.getMessage()}"
        fields = getattr(record, "fields", None) or {}
        if fields:
            line += " " + " ".join(f"{key}={value}" for key, value in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


FORMATTERS = {"json": JsonFormatter, "text": TextFormatter}


def configure(level: str, fmt: str, stream: IO[str] | None = None) -> None:
    """The ``hooks`` loggers write to ``stream`` (stderr) in ``fmt``; idempotent."""
    logger = logging.getLogger(LOGGER)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(FORMATTERS[fmt]())
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False


class GunicornLogger(glogging.Logger):
    """gunicorn's own messages (start-up, worker life) in the format of the ``hooks`` logger."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        ours = logging.getLogger(LOGGER).handlers
        if ours:
            for handler in self.error_log.handlers:
                handler.setFormatter(ours[0].formatter)
