"""A job's run history as its purge removes it: settled runs a page at a time.

Running leases and unsettled runs are never deleted here: a purge waits for them.
"""

from __future__ import annotations

import uuid

from sqlalchemy import Connection, delete, exists, select

from kickside_engine.store.database import Database


def delete_settled_runs(db: Database, conn: Connection, job_id: uuid.UUID, limit: int) -> int:
    """Delete up to ``limit`` of the job's settled runs, oldest first; returns how many."""
    run = db.tables.job_run
    page = list(
        conn.execute(
            select(run.c.id)
            .where(run.c.job_id == job_id, run.c.finished_at.is_not(None))
            .order_by(run.c.id)
            .limit(limit)
        ).scalars()
    )
    if page:
        conn.execute(delete(run).where(run.c.id.in_(page)))
    return len(page)


def has_runs(db: Database, conn: Connection, job_id: uuid.UUID, *, settled: bool) -> bool:
    """Whether the job has any settled (or, with ``settled=False``, unsettled) run left."""
    run = db.tables.job_run
    finished = run.c.finished_at.is_not(None) if settled else run.c.finished_at.is_(None)
    return bool(conn.execute(select(exists().where(run.c.job_id == job_id, finished))).scalar())
