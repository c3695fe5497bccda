"""Settings: JSON values by ``(namespace, key)`` in ``kickside_setting``.

Capacity groups read their limits from here at every claim. Writes go through
:func:`set_setting`, which validates JSON and records who changed what.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, select

from kickside_engine.clock import utcnow
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.store.database import Database
from kickside_engine.text import require_storable_json, require_text


@dataclass(frozen=True)
class Setting:
    """One stored setting."""

    namespace: str
    key: str
    value: Any
    updated_at: datetime
    updated_by: str | None


def check_setting_name(value: str, field: str) -> str:
    """A setting's namespace or key: non-empty storable text of at most 255 characters."""
    if not isinstance(value, str) or not value.strip() or len(value) > 255:
        raise InvalidArgumentError(f"setting {field} must be a non-empty string (≤255)")
    return require_text(value, f"setting {field}")


def set_setting(
    db: Database,
    namespace: str,
    key: str,
    value: Any,
    *,
    updated_by: str | None = None,
    conn: Connection | None = None,
    now: datetime | None = None,
) -> Setting:
    """Create or replace a setting."""
    check_setting_name(namespace, "namespace")
    check_setting_name(key, "key")
    try:
        encoded = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"setting value is not JSON: {exc}") from None
    require_storable_json(encoded, "setting value")
    now = now or utcnow()
    table = db.tables.setting
    stmt = db.upsert_insert(table).values(
        namespace=namespace, key=key, value=value, updated_at=now, updated_by=updated_by
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=["namespace", "key"],
        set_={"value": value, "updated_at": now, "updated_by": updated_by},
    )
    if conn is not None:
        conn.execute(stmt)
    else:
        with db.begin() as own:
            own.execute(stmt)
    return Setting(namespace, key, value, now, updated_by)


def get_settings(
    db: Database, namespace: str | None = None, *, conn: Connection | None = None
) -> list[Setting]:
    """Every setting, or those of one namespace, ordered by namespace and key."""
    table = db.tables.setting
    stmt = select(table).order_by(table.c.namespace, table.c.key)
    if namespace is not None:
        stmt = stmt.where(table.c.namespace == namespace)
    if conn is not None:
        rows = conn.execute(stmt).all()
    else:
        with db.read() as own:
            rows = own.execute(stmt).all()
    return [Setting(r.namespace, r.key, r.value, r.updated_at, r.updated_by) for r in rows]


def delete_setting(db: Database, namespace: str, key: str) -> bool:
    """Remove a setting; True when it existed."""
    table = db.tables.setting
    with db.begin() as conn:
        result = conn.execute(
            delete(table).where(table.c.namespace == namespace, table.c.key == key)
        )
    return result.rowcount > 0


def limit_value(value: Any) -> int | None:
    """A capacity limit: a whole number >= 0, else None (invalid)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
