"""Slot jobs: enrolling a durable identity with demand, and the operator's slot reads and actions.

A slot ``(namespace, scope, key)`` runs whenever it has demand and parks in between. Enrolling
is concurrency-safe: the insert skips a conflict on the identity index and the existing row is
then locked and updated, so processes enrolling one identity at once end with one row.

Wakes live in :mod:`kickside_engine.wake` and purges in :mod:`kickside_engine.purge`; both are
re-exported here so that slot users import one module.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, func, select, update

from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import ensure_aware, utcnow
from kickside_engine.enqueue import JobBuilder, build_row
from kickside_engine.errors import ConflictError, InvalidArgumentError, NotFoundError
from kickside_engine.models import FINAL_STATES, Inserted, Job, JobKind, JobState, RunOutcome
from kickside_engine.purge import (
    RUNS_PER_CALL,
    PurgeRequest,
    PurgeResult,
    purge_request,
    purge_slot,
    withdraw_purge,
)
from kickside_engine.store.database import Database
from kickside_engine.store.notify import local_signal, notify_in_transaction
from kickside_engine.store.rows import job_from_row
from kickside_engine.text import require_text
from kickside_engine.wake import (
    WakeKey,
    WakeMultiResult,
    WakeResult,
    lock_job,
    nudge_workers,
    parse_job_id,
    wake_job,
    wake_multi,
    wake_values,
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

_ENROLL_ATTEMPTS = 5
# Scheduled and retryable slots may be disabled too: a failing slot is the usual reason.
_DISABLE_FROM = frozenset(
    {JobState.PARKED, JobState.AVAILABLE, JobState.SCHEDULED, JobState.RETRYABLE}
)
_PARK_FROM = frozenset({JobState.AVAILABLE, JobState.SCHEDULED, JobState.RETRYABLE})


def enqueue_slot(
    db: Database,
    job: JobBuilder,
    *,
    conn: Connection | None = None,
    now: datetime | None = None,
) -> Inserted:
    """Enroll a slot job, with control demand when the builder says ``demand=True``.

    A new identity is inserted like any job (``available`` or ``scheduled``); with demand it
    is ``available`` now with ``control_pending``. An existing identity is returned with
    ``duplicate=True``: without demand unchanged (its args, queue and worker are never
    rewritten); with demand a parked, scheduled or available slot becomes due now, an
    executing one keeps a follow-up, a retryable one keeps its backoff and a disabled one its
    state, each with ``control_pending`` recorded. A slot's uniqueness is its identity, so a
    ``unique`` rule on the builder is not applied.

    Raises :class:`ConflictError` (``details["identity_in_use"] == "oneshot"``) when demand
    names an identity held by an active one-shot job, or one held by a final slot.
    """
    opts = job.options
    if opts.kind is not JobKind.SLOT:
        raise InvalidArgumentError("enqueue_slot takes a slot job: use JobBuilder.slot(...)")
    now = ensure_aware(now, "now") if now is not None else utcnow()
    row = build_row(replace(opts, unique=None), now)
    if opts.demand:
        row.update(state=JobState.AVAILABLE.value, scheduled_at=now, control_pending=True)
    if conn is not None:
        inserted, due = _enroll(db, conn, row, demand=opts.demand, now=now)
    else:
        with db.begin() as own:
            inserted, due = _enroll(db, own, row, demand=opts.demand, now=now)
    if due:
        local_signal(db).wake(due)
    return inserted


def _insert_skipping_identity_conflict(db: Database) -> Any:
    return db.upsert_insert(db.tables.job).on_conflict_do_nothing(
        index_elements=["namespace", "scope", "identity_key"],
        index_where=db.tables.job.c.identity_key.is_not(None),  # the index is partial
    )


def _enroll(
    db: Database, conn: Connection, row: dict[str, Any], *, demand: bool, now: datetime
) -> tuple[Inserted, str | None]:
    """Insert or find the slot; returns what happened and the queue to wake (None: none)."""
    job = db.tables.job
    insert_stmt = _insert_skipping_identity_conflict(db).returning(job.c.id)
    identity = (
        job.c.namespace == row["namespace"],
        job.c.scope == row["scope"],
        job.c.identity_key == row["identity_key"],
    )
    for _ in range(_ENROLL_ATTEMPTS):
        inserted_id = conn.execute(insert_stmt, row).scalar_one_or_none()
        if inserted_id is not None:
            notify_in_transaction(conn, db, row["queue"])
            return Inserted(inserted_id, False, JobState(row["state"])), row["queue"]
        lookup = select(job).where(*identity)
        if db.is_postgresql:
            lookup = lookup.with_for_update()
        existing = conn.execute(lookup).one_or_none()
        if existing is None:
            continue  # purged between the two statements: insert again
        state = JobState(existing.state)
        if existing.kind == JobKind.ONESHOT.value and state in FINAL_STATES:
            _release_identity(db, conn, existing, now)
            continue
        if not demand:
            return Inserted(existing.id, True, state), None
        if existing.kind == JobKind.ONESHOT.value:
            raise ConflictError(
                f"identity {'/'.join(_identity(existing))} is held by active one-shot job "
                f"{existing.id}",
                details={
                    "identity_in_use": "oneshot",
                    "job_id": str(existing.id),
                    "state": state.value,
                },
            )
        if state in FINAL_STATES:
            raise ConflictError(
                f"slot {'/'.join(_identity(existing))} is {state.value}; purge it first",
                details={
                    "identity_in_use": "slot",
                    "job_id": str(existing.id),
                    "state": state.value,
                },
            )
        if (request := purge_request(existing.meta)) is not None:
            raise ConflictError(
                f"slot {'/'.join(_identity(existing))} is being purged ({request.describe()}): "
                "enroll it again once the purge is done",
                details={
                    "identity_in_use": "slot",
                    "purge_pending": True,
                    "job_id": str(existing.id),
                    "state": state.value,
                },
            )
        values, new_state = wake_values(db, state, control=True, now=now, retry_now=False)
        conn.execute(update(job).where(job.c.id == existing.id).values(**values))
        notify_in_transaction(conn, db, existing.queue)
        return Inserted(existing.id, True, new_state), existing.queue
    raise ConflictError(
        "slot enrollment kept conflicting with a job that vanished; retry",
        details={"retry": True},
    )


def _identity(row: Row[Any]) -> tuple[str, str, str]:
    return (row.namespace, row.scope, row.identity_key)


def _release_identity(db: Database, conn: Connection, row: Row[Any], now: datetime) -> None:
    """A final one-shot job gives up its identity (as finishing normally does)."""
    job = db.tables.job
    conn.execute(
        update(job)
        .where(job.c.id == row.id)
        .values(
            namespace=None,
            scope=None,
            identity_key=None,
            meta={**(row.meta or {}), "identity": list(_identity(row))},
            updated_at=now,
        )
    )


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
    job = db.tables.job
    run = db.tables.job_run
    stmt = (
        select(job)
        # Every slot has an identity: saying so lets the identity index (partial: only jobs
        # with an identity) serve the scan.
        .where(
            job.c.kind == JobKind.SLOT.value,
            job.c.namespace.is_not(None),
            job.c.identity_key.is_not(None),
        )
        .order_by(job.c.namespace, job.c.scope, job.c.identity_key)
        .limit(limit)
    )
    if namespace is not None:
        stmt = stmt.where(job.c.namespace == _lookup(namespace, "namespace"))
    if scope is not None:
        stmt = stmt.where(job.c.scope == _lookup(scope, "scope"))
    last_runs: dict[uuid.UUID, Row[Any]] = {}
    with db.read() as conn:
        jobs = [job_from_row(r) for r in conn.execute(stmt)]
        if jobs:
            last_ids = (
                select(func.max(run.c.id))
                .where(run.c.job_id.in_([j.id for j in jobs]))
                .group_by(run.c.job_id)
            )
            for r in conn.execute(select(run).where(run.c.id.in_(last_ids.scalar_subquery()))):
                last_runs[r.job_id] = r
    return [_slot_info(j, last_runs.get(j.id), now) for j in jobs]


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
    job = db.tables.job
    row = conn.execute(
        update(job).where(job.c.id == job_id).values(**values).returning(*job.c)
    ).one()
    return job_from_row(row)


def disable_slot(
    db: Database,
    job_id: uuid.UUID | str,
    *,
    now: datetime | None = None,
    actor: Actor | None = None,
) -> Job:
    """Take a slot out of service: wakes are recorded but it does not run until enabled.

    A disabled slot stays disabled (idempotent). A running slot cannot be disabled
    (:class:`ConflictError`, ``details["state"] == "executing"``): disable it after the run.
    """
    now = ensure_aware(now, "now") if now is not None else utcnow()
    return _move_slot(db, job_id, "disable", JobState.DISABLED, _DISABLE_FROM, {}, now, actor)


def _move_slot(
    db: Database,
    job_id: uuid.UUID | str,
    action: str,
    target: JobState,
    allowed_from: frozenset[JobState],
    values: dict[str, Any],
    now: datetime,
    actor: Actor | None,
) -> Job:
    """An operator's move of a slot to ``target`` (with ``values``) from ``allowed_from``:
    nothing changes when it is there already, and any other state is a conflict. Audited
    either way."""
    parsed = parse_job_id(job_id)
    with db.begin() as conn:
        row = _locked_slot(db, conn, parsed)
        state = JobState(row.state)
        if state is target:
            unchanged = job_from_row(row)
            _audit(conn, db, actor, action, unchanged, now, changed=False)
            return unchanged
        if state not in allowed_from:
            raise ConflictError(
                f"slot {parsed} is {state.value} and cannot be {target.value} now",
                details={"state": state.value},
            )
        moved = _set(db, conn, parsed, {**values, "state": target.value, "updated_at": now})
        _audit(conn, db, actor, action, moved, now)
        return moved


def enable_slot(
    db: Database,
    job_id: uuid.UUID | str,
    *,
    now: datetime | None = None,
    actor: Actor | None = None,
) -> Job:
    """Put a disabled slot back in service: due now if a wake is pending, else parked.

    Enabling a slot that is not disabled changes nothing.
    """
    parsed = parse_job_id(job_id)
    now = ensure_aware(now, "now") if now is not None else utcnow()
    with db.begin() as conn:
        row = _locked_slot(db, conn, parsed)
        if row.state != JobState.DISABLED.value:
            unchanged = job_from_row(row)
            _audit(conn, db, actor, "enable", unchanged, now, changed=False)
            return unchanged
        values: dict[str, Any] = {"state": JobState.PARKED.value, "attempt": 0, "updated_at": now}
        if row.demand_pending or row.control_pending:
            values.update(state=JobState.AVAILABLE.value, scheduled_at=now)
            notify_in_transaction(conn, db, row.queue)
        enabled = _set(db, conn, parsed, values)
        _audit(conn, db, actor, "enable", enabled, now)
    if enabled.state is JobState.AVAILABLE:
        local_signal(db).wake(enabled.queue)
    return enabled


def park_job(
    db: Database,
    job_id: uuid.UUID | str,
    *,
    now: datetime | None = None,
    actor: Actor | None = None,
) -> Job:
    """An operator parks a slot: it rests until the next wake.

    Pending demand and control wakes are cleared (the operator's park supersedes them; the next
    wake makes the slot due again) and the attempt count resets, as after a run. Parking a
    parked slot changes nothing. A running slot cannot be parked and a disabled one is enabled
    with :func:`enable_slot` instead (:class:`ConflictError` with ``details["state"]``).
    """
    now = ensure_aware(now, "now") if now is not None else utcnow()
    cleared = {"demand_pending": False, "control_pending": False, "attempt": 0, "scheduled_at": now}
    return _move_slot(db, job_id, "park", JobState.PARKED, _PARK_FROM, cleared, now, actor)


def _audit(
    conn: Connection,
    db: Database,
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
        record_audit(conn, db, actor, action, "job", str(job.id), details, now)
