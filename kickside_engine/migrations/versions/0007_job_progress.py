"""A job's progress: what its live attempt last reported (issue 22).

Purely additive: a nullable JSON column (``jsonb`` on PostgreSQL), NULL until the running
attempt reports, cleared by each claim. It is the table's last column, as ``Job.progress`` is
the read model's last field. Code that does not know it never reads or writes it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _schema() -> str | None:
    schema: str | None = context.config.attributes.get("schema")
    return schema


def upgrade() -> None:
    json_type = sa.JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
    op.add_column("kickside_job", sa.Column("progress", json_type, nullable=True), schema=_schema())


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite has it since 3.35): a batch copy of the table would lose its
    # triggers and partial indexes.
    op.drop_column("kickside_job", "progress", schema=_schema())
