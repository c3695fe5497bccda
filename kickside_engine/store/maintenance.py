"""The statements of the maintenance plugins: staging, rescue, pruning and cron bookkeeping.

Every pool runs every plugin, so each statement is safe to run on many nodes at once: staging
and pruning work on rows nobody else holds (``SKIP LOCKED`` on PostgreSQL, the write lock on
SQLite), a rescue is fenced by the old lease token, and a cron run is recorded by whichever node
inserts its ``(key, run_at)`` row first.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, delete, select, update

from kickside_engine.models import FINAL_STATES, STAGED_STATES, JobState
from kickside_engine.store.database import Database
from kickside_engine.store.tables import state_literal
from kickside_engine.store.workflows import plain_job

_WAITING = sorted(state.value for state in STAGED_STATES)
_FINAL = sorted(state.value for state in FINAL_STATES)


def stage_due(db: Database, conn: Connection, now: datetime, batch: int) -> list[str]:
    """Make up to ``batch`` scheduled or retryable jobs due by ``now`` available; returns the
    queue of each job staged."""
    job = db.tables.job
    due = (
        select(job.c.id)
        .where(job.c.state.in_(_WAITING), job.c.scheduled_at <= now)
        .limit(batch)
        .cte("due")
        .prefix_with("MATERIALIZED", dialect="postgresql")
    )
    rows = conn.execute(
        update(job)
        .where(job.c.id.in_(select(due.c.id)))
        .where(job.c.state.in_(_WAITING))
        .values(state=JobState.AVAILABLE.value, updated_at=now)
        .returning(job.c.queue)
    ).all()
    return [r[0] for r in rows]


def lock_expired_leases(
    db: Database, conn: Connection, now: datetime, batch: int, columns: Sequence[str]
) -> list[Row[Any]]:
    """Up to ``batch`` executing jobs whose lease expired before ``now``, oldest expiry first,
    locked (``SKIP LOCKED`` on PostgreSQL: concurrent Lifelines take other rows)."""
    job = db.tables.job
    stmt = (
        select(*(job.c[name] for name in columns))
        .where(job.c.state == state_literal(JobState.EXECUTING), job.c.lease_expires_at < now)
        .order_by(job.c.lease_expires_at, job.c.id)
        .limit(batch)
    )
    if db.is_postgresql:
        stmt = stmt.with_for_update(skip_locked=True)
    return list(conn.execute(stmt).all())


def delete_final_jobs(db: Database, cutoff: datetime, batch: int) -> tuple[int, int]:
    """In a transaction of its own, delete up to ``batch`` final jobs finalized before
    ``cutoff`` (their runs go with them); returns (jobs selected, jobs deleted).

    The delete re-checks state and age: a job an operator retried meanwhile stays.
    """
    job = db.tables.job
    old = (
        select(job.c.id)
        .where(job.c.state.in_(_FINAL), job.c.finalized_at < cutoff, plain_job(db, job))
        .order_by(job.c.finalized_at)
        .limit(batch)
    )
    if db.is_postgresql:
        # Concurrent pruners on other nodes take other rows instead of waiting on these.
        old = old.with_for_update(skip_locked=True)
    with db.begin() as conn:
        ids = list(conn.execute(old).scalars())
        if not ids:
            return 0, 0
        deleted = conn.execute(
            delete(job).where(
                job.c.id.in_(ids), job.c.state.in_(_FINAL), job.c.finalized_at < cutoff
            )
        ).rowcount
    return len(ids), deleted


def delete_recurring_runs(db: Database, before: datetime) -> int:
    """Delete the cron bookkeeping rows of runs before ``before``; returns how many."""
    table = db.tables.recurring_execution
    with db.begin() as conn:
        return int(conn.execute(delete(table).where(table.c.run_at < before)).rowcount)


def record_cron_run(db: Database, conn: Connection, key: str, run_at: datetime) -> Any:
    """Record that this node fires ``key``'s run at ``run_at``: the row's id, or None when
    another node (or an earlier tick) recorded it first."""
    table = db.tables.recurring_execution
    stmt = (
        db.upsert_insert(table)
        .on_conflict_do_nothing(index_elements=["key", "run_at"])
        .returning(table.c.id)
    )
    return conn.execute(stmt, {"key": key, "run_at": run_at}).scalar_one_or_none()


def attach_cron_job(db: Database, conn: Connection, run_id: Any, job_id: uuid.UUID) -> None:
    """Note the job a recorded cron run enqueued."""
    table = db.tables.recurring_execution
    conn.execute(update(table).where(table.c.id == run_id).values(job_id=job_id))
