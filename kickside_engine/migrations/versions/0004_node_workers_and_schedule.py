"""Nodes publish the workers they serve and the cron schedule they run.

``kickside_node.workers`` lists the worker names a running pool can execute, so that a job whose
worker no running node has is explained instead of discarded (during a rolling deploy old pools
leave new job types for new pools). ``kickside_node.schedule`` lists the pool's cron entries
(name, expression, timezone, next due time), so that ``kickside cron`` and the dashboard show
the schedule production runs without importing the application. Both are nullable: a pool of
an older version writes neither, and its row reads as "not published".

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

JSON_DOCUMENT = sa.JSON().with_variant(JSONB(), "postgresql")


def _schema() -> str | None:
    schema: str | None = context.config.attributes.get("schema")
    return schema


def upgrade() -> None:
    schema = _schema()
    op.add_column(
        "kickside_node", sa.Column("workers", JSON_DOCUMENT, nullable=True), schema=schema
    )
    op.add_column(
        "kickside_node", sa.Column("schedule", JSON_DOCUMENT, nullable=True), schema=schema
    )


def downgrade() -> None:
    schema = _schema()
    with op.batch_alter_table("kickside_node", schema=schema) as batch:
        batch.drop_column("schedule")
        batch.drop_column("workers")
