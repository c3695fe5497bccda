"""Partial indexes: the claim and settle keep the plans they were written for, and cost less.

The concurrency-key and capacity-group indexes now cover only jobs that have a key or group:
as full indexes they matched ``concurrency_key IS NULL AND state = 'available'`` and tempted
the planner into reading every available job and sorting it, instead of walking the fetch
index and stopping at the limit. The run index on ``finished_at`` (used by the Pruner) no longer
holds open runs: with them, settling a batch read through entries of every run settled since
the last vacuum rather than looking each run up by its lease token. The finalized, lease,
unique-key and identity indexes hold only the jobs they are ever asked about, so claiming and
settling a job (each a new row version, as its state changes) inserts fewer index entries.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

PARTIAL = {
    # name: (table, columns, predicate, unique)
    "ix_kickside_job_concurrency": (
        "kickside_job",
        ["concurrency_key", "state"],
        "concurrency_key IS NOT NULL",
        False,
    ),
    "ix_kickside_job_capacity": (
        "kickside_job",
        ["capacity_group", "state"],
        "capacity_group IS NOT NULL",
        False,
    ),
    "ix_kickside_job_run_finished_at": (
        "kickside_job_run",
        ["finished_at"],
        "finished_at IS NOT NULL",
        False,
    ),
    # Each claim and settle rewrites a job row with a new state: an index holding every job
    # costs an insert per job twice over. These now hold only the jobs they are asked about.
    "ix_kickside_job_finalized_at": (
        "kickside_job",
        ["finalized_at"],
        "finalized_at IS NOT NULL",
        False,
    ),
    "ix_kickside_job_lease": (
        "kickside_job",
        ["state", "lease_expires_at"],
        "state = 'executing'",
        False,
    ),
    "uq_kickside_job_unique_key": ("kickside_job", ["unique_key"], "unique_key IS NOT NULL", True),
    "uq_kickside_job_identity": (
        "kickside_job",
        ["namespace", "scope", "identity_key"],
        "identity_key IS NOT NULL",
        True,
    ),
}


def _schema() -> str | None:
    schema: str | None = context.config.attributes.get("schema")
    return schema


def upgrade() -> None:
    schema = _schema()
    for name, (table, columns, predicate, unique) in PARTIAL.items():
        op.drop_index(name, table_name=table, schema=schema)
        where = sa.text(predicate)
        op.create_index(
            name,
            table,
            columns,
            unique=unique,
            schema=schema,
            postgresql_where=where,
            sqlite_where=where,
        )


def downgrade() -> None:
    schema = _schema()
    for name, (table, columns, _predicate, unique) in PARTIAL.items():
        op.drop_index(name, table_name=table, schema=schema)
        op.create_index(name, table, columns, unique=unique, schema=schema)
