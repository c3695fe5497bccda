"""Nodes publish the newest schema revision their code knows (its head).

``kickside migrate status`` reads ``kickside_node.schema_head`` to say which running pools a
pending migration would stop (expand/contract: a pool runs on a schema whose migrations accept
its head). Nullable: a pool of an older Kickside writes nothing and reads as "unknown".

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None
#: Expand: code at 0006 never reads the column and its heartbeat leaves it NULL.
oldest_code_head = "0006"


def _schema() -> str | None:
    schema: str | None = context.config.attributes.get("schema")
    return schema


def upgrade() -> None:
    op.add_column(
        "kickside_node", sa.Column("schema_head", sa.String(32), nullable=True), schema=_schema()
    )


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite has it since 3.35), as in 0006.
    op.drop_column("kickside_node", "schema_head", schema=_schema())
