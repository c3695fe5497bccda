"""Purging a retired slot and its settled run history, a page at a time.

Each call is one transaction: it locks the slot row (so no claim or completion interleaves),
deletes at most :data:`RUNS_PER_CALL` settled runs, oldest first, and removes the slot row once
no history is left and no lease is held. While work remains it commits what it deleted and
raises a :class:`ConflictError` whose ``details`` say how to continue:

- ``{"cleanup_pending": True, "needs_continue": True, "runs_deleted": n}``: more settled runs
  remain; call again at once;
- ``{"cleanup_pending": True, "wait_for": "lease_release", ...}``: the slot is executing (or
  holds an unexpired lease); call again after the run ends or is rescued;
- ``{"cleanup_pending": True, "wait_for": "run_history_settlement", ...}``: an unsettled run
  remains although no lease is live; call again once the Lifeline has settled it.

The call that finishes returns a :class:`PurgeResult`: an ``int`` (1 removed, 0 no such slot,
as before) that also carries ``runs_deleted``, the settled runs that call deleted with the row.
Summing ``runs_deleted`` over every call (pending and final) gives the history the purge removed.

Running leases and unsettled history are never deleted.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, exists, select

from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import ensure_aware, utcnow
from kickside_engine.errors import ConflictError, InvalidArgumentError
from kickside_engine.models import JobKind, JobState
from kickside_engine.store.database import Database
from kickside_engine.text import require_text

RUNS_PER_CALL = 100


class PurgeResult(int):
    """A finished purge call: 1 when the slot row was removed, 0 when no slot had the identity.

    An ``int`` so that callers comparing the result with 1 or 0 keep working; ``runs_deleted``
    counts the settled runs this call deleted along with the row (at most
    :data:`RUNS_PER_CALL`; 0 when the slot was absent).
    """

    runs_deleted: int

    def __new__(cls, removed: bool | int, runs_deleted: int = 0) -> PurgeResult:
        result = super().__new__(cls, 1 if removed else 0)
        result.runs_deleted = runs_deleted
        return result

    @property
    def removed(self) -> bool:
        """True when this call removed the slot row."""
        return bool(self)

    def __repr__(self) -> str:
        return f"PurgeResult(removed={self.removed}, runs_deleted={self.runs_deleted})"


@dataclass(frozen=True)
class _Pending:
    message: str
    details: dict[str, Any]


def _required(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{field} is required: a non-empty string, got {value!r}")
    return require_text(value, field, max_length=None)


def purge_slot(
    db: Database,
    *,
    namespace: str,
    scope: str,
    key: str,
    now: datetime | None = None,
    actor: Actor | None = None,
) -> PurgeResult:
    """Remove the slot with this exact identity and its settled run history.

    With ``actor``, each call that changed something leaves an audit row in its transaction.

    Returns a :class:`PurgeResult`, equal to 1 when the slot row was removed and 0 when no slot
    has this identity (a one-shot job holding it is not a slot and is left alone); its
    ``runs_deleted`` counts the settled runs this final call deleted. Raises
    :class:`ConflictError` with ``details["cleanup_pending"]`` while work remains (see the module
    docstring); its exit code is 4 (retryable).
    """
    identity = (
        _required(namespace, "namespace"),
        _required(scope, "scope"),
        _required(key, "key"),
    )
    now = ensure_aware(now, "now") if now is not None else utcnow()
    with db.begin() as conn:
        outcome = _purge_page(db, conn, identity, now)
        if actor is not None:
            details = (
                outcome.details
                if isinstance(outcome, _Pending)
                else {"removed": int(outcome), "runs_deleted": outcome.runs_deleted}
            )
            record_audit(
                conn, db, actor, "purge_slot", "slot", "/".join(identity), dict(details), now
            )
    if isinstance(outcome, _Pending):
        raise ConflictError(outcome.message, details=outcome.details)
    return outcome


def _purge_page(
    db: Database, conn: Connection, identity: tuple[str, str, str], now: datetime
) -> PurgeResult | _Pending:
    job = db.tables.job
    run = db.tables.job_run
    stmt = select(job.c.id, job.c.state, job.c.lease_token, job.c.lease_expires_at).where(
        job.c.namespace == identity[0],
        job.c.scope == identity[1],
        job.c.identity_key == identity[2],
        job.c.kind == JobKind.SLOT.value,
    )
    if db.is_postgresql:
        stmt = stmt.with_for_update()
    slot = conn.execute(stmt).one_or_none()
    if slot is None:
        return PurgeResult(False)
    job_id: uuid.UUID = slot.id
    settled = run.c.job_id == job_id, run.c.finished_at.is_not(None)
    page = list(
        conn.execute(
            select(run.c.id).where(*settled).order_by(run.c.id).limit(RUNS_PER_CALL)
        ).scalars()
    )
    if page:
        conn.execute(delete(run).where(run.c.id.in_(page)))
    name = "/".join(identity)
    base = {"cleanup_pending": True, "runs_deleted": len(page), "job_id": str(job_id)}
    if conn.execute(select(exists().where(*settled))).scalar():
        return _Pending(
            f"slot {name}: deleted {len(page)} settled runs, more remain; call again",
            {**base, "needs_continue": True},
        )
    leased = slot.state == JobState.EXECUTING.value or (
        slot.lease_token is not None
        and slot.lease_expires_at is not None
        and slot.lease_expires_at > now
    )
    if leased:
        return _Pending(
            f"slot {name} is running: purge it again after its lease is released",
            {**base, "wait_for": "lease_release"},
        )
    unsettled = run.c.job_id == job_id, run.c.finished_at.is_(None)
    if conn.execute(select(exists().where(*unsettled))).scalar():
        return _Pending(
            f"slot {name} has unsettled run history: purge it again once it is settled",
            {**base, "wait_for": "run_history_settlement"},
        )
    conn.execute(delete(job).where(job.c.id == job_id))
    return PurgeResult(True, runs_deleted=len(page))
