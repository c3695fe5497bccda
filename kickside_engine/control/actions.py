"""Operator actions on one job: retry (run now), resume, cancel, discard and delete.

Each action runs in one transaction with its audit row, checks the state change against
:data:`kickside_engine.models.TRANSITIONS`, and returns the job after the change. Cancelling or
discarding an executing job takes its lease away and settles its open run, and tells the pool
running it (``cancel:<job id>``: a NOTIFY on PostgreSQL, a datagram after the commit on a SQLite
file), which checks its leases at once and stops the execution; its lease check (every second)
is the fallback. A late outcome from it is dropped (settling is fenced by the lease token).
Bulk actions (:mod:`kickside_engine.control.bulk`) apply the very same transitions.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection

from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import ensure_aware
from kickside_engine.errors import ConflictError, NotFoundError
from kickside_engine.finality import final_values_of
from kickside_engine.ids import parse_job_id
from kickside_engine.models import (
    FINAL_STATES,
    TRANSITIONS,
    Job,
    JobKind,
    JobState,
    RunOutcome,
)
from kickside_engine.purge import purge_request
from kickside_engine.redact import redact_text
from kickside_engine.slots import enable_in_transaction
from kickside_engine.store.database import Database
from kickside_engine.store.jobs import delete_job as delete_job_row
from kickside_engine.store.jobs import lock_job, move_job
from kickside_engine.store.notify import local_signal, notify_in_transaction
from kickside_engine.store.rows import job_from_row
from kickside_engine.store.settle import settle_open_run
from kickside_engine.wake import wake_job

JobAction = Literal["retry", "cancel", "discard"]

#: Where each action takes a job.
ACTION_TARGETS: dict[str, JobState] = {
    "retry": JobState.AVAILABLE,
    "cancel": JobState.CANCELLED,
    "discard": JobState.DISCARDED,
}
# "Retry / run now" revives finished jobs and hurries waiting ones. An available job is already
# runnable, an executing one must be cancelled first, and a disabled slot is enabled through the
# slots API instead.
_RETRY_FROM = frozenset(
    {
        JobState.RETRYABLE,
        JobState.SCHEDULED,
        JobState.COMPLETED,
        JobState.CANCELLED,
        JobState.DISCARDED,
        JobState.PARKED,
    }
)
_RUN_OUTCOMES = {"cancel": RunOutcome.CANCELLED, "discard": RunOutcome.DISCARDED}


def eligible_states(action: str) -> frozenset[JobState]:
    """The states a job can be in for ``action`` to apply to it."""
    target = ACTION_TARGETS[action]
    sources = _RETRY_FROM if action == "retry" else frozenset(set(JobState) - FINAL_STATES)
    return frozenset(s for s in sources if target in TRANSITIONS[s])


def retry_refusal(job: Job) -> str | None:
    """Why a retry must leave ``job`` alone although its state allows one (None: it may run).

    A slot being purged never runs again (see :mod:`kickside_engine.purge`).
    """
    if job.kind is JobKind.SLOT and (request := purge_request(job.meta)) is not None:
        return f"the slot is being purged ({request.describe()})"
    return None


def check_action(job: Job, action: str) -> None:
    """Raise :class:`ConflictError` (details: state, action, job_id) unless ``action`` applies."""
    if job.state in eligible_states(action):
        refusal = retry_refusal(job) if action == "retry" else None
        if refusal is None:
            return
        details = {
            "state": job.state.value,
            "action": action,
            "job_id": str(job.id),
            "purge_pending": True,
        }
        raise ConflictError(f"cannot {action} job {job.id}: {refusal}", details=details)
    details = {"state": job.state.value, "action": action, "job_id": str(job.id)}
    if job.state is JobState.EXECUTING:
        reason = "it is executing (cancel it first)"
    elif job.state.is_final:
        reason = f"it is already {job.state.value}"
    else:
        reason = f"it is {job.state.value}"
    raise ConflictError(f"cannot {action} job {job.id}: {reason}", details=details)


def apply_job_action(
    db: Database, conn: Connection, job: Job, action: str, actor: Actor, now: datetime
) -> Job | None:
    """Apply a checked ``action`` to ``job`` as read in this transaction; no audit row.

    The update is guarded by the state (and lease token) that was read, so it returns None
    when the job changed meanwhile. Callers lock the row first (see :func:`locked_job`).
    """
    target = ACTION_TARGETS[action]
    values: dict[str, Any] = {"state": target.value, "updated_at": now}
    if target is JobState.AVAILABLE:
        values.update(
            scheduled_at=now,
            finalized_at=None,
            completed_at=None,
            cancelled_at=None,
            discarded_at=None,
        )
        if job.attempt >= job.max_attempts:
            values["max_attempts"] = job.attempt + 1
    else:
        values.update(final_values_of(job, target, now))
    guard: dict[str, Any] = {"state": job.state.value}
    token = job.lease_token if job.state is JobState.EXECUTING else None
    if token is not None:
        values.update(lease_token=None, lease_expires_at=None)
        guard["lease_token"] = token
    moved = move_job(db, conn, job.id, values, where=guard)
    if moved is None:
        return None
    if token is not None:
        settle_open_run(
            db,
            conn,
            lease_token=token,
            outcome=_RUN_OUTCOMES[action],
            now=now,
            error=redact_text(f"{target.value} by {actor}"),
        )
        # The pool stops the execution at once (NOTIFY, or a datagram on a SQLite file after
        # the commit); without it, at its next lease check.
        notify_in_transaction(db, conn, f"cancel:{job.id}")
    if target is JobState.AVAILABLE:
        notify_in_transaction(db, conn, job.queue)
    return moved


def locked_job(db: Database, conn: Connection, job_id: uuid.UUID) -> Job:
    """Read a job for update in this transaction; NotFoundError when it does not exist."""
    row = lock_job(db, conn, job_id)
    if row is None:
        raise NotFoundError(f"job {job_id} not found")
    return job_from_row(row)


def _audit_details(before: Job, after: Job | None) -> dict[str, Any]:
    details: dict[str, Any] = {
        "from": before.state.value,
        "queue": before.queue,
        "worker": before.worker,
    }
    if after is not None:
        details["to"] = after.state.value
    if before.state is JobState.EXECUTING:
        details["node"] = before.lease_owner
    return details


def _job_action(
    db: Database, job_id: uuid.UUID | str, action: str, actor: Actor, now: datetime
) -> Job:
    parsed = parse_job_id(job_id)
    now = ensure_aware(now, "now")
    with db.begin() as conn:
        changed = job_action_in_transaction(db, conn, parsed, action, actor, now)
    if changed.state is JobState.AVAILABLE:
        local_signal(db).wake(changed.queue)
    return changed


def job_action_in_transaction(
    db: Database, conn: Connection, job_id: uuid.UUID, action: str, actor: Actor, now: datetime
) -> Job:
    """Lock, check and apply ``action`` (retry, cancel, discard) to the job, with its audit
    row, in ``conn``'s transaction: what :func:`retry_job`, :func:`cancel_job` and
    :func:`discard_job` do inside the transaction they begin. Returns the job as changed."""
    current = locked_job(db, conn, job_id)
    check_action(current, action)
    changed = apply_job_action(db, conn, current, action, actor, now)
    if changed is None:
        raise ConflictError(
            f"job {job_id} changed during {action}; look again",
            details={"state": current.state.value, "action": action, "job_id": str(job_id)},
        )
    details = _audit_details(current, changed)
    record_audit(db, conn, actor, action, "job", str(job_id), details, now)
    return changed


def retry_job(db: Database, job_id: uuid.UUID | str, actor: Actor, now: datetime) -> Job:
    """Retry / run now: make the job available at ``now``.

    Works from retryable, scheduled, parked and the final states. A final job is revived
    (its final timestamps cleared) and, when its attempts are used up, gets one more. An
    executing or already available job is a :class:`ConflictError`.
    """
    return _job_action(db, job_id, "retry", actor, now)


def resume_job(
    db: Database,
    job_id: uuid.UUID | str,
    actor: Actor,
    now: datetime,
    *,
    expected_state: JobState | None = None,
    conn: Connection | None = None,
) -> Job:
    """Resume a job: enable a disabled slot, wake a parked one; retry anything else.

    A disabled slot goes back in service (due now if a wake is pending, else parked); a parked
    slot gets a control wake; any other job is retried as :func:`retry_job` does (so an
    executing or available one is a :class:`ConflictError`). One transaction, audited as
    ``resume`` with what it did (``details["via"]``: enable, wake or retry).

    ``expected_state`` is the state the operator saw: when the job has meanwhile left it, the
    resume is refused with a :class:`ConflictError` instead of doing something else than what
    was shown (the dashboard resumes only the disabled slot it showed). In ``conn``'s
    transaction when given (this process's pools are then woken by the caller after commit).
    """
    parsed = parse_job_id(job_id)
    now = ensure_aware(now, "now")
    own = conn is None
    with db.transaction(conn) as conn:
        current = locked_job(db, conn, parsed)
        if expected_state is not None and current.state is not expected_state:
            raise ConflictError(
                f"job {parsed} is now {current.state.value}, no longer "
                f"{expected_state.value}; look again",
                details={"state": current.state.value, "action": "resume", "job_id": str(parsed)},
            )
        resumed: Job | None
        if current.kind is JobKind.SLOT and current.state is JobState.DISABLED:
            via = "enable"
            resumed, _ = enable_in_transaction(db, conn, parsed, now)
        elif current.kind is JobKind.SLOT and current.state is JobState.PARKED:
            via = "wake"
            wake_job(db, parsed, conn=conn, now=now)  # unaudited: this row records it
            resumed = locked_job(db, conn, parsed)
        else:
            via = "retry"
            check_action(current, "retry")
            resumed = apply_job_action(db, conn, current, "retry", actor, now)
            if resumed is None:
                raise ConflictError(
                    f"job {parsed} changed during resume; look again",
                    details={
                        "state": current.state.value,
                        "action": "resume",
                        "job_id": str(parsed),
                    },
                )
        details = {**_audit_details(current, resumed), "via": via}
        record_audit(db, conn, actor, "resume", "job", str(parsed), details, now)
    if own and resumed.state is JobState.AVAILABLE:
        local_signal(db).wake(resumed.queue)
    return resumed


def cancel_job(db: Database, job_id: uuid.UUID | str, actor: Actor, now: datetime) -> Job:
    """Cancel a job that is not final; an executing one is aborted on its node.

    Its unique key is released unless its uniqueness covers all states. A final job is a
    :class:`ConflictError` with ``details["state"]``.
    """
    return _job_action(db, job_id, "cancel", actor, now)


def discard_job(db: Database, job_id: uuid.UUID | str, actor: Actor, now: datetime) -> Job:
    """Discard a job that is not final, by the same rules as :func:`cancel_job`."""
    return _job_action(db, job_id, "discard", actor, now)


def delete_job(
    db: Database,
    job_id: uuid.UUID | str,
    actor: Actor,
    now: datetime,
    *,
    conn: Connection | None = None,
) -> Job:
    """Delete a job that is not executing, with its run history; returns it as it was. A
    workflow's job counts as cancelled for the jobs that run after it. In ``conn``'s
    transaction when given."""
    parsed = parse_job_id(job_id)
    now = ensure_aware(now, "now")
    with db.transaction(conn) as conn:
        current = locked_job(db, conn, parsed)
        if current.state is JobState.EXECUTING:
            raise ConflictError(
                f"cannot delete job {parsed}: it is executing (cancel it first)",
                details={"state": current.state.value, "action": "delete", "job_id": str(parsed)},
            )
        # Explicitly rather than by ON DELETE CASCADE: a host's SQLite engine may run with
        # foreign keys off.
        delete_job_row(db, conn, parsed, now)
        details = _audit_details(current, None)
        record_audit(db, conn, actor, "delete", "job", str(parsed), details, now)
    return current
