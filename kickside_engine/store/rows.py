"""Turning database rows into the engine's read models."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row

from kickside_engine.models import Job, JobError, JobKind, JobState, Run, RunOutcome


def job_from_row(row: Row[Any] | Any) -> Job:
    """A :class:`Job` from a ``kickside_job`` row."""
    m = row._mapping
    return Job(
        id=m["id"],
        kind=JobKind(m["kind"]),
        state=JobState(m["state"]),
        queue=m["queue"],
        worker=m["worker"],
        args=m["args"] or {},
        meta=m["meta"] or {},
        tags=list(m["tags"] or []),
        errors=[_error(e) for e in (m["errors"] or [])],
        attempt=m["attempt"],
        max_attempts=m["max_attempts"],
        priority=m["priority"],
        unique_key=m["unique_key"],
        namespace=m["namespace"],
        scope=m["scope"],
        identity_key=m["identity_key"],
        concurrency_key=m["concurrency_key"],
        capacity_group=m["capacity_group"],
        demand_pending=bool(m["demand_pending"]),
        control_pending=bool(m["control_pending"]),
        demand_seq=int(m["demand_seq"]),
        lease_owner=m["lease_owner"],
        lease_token=m["lease_token"],
        lease_expires_at=m["lease_expires_at"],
        rescue_count=m["rescue_count"],
        max_execution_ms=m["max_execution_ms"],
        inserted_at=m["inserted_at"],
        scheduled_at=m["scheduled_at"],
        attempted_at=m["attempted_at"],
        completed_at=m["completed_at"],
        cancelled_at=m["cancelled_at"],
        discarded_at=m["discarded_at"],
        finalized_at=m["finalized_at"],
        updated_at=m["updated_at"],
    )


def _error(entry: dict[str, Any]) -> JobError:
    at = entry.get("at")
    return JobError(
        attempt=int(entry.get("attempt", 0)),
        at=datetime.fromisoformat(at) if isinstance(at, str) else at,  # type: ignore[arg-type]
        error=str(entry.get("error", "")),
    )


def run_from_row(row: Row[Any] | Any) -> Run:
    """A :class:`Run` from a ``kickside_job_run`` row."""
    m = row._mapping
    return Run(
        id=m["id"],
        job_id=m["job_id"],
        attempt=m["attempt"],
        queue=m["queue"],
        worker=m["worker"],
        node=m["node"],
        lease_token=m["lease_token"],
        code_version=m["code_version"],
        queue_ms=m["queue_ms"],
        started_at=m["started_at"],
        finished_at=m["finished_at"],
        duration_ms=m["duration_ms"],
        outcome=RunOutcome(m["outcome"]) if m["outcome"] else None,
        error=m["error"],
    )
