"""Slot jobs: the operator's slot reads and actions, and everything slot users need in one place.

A slot ``(namespace, scope, key)`` runs whenever it has demand and parks in between. Enrolling
lives in :mod:`kickside_engine.enrollment`, wakes in :mod:`kickside_engine.wake` and purges in
:mod:`kickside_engine.purge`; all are re-exported here so that slot users import one module.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row

from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import ensure_aware, utcnow
from kickside_engine.enrollment import enqueue_slot
from kickside_engine.errors import ConflictError, InvalidArgumentError, NotFoundError
from kickside_engine.ids import parse_job_id
from kickside_engine.models import PENDING_STATES, Job, JobKind, JobState, RunOutcome
from kickside_engine.purge import (
    RUNS_PER_CALL,
    PurgeRequest,
    PurgeResult,
    purge_request,
    purge_slot,
    withdraw_purge,
)
from kickside_engine.store.database import Database
from kickside_engine.store.jobs import last_runs, lock_job, move_job, read_slots
from kickside_engine.store.notify import local_signal, notify_in_transaction
from kickside_engine.store.rows import job_from_row
from kickside_engine.text import require_text
from kickside_engine.wake import (
    WakeKey,
    WakeMultiResult,
    WakeResult,
    nudge_workers,
    wake_job,
    wake_multi,
)

__all__ = [
    "RUNS_PER_CALL",
    "PurgeRequest",
    "PurgeResult",
    "SlotInfo",
    "WakeKey",
    "WakeMultiResult",
    "WakeResult",
    "disable_slot",
    "enable_slot",
    "enqueue_slot",
    "list_slots",
    "nudge_workers",
    "park_job",
    "purge_request",
    "purge_slot",
    "wake_job",
    "wake_multi",
    "withdraw_purge",
]

# Scheduled and retryable slots may be disabled too: a failing slot is the usual reason.
_DISABLE_FROM = PENDING_STATES | {JobState.PARKED}
_PARK_FROM = PENDING_STATES


@dataclass(frozen=True)
class SlotInfo:
    """One slot as an operator sees it.

    ``due`` means a claim could take it now; ``next_due_at`` is when a pending slot becomes
    claimable (None while parked, disabled or running). ``purge`` is the pending purge request
    (None: none): the slot runs no more and goes once the purge is done.
    """

    job_id: uuid.UUID
    namespace: str
    scope: str
    key: str
    queue: str
    worker: str
    state: JobState
    demand_pending: bool
    control_pending: bool
    demand_seq: int
    due: bool
    next_due_at: datetime | None
    last_started_at: datetime | None
    last_finished_at: datetime | None
    last_outcome: RunOutcome | None
    purge: PurgeRequest | None = None


def list_slots(
    db: Database,
    *,
    namespace: str | None = None,
    scope: str | None = None,
    limit: int = 200,
    now: datetime | None = None,
) -> list[SlotInfo]:
    """Slots ordered by identity, optionally of one namespace (and scope), with their last run."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise InvalidArgumentError(f"limit must be 1..10000, got {limit!r}")
    now = ensure_aware(now, "now") if now is not None else utcnow()
    namespace = _lookup(namespace, "namespace") if namespace is not None else None
    scope = _lookup(scope, "scope") if scope is not None else None
    with db.read() as conn:
        jobs = read_slots(db, conn, namespace=namespace, scope=scope, limit=limit)
        last = last_runs(db, conn, [j.id for j in jobs])
    return [_slot_info(j, last.get(j.id), now) for j in jobs]


def _lookup(value: str, field: str) -> str:
    """A lookup value: any length (a longer one matches nothing), but storable text."""
    return require_text(value, field, max_length=None, allow_empty=True)


def _slot_info(job: Job, last: Row[Any] | None, now: datetime) -> SlotInfo:
    pending = job.state in (JobState.AVAILABLE, JobState.SCHEDULED, JobState.RETRYABLE)
    return SlotInfo(
        job_id=job.id,
        namespace=job.namespace or "",
        scope=job.scope or "",
        key=job.identity_key or "",
        queue=job.queue,
        worker=job.worker,
        state=job.state,
        demand_pending=job.demand_pending,
        control_pending=job.control_pending,
        demand_seq=job.demand_seq,
        due=pending and job.scheduled_at <= now,
        next_due_at=job.scheduled_at if pending else None,
        last_started_at=last.started_at if last is not None else None,
        last_finished_at=last.finished_at if last is not None else None,
        last_outcome=RunOutcome(last.outcome) if last is not None and last.outcome else None,
        purge=purge_request(job.meta),
    )


def _locked_slot(db: Database, conn: Connection, job_id: uuid.UUID) -> Row[Any]:
    row = lock_job(db, conn, job_id)
    if row is None:
        raise NotFoundError(f"job {job_id} not found")
    if row.kind != JobKind.SLOT.value:
        raise ConflictError(
            f"job {job_id} is a one-shot job, not a slot",
            details={"kind": row.kind, "state": row.state},
        )
    return row


def _set(db: Database, conn: Connection, job_id: uuid.UUID, values: dict[str, Any]) -> Job:
    moved = move_job(db, conn, job_id, values)
    assert moved is not None  # locked by this transaction
    return moved


def disable_slot(
    db: Database,
    job_id: uuid.UUID | str,
    *,
    now: datetime | None = None,
    actor: Actor | None = None,
    conn: Connection | None = None,
) -> Job:
    """Take a slot out of service: wakes are recorded but it does not run until enabled.

    A disabled slot stays disabled (idempotent). A running slot cannot be disabled
    (:class:`ConflictError`, ``details["state"] == "executing"``): disable it after the run.
    """
    now = ensure_aware(now, "now") if now is not None else utcnow()
    return _move_slot(db, job_id, "disable", JobState.DISABLED, _DISABLE_FROM, {}, now, actor, conn)


def _move_slot(
    db: Database,
    job_id: uuid.UUID | str,
    action: str,
    target: JobState,
    allowed_from: frozenset[JobState],
    values: dict[str, Any],
    now: datetime,
    actor: Actor | None,
    conn: Connection | None,
) -> Job:
    """An operator's move of a slot to ``target`` (with ``values``) from ``allowed_from``:
    nothing changes when it is there already, and any other state is a conflict. Audited
    either way; in ``conn``'s transaction when given."""
    parsed = parse_job_id(job_id)
    with db.transaction(conn) as tx:
        row = _locked_slot(db, tx, parsed)
        state = JobState(row.state)
        if state is target:
            unchanged = job_from_row(row)
            _audit(db, tx, actor, action, unchanged, now, changed=False)
            return unchanged
        if state not in allowed_from:
            raise ConflictError(
                f"slot {parsed} is {state.value} and cannot be {target.value} now",
                details={"state": state.value},
            )
        moved = _set(db, tx, parsed, {**values, "state": target.value, "updated_at": now})
        _audit(db, tx, actor, action, moved, now)
        return moved


def enable_slot(
    db: Database,
    job_id: uuid.UUID | str,
    *,
    now: datetime | None = None,
    actor: Actor | None = None,
    conn: Connection | None = None,
) -> Job:
    """Put a disabled slot back in service: due now if a wake is pending, else parked.

    Enabling a slot that is not disabled changes nothing. In ``conn``'s transaction when given
    (then this process's pools are woken when the caller commits, as for any change there).
    """
    parsed = parse_job_id(job_id)
    now = ensure_aware(now, "now") if now is not None else utcnow()
    with db.transaction(conn) as tx:
        enabled, changed = enable_in_transaction(db, tx, parsed, now)
        _audit(db, tx, actor, "enable", enabled, now, changed=changed)
    if conn is None and enabled.state is JobState.AVAILABLE:
        local_signal(db).wake(enabled.queue)
    return enabled


def enable_in_transaction(
    db: Database, conn: Connection, job_id: uuid.UUID, now: datetime
) -> tuple[Job, bool]:
    """:func:`enable_slot`'s change in ``conn``'s transaction, unaudited: the slot after it,
    and whether it changed (only a disabled slot does). The caller signals the pools."""
    row = _locked_slot(db, conn, job_id)
    if row.state != JobState.DISABLED.value:
        return job_from_row(row), False
    values: dict[str, Any] = {"state": JobState.PARKED.value, "attempt": 0, "updated_at": now}
    if row.demand_pending or row.control_pending:
        values.update(state=JobState.AVAILABLE.value, scheduled_at=now)
        notify_in_transaction(db, conn, row.queue)
    return _set(db, conn, job_id, values), True


def park_job(
    db: Database,
    job_id: uuid.UUID | str,
    *,
    now: datetime | None = None,
    actor: Actor | None = None,
    conn: Connection | None = None,
) -> Job:
    """An operator parks a slot: it rests until the next wake.

    Pending demand and control wakes are cleared (the operator's park supersedes them; the next
    wake makes the slot due again) and the attempt count resets, as after a run. Parking a
    parked slot changes nothing. A running slot cannot be parked and a disabled one is enabled
    with :func:`enable_slot` instead (:class:`ConflictError` with ``details["state"]``).
    """
    now = ensure_aware(now, "now") if now is not None else utcnow()
    cleared = {"demand_pending": False, "control_pending": False, "attempt": 0, "scheduled_at": now}
    return _move_slot(db, job_id, "park", JobState.PARKED, _PARK_FROM, cleared, now, actor, conn)


def _audit(
    db: Database,
    conn: Connection,
    actor: Actor | None,
    action: str,
    job: Job,
    now: datetime,
    *,
    changed: bool = True,
) -> None:
    """Audit an operator's slot action, also when it found nothing to change."""
    if actor is not None:
        details = {"state": job.state.value, "changed": changed}
        record_audit(db, conn, actor, action, "job", str(job.id), details, now)
