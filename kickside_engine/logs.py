"""Structured, redacted log output for the pool: one line per record, fields as key=value."""

from __future__ import annotations

import logging
import sys

from kickside_engine.errors import InvalidArgumentError
from kickside_engine.redact import redact_text

#: The log levels :func:`configure_logging` takes (in any case).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class KeyValueFormatter(logging.Formatter):
    """``time level logger message key=value ...``, every part redacted."""

    def format(self, record: logging.LogRecord) -> str:
        base = f"{self.formatTime(record)} {record.levelname} {record.name} {record.getMessage()}"
        extras = " ".join(f"{k}={v}" for k, v in record.__dict__.items() if k not in _STANDARD)
        text = f"{base} {extras}".rstrip()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return redact_text(text)


def configure_logging(level: str = "INFO") -> None:
    """Send Kickside's logs to stderr with the key=value formatter.

    ``level`` is one of :data:`LOG_LEVELS` (any case), else :class:`InvalidArgumentError`.
    """
    name = level.strip().upper() if isinstance(level, str) else level
    if name not in LOG_LEVELS:
        raise InvalidArgumentError(
            f"log level must be one of {', '.join(LOG_LEVELS)}, got {str(level)[:40]!r}"
        )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger("kickside")
    root.handlers[:] = [handler]
    root.setLevel(name)
    root.propagate = False
