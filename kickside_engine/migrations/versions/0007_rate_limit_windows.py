"""Rate limits of capacity groups: a counter of job starts per group or key and window (issue 24).

``kickside_rate_window`` holds one row per capacity group (``concurrency_key`` ``''``) or per
group and concurrency key, and per fixed rate window; claims add their starts to it under the
admission lock (``store/rate_windows.py``). The index on ``window_end`` serves the Pruner, which
deletes the rows of ended windows.

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

TABLE = "kickside_rate_window"
TS = sa.DateTime(timezone=True)


def _schema() -> str | None:
    schema: str | None = context.config.attributes.get("schema")
    return schema


def upgrade() -> None:
    schema = _schema()
    op.create_table(
        TABLE,
        sa.Column("capacity_group", sa.String(255), nullable=False),
        sa.Column("concurrency_key", sa.String(255), nullable=False),
        sa.Column("window_start", TS, nullable=False),
        sa.Column("window_end", TS, nullable=False),
        sa.Column("admitted", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "capacity_group",
            "concurrency_key",
            "window_start",
            "window_end",
            name="pk_kickside_rate_window",
        ),
        sa.CheckConstraint("admitted >= 0", name="ck_kickside_rate_window_admitted"),
        sa.CheckConstraint("window_end > window_start", name="ck_kickside_rate_window_window"),
        schema=schema,
    )
    op.create_index("ix_kickside_rate_window_window_end", TABLE, ["window_end"], schema=schema)


def downgrade() -> None:
    schema = _schema()
    op.drop_index("ix_kickside_rate_window_window_end", table_name=TABLE, schema=schema)
    op.drop_table(TABLE, schema=schema)
