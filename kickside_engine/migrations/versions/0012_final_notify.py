"""Waiters hear a job finish: ``kickside_job.awaited`` and, on PostgreSQL, a trigger (issue 22).

:func:`~kickside_engine.waiting.wait_for` sets ``awaited`` on the job it waits for. On
PostgreSQL a row trigger notifies ``kickside_<schema>_final`` (payload: the job id) when an
awaited job becomes completed, cancelled or discarded, or is deleted, in the transaction that
does it. The trigger's ``WHEN`` clause is evaluated by the server without calling the
function, so a job nobody waits for costs the settle nothing (no notification, no PL/pgSQL
call); a notification per finished job would take PostgreSQL's cluster-wide notify lock at
every settle commit. Being in the database, it fires for every writer: this code's settles,
operators' cancels, the Lifeline, and pools of older code during a rolling upgrade.

Flagging a job is not a change of the job: the ``updated_at`` trigger of ``kickside_job``
(0001) is created again with a ``WHEN`` that leaves an update of ``awaited`` alone, so a wait
never moves a job's ``updated_at``.

On SQLite the column exists too (one schema on both databases) and is never set: waiters there
read the job (see ``kickside_engine/waiting.py``).

Expand: code before it inserts without the column (false) and never reads it.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None
oldest_code_head = "0006"

JOB = "kickside_job"
FUNCTION = "kickside_job_final_notify"
TRIGGERS = ("kickside_job_final_notify", "kickside_job_deleted_notify")
UPDATED_AT_TRIGGER = "kickside_job_updated_at"


def _schema() -> str | None:
    schema: str | None = context.config.attributes.get("schema")
    return schema


def final_channel(schema: str | None) -> str:
    """The channel waiters listen on: :func:`kickside_engine.store.final_watch.final_channel`."""
    return f"kickside_{schema or 'public'}_final"


def upgrade() -> None:
    schema = _schema()
    op.add_column(
        JOB,
        sa.Column("awaited", sa.Boolean(), nullable=False, server_default=sa.false()),
        schema=schema,
    )
    if op.get_bind().dialect.name != "postgresql":
        return
    prefix = f'"{schema}".' if schema else ""
    channel = final_channel(schema).replace("'", "''")
    op.execute(
        f"CREATE FUNCTION {prefix}{FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        f"BEGIN\n"
        f"  IF TG_OP = 'DELETE' THEN\n"
        f"    PERFORM pg_notify('{channel}', OLD.id::text);\n"
        f"  ELSE\n"
        f"    PERFORM pg_notify('{channel}', NEW.id::text);\n"
        f"  END IF;\n"
        f"  RETURN NULL;\n"
        f"END\n$$"
    )
    op.execute(
        f"CREATE TRIGGER {TRIGGERS[0]} AFTER UPDATE OF state ON {prefix}{JOB} FOR EACH ROW "
        f"WHEN (NEW.awaited AND NEW.state IN ('completed', 'cancelled', 'discarded') "
        f"AND OLD.state IS DISTINCT FROM NEW.state) "
        f"EXECUTE FUNCTION {prefix}{FUNCTION}()"
    )
    op.execute(
        f"CREATE TRIGGER {TRIGGERS[1]} AFTER DELETE ON {prefix}{JOB} FOR EACH ROW "
        f"WHEN (OLD.awaited) EXECUTE FUNCTION {prefix}{FUNCTION}()"
    )
    _updated_at_trigger(prefix, "WHEN (OLD.awaited IS NOT DISTINCT FROM NEW.awaited) ")


def _updated_at_trigger(prefix: str, when: str) -> None:
    """Create 0001's ``updated_at`` trigger of the job table again, with ``when``."""
    op.execute(f"DROP TRIGGER IF EXISTS {UPDATED_AT_TRIGGER} ON {prefix}{JOB}")
    op.execute(
        f"CREATE TRIGGER {UPDATED_AT_TRIGGER} BEFORE UPDATE ON {prefix}{JOB} FOR EACH ROW "
        f"{when}EXECUTE FUNCTION {prefix}kickside_set_updated_at()"
    )


def downgrade() -> None:
    schema = _schema()
    if op.get_bind().dialect.name == "postgresql":
        prefix = f'"{schema}".' if schema else ""
        for trigger in TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {trigger} ON {prefix}{JOB}")
        op.execute(f"DROP FUNCTION IF EXISTS {prefix}{FUNCTION}()")
        _updated_at_trigger(prefix, "")  # as 0001 made it: the column it tests goes next
    # A plain DROP COLUMN (SQLite has it since 3.35), as in 0006.
    op.drop_column(JOB, "awaited", schema=schema)
