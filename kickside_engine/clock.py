"""The application clock. Every timestamp Kickside stores comes from here, in UTC."""

from __future__ import annotations

from datetime import UTC, datetime

#: 1970-01-01 UTC, the origin of Unix time (instants on the wire, rate windows, UUIDv7s).
UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def ensure_aware(value: datetime, field: str = "timestamp") -> datetime:
    """Return ``value`` in UTC, refusing naive datetimes (their zone would be a guess).

    A value that is not a datetime, or that falls outside years 1..9999 once in UTC, is an
    :class:`~kickside_engine.errors.InvalidArgumentError` too.
    """
    from kickside_engine.errors import InvalidArgumentError

    if not isinstance(value, datetime):
        raise InvalidArgumentError(f"{field} must be a datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgumentError(f"{field} must be timezone-aware, got naive {value.isoformat()}")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidArgumentError(
            f"{field} {value.isoformat()} is out of range in UTC (years 1..9999)"
        ) from None
