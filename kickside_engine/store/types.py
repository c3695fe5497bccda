"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Dialect, TypeDecorator
from sqlalchemy.dialects.postgresql import JSONB


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC; a naive datetime is refused (``ValueError``): every timestamp comes
    from the application clock in UTC."""
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: Kickside stores timezone-aware UTC")
    return value.astimezone(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp.

    PostgreSQL stores ``timestamptz``. SQLite has no timezone support, so values are stored as
    naive UTC and given back their UTC tzinfo on the way out. Naive datetimes are refused on the
    way in: every timestamp comes from the application clock in UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = as_utc(value)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)  # type: ignore[no-any-return]
        return value.astimezone(UTC)  # type: ignore[no-any-return]


#: JSON on SQLite, JSONB on PostgreSQL (indexable, compact, canonical key order).
JSONDocument = JSON().with_variant(JSONB(), "postgresql")
#: A nullable JSON document where Python ``None`` is SQL NULL (a job without a result), never
#: the JSON ``null``.
NullableJSONDocument = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
