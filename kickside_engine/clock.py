"""The application clock. Every timestamp Kickside stores comes from here, in UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def ensure_aware(value: datetime, field: str = "timestamp") -> datetime:
    """Return ``value`` in UTC, refusing naive datetimes (their zone would be a guess)."""
    if value.tzinfo is None or value.utcoffset() is None:
        from kickside_engine.errors import InvalidArgumentError

        raise InvalidArgumentError(f"{field} must be timezone-aware, got naive {value.isoformat()}")
    return value.astimezone(UTC)
