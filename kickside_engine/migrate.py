"""Schema migrations: upgrade, downgrade and inspect Kickside's tables with Alembic.

Kickside keeps its own version table (``kickside_alembic_version``), so it never touches a host
application's ``alembic_version``. Every upgrade or downgrade runs in one transaction: on failure
nothing is left half-migrated. On PostgreSQL a transaction-level advisory lock serialises
concurrent migrators.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Connection, text

from kickside_engine.errors import MigrationError, NotFoundError
from kickside_engine.store.database import Database

VERSION_TABLE = "kickside_alembic_version"
MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_MIGRATION_LOCK_KEY = 0x4B49434B  # "KICK": serialises concurrent migrators on PostgreSQL


@dataclass(frozen=True)
class MigrationStatus:
    """Where a database's schema stands relative to this version of Kickside."""

    current: str | None
    head: str
    pending: tuple[str, ...]

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


def _script() -> ScriptDirectory:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(cfg)


def head_revision() -> str:
    """The newest revision this version of Kickside knows."""
    head = _script().get_current_head()
    assert head is not None
    return head


def revisions() -> list[str]:
    """Every known revision, oldest first."""
    return [s.revision for s in reversed(list(_script().walk_revisions()))]


def _read_current(conn: Connection, db: Database) -> str | None:
    ctx = MigrationContext.configure(
        conn, opts={"version_table": VERSION_TABLE, "version_table_schema": db.schema}
    )
    return ctx.get_current_revision()


def current_revision(db: Database) -> str | None:
    """The revision the database is at, or None for a database Kickside never migrated."""
    with db.read() as conn:
        return _read_current(conn, db)


def status(db: Database) -> MigrationStatus:
    """The database's current revision, this Kickside's head and what an upgrade would apply."""
    current = current_revision(db)
    known = revisions()
    if current is not None and current not in known:
        raise _unknown_revision(current)
    start = known.index(current) + 1 if current is not None else 0
    return MigrationStatus(current=current, head=head_revision(), pending=tuple(known[start:]))


def _unknown_revision(revision: str) -> MigrationError:
    return MigrationError(
        f"the database is at migration revision {revision!r}, which this version of Kickside "
        f"does not know (its newest is {head_revision()!r}); upgrade Kickside first"
    )


def _run(db: Database, action: str, target: str) -> None:
    with db.begin() as conn:
        if db.is_postgresql:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
            if db.schema:
                conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{db.schema}"'))
        current = _read_current(conn, db)
        if current is not None and current not in revisions():
            raise _unknown_revision(current)
        cfg = _config(db, conn)
        try:
            if action == "upgrade":
                command.upgrade(cfg, target)
            else:
                command.downgrade(cfg, target)
        except CommandError as exc:
            raise NotFoundError(f"cannot {action} to {target!r}: {exc}") from None


def upgrade(db: Database, revision: str = "head") -> MigrationStatus:
    """Upgrade the schema to ``revision`` (default: head). A current database is left as is."""
    _run(db, "upgrade", revision)
    return status(db)


def downgrade(db: Database, revision: str) -> MigrationStatus:
    """Downgrade the schema to ``revision`` (``"base"`` removes every Kickside table)."""
    _run(db, "downgrade", revision)
    return status(db)


def ensure_current(db: Database) -> None:
    """Raise :class:`MigrationError` unless the schema is at this Kickside's head revision."""
    st = status(db)
    if not st.up_to_date:
        where = st.current or "no Kickside tables"
        raise MigrationError(
            f"the database schema is not current ({where}; need {st.head}): run `kickside migrate`"
        )
