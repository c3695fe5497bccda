"""The operator API: the reads and actions the CLI and the dashboard use (and nothing else).

Every function takes the :class:`Database` and returns read models; actions record an audit
row (who, host, when, what) in the same transaction as the change.
"""

from __future__ import annotations

import uuid

from sqlalchemy import select

from kickside_engine.ids import parse_uuid
from kickside_engine.models import Run
from kickside_engine.store.database import Database
from kickside_engine.store.rows import run_from_row


def list_runs(db: Database, job_id: uuid.UUID | str) -> list[Run]:
    """Every execution attempt of a job, oldest first."""
    parsed = parse_uuid(job_id)
    if parsed is None:
        return []
    run = db.tables.job_run
    with db.read() as conn:
        rows = conn.execute(select(run).where(run.c.job_id == parsed).order_by(run.c.id)).all()
    return [run_from_row(r) for r in rows]
