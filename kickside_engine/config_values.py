"""Parsers of option values, for :data:`~kickside_engine.config_sources.OPTIONS`.

Each takes the raw value (a flag's or a variable's text, or whatever TOML gave: a string, a
number, a boolean, a table) and ``what`` names where it came from (``--lease``,
``KICKSIDE_LEASE``, ``path:worker.lease``); errors name it, so a value from a file gets the
message its flag gets.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from kickside_engine.config import parse_database_url
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.logs import LOG_FORMATS, LOG_LEVELS
from kickside_engine.runtime.config import (
    MAX_LEASE,
    MIN_LEASE,
    parse_duration,
    parse_queue_leases,
    parse_queues,
    validate_queues,
)
from kickside_engine.text import validate_name

#: Largest number of seconds a duration takes (about 31 years).
MAX_SECONDS = 1e9
#: The bounds of a pool's poll interval (a poll finds due jobs no wake-up announced).
MIN_POLL_SECONDS = 0.05
MAX_POLL_SECONDS = 3600.0


def parse_text(raw: Any, what: str) -> str:
    """A non-empty string, stripped."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidArgumentError(f"{what} must be a non-empty string")
    return raw.strip()


def _seconds_text(raw: Any, what: str) -> str:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise InvalidArgumentError(f"{what} must be a duration such as 30s, 5m or 7d")
    return raw if isinstance(raw, str) else repr(raw)


def parse_flag(raw: Any, what: str) -> bool:
    """``true``/``false`` (TOML), or ``1 true yes on`` / ``0 false no off`` (any case)."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower() if isinstance(raw, str) else None
    if text in ("1", "true", "t", "yes", "y", "on"):
        return True
    if text in ("0", "false", "f", "no", "n", "off", ""):
        return False
    raise InvalidArgumentError(f"{what} must be true or false, got {str(raw)[:40]!r}")


def parse_module_spec(raw: Any, what: str) -> str:
    """``module`` or ``module:attribute`` (dotted Python names)."""
    text = parse_text(raw, what)
    module, _, attribute = text.partition(":")
    if not all(p.isidentifier() for p in module.split(".")) or (
        attribute and not attribute.isidentifier()
    ):
        raise InvalidArgumentError(
            f"{what} must name a module or module:attribute, got {text[:80]!r}"
        )
    return text


def parse_lease(raw: Any, what: str) -> timedelta:
    """A duration from 3 seconds to 1 day."""
    return _lease_in_range(parse_duration(_seconds_text(raw, what), what), what)


def _lease_in_range(lease: timedelta, what: str) -> timedelta:
    if not MIN_LEASE <= lease <= MAX_LEASE:
        raise InvalidArgumentError(
            f"lease must be from 3 seconds to 1 day, got {lease.total_seconds():g}s ({what})"
        )
    return lease


def parse_retention(raw: Any, what: str) -> timedelta:
    """A duration of more than 0."""
    return parse_duration(_seconds_text(raw, what), what)


def parse_grace(raw: Any, what: str) -> timedelta:
    """Seconds (``0`` allowed) or a duration such as ``25s``."""
    text = _seconds_text(raw, what)
    try:
        seconds = float(text)
    except ValueError:
        return parse_duration(text, what)
    if not 0 <= seconds <= MAX_SECONDS:  # also refuses nan
        raise InvalidArgumentError(
            f"{what} must be a number of seconds in 0..{MAX_SECONDS:g}, got {text[:40]}"
        )
    return timedelta(seconds=seconds)


def parse_poll_interval(raw: Any, what: str) -> float:
    """Seconds (``0.5``) or a duration (``2s``, ``1m``) from 0.05 seconds to an hour."""
    interval = parse_grace(raw, what).total_seconds()
    if not MIN_POLL_SECONDS <= interval <= MAX_POLL_SECONDS:
        raise InvalidArgumentError(
            f"poll interval must be from {MIN_POLL_SECONDS:g} to {MAX_POLL_SECONDS:g} seconds, "
            f"got {interval:g} ({what})"
        )
    return interval


def parse_count(raw: Any, what: str) -> int:
    """An integer of 0 or more."""
    try:
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise ValueError
        value = int(raw)
    except ValueError:
        raise InvalidArgumentError(f"{what} must be an integer, got {str(raw)[:40]!r}") from None
    if value < 0:
        raise InvalidArgumentError(f"{what} must be 0 or more, got {value}")
    return value


def parse_port(raw: Any, what: str) -> int:
    """A TCP port, 1..65535."""
    value = parse_count(raw, what)
    if not 1 <= value <= 65535:
        raise InvalidArgumentError(f"{what} must be a port from 1 to 65535, got {value}")
    return value


def parse_queue_table(raw: Any, what: str) -> dict[str, int]:
    """``"default:10,mailers:5"`` or a table ``{default = 10, mailers = 5}``."""
    if isinstance(raw, Mapping):
        return validate_queues(dict(raw))
    return parse_queues(parse_text(raw, what))


def parse_queue_lease_table(raw: Any, what: str) -> dict[str, timedelta]:
    """``"reports=5m,exports=1h"`` or a table ``{reports = "5m"}``."""
    if isinstance(raw, Mapping):
        leases = {}
        for queue, lease in raw.items():
            validate_name(queue, "queue", max_length=128)
            leases[queue] = parse_lease(lease, f"{what}.{queue}")
        return leases
    leases = parse_queue_leases(parse_text(raw, what))
    return {queue: _lease_in_range(lease, what) for queue, lease in leases.items()}


def parse_log_level(raw: Any, what: str) -> str:
    """One of :data:`~kickside_engine.logs.LOG_LEVELS`, in any case."""
    level = parse_text(raw, what).upper()
    if level not in LOG_LEVELS:
        raise InvalidArgumentError(
            f"log level must be one of {', '.join(LOG_LEVELS)}, got {str(raw)[:40]!r} ({what})"
        )
    return level


def parse_log_format(raw: Any, what: str) -> str:
    """One of :data:`~kickside_engine.logs.LOG_FORMATS`, in any case."""
    shape = parse_text(raw, what).lower()
    if shape not in LOG_FORMATS:
        raise InvalidArgumentError(
            f"log format must be one of {', '.join(LOG_FORMATS)}, got {str(raw)[:40]!r} ({what})"
        )
    return shape


def parse_url(raw: Any, what: str) -> str:
    """A database URL Kickside can use (errors never show its password)."""
    text = parse_text(raw, what)
    parse_database_url(text)
    return text
