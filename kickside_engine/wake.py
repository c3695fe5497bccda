"""Waking jobs: control wakes, ordinary demand, fan-out wakes, and nudging worker pools.

Two kinds of wake reach a job:

- a *control wake* (``control=True``: an operator or the API asks for dispatch) sets
  ``control_pending``;
- *ordinary demand* (``control=False``: new work for a slot) sets ``demand_pending`` and bumps
  ``demand_seq``.

Either way the ordinary wake makes pending work due now: a ``parked``, ``scheduled`` or
``available`` job becomes ``available`` with ``scheduled_at = now``. A ``retryable`` job becomes
due only on a control wake (an explicit dispatch request); ordinary demand keeps its failure
backoff, and the retry runs the new work. An ``executing`` job only keeps the flag, so its
completion leaves a follow-up run; a ``disabled`` slot keeps its state and records the flag, so
enabling it runs the pending work. Final jobs cannot be woken, and neither can a slot being
purged (:mod:`kickside_engine.purge`): :func:`wake_job` refuses it and :func:`wake_multi` passes
it by.

Every wake locks the job row first (``FOR UPDATE`` on PostgreSQL; SQLite's single writer does
the same), so it composes with claims (which skip locked rows) and with completions (which wait,
then see the flag).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, cast

from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError

from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import ensure_aware, utcnow
from kickside_engine.errors import (
    ConflictError,
    InvalidArgumentError,
    KicksideError,
    NotFoundError,
)
from kickside_engine.ids import parse_job_id
from kickside_engine.models import (
    FINAL_STATES,
    PENDING_STATES,
    WAKE_MADE_DUE_STATES,
    JobKind,
    JobState,
)
from kickside_engine.purge import purge_request
from kickside_engine.store.database import Database
from kickside_engine.store.jobs import (
    Increment,
    add_demand,
    count_live_nodes,
    ids_with_identities,
    lock_job,
    lock_jobs,
    move_job,
)
from kickside_engine.store.notify import local_signal, notify_in_transaction
from kickside_engine.text import require_text

#: A pool whose node row was refreshed this recently counts as live for :func:`nudge_workers`.
NODE_FRESHNESS = timedelta(seconds=30)
#: What a fan-out wake reads of each slot row it locks.
_WAKE_COLUMNS = ("id", "kind", "state", "namespace", "scope", "identity_key", "meta")

_MADE_DUE = WAKE_MADE_DUE_STATES
_PENDING = PENDING_STATES
_FINAL_VALUES = frozenset(s.value for s in FINAL_STATES)


@dataclass(frozen=True)
class WakeResult:
    """What :func:`wake_job` did.

    ``woke`` is true when the wake changed the job (a flag recorded or the job made due);
    ``already_due`` is true when ``ensure_due`` found the job due or running and left it alone.
    """

    job_id: uuid.UUID
    state: JobState
    woke: bool
    already_due: bool = False


class WakeKey(NamedTuple):
    """An exact slot identity to wake: ``(namespace, scope, key)``."""

    namespace: str
    scope: str
    key: str

    def payload(self) -> str:
        return f"wake:{self.namespace}/{self.scope}/{self.key}"


@dataclass(frozen=True)
class WakeMultiResult:
    """What :func:`wake_multi` did: the slots that received demand, and keys that found none."""

    woken: list[uuid.UUID]
    missing: list[WakeKey]
    locked: int


def wake_values(
    state: JobState, *, control: bool, now: datetime, retry_now: bool
) -> tuple[dict[str, Any], JobState]:
    """The column values of an ordinary wake of a job in ``state``, and its state afterwards.

    ``retry_now`` makes a ``retryable`` job due as well (control wakes do).
    """
    values: dict[str, Any] = {"updated_at": now}
    if control:
        values["control_pending"] = True
    else:
        values["demand_pending"] = True
        values["demand_seq"] = Increment(1)
    new_state = state
    if state in _MADE_DUE or (retry_now and state is JobState.RETRYABLE):
        new_state = JobState.AVAILABLE
        values.update(state=new_state.value, scheduled_at=now)
    return values, new_state


def _already_due(state: JobState, scheduled_at: datetime, now: datetime) -> bool:
    if state is JobState.EXECUTING:
        return True
    return state in _PENDING and scheduled_at <= now


def wake_job(
    db: Database,
    job_id: uuid.UUID | str,
    *,
    control: bool = True,
    ensure_due: bool = False,
    conn: Connection | None = None,
    now: datetime | None = None,
    actor: Actor | None = None,
) -> WakeResult:
    """Wake one job: a control wake (default) or ordinary demand (``control=False``).

    With ``ensure_due`` a job that is already due (pending with ``scheduled_at <= now``) or
    running is left exactly as it is (retry, lease, schedule and demand state) and reported
    ``already_due``; parked, disabled and future pending jobs get the ordinary wake. The worker
    pools are notified either way. Runs in ``conn``'s transaction when given.

    Raises :class:`InvalidArgumentError` for a malformed id, :class:`NotFoundError` for an
    absent job and :class:`ConflictError` (``details["state"]``) for a final one.
    """
    parsed = parse_job_id(job_id)
    now = ensure_aware(now, "now") if now is not None else utcnow()
    if conn is not None:
        result, queue = _wake(db, conn, parsed, control=control, ensure_due=ensure_due, now=now)
        _audit_wake(db, conn, actor, result, control, ensure_due, now)
    else:
        with db.begin() as own:
            result, queue = _wake(db, own, parsed, control=control, ensure_due=ensure_due, now=now)
            _audit_wake(db, own, actor, result, control, ensure_due, now)
    local_signal(db).wake(queue)
    return result


def _wake(
    db: Database,
    conn: Connection,
    job_id: uuid.UUID,
    *,
    control: bool,
    ensure_due: bool,
    now: datetime,
) -> tuple[WakeResult, str]:
    row = lock_job(db, conn, job_id)
    if row is None:
        raise NotFoundError(f"job {job_id} not found")
    state = JobState(row.state)
    if state in FINAL_STATES:
        raise ConflictError(
            f"job {job_id} is {state.value}: a finished job cannot be woken",
            details={"state": state.value},
        )
    if row.kind == JobKind.SLOT.value and (request := purge_request(row.meta)) is not None:
        raise ConflictError(
            f"slot {job_id} is being purged ({request.describe()}): it is not woken; "
            "withdraw the purge first to keep it",
            details={"state": state.value, "purge_pending": True},
        )
    notify_in_transaction(db, conn, row.queue)
    if ensure_due and _already_due(state, row.scheduled_at, now):
        return WakeResult(job_id, state, woke=False, already_due=True), row.queue
    values, new_state = wake_values(state, control=control, now=now, retry_now=control)
    move_job(db, conn, job_id, values)
    return WakeResult(job_id, new_state, woke=True), row.queue


def _wake_key(value: Any) -> WakeKey:
    if not isinstance(value, tuple) or len(value) != 3:
        raise InvalidArgumentError(f"a wake key is (namespace, scope, key), got {value!r}")
    for part, name in zip(value, ("namespace", "scope", "key"), strict=True):
        if not isinstance(part, str) or not part:
            raise InvalidArgumentError(f"wake key {name} must be a non-empty string, got {part!r}")
        # No identity part is longer than 255 characters (and NOTIFY payloads are bounded).
        require_text(part, f"wake key {name}", allow_empty=True)
    return WakeKey(*value)


def wake_multi(
    db: Database,
    keys: Sequence[WakeKey | tuple[str, str, str]],
    *seed_order: Any,
    conn: Connection | None = None,
    completion_job_id: uuid.UUID | str | None = None,
    now: datetime | None = None,
) -> WakeMultiResult:
    """Give ordinary demand to the slots with these exact identities, in ``conn``'s transaction
    (required: the caller's own, which commits the demand with its own work).

    Keys are exact: ``(namespace, scope, key)``, no wildcards. Each key is published
    (``wake:<namespace>/<scope>/<key>``, delivered on commit) before any job row is locked.
    The selected rows are then locked in one global order (by id), so concurrent fan-outs over
    overlapping keys never deadlock. ``completion_job_id`` (the job the caller completes in
    the same transaction) joins that ordered prelock without being woken, unless a key selects
    it; with no fan-out rows the completion takes its sole lock itself. One-shot and final jobs
    holding an identity are not woken, nor is a slot being purged. Neither commits nor rolls
    back; call :func:`nudge_workers` after the caller's commit.

    The kickside seed's order, ``wake_multi(conn, db, keys)``, is accepted as well.
    """
    if isinstance(db, Connection):  # the seed's order: (tx, db, keys)
        if conn is not None or len(seed_order) != 1:
            raise InvalidArgumentError("call wake_multi(db, keys, conn=conn)")
        db, keys, conn = cast(Database, keys), seed_order[0], db
    elif seed_order:
        raise InvalidArgumentError("call wake_multi(db, keys, conn=conn)")
    if conn is None:
        raise InvalidArgumentError("wake_multi runs in the caller's transaction: pass conn=")
    wanted = sorted({_wake_key(k) for k in keys})
    completion = (
        parse_job_id(completion_job_id, "completion_job_id")
        if completion_job_id is not None
        else None
    )
    now = ensure_aware(now, "now") if now is not None else utcnow()
    for key in wanted:
        notify_in_transaction(db, conn, key.payload())
    candidates = ids_with_identities(db, conn, wanted)
    if not candidates:
        return WakeMultiResult(woken=[], missing=wanted, locked=0)
    if completion is not None:
        candidates.add(completion)
    locked = lock_jobs(db, conn, sorted(candidates), _WAKE_COLUMNS)
    wanted_set = set(wanted)
    found: set[WakeKey] = set()
    to_wake: list[uuid.UUID] = []
    for row in locked:
        key = WakeKey(row.namespace, row.scope, row.identity_key)
        if key not in wanted_set:
            continue  # the completion row, or an identity released meanwhile
        found.add(key)
        if (
            row.kind == JobKind.SLOT.value
            and row.state not in _FINAL_VALUES
            and purge_request(row.meta) is None  # a slot being purged never runs again
        ):
            to_wake.append(row.id)
    queues = add_demand(db, conn, to_wake, made_due=_MADE_DUE, now=now)
    for queue in sorted(queues):
        notify_in_transaction(db, conn, queue)
    return WakeMultiResult(
        woken=to_wake, missing=[k for k in wanted if k not in found], locked=len(locked)
    )


def live_pools(db: Database, conn: Connection, now: datetime) -> int:
    """How many pools have refreshed their node row within :data:`NODE_FRESHNESS`."""
    return count_live_nodes(db, conn, now - NODE_FRESHNESS)


def nudge_workers(db: Database, *, now: datetime | None = None) -> int:
    """Tell the worker pools that committed work is waiting; 1 when a live pool exists, else 0.

    Call it after committing a transaction that enqueued or woke jobs through the caller's
    connection, never before the commit, after a rollback or inside a transaction: it sends in
    a short transaction of its own (``pg_notify`` on PostgreSQL; the in-process signal on
    both backends). 0 means no pool has a fresh heartbeat: the committed demand stays in the
    database for the next pool to find at boot. A failure to notify raises
    :class:`DatabaseUnavailableError` (or :class:`KicksideError`) so the caller can retry.
    """
    now = ensure_aware(now, "now") if now is not None else utcnow()
    local_signal(db).wake()
    with nudge_errors():
        if db.is_postgresql:
            with db.begin() as conn:
                return nudge_in_transaction(db, conn, now)
        with db.read() as conn:
            return nudge_in_transaction(db, conn, now)


def nudge_in_transaction(db: Database, conn: Connection, now: datetime) -> int:
    """What :func:`nudge_workers` sends and reads in its transaction: the ``nudge`` NOTIFY
    (PostgreSQL), then 1 when a live pool exists, else 0."""
    notify_in_transaction(db, conn, "nudge")
    return 1 if live_pools(db, conn, now) > 0 else 0


@contextlib.contextmanager
def nudge_errors() -> Iterator[None]:
    """A failure to nudge as :func:`nudge_workers` reports it (a :class:`KicksideError`)."""
    try:
        yield
    except KicksideError:
        raise
    except SQLAlchemyError as exc:
        raise KicksideError(f"could not notify the worker pools: {exc}") from exc


def _audit_wake(
    db: Database,
    conn: Connection,
    actor: Actor | None,
    result: WakeResult,
    control: bool,
    ensure_due: bool,
    now: datetime,
) -> None:
    if actor is not None:
        details = {
            "control": control,
            "ensure_due": ensure_due,
            "already_due": result.already_due,
            "state": result.state.value,
        }
        record_audit(db, conn, actor, "wake", "job", str(result.job_id), details, now)
