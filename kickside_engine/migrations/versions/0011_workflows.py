"""Workflows: jobs that wait for other jobs (issue 24).

A job whose upstream jobs are not all final is ``waiting``, a state of its own (the state CHECK
allows it from here on). ``kickside_workflow_step`` holds each job of a workflow with the count
of its upstreams not final yet; ``kickside_workflow_edge`` one row per dependency, resolved with
the upstream's final state exactly once (``store/workflows.py``).

Expand: code before it never reads the new tables, inserts no waiting job and never sees one
unless a workflow is enqueued; a pool of that code settling an upstream leaves its edges
unresolved, and the Stager of a pool that knows workflows resolves them (the sweep in
``store/workflows.py``), so a rolling upgrade delays a release by at most a Stager tick.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None
oldest_code_head = "0006"

JOB = "kickside_job"
STATE_CHECK = "ck_kickside_job_state"
OLD_STATES = (
    "'scheduled', 'available', 'executing', 'retryable', 'completed', 'cancelled', "
    "'discarded', 'parked', 'disabled'"
)
NEW_STATES = OLD_STATES + ", 'waiting'"


def _schema() -> str | None:
    schema: str | None = context.config.attributes.get("schema")
    return schema


def _replace_state_check(old: str, new: str) -> None:
    schema = _schema()
    if op.get_bind().dialect.name == "sqlite":
        _replace_sqlite_check(f"state IN ({old})", f"state IN ({new})")
        return
    op.drop_constraint(STATE_CHECK, JOB, type_="check", schema=schema)
    op.create_check_constraint(STATE_CHECK, JOB, sa.text(f"state IN ({new})"), schema=schema)


def _replace_sqlite_check(old: str, new: str) -> None:
    """Rewrite the CHECK in the table's stored definition, as SQLite documents for changes
    that do not touch stored rows (https://www.sqlite.org/lang_altertable.html#otheralter):
    every existing row satisfies either list.

    Not Alembic's batch copy: dropping the old table under ``PRAGMA foreign_keys=ON`` (which
    cannot be turned off inside the migration's transaction) deletes every run row through
    ``ON DELETE CASCADE``, and the copy takes time in proportion to the jobs stored.
    """
    bind = op.get_bind()
    definition = bind.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (JOB,)
    ).scalar_one()
    if definition.count(old) != 1:
        raise RuntimeError(f"{JOB}'s definition does not hold the CHECK {old!r} once")
    version = bind.exec_driver_sql("PRAGMA schema_version").scalar_one()
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    try:
        bind.exec_driver_sql(
            "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?",
            (definition.replace(old, new), JOB),
        )
        bind.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        bind.exec_driver_sql("PRAGMA writable_schema = OFF")


def upgrade() -> None:
    schema = _schema()
    _replace_state_check(OLD_STATES, NEW_STATES)
    job_id = f"{schema}.{JOB}.id" if schema else f"{JOB}.id"
    op.create_table(
        "kickside_workflow_step",
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("workflow_id", sa.String(255), nullable=False),
        sa.Column("step", sa.String(255), nullable=False),
        sa.Column("upstreams", sa.Integer(), nullable=False),
        sa.Column("upstreams_pending", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", name="pk_kickside_workflow_step"),
        sa.ForeignKeyConstraint(
            ["job_id"],
            [job_id],
            name="fk_kickside_workflow_step_job_id_kickside_job",
            ondelete="CASCADE",
        ),
        sa.CheckConstraint(
            "upstreams_pending BETWEEN 0 AND upstreams", name="ck_kickside_workflow_step_pending"
        ),
        schema=schema,
    )
    op.create_index(
        "ix_kickside_workflow_step_workflow_id_step",
        "kickside_workflow_step",
        ["workflow_id", "step"],
        unique=True,
        schema=schema,
    )
    op.create_table(
        "kickside_workflow_edge",
        sa.Column("downstream_id", sa.Uuid(), nullable=False),
        sa.Column("upstream_id", sa.Uuid(), nullable=False),
        sa.Column("on_failure", sa.String(8), nullable=False),
        sa.Column("resolved_state", sa.String(16), nullable=True),
        sa.PrimaryKeyConstraint("downstream_id", "upstream_id", name="pk_kickside_workflow_edge"),
        sa.ForeignKeyConstraint(
            ["downstream_id"],
            [job_id],
            name="fk_kickside_workflow_edge_downstream_id_kickside_job",
            ondelete="CASCADE",
        ),
        sa.CheckConstraint(
            "on_failure IN ('cancel', 'run')", name="ck_kickside_workflow_edge_on_failure"
        ),
        schema=schema,
    )
    op.create_index(
        "ix_kickside_workflow_edge_upstream_id",
        "kickside_workflow_edge",
        ["upstream_id"],
        schema=schema,
        postgresql_where=sa.text("resolved_state IS NULL"),
        sqlite_where=sa.text("resolved_state IS NULL"),
    )


def downgrade() -> None:
    schema = _schema()
    table = f"{schema}.{JOB}" if schema else JOB
    waiting = (
        op.get_bind()
        .execute(sa.text(f"SELECT count(*) FROM {table} WHERE state = 'waiting'"))
        .scalar_one()
    )
    if waiting:
        # The old CHECK cannot hold them, and making them runnable would run them before
        # their upstreams: refuse, and say what to do.
        raise RuntimeError(
            f"cannot downgrade below 0011: {waiting} workflow jobs are waiting on upstream "
            "jobs; let their workflows finish or cancel them first"
        )
    op.drop_index(
        "ix_kickside_workflow_edge_upstream_id", table_name="kickside_workflow_edge", schema=schema
    )
    op.drop_table("kickside_workflow_edge", schema=schema)
    op.drop_index(
        "ix_kickside_workflow_step_workflow_id_step",
        table_name="kickside_workflow_step",
        schema=schema,
    )
    op.drop_table("kickside_workflow_step", schema=schema)
    _replace_state_check(NEW_STATES, OLD_STATES)
