"""Enrolling a slot job: a durable identity, inserted once, with demand when asked.

Enrolling is concurrency-safe: the insert skips a conflict on the identity index and the
existing row is then locked and updated, so processes enrolling one identity at once end with
one row.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from kickside_engine.clock import ensure_aware, utcnow
from kickside_engine.errors import ConflictError, InvalidArgumentError
from kickside_engine.job_row import build_row
from kickside_engine.models import FINAL_STATES, Inserted, JobKind, JobState
from kickside_engine.purge import purge_request
from kickside_engine.store.database import Database
from kickside_engine.store.inserts import insert_slot
from kickside_engine.store.jobs import lock_identity, move_job
from kickside_engine.store.notify import local_signal, notify_in_transaction
from kickside_engine.wake import wake_values

if TYPE_CHECKING:
    from kickside_engine.builder import JobBuilder

_ENROLL_ATTEMPTS = 5


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
    with db.transaction(conn) as tx:
        inserted, due = _enroll(db, tx, row, demand=opts.demand, now=now)
    if due:
        local_signal(db).wake(due)
    return inserted


def _enroll(
    db: Database, conn: Connection, row: dict[str, Any], *, demand: bool, now: datetime
) -> tuple[Inserted, str | None]:
    """Insert or find the slot; returns what happened and the queue to wake (None: none)."""
    identity = (row["namespace"], row["scope"], row["identity_key"])
    for _ in range(_ENROLL_ATTEMPTS):
        inserted_id = insert_slot(db, conn, row)
        if inserted_id is not None:
            notify_in_transaction(db, conn, row["queue"])
            return Inserted(inserted_id, False, JobState(row["state"])), row["queue"]
        existing = lock_identity(db, conn, identity)
        if existing is None:
            continue  # purged between the two statements: insert again
        state = JobState(existing.state)
        if existing.kind == JobKind.ONESHOT.value and state in FINAL_STATES:
            _release_identity(db, conn, existing, now)
            continue
        if not demand:
            return Inserted(existing.id, True, state), None
        _refuse_demand(existing, state)
        values, new_state = wake_values(state, control=True, now=now, retry_now=False)
        move_job(db, conn, existing.id, values)
        notify_in_transaction(db, conn, existing.queue)
        return Inserted(existing.id, True, new_state), existing.queue
    raise ConflictError(
        "slot enrollment kept conflicting with a job that vanished; retry",
        details={"retry": True},
    )


def _refuse_demand(existing: Any, state: JobState) -> None:
    """Refuse demand for an identity held by an active one-shot job, a final slot or a slot
    being purged (:class:`ConflictError`)."""
    held_by = "/".join(_identity(existing))
    if existing.kind == JobKind.ONESHOT.value:
        raise ConflictError(
            f"identity {held_by} is held by active one-shot job {existing.id}",
            details={
                "identity_in_use": "oneshot",
                "job_id": str(existing.id),
                "state": state.value,
            },
        )
    if state in FINAL_STATES:
        raise ConflictError(
            f"slot {held_by} is {state.value}; purge it first",
            details={"identity_in_use": "slot", "job_id": str(existing.id), "state": state.value},
        )
    if (request := purge_request(existing.meta)) is not None:
        raise ConflictError(
            f"slot {held_by} is being purged ({request.describe()}): "
            "enroll it again once the purge is done",
            details={
                "identity_in_use": "slot",
                "purge_pending": True,
                "job_id": str(existing.id),
                "state": state.value,
            },
        )


def _identity(row: Any) -> tuple[str, str, str]:
    return (row.namespace, row.scope, row.identity_key)


def _release_identity(db: Database, conn: Connection, row: Any, now: datetime) -> None:
    """A final one-shot job gives up its identity (as finishing normally does)."""
    move_job(
        db,
        conn,
        row.id,
        {
            "namespace": None,
            "scope": None,
            "identity_key": None,
            "meta": {**(row.meta or {}), "identity": list(_identity(row))},
            "updated_at": now,
        },
    )
