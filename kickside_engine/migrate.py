"""Schema migrations: upgrade, downgrade and inspect Kickside's tables with Alembic.

Kickside keeps its own version table (``kickside_alembic_version``), so it never touches a host
application's ``alembic_version``. Every upgrade or downgrade runs in one transaction: on failure
nothing is left half-migrated. On PostgreSQL a transaction-level advisory lock serialises
concurrent migrators.

Everything here works on a schema that is not current (that is what it is for), so it reads
and writes without the once-per-handle schema check the rest of the engine makes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from alembic import command
from alembic.config import Config
from alembic.util.exc import CommandError
from sqlalchemy import Connection, text

from kickside_engine.clock import utcnow
from kickside_engine.errors import NotFoundError
from kickside_engine.store.database import Database
from kickside_engine.store.nodes import NODE_STALE_AFTER, NodeHead, live_node_heads
from kickside_engine.store.revisions import (
    MIGRATIONS_DIR,
    OLDEST_SCHEMA,
    VERSION_TABLE,
    code_floor,
    head_revision,
    known_revisions,
    read_current,
    runs_on,
    unknown_revision,
)

__all__ = [
    "MIGRATIONS_DIR",
    "OLDEST_SCHEMA",
    "VERSION_TABLE",
    "MigrationStatus",
    "NodeHead",
    "code_floor",
    "current_revision",
    "downgrade",
    "ensure_current",
    "head_revision",
    "migration_transaction",
    "revisions",
    "runs_on",
    "status",
    "upgrade",
]

_MIGRATION_LOCK_KEY = 0x4B49434B  # "KICK": serialises concurrent migrators on PostgreSQL


@dataclass(frozen=True)
class MigrationStatus:
    """Where a database's schema stands relative to this version of Kickside."""

    current: str | None
    head: str
    pending: tuple[str, ...]
    #: The oldest code head that runs on the schema once it is at ``head`` (expand/contract).
    oldest_code_head: str | None = None
    #: Running nodes whose code would stop on the upgraded schema (their head is older than
    #: ``oldest_code_head``, or they did not publish one), oldest first.
    stopped_by_upgrade: tuple[NodeHead, ...] = ()

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head


def _config(db: Database, conn: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["connection"] = conn
    cfg.attributes["schema"] = db.schema
    cfg.attributes["dialect"] = db.dialect
    return cfg


def revisions() -> list[str]:
    """Every known revision, oldest first."""
    return list(known_revisions())


def current_revision(db: Database) -> str | None:
    """The revision the database is at, or None for a database Kickside never migrated."""
    with db.read(check_schema=False) as conn:
        return read_current(conn, db.schema)


def status(db: Database) -> MigrationStatus:
    """The database's current revision, this Kickside's head and what an upgrade would apply."""
    current = current_revision(db)
    known = revisions()
    if current is not None and current not in known:
        raise unknown_revision(current)
    start = known.index(current) + 1 if current is not None else 0
    pending = tuple(known[start:])
    floor = code_floor(head_revision())
    stopped: tuple[NodeHead, ...] = ()
    if pending:
        nodes = live_node_heads(db, revision=current, since=utcnow() - NODE_STALE_AFTER)
        stopped = tuple(
            n
            for n in nodes
            if n.schema_head is None  # a Kickside before 0007, or one on a schema before it
            or (n.schema_head in known and not runs_on(n.schema_head, head_revision()))
        )
    return MigrationStatus(
        current=current,
        head=head_revision(),
        pending=pending,
        oldest_code_head=floor,
        stopped_by_upgrade=stopped,
    )


@contextlib.contextmanager
def migration_transaction(db: Database) -> Iterator[Connection]:
    """A transaction to migrate in (on PostgreSQL: the migration lock held, the schema created).

    The ``alembic`` command migrates in one too (``migrations/env.py``).
    """
    with db.begin(check_schema=False) as conn:
        if db.is_postgresql:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
            if db.schema:
                conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{db.schema}"'))
        yield conn


def _run(db: Database, action: str, target: str) -> None:
    try:
        with migration_transaction(db) as conn:
            current = read_current(conn, db.schema)
            if current is not None and current not in known_revisions():
                raise unknown_revision(current)
            cfg = _config(db, conn)
            try:
                if action == "upgrade":
                    command.upgrade(cfg, target)
                else:
                    command.downgrade(cfg, target)
            except CommandError as exc:
                raise NotFoundError(f"cannot {action} to {target!r}: {exc}") from None
    finally:
        db.schema_changed()  # this handle checks the schema again on its next use


def upgrade(db: Database, revision: str = "head") -> MigrationStatus:
    """Upgrade the schema to ``revision`` (default: head). A current database is left as is."""
    _run(db, "upgrade", revision)
    return status(db)


def downgrade(db: Database, revision: str) -> MigrationStatus:
    """Downgrade the schema to ``revision`` (``"base"`` removes every Kickside table)."""
    _run(db, "downgrade", revision)
    return status(db)


def ensure_current(db: Database) -> None:
    """Raise :class:`MigrationError` unless this Kickside runs on the database's schema.

    It runs from its oldest supported schema (:data:`OLDEST_SCHEMA`) up to its head, and on a
    newer schema whose migrations declared that they keep this code's head working
    (expand/contract; see :mod:`kickside_engine.store.revisions`). Always reads the revision
    (unlike the once-per-handle check of :meth:`Database.require_current_schema`); once it
    passes, the handle's check has passed too.
    """
    db.schema_changed()
    db.require_current_schema()
