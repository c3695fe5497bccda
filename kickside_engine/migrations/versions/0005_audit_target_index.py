"""An index on the audit trail's target: a job's detail reads that job's audit entries.

The dashboard's job detail and its log show the operator actions on one job, read by
``target`` newest first. Without an index each read scanned the audit table back from its
newest entry until it had found a page, the whole table for a job without entries.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import context, op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

INDEX = "ix_kickside_audit_target_id"


def _schema() -> str | None:
    schema: str | None = context.config.attributes.get("schema")
    return schema


def upgrade() -> None:
    op.create_index(INDEX, "kickside_audit", ["target", "id"], schema=_schema())


def downgrade() -> None:
    op.drop_index(INDEX, table_name="kickside_audit", schema=_schema())
