"""Lifeline: executing jobs whose lease expired go back to work (or are discarded).

A lease expires when its holder stopped renewing it: the node crashed, was killed, or shut down
with the job unfinished. Only expired leases are touched (``lease_expires_at < now``); a live
lease belongs to a node that is still running the job.

A rescued job becomes ``available`` at once, or ``discarded`` when it has used its last attempt
(slot jobs are never discarded: they return to ``available``, or park when a purge of them is
pending). Each rescue settles the job's open run as ``rescued`` in the same transaction, so a
late outcome from the old holder matches nothing and is dropped (see
:mod:`kickside_engine.store.settle`).

Every node runs the Lifeline. On PostgreSQL the candidate rows are locked ``FOR UPDATE SKIP
LOCKED``, and each update is fenced by the old lease token, so concurrent Lifelines rescue each
expiry exactly once; on SQLite the write transaction serialises them.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from kickside_engine.clock import ensure_aware
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.finality import final_values
from kickside_engine.hooks import Rescued
from kickside_engine.lifecycle import MAX_ERRORS, clean_error
from kickside_engine.models import JobKind, JobState, RunOutcome
from kickside_engine.purge import purge_request
from kickside_engine.store.database import Database
from kickside_engine.store.jobs import Increment, move_job
from kickside_engine.store.maintenance import lock_expired_leases
from kickside_engine.store.notify import local_signal, notify_in_transaction
from kickside_engine.store.settle import settle_open_run

log = logging.getLogger("kickside.plugins.lifeline")
BATCH = 1_000


@dataclass(frozen=True)
class RescueResult:
    """What one Lifeline pass did: jobs made available again, jobs discarded, and their ids."""

    rescued: int = 0
    discarded: int = 0
    job_ids: list[uuid.UUID] = field(default_factory=list)
    #: Each job rescued (or discarded), for the ``on_rescue`` and ``on_discard`` hooks.
    jobs: list[Rescued] = field(default_factory=list, compare=False, repr=False)


def rescue_expired(db: Database, now: datetime, *, batch: int = BATCH) -> RescueResult:
    """Rescue up to ``batch`` executing jobs whose lease expired before ``now``.

    Increments ``rescue_count``, clears the lease token and expiry (``lease_owner`` stays, so
    operators see which node lost the job) and settles the open run as ``rescued``.
    """
    now = ensure_aware(now, "now")
    if batch < 1:
        raise InvalidArgumentError(f"batch must be at least 1, got {batch}")
    rescued: list[uuid.UUID] = []
    discarded: list[uuid.UUID] = []
    events: list[Rescued] = []
    queues: set[str] = set()
    with db.begin() as conn:
        for found in lock_expired_leases(db, conn, now, batch, _EXPIRED_COLUMNS):
            row = _Expired(**found._asdict())
            discard = _out_of_attempts(row)
            if not _rescue_one(db, conn, row, now, discard=discard):
                continue
            (discarded if discard else rescued).append(row.id)
            events.append(Rescued(row.id, row.worker, row.queue, discarded=discard))
            if not discard:
                queues.add(row.queue)
        for queue in sorted(queues):
            notify_in_transaction(db, conn, queue)
    if rescued or discarded:
        log.warning(
            "rescued %d jobs with expired leases (%d discarded)",
            len(rescued) + len(discarded),
            len(discarded),
            extra={"plugin": "lifeline", "rescued": len(rescued), "discarded": len(discarded)},
        )
        signal = local_signal(db)
        for queue in sorted(queues):
            signal.wake(queue)
    return RescueResult(
        rescued=len(rescued), discarded=len(discarded), job_ids=rescued + discarded, jobs=events
    )


@dataclass(frozen=True)
class _Expired:
    """The columns of an expired job the Lifeline needs."""

    id: uuid.UUID
    kind: str
    worker: str
    queue: str
    attempt: int
    max_attempts: int
    lease_owner: str
    lease_token: uuid.UUID
    meta: dict[str, Any]
    errors: list[dict[str, Any]]
    namespace: str | None
    scope: str | None
    identity_key: str | None


_EXPIRED_COLUMNS = tuple(f.name for f in fields(_Expired))


def _out_of_attempts(row: _Expired) -> bool:
    return row.kind != JobKind.SLOT.value and row.attempt >= row.max_attempts


def _rescue_one(
    db: Database, conn: Connection, row: _Expired, now: datetime, *, discard: bool
) -> bool:
    """Move one expired job out of ``executing`` and settle its run; False if it moved already."""
    reason = clean_error(f"lease expired on node {row.lease_owner}")
    values: dict[str, Any] = {
        "rescue_count": Increment(1),
        "lease_token": None,
        "lease_expires_at": None,
        "updated_at": now,
    }
    if discard:
        values.update(_discarded(row, now))
    elif row.kind == JobKind.SLOT.value and purge_request(row.meta) is not None:
        values.update(state=JobState.PARKED.value, scheduled_at=now)  # it never runs again
    else:
        values.update(state=JobState.AVAILABLE.value, scheduled_at=now)
    # Fenced by the old token: a concurrent Lifeline (or the holder finishing) wins cleanly.
    fence = {"state": JobState.EXECUTING.value, "lease_token": row.lease_token}
    if move_job(db, conn, row.id, values, where=fence) is None:
        return False
    settle_open_run(
        db, conn, lease_token=row.lease_token, outcome=RunOutcome.RESCUED, now=now, error=reason
    )
    return True


def _discarded(row: _Expired, now: datetime) -> dict[str, Any]:
    """The final-state values for a one-shot job that expired on its last attempt."""
    meta: dict[str, Any] = dict(row.meta or {})
    error = clean_error(f"lease expired on node {row.lease_owner} after attempt {row.attempt}")
    errors = [*(row.errors or []), {"attempt": row.attempt, "at": now.isoformat(), "error": error}]
    values = final_values(
        JobState.DISCARDED,
        now,
        meta=meta,
        kind=JobKind(row.kind),
        namespace=row.namespace,
        scope=row.scope,
        identity_key=row.identity_key,
    )
    values["errors"] = errors[-MAX_ERRORS:]
    return values
