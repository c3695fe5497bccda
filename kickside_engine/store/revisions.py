"""Which schema revision a database is at, and whether this version of Kickside can use it.

The revisions are the Alembic scripts shipped in ``kickside_engine/migrations``; the revision a
database is at is the row of Kickside's own version table. :mod:`kickside_engine.migrate`
changes the schema; :meth:`Database.require_current_schema` refuses to work on a schema that
is not at this Kickside's head (too old, not migrated, or newer than this code knows).

Alembic is imported when a revision is first read, not with this module: an application that
imports Kickside to enqueue pays for Alembic on its first transaction (the schema check), and
a process that only imports it never does.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from kickside_engine.errors import MigrationError

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory
    from sqlalchemy import Connection

VERSION_TABLE = "kickside_alembic_version"
MIGRATIONS_DIR = Path(__file__).resolve().parents[1] / "migrations"


@functools.cache
def script_directory() -> ScriptDirectory:
    """The shipped migration scripts (read once per process)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(cfg)


def head_revision() -> str:
    """The newest revision this version of Kickside knows."""
    head = script_directory().get_current_head()
    assert head is not None
    return head


@functools.cache
def known_revisions() -> tuple[str, ...]:
    """Every revision this version of Kickside knows, oldest first."""
    return tuple(s.revision for s in reversed(list(script_directory().walk_revisions())))


def read_current(conn: Connection, schema: str | None) -> str | None:
    """The revision the database is at, or None when Kickside never migrated it."""
    from alembic.runtime.migration import MigrationContext

    ctx = MigrationContext.configure(
        conn, opts={"version_table": VERSION_TABLE, "version_table_schema": schema}
    )
    return ctx.get_current_revision()


def unknown_revision(revision: str) -> MigrationError:
    """The error for a database at a revision this Kickside does not know (a newer one)."""
    return MigrationError(
        f"the database is at migration revision {revision!r}, which this version of Kickside "
        f"does not know (its newest is {head_revision()!r}); upgrade Kickside first"
    )


def schema_problem(current: str | None) -> MigrationError | None:
    """Why a database at revision ``current`` cannot be used, or None when it is at head."""
    if current is not None and current not in known_revisions():
        return unknown_revision(current)
    head = head_revision()
    if current != head:
        where = current or "no Kickside tables"
        return MigrationError(
            f"the database schema is not current ({where}; need {head}): run `kickside migrate`"
        )
    return None
