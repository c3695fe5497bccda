"""Create the engine's tables and, on PostgreSQL, its own updated_at trigger function.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

STATES = (
    "'scheduled', 'available', 'executing', 'retryable', 'completed', 'cancelled', "
    "'discarded', 'parked', 'disabled'"
)
OUTCOMES = (
    "'completed', 'failed', 'snoozed', 'cancelled', 'discarded', 'timeout', 'crashed', 'rescued'"
)
UPDATED_AT_TABLES = ("kickside_job", "kickside_queue", "kickside_setting")

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSONDoc = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def _schema() -> str | None:
    schema: str | None = context.config.attributes.get("schema")
    return schema


def _qualified(name: str) -> str:
    schema = _schema()
    return f'"{schema}".{name}' if schema else name


def upgrade() -> None:
    schema = _schema()
    op.create_table(
        "kickside_job",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False, server_default="oneshot"),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("queue", sa.String(128), nullable=False, server_default="default"),
        sa.Column("worker", sa.String(255), nullable=False),
        sa.Column("args", JSONDoc, nullable=False),
        sa.Column("meta", JSONDoc, nullable=False),
        sa.Column("tags", JSONDoc, nullable=False),
        sa.Column("errors", JSONDoc, nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("max_attempts", sa.Integer(), nullable=False, server_default="20"),
        sa.Column("priority", sa.SmallInteger(), nullable=False, server_default="0"),
        sa.Column("unique_key", sa.String(64), nullable=True),
        sa.Column("namespace", sa.String(255), nullable=True),
        sa.Column("scope", sa.String(255), nullable=True),
        sa.Column("identity_key", sa.String(255), nullable=True),
        sa.Column("concurrency_key", sa.String(255), nullable=True),
        sa.Column("capacity_group", sa.String(255), nullable=True),
        sa.Column("demand_pending", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("control_pending", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("demand_seq", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("lease_owner", sa.String(255), nullable=True),
        sa.Column("lease_token", sa.Uuid(), nullable=True),
        sa.Column("lease_expires_at", TS, nullable=True),
        sa.Column("rescue_count", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("max_execution_ms", sa.BigInteger(), nullable=True),
        sa.Column("inserted_at", TS, nullable=False),
        sa.Column("scheduled_at", TS, nullable=False),
        sa.Column("attempted_at", TS, nullable=True),
        sa.Column("completed_at", TS, nullable=True),
        sa.Column("cancelled_at", TS, nullable=True),
        sa.Column("discarded_at", TS, nullable=True),
        sa.Column("finalized_at", TS, nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_kickside_job"),
        sa.CheckConstraint(f"state IN ({STATES})", name="ck_kickside_job_state"),
        sa.CheckConstraint("kind IN ('oneshot', 'slot')", name="ck_kickside_job_kind"),
        sa.CheckConstraint("priority BETWEEN 0 AND 9", name="ck_kickside_job_priority"),
        sa.CheckConstraint("max_attempts >= 1", name="ck_kickside_job_max_attempts"),
        sa.CheckConstraint("attempt >= 0", name="ck_kickside_job_attempt"),
        sa.CheckConstraint(
            "(state IN ('completed', 'cancelled', 'discarded')) = (finalized_at IS NOT NULL)",
            name="ck_kickside_job_finalized",
        ),
        sa.CheckConstraint(
            "state <> 'executing' OR (lease_owner IS NOT NULL AND lease_token IS NOT NULL"
            " AND lease_expires_at IS NOT NULL)",
            name="ck_kickside_job_executing_lease",
        ),
        sa.CheckConstraint(
            "kind <> 'slot' OR (namespace IS NOT NULL AND scope IS NOT NULL"
            " AND identity_key IS NOT NULL)",
            name="ck_kickside_job_slot_identity",
        ),
        sa.CheckConstraint(
            "state NOT IN ('parked', 'disabled') OR kind = 'slot'",
            name="ck_kickside_job_slot_state",
        ),
        schema=schema,
    )
    job_indexes = {
        "ix_kickside_job_fetch": ["state", "queue", "priority", "scheduled_at", "id"],
        "ix_kickside_job_worker_state": ["worker", "state"],
        "ix_kickside_job_inserted_at": ["inserted_at"],
        "ix_kickside_job_finalized_at": ["finalized_at"],
        "ix_kickside_job_lease": ["state", "lease_expires_at"],
        "ix_kickside_job_concurrency": ["concurrency_key", "state"],
        "ix_kickside_job_capacity": ["capacity_group", "state"],
    }
    for name, columns in job_indexes.items():
        op.create_index(name, "kickside_job", columns, schema=schema)
    op.create_index(
        "uq_kickside_job_unique_key", "kickside_job", ["unique_key"], unique=True, schema=schema
    )
    op.create_index(
        "uq_kickside_job_identity",
        "kickside_job",
        ["namespace", "scope", "identity_key"],
        unique=True,
        schema=schema,
    )
    if context.get_context().dialect.name == "postgresql":
        op.create_index(
            "ix_kickside_job_tags", "kickside_job", ["tags"], postgresql_using="gin", schema=schema
        )

    op.create_table(
        "kickside_job_run",
        sa.Column("id", BigId, nullable=False, autoincrement=True),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("queue", sa.String(128), nullable=False),
        sa.Column("worker", sa.String(255), nullable=False),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("lease_token", sa.Uuid(), nullable=False),
        sa.Column("code_version", sa.String(128), nullable=True),
        sa.Column("queue_ms", sa.BigInteger(), nullable=True),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        sa.Column("duration_ms", sa.BigInteger(), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_kickside_job_run"),
        sa.ForeignKeyConstraint(
            ["job_id"],
            [f"{schema}.kickside_job.id" if schema else "kickside_job.id"],
            name="fk_kickside_job_run_job_id_kickside_job",
            ondelete="CASCADE",
        ),
        sa.CheckConstraint(
            f"outcome IS NULL OR outcome IN ({OUTCOMES})", name="ck_kickside_job_run_outcome"
        ),
        sa.CheckConstraint(
            "(outcome IS NULL) = (finished_at IS NULL)", name="ck_kickside_job_run_settled"
        ),
        schema=schema,
    )
    op.create_index(
        "ix_kickside_job_run_job_id_attempt",
        "kickside_job_run",
        ["job_id", "attempt"],
        schema=schema,
    )
    op.create_index(
        "ix_kickside_job_run_finished_at", "kickside_job_run", ["finished_at"], schema=schema
    )
    op.create_index(
        "uq_kickside_job_run_lease_token",
        "kickside_job_run",
        ["lease_token"],
        unique=True,
        schema=schema,
    )

    op.create_table(
        "kickside_queue",
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("paused_at", TS, nullable=True),
        sa.Column("paused_by", sa.String(255), nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_kickside_queue"),
        schema=schema,
    )
    op.create_table(
        "kickside_node",
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("queues", JSONDoc, nullable=False),
        sa.Column("code_version", sa.String(128), nullable=True),
        sa.Column("executors_busy", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("executors_total", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("heartbeat_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_kickside_node"),
        schema=schema,
    )
    op.create_index(
        "ix_kickside_node_heartbeat_at", "kickside_node", ["heartbeat_at"], schema=schema
    )
    op.create_table(
        "kickside_setting",
        sa.Column("namespace", sa.String(255), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("value", JSONDoc, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("updated_by", sa.String(255), nullable=True),
        sa.PrimaryKeyConstraint("namespace", "key", name="pk_kickside_setting"),
        schema=schema,
    )
    op.create_table(
        "kickside_recurring_execution",
        sa.Column("id", BigId, nullable=False, autoincrement=True),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("run_at", TS, nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_kickside_recurring_execution"),
        sa.UniqueConstraint("key", "run_at", name="uq_kickside_recurring_execution_key_run_at"),
        schema=schema,
    )
    op.create_table(
        "kickside_audit",
        sa.Column("id", BigId, nullable=False, autoincrement=True),
        sa.Column("at", TS, nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target_type", sa.String(32), nullable=False),
        sa.Column("target", sa.String(512), nullable=False),
        sa.Column("details", JSONDoc, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_kickside_audit"),
        schema=schema,
    )
    op.create_index("ix_kickside_audit_at", "kickside_audit", ["at"], schema=schema)

    if context.get_context().dialect.name == "postgresql":
        function = _qualified("kickside_set_updated_at")
        op.execute(
            f"""
            CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                -- Keep a timestamp the application set; fill one it left unchanged.
                IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
                    NEW.updated_at := now();
                END IF;
                RETURN NEW;
            END;
            $$
            """
        )
        for table in UPDATED_AT_TABLES:
            op.execute(
                f"CREATE TRIGGER {table}_updated_at BEFORE UPDATE ON {_qualified(table)} "
                f"FOR EACH ROW EXECUTE FUNCTION {function}()"
            )


def downgrade() -> None:
    schema = _schema()
    if context.get_context().dialect.name == "postgresql":
        for table in UPDATED_AT_TABLES:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_updated_at ON {_qualified(table)}")
        op.execute(f"DROP FUNCTION IF EXISTS {_qualified('kickside_set_updated_at')}()")
    for table in (
        "kickside_audit",
        "kickside_recurring_execution",
        "kickside_setting",
        "kickside_node",
        "kickside_queue",
        "kickside_job_run",
        "kickside_job",
    ):
        op.drop_table(table, schema=schema)
