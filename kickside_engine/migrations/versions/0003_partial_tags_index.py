"""Partial GIN index on tags: only jobs that have tags (PostgreSQL).

Every claim and settle writes a new version of a job row (its state changes, and state is
indexed), and each version took an entry in the GIN index on ``tags``, even for the jobs
without tags, which are most of them: a pending-list insert and about 170 bytes of WAL per
version, three per job. Now the index holds only tagged jobs; the tag filter repeats the
predicate so the planner still uses it. SQLite has no such index.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TAGS_INDEX = "ix_kickside_job_tags"
TAGGED = "tags <> '[]'::jsonb"


def _schema() -> str | None:
    schema: str | None = context.config.attributes.get("schema")
    return schema


def _postgresql() -> bool:
    return bool(context.get_context().dialect.name == "postgresql")


def _tags_index(where: str | None) -> None:
    schema = _schema()
    op.drop_index(TAGS_INDEX, table_name="kickside_job", schema=schema)
    op.create_index(
        TAGS_INDEX,
        "kickside_job",
        ["tags"],
        schema=schema,
        postgresql_using="gin",
        postgresql_where=sa.text(where) if where is not None else None,
    )


def upgrade() -> None:
    if _postgresql():
        _tags_index(TAGGED)


def downgrade() -> None:
    if _postgresql():
        _tags_index(None)
