"""Nodes publish their executors by kind, with busy and total slots (issue 21).

``kickside_node.executors`` holds the pool's executors as a JSON list, one entry per kind:
``{"kind": "async", "executors": 1, "busy": 120, "slots": 200}``. Nullable: a pool of an
older Kickside writes nothing, and operators see its ``executors_busy``/``executors_total``
as process executors, as before.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None
#: Expand: code before it never reads the column and its heartbeat leaves it NULL.
oldest_code_head = "0006"


def _schema() -> str | None:
    schema: str | None = context.config.attributes.get("schema")
    return schema


def upgrade() -> None:
    json_type = sa.JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
    op.add_column(
        "kickside_node", sa.Column("executors", json_type, nullable=True), schema=_schema()
    )


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite has it since 3.35), as in 0007.
    op.drop_column("kickside_node", "executors", schema=_schema())
