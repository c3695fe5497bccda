"""What a worker pool's database role (or SQLite file) must be allowed, said when it is not.

A pool writes every Kickside table (claims, runs, its node's heartbeat, the plugins' work), so
a role that may only read fails on the pool's first write. :func:`worker_permission_error`
turns that refusal into one line that says what to grant.
"""

from __future__ import annotations

from kickside_engine.errors import PermissionDeniedError
from kickside_engine.store.database import Database
from kickside_engine.store.sqlite_file import sqlite_path


def worker_grants(db: Database) -> str:
    """What to grant (PostgreSQL) or change (SQLite) so that a pool may write ``db``."""
    url = db.engine.url
    if db.is_sqlite:
        if str(url.query.get("mode", "")).lower() == "ro":
            return "a worker writes the database: open it without mode=ro"
        return (
            f"a worker writes the database: give this user write access to {sqlite_path(url)} "
            "and its folder (SQLite keeps -wal and -shm files beside it)"
        )
    role = f'"{url.username}"' if url.username else "the worker's role"
    schema = f'"{db.schema}"' if db.schema else "public"
    return (
        f"a worker writes Kickside's tables: GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES "
        f"IN SCHEMA {schema} TO {role}; GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}"
    )


def worker_permission_error(db: Database, refused: PermissionDeniedError) -> PermissionDeniedError:
    """``refused`` (a write the database refused a pool) as one line saying what to grant."""
    cause = refused.__cause__
    detail = str(getattr(cause, "orig", None) or refused).strip().splitlines()
    reason = detail[0] if detail else "permission denied"
    if not reason.startswith("permission denied"):
        reason = f"permission denied: {reason}"
    return PermissionDeniedError(f"{reason}; {worker_grants(db)}")
