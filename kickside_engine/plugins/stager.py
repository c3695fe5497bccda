"""Stager: scheduled and retryable jobs whose time has come become available."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import select, update

from kickside_engine.models import JobState
from kickside_engine.store.database import Database
from kickside_engine.store.notify import local_signal, notify_in_transaction

log = logging.getLogger("kickside.plugins.stager")
BATCH = 5_000


def stage(db: Database, now: datetime, *, batch: int = BATCH) -> int:
    """Make due scheduled/retryable jobs available (at most ``batch``); returns how many."""
    job = db.tables.job
    due = (
        select(job.c.id)
        .where(
            job.c.state.in_([JobState.SCHEDULED.value, JobState.RETRYABLE.value]),
            job.c.scheduled_at <= now,
        )
        .limit(batch)
    )
    with db.begin() as conn:
        rows = conn.execute(
            update(job)
            .where(
                job.c.id.in_(
                    select(due.cte("due").prefix_with("MATERIALIZED", dialect="postgresql").c.id)
                )
            )
            .where(job.c.state.in_([JobState.SCHEDULED.value, JobState.RETRYABLE.value]))
            .values(state=JobState.AVAILABLE.value, updated_at=now)
            .returning(job.c.queue)
        ).all()
        queues = sorted({r[0] for r in rows})
        for queue in queues:
            notify_in_transaction(conn, db, queue)
    if rows:
        log.debug("staged jobs", extra={"plugin": "stager", "count": len(rows)})
        signal = local_signal(db)
        for queue in queues:
            signal.wake(queue)
    return len(rows)
