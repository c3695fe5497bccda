"""Writing an audit row, and telling dashboards about it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, insert

from kickside_engine.store.database import Database
from kickside_engine.store.notify import notify_in_transaction


def insert_audit_row(db: Database, conn: Connection, row: dict[str, Any]) -> int:
    """Insert one ``kickside_audit`` row through ``conn``; returns its id. Dashboards listening
    on PostgreSQL refresh when the change commits (one notification per action)."""
    audit = db.tables.audit
    new_id = conn.execute(insert(audit).values(**row).returning(audit.c.id)).scalar_one()
    notify_in_transaction(db, conn, f"audit:{row['action']}")
    return int(new_id)
