"""Which schema revision a database is at, and whether this version of Kickside can run on it.

The revisions are the Alembic scripts shipped in ``kickside_engine/migrations``; the revision a
database is at is the row of Kickside's own version table. :mod:`kickside_engine.migrate`
changes the schema; :meth:`Database.require_current_schema` refuses to work on a schema this
code cannot run on.

Rolling upgrades follow expand/contract, declared in two places:

- Each revision module may set ``oldest_code_head = "000N"``: code whose head revision is
  ``000N`` or newer still runs on a schema at this revision (an *expand* step: a nullable
  column, an index). Without it only code that knows the revision runs on it (a *contract*
  step). A schema at revision S runs code whose head H satisfies
  ``floor(S) <= H``, where ``floor(S)`` is the newest ``oldest_code_head`` of the revisions up
  to S (:func:`code_floor`).
- This code declares :data:`OLDEST_SCHEMA`, the oldest schema it runs on: every column it uses
  unconditionally exists there. A column added later carries ``info={"since": "000N"}`` in
  :mod:`~kickside_engine.store.tables` and is used only where :meth:`Database.has_column` says
  the schema has it.

Old code cannot read a newer revision's declaration from its own scripts, so every migration
records ``floor(S)`` in the database (the ``kickside.schema``/``compatibility`` setting,
:func:`record_compatibility`), and code at an older head reads it there.

Alembic is imported when a revision is first read, not with this module: an application that
imports Kickside to enqueue pays for Alembic on its first transaction (the schema check), and
a process that only imports it never does.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kickside_engine.clock import utcnow
from kickside_engine.errors import MigrationError

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory
    from sqlalchemy import Connection

VERSION_TABLE = "kickside_alembic_version"
#: The oldest schema revision this code runs on (see the module docstring). Raise it when the
#: code starts to use a column or table unconditionally; keep it when a new column is read and
#: written only where :meth:`Database.has_column` allows.
#: 0008: claims clear a job's progress, renewals and settles write it; 0009: claims count the
#: starts of rate-limited capacity groups.
OLDEST_SCHEMA = "0009"
#: Where each migration records the oldest code head its schema runs (``kickside_setting``).
COMPATIBILITY_NAMESPACE = "kickside.schema"
COMPATIBILITY_KEY = "compatibility"
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


def position(revision: str) -> int:
    """Where a known revision stands in the chain (0 for the first)."""
    return known_revisions().index(revision)


@functools.cache
def oldest_code_head(revision: str) -> str:
    """The oldest code head that runs on a schema at ``revision``, as the revision declares."""
    declared = getattr(script_directory().get_revision(revision).module, "oldest_code_head", None)
    if declared is None:
        return revision
    if declared not in known_revisions() or position(declared) > position(revision):
        raise MigrationError(
            f"revision {revision!r} declares oldest_code_head={declared!r}, which is not a "
            "known revision at or before it"
        )
    return str(declared)


def code_floor(revision: str) -> str:
    """The oldest code head that runs on a schema at ``revision`` (every step up to it agrees)."""
    steps = known_revisions()[: position(revision) + 1]
    return max((oldest_code_head(step) for step in steps), key=position)


def runs_on(code_head: str, revision: str) -> bool:
    """Whether code whose head is ``code_head`` runs on a schema at ``revision`` (both known)."""
    if position(code_head) >= position(revision):
        return True  # the code knows the schema (its own oldest schema is checked separately)
    return position(code_floor(revision)) <= position(code_head)


def _setting_table(schema: str | None) -> Any:
    from kickside_engine.store.tables import build_tables

    return build_tables(schema).setting


def record_compatibility(conn: Connection, schema: str | None) -> None:
    """Record, in the migration's transaction, the oldest code head the new schema runs."""
    current = read_current(conn, schema)
    if current is None:
        return  # downgraded to base: no tables left to record in
    floor = code_floor(current)
    if read_recorded_floor(conn, schema, current) == floor:
        return  # nothing changed (``alembic check``, an upgrade of a current schema)
    from sqlalchemy import delete, insert

    table = _setting_table(schema)
    where = (table.c.namespace == COMPATIBILITY_NAMESPACE, table.c.key == COMPATIBILITY_KEY)
    conn.execute(delete(table).where(*where))
    conn.execute(
        insert(table).values(
            namespace=COMPATIBILITY_NAMESPACE,
            key=COMPATIBILITY_KEY,
            value={"schema": current, "oldest_code_head": floor},
            updated_at=utcnow(),
            updated_by="kickside migrate",
        )
    )


def read_recorded_floor(conn: Connection, schema: str | None, revision: str) -> str | None:
    """The oldest code head recorded for a schema at ``revision``, or None if none was."""
    from sqlalchemy import select

    table = _setting_table(schema)
    value = conn.execute(
        select(table.c.value).where(
            table.c.namespace == COMPATIBILITY_NAMESPACE, table.c.key == COMPATIBILITY_KEY
        )
    ).scalar_one_or_none()
    if not isinstance(value, dict) or value.get("schema") != revision:
        return None  # recorded by a migration tool that predates it, or for another revision
    floor = value.get("oldest_code_head")
    return floor if isinstance(floor, str) else None


def check_schema(conn: Connection, schema: str | None) -> tuple[str | None, MigrationError | None]:
    """The revision the database is at, and why this code cannot run on it (None: it can)."""
    current = read_current(conn, schema)
    if current is None or current in known_revisions():
        return current, schema_problem(current)
    return current, schema_problem(
        current, recorded_floor=read_recorded_floor(conn, schema, current)
    )


def schema_problem(
    current: str | None, *, recorded_floor: str | None = None
) -> MigrationError | None:
    """Why this code cannot run on a schema at ``current``, or None when it can.

    ``recorded_floor`` is what the migration to an unknown (newer) ``current`` recorded.
    """
    head = head_revision()
    if current is None or (
        current in known_revisions() and position(current) < position(OLDEST_SCHEMA)
    ):
        where = current or "no Kickside tables"
        return MigrationError(
            f"the database schema is not current ({where}; this Kickside runs on {OLDEST_SCHEMA} "
            f"up to its head {head}): run `kickside migrate`"
        )
    if current in known_revisions():
        return None
    if recorded_floor is None:
        return MigrationError(
            f"the database is at migration revision {current!r}, which this version of Kickside "
            f"does not know (its newest is {head!r}) and which records no compatibility with "
            "it: upgrade Kickside first"
        )
    if recorded_floor not in known_revisions() or position(recorded_floor) > position(head):
        return MigrationError(
            f"the database schema is at revision {current!r}, which runs code whose head is "
            f"{recorded_floor!r} or newer; this Kickside's head is {head!r}: upgrade Kickside "
            "on this node (the schema was contracted past this code)"
        )
    return None


def revision_at_least(current: str | None, revision: str) -> bool:
    """Whether a schema at ``current`` includes ``revision`` (an unknown one is newer)."""
    if current is None:
        return False
    if current not in known_revisions():
        return True
    return position(current) >= position(revision)
