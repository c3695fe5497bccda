"""The ``updated_at`` triggers are called only when the update leaves ``updated_at`` alone.

0001's trigger function fills ``updated_at`` with ``now()`` when an update did not change it,
and does nothing when the update set it. Every claim and every settle sets it, so for them the
trigger was a PL/pgSQL call per row that did nothing: two per job, about 15 % of PostgreSQL's
CPU for a drain's writes (``python -m bench.write_cost --backend postgresql base
updated_at_when``). With the function's own test in the trigger's ``WHEN`` clause, the server
evaluates it without calling the function. What the trigger does is unchanged: an update that
leaves ``updated_at`` alone gets ``now()``, one that sets it keeps its value, and (as 0012 made
it) a waiter flagging a job moves nothing.

PostgreSQL only: SQLite has no such triggers. Expand: code of any head from 0006 on runs on it,
as on 0012 (the triggers behave the same).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import context, op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None
oldest_code_head = "0006"

#: The filled-in test of ``kickside_set_updated_at()`` (0001), as a ``WHEN`` condition.
UNSET = "NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at"
#: 0012's condition on the job table: a waiter's flag is not a change of the job.
NOT_A_WAIT = "OLD.awaited IS NOT DISTINCT FROM NEW.awaited"
#: Each table's trigger condition after this revision, and before it (0001, 0012).
CONDITIONS = {
    "kickside_job": (f"{NOT_A_WAIT} AND {UNSET}", NOT_A_WAIT),
    "kickside_queue": (UNSET, None),
    "kickside_setting": (UNSET, None),
}


def _prefix() -> str:
    schema: str | None = context.config.attributes.get("schema")
    return f'"{schema}".' if schema else ""


def _recreate(table: str, condition: str | None) -> None:
    prefix = _prefix()
    op.execute(f"DROP TRIGGER IF EXISTS {table}_updated_at ON {prefix}{table}")
    when = f"WHEN ({condition}) " if condition else ""
    op.execute(
        f"CREATE TRIGGER {table}_updated_at BEFORE UPDATE ON {prefix}{table} FOR EACH ROW "
        f"{when}EXECUTE FUNCTION {prefix}kickside_set_updated_at()"
    )


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, (condition, _) in CONDITIONS.items():
        _recreate(table, condition)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, (_, condition) in CONDITIONS.items():
        _recreate(table, condition)
