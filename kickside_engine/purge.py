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

**The purge request.** The first call marks the slot as being purged (``meta["purge_requested"]``:
when and by whom, see :func:`purge_request`) and every call clears its pending wakes, demand and
control alike, and parks it if it was waiting to run: a slot being purged never starts another
run. Its current run (if any) ends as it would; without pending wakes a successful one parks.
Until the purge is done, wakes of the slot are refused (:mod:`kickside_engine.wake`), a retry
of it is refused, and the request shows in ``kickside slots``, ``job``, ``explain`` and the
dashboard. :func:`withdraw_purge` takes the request back.

:func:`kickside_engine.control.purge_runner.purge_until_done` runs the calls to the end
(waiting while the slot runs) and leaves one audit row for the whole command, with its outcome.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import ensure_aware, utcnow
from kickside_engine.errors import ConflictError, InvalidArgumentError
from kickside_engine.models import PENDING_STATES, PURGE_META_KEY, JobKind, JobState
from kickside_engine.store.database import Database
from kickside_engine.store.history import delete_settled_runs, has_runs
from kickside_engine.store.jobs import delete_job, lock_identity, move_job
from kickside_engine.text import require_text

RUNS_PER_CALL = 100
#: States of a slot waiting to run: a purge request parks it instead.
_WAITING = frozenset(state.value for state in PENDING_STATES)


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
class PurgeRequest:
    """A purge asked for and not finished yet: when, and by whom (None: an API call)."""

    requested_at: datetime | None
    requested_by: str | None

    def describe(self) -> str:
        """``purge pending since 2025-01-02 03:04:05 UTC by alice@ops-1``."""
        text = "purge pending"
        if self.requested_at is not None:
            text += f" since {self.requested_at:%Y-%m-%d %H:%M:%S} UTC"
        return text + (f" by {self.requested_by}" if self.requested_by else "")


def purge_request(meta: Mapping[str, Any] | None) -> PurgeRequest | None:
    """The pending purge request recorded in a slot's ``meta``, or None."""
    value = (meta or {}).get(PURGE_META_KEY)
    if not isinstance(value, Mapping):
        return None
    at: datetime | None = None
    if isinstance(value.get("at"), str):
        try:
            at = ensure_aware(datetime.fromisoformat(value["at"]), "at")
        except (ValueError, InvalidArgumentError):
            at = None
    by = value.get("by")
    return PurgeRequest(at, by if isinstance(by, str) and by else None)


@dataclass(frozen=True)
class PurgePending:
    """A purge that cannot finish yet: why (``message``), and the details its
    :class:`ConflictError` carries."""

    message: str
    details: dict[str, Any]


def _required(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{field} is required: a non-empty string, got {value!r}")
    return require_text(value, field, max_length=None)


def identity_of(namespace: Any, scope: Any, key: Any) -> tuple[str, str, str]:
    """A slot identity from its three parts, each a required non-empty string."""
    return (
        _required(namespace, "namespace"),
        _required(scope, "scope"),
        _required(key, "key"),
    )


def purge_slot(
    db: Database,
    *,
    namespace: str,
    scope: str,
    key: str,
    now: datetime | None = None,
    actor: Actor | None = None,
    audit: bool = True,
    conn: Connection | None = None,
) -> PurgeResult:
    """Remove the slot with this exact identity and its settled run history.

    With ``actor`` (and ``audit``), the call leaves one audit row in its transaction, with its
    ``outcome`` (``removed``, ``absent`` or ``pending``); callers that repeat calls for one
    command pass ``audit=False`` and audit the command once (as
    :func:`~kickside_engine.control.purge_runner.purge_until_done` does).
    The actor is recorded in the purge request either way.

    Returns a :class:`PurgeResult`, equal to 1 when the slot row was removed and 0 when no slot
    has this identity (a one-shot job holding it is not a slot and is left alone); its
    ``runs_deleted`` counts the settled runs this final call deleted. Raises
    :class:`ConflictError` with ``details["cleanup_pending"]`` while work remains (see the module
    docstring); its exit code is 4 (retryable). In ``conn``'s transaction when given: then the
    request it records commits with the caller's transaction, and the caller should commit it
    even when the call raises that ``ConflictError``.
    """
    outcome = purge_slot_in_transaction(
        db, conn, namespace=namespace, scope=scope, key=key, now=now, actor=actor, audit=audit
    )
    if isinstance(outcome, PurgePending):
        raise ConflictError(outcome.message, details=outcome.details)
    return outcome


def purge_slot_in_transaction(
    db: Database,
    conn: Connection | None,
    *,
    namespace: str,
    scope: str,
    key: str,
    now: datetime | None = None,
    actor: Actor | None = None,
    audit: bool = True,
) -> PurgeResult | PurgePending:
    """:func:`purge_slot`'s work in ``conn``'s transaction (or one of its own): the result, or
    what remains to do, returned rather than raised so that the request commits."""
    identity = identity_of(namespace, scope, key)
    now = ensure_aware(now, "now") if now is not None else utcnow()
    with db.transaction(conn) as conn:
        outcome = _purge_page(db, conn, identity, now, actor)
        if actor is not None and audit:
            details = (
                {"outcome": "pending", **outcome.details}
                if isinstance(outcome, PurgePending)
                else {
                    "outcome": "removed" if outcome else "absent",
                    "removed": int(outcome),
                    "runs_deleted": outcome.runs_deleted,
                }
            )
            record_audit(db, conn, actor, "purge_slot", "slot", "/".join(identity), details, now)
    return outcome


def _slot_row(db: Database, conn: Connection, identity: tuple[str, str, str]) -> Any:
    """The slot holding ``identity``, locked; None when none does (a one-shot job holding it
    is not a slot)."""
    row = lock_identity(db, conn, identity)
    return row if row is not None and row.kind == JobKind.SLOT.value else None


def _hold(db: Database, conn: Connection, slot: Any, now: datetime, actor: Actor | None) -> None:
    """Record the purge request on the locked slot, clear its wakes and park it if it waits.

    Written only when something changes: a purge that polls a running slot leaves it alone.
    """
    meta = dict(slot.meta or {})
    values: dict[str, Any] = {}
    if purge_request(meta) is None:
        meta[PURGE_META_KEY] = {"at": now.isoformat(), "by": str(actor) if actor else None}
        values["meta"] = meta
    if slot.demand_pending or slot.control_pending:
        values.update(demand_pending=False, control_pending=False)
    if slot.state in _WAITING:
        values.update(state=JobState.PARKED.value, attempt=0, scheduled_at=now)
    if values:
        move_job(db, conn, slot.id, {**values, "updated_at": now})


def _purge_page(
    db: Database,
    conn: Connection,
    identity: tuple[str, str, str],
    now: datetime,
    actor: Actor | None,
) -> PurgeResult | PurgePending:
    slot = _slot_row(db, conn, identity)
    if slot is None:
        return PurgeResult(False)
    job_id: uuid.UUID = slot.id
    _hold(db, conn, slot, now, actor)
    deleted = delete_settled_runs(db, conn, job_id, RUNS_PER_CALL)
    name = "/".join(identity)
    base = {"cleanup_pending": True, "runs_deleted": deleted, "job_id": str(job_id)}
    if has_runs(db, conn, job_id, settled=True):
        return PurgePending(
            f"slot {name}: deleted {deleted} settled runs, more remain; call again",
            {**base, "needs_continue": True},
        )
    leased = slot.state == JobState.EXECUTING.value or (
        slot.lease_token is not None
        and slot.lease_expires_at is not None
        and slot.lease_expires_at > now
    )
    if leased:
        return PurgePending(
            f"slot {name} is running: purge it again after its lease is released",
            {**base, "wait_for": "lease_release"},
        )
    if has_runs(db, conn, job_id, settled=False):
        return PurgePending(
            f"slot {name} has unsettled run history: purge it again once it is settled",
            {**base, "wait_for": "run_history_settlement"},
        )
    delete_job(db, conn, job_id, now)
    return PurgeResult(True, runs_deleted=deleted)


def withdraw_purge(
    db: Database,
    *,
    namespace: str,
    scope: str,
    key: str,
    now: datetime | None = None,
    actor: Actor | None = None,
) -> bool:
    """Take back a pending purge request: the slot can be woken again (it stays parked).

    Returns False when the slot has no pending purge (or does not exist). Audited with
    ``actor`` when something changed.
    """
    identity = identity_of(namespace, scope, key)
    now = ensure_aware(now, "now") if now is not None else utcnow()
    with db.begin() as conn:
        slot = _slot_row(db, conn, identity)
        if slot is None or purge_request(slot.meta) is None:
            return False
        meta = {k: v for k, v in (slot.meta or {}).items() if k != PURGE_META_KEY}
        move_job(db, conn, slot.id, {"meta": meta, "updated_at": now})
        if actor is not None:
            details = {"job_id": str(slot.id)}
            record_audit(
                db, conn, actor, "purge_withdraw", "slot", "/".join(identity), details, now
            )
    return True
