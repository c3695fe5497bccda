"""Structured, redacted log output for the pool: one line per record, fields as key=value, or
one JSON object per line (``--log-format json``) carrying the same fields, redacted alike."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from kickside_engine.errors import InvalidArgumentError
from kickside_engine.redact import redact_text

#: The log levels :func:`configure_logging` takes (in any case).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: The log formats :func:`configure_logging` takes: key=value lines, or JSON lines.
LOG_FORMATS = ("text", "json")

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


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time`` (ISO 8601 UTC), ``level``, ``logger``, ``message``,
    the record's fields, and ``exception`` when there is one.

    Text is redacted as :class:`KeyValueFormatter` redacts it: each field as its ``key=value``
    text would be (so a field named ``password`` is masked), the message and the exception as
    free text. Numbers, booleans and null stay JSON values; other values become their text.
    """

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact_text(record.getMessage()),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in document:
                document[key] = _field(key, value)
        if record.exc_info:
            document["exception"] = redact_text(self.formatException(record.exc_info))
        return json.dumps(document, ensure_ascii=False, default=str)


def _field(key: str, value: object) -> object:
    """``value`` redacted as its ``key=value`` text would be."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = redact_text(f"{key}={value}")
    prefix = f"{key}="
    return text[len(prefix) :] if text.startswith(prefix) else text


def configure_logging(level: str = "INFO", log_format: str = "text") -> None:
    """Send Kickside's logs to stderr, as key=value lines or (``log_format="json"``) JSON lines.

    ``level`` is one of :data:`LOG_LEVELS` and ``log_format`` one of :data:`LOG_FORMATS` (any
    case), else :class:`InvalidArgumentError`.
    """
    name = level.strip().upper() if isinstance(level, str) else level
    if name not in LOG_LEVELS:
        raise InvalidArgumentError(
            f"log level must be one of {', '.join(LOG_LEVELS)}, got {str(level)[:40]!r}"
        )
    shape = log_format.strip().lower() if isinstance(log_format, str) else log_format
    if shape not in LOG_FORMATS:
        raise InvalidArgumentError(
            f"log format must be one of {', '.join(LOG_FORMATS)}, got {str(log_format)[:40]!r}"
        )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if shape == "json" else KeyValueFormatter())
    root = logging.getLogger("kickside")
    root.handlers[:] = [handler]
    root.setLevel(name)
    root.propagate = False
