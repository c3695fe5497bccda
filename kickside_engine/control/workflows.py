"""Operator actions on a whole workflow: cancel it, or retry what failed in it.

Each runs in one transaction with one audit row, locks every job of the workflow in id order
(so a settle of one of its jobs on another node waits, or is seen), and touches no job the
caller did not preview: ``only`` restricts the action to the ids that were shown (a job can
leave the eligible states meanwhile; none can join a workflow after its insert).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row

from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import ensure_aware
from kickside_engine.control.actions import apply_job_action, eligible_states
from kickside_engine.errors import NotFoundError
from kickside_engine.models import JobState
from kickside_engine.store.database import Database
from kickside_engine.store.jobs import lock_jobs, move_job
from kickside_engine.store.notify import local_signal
from kickside_engine.store.rows import job_from_row
from kickside_engine.store.workflows import read_steps, reopen
from kickside_engine.workflow import WorkflowView, get_workflow

#: What a workflow retry runs again.
RETRIED_STATES = frozenset({JobState.CANCELLED, JobState.DISCARDED})


@dataclass(frozen=True)
class WorkflowChange:
    """What a workflow action did: the ids it changed, and the workflow after it."""

    workflow_id: str
    changed: list[uuid.UUID]
    workflow: WorkflowView


def cancelable(view: WorkflowView) -> list[uuid.UUID]:
    """The jobs of ``view`` that a cancel of the workflow would cancel (the preview)."""
    states = eligible_states("cancel")
    return [s.job_id for s in view.steps if s.state in states]


def retryable(view: WorkflowView) -> list[uuid.UUID]:
    """The jobs of ``view`` that a retry of the workflow would run again (the preview)."""
    return [s.job_id for s in view.steps if s.state in RETRIED_STATES]


def cancel_workflow(
    db: Database,
    workflow_id: str,
    actor: Actor,
    now: datetime,
    *,
    only: Collection[uuid.UUID] | None = None,
) -> WorkflowChange:
    """Cancel every job of the workflow that is not final (executing ones are aborted on their
    nodes, as :func:`~kickside_engine.control.actions.cancel_job` does); with ``only``, just
    those of these ids. One audit row."""
    now = ensure_aware(now, "now")
    with db.begin() as conn:
        rows = _locked(db, conn, workflow_id)
        changed: list[uuid.UUID] = []
        states = eligible_states("cancel")
        for row in rows:
            job = job_from_row(row)
            if job.state not in states or (only is not None and job.id not in only):
                continue
            # A cascade from an earlier cancel may have cancelled it since it was locked.
            current = job_from_row(lock_jobs(db, conn, [job.id])[0])
            if current.state not in states:
                continue
            if apply_job_action(db, conn, current, "cancel", actor, now) is not None:
                changed.append(job.id)
        record_audit(
            db,
            conn,
            actor,
            "cancel_workflow",
            "workflow",
            workflow_id,
            {"cancelled": len(changed)},
            now,
        )
        view = get_workflow(db, workflow_id, conn=conn)
    return WorkflowChange(workflow_id, changed, view)


def retry_workflow(
    db: Database,
    workflow_id: str,
    actor: Actor,
    now: datetime,
    *,
    only: Collection[uuid.UUID] | None = None,
) -> WorkflowChange:
    """Run the cancelled and discarded jobs of the workflow again (with ``only``, those of
    these ids): each goes back to ``waiting`` while any of its upstreams is not final again,
    else to ``available``; the jobs downstream of them wait for them again. Completed jobs
    are left alone. One audit row."""
    now = ensure_aware(now, "now")
    with db.begin() as conn:
        rows = _locked(db, conn, workflow_id)
        jobs = [job_from_row(row) for row in rows]
        retried = [j for j in jobs if j.state in RETRIED_STATES and (only is None or j.id in only)]
        # Their edges open first, so each retried job's count includes the upstreams retried
        # with it; a job still waiting counts them too.
        pending = reopen(db, conn, workflow_id, [j.id for j in retried])
        queues: set[str] = set()
        for job in retried:
            target = JobState.WAITING if pending.get(job.id, 0) else JobState.AVAILABLE
            values: dict[str, Any] = {
                "state": target.value,
                "updated_at": now,
                "scheduled_at": now,
                "finalized_at": None,
                "completed_at": None,
                "cancelled_at": None,
                "discarded_at": None,
            }
            if job.attempt >= job.max_attempts:
                values["max_attempts"] = job.attempt + 1
            moved = move_job(db, conn, job.id, values, where={"state": job.state.value})
            if moved is not None and target is JobState.AVAILABLE:
                queues.add(job.queue)
        _rewait(db, conn, workflow_id, pending, {j.id for j in retried}, now)
        record_audit(
            db,
            conn,
            actor,
            "retry_workflow",
            "workflow",
            workflow_id,
            {"retried": len(retried)},
            now,
        )
        view = get_workflow(db, workflow_id, conn=conn)
    signal = local_signal(db)
    for queue in sorted(queues):
        signal.wake(queue)
    return WorkflowChange(workflow_id, [j.id for j in retried], view)


def _rewait(
    db: Database,
    conn: Connection,
    workflow_id: str,
    pending: dict[uuid.UUID, int],
    retried: set[uuid.UUID],
    now: datetime,
) -> None:
    """Jobs not retried that were released but have not started (available or scheduled)
    while an upstream now runs again go back to waiting for it."""
    for row in read_steps(db, conn, workflow_id):
        if row.job_id in retried or not pending.get(row.job_id):
            continue
        if row.state in (JobState.AVAILABLE.value, JobState.SCHEDULED.value):
            move_job(
                db,
                conn,
                row.job_id,
                {"state": JobState.WAITING.value, "updated_at": now},
                where={"state": row.state},
            )


def _locked(db: Database, conn: Connection, workflow_id: str) -> list[Row[Any]]:
    """Every job row of the workflow, locked in id order."""
    ids = [row.job_id for row in read_steps(db, conn, workflow_id)]
    if not ids:
        raise NotFoundError(f"workflow {workflow_id} not found")
    return list(lock_jobs(db, conn, ids))
