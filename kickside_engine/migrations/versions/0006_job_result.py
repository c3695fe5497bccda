"""A job's result: what its worker returned, stored on the job (issue 22).

A nullable JSON column (``jsonb`` on PostgreSQL), NULL for a job whose worker returned nothing.
It is the table's last column, as ``Job.result`` is the read model's last field.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None
#: Expand: code at 0005 never reads the column and inserts without it (NULL), so it runs on.
oldest_code_head = "0005"


def _schema() -> str | None:
    schema: str | None = context.config.attributes.get("schema")
    return schema


def upgrade() -> None:
    json_type = sa.JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
    op.add_column("kickside_job", sa.Column("result", json_type, nullable=True), schema=_schema())


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite has it since 3.35): a batch copy of the table would lose its
    # triggers and partial indexes.
    op.drop_column("kickside_job", "result", schema=_schema())
