"""What applications call: read jobs, claim them under leases, and settle their attempts.

Enqueueing lives in :mod:`kickside_engine.enqueue`; slots, wakes and purges in
:mod:`kickside_engine.slots`; the operator API in :mod:`kickside_engine.control`; the fenced
settle statement that :func:`complete`, :func:`fail` and :func:`record` run in
:mod:`kickside_engine.store.settle`.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Connection

from kickside_engine.backoff import DEFAULT_BACKOFF, Backoff, validate_retry_after_ms
from kickside_engine.clock import ensure_aware, utcnow
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.ids import parse_uuid, uuid7
from kickside_engine.lifecycle import ExecutionResult, ResultKind, settlement_for
from kickside_engine.models import ClaimedJob, Job, JobState
from kickside_engine.outcomes import storable_result
from kickside_engine.store.claims import claim_jobs
from kickside_engine.store.database import Database
from kickside_engine.store.jobs import read_job, read_states
from kickside_engine.store.leases import DEFAULT_LEASE
from kickside_engine.store.settle import Settlement, settle
from kickside_engine.workers import WorkerRegistry


def node_name() -> str:
    """A name for a pool in this process: ``host:pid:suffix`` (the suffix tells two apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid7().hex[-4:]}"


def get_job(db: Database, job_id: uuid.UUID | str, *, conn: Connection | None = None) -> Job | None:
    """The job with this id, or None when it does not exist (or the id is malformed)."""
    parsed = parse_uuid(job_id)
    if parsed is None:
        return None
    if conn is not None:
        return read_job(db, conn, parsed)
    with db.read() as own:
        return read_job(db, own, parsed)


def _statuses(
    db: Database, conn: Connection, ids: Iterable[uuid.UUID | str]
) -> dict[uuid.UUID, JobState]:
    parsed = {p for p in (parse_uuid(i) for i in ids) if p is not None}
    if not parsed:
        return {}
    return read_states(db, conn, parsed)


def get_job_statuses(
    db: Database, ids: Iterable[uuid.UUID | str], *, conn: Connection | None = None
) -> dict[uuid.UUID, JobState]:
    """Map each existing id to its state, in one query; absent and malformed ids are omitted.

    Any number of ids: they travel as one parameter. With ``conn`` it reads through the
    caller's transaction (seeing its writes), neither committing nor rolling it back.
    """
    if conn is not None:
        return _statuses(db, conn, ids)
    with db.read() as own:
        return _statuses(db, own, ids)


def get_job_statuses_tx(
    db: Database | Connection, ids: Any, seed_order_ids: Any = None
) -> dict[uuid.UUID, JobState]:
    """:func:`get_job_statuses` through the caller's transaction, ``conn``:
    ``get_job_statuses_tx(db, ids, conn)``; the kickside seed's ``(conn, db, ids)`` too.

    Neither commits nor rolls back that transaction.
    """
    if isinstance(db, Connection):  # the seed's order: (tx, db, ids)
        return _statuses(cast(Database, ids), db, seed_order_ids)
    if not isinstance(seed_order_ids, Connection):
        raise InvalidArgumentError("call get_job_statuses_tx(db, ids, conn)")
    return _statuses(db, seed_order_ids, ids)


def claim(
    db: Database,
    *,
    queue: str,
    node: str,
    limit: int = 1,
    now: datetime | None = None,
    lease: timedelta = DEFAULT_LEASE,
    code_version: str | None = None,
    workers: Iterable[str] | None = None,
) -> list[ClaimedJob]:
    """Claim up to ``limit`` due jobs of ``queue`` for ``node`` under fresh leases.

    Jobs come in one order, (priority, scheduled_at, id), whether or not they have a
    concurrency key; paused queues, single-flight keys and capacity groups are honoured, and a
    key at its limit never holds back another key's jobs. ``workers``: claim only jobs of
    these workers (a pool claims only what it can run). ``now``, unless given, is read inside
    the claim's transaction once its locks are held: it is the runs' recorded start.
    """
    from kickside_engine.store.keyed_claims import claim_keyed, queue_is_paused

    fixed = ensure_aware(now, "now") if now is not None else None
    names = sorted(set(workers)) if workers is not None else None
    with db.begin() as conn:
        if queue_is_paused(db, conn, queue):
            return []
        claimed = claim_jobs(
            db,
            conn,
            queue=queue,
            node=node,
            limit=limit,
            now=fixed or utcnow(),
            lease=lease,
            code_version=code_version,
            workers=names,
        )
        if len(claimed) < limit:
            claimed += claim_keyed(
                db,
                conn,
                queue=queue,
                node=node,
                limit=limit - len(claimed),
                now=fixed,
                lease=lease,
                code_version=code_version,
                workers=names,
            )
    claimed.sort(key=lambda c: (c.job.priority, c.job.scheduled_at, c.job.id))
    return claimed


def record(
    db: Database,
    results: Sequence[tuple[ClaimedJob, ExecutionResult]],
    *,
    registry: WorkerRegistry | None = None,
    conn: Connection | None = None,
) -> set[uuid.UUID]:
    """Record attempts' results in one transaction; returns the ids actually settled.

    A result for a job whose lease was lost (cancelled, rescued, re-claimed) is dropped.
    """
    settlements = []
    for claimed, result in results:
        backoff = _registered_backoff(registry, claimed)
        settlements.append(settlement_for(claimed, result, backoff=backoff))
    if conn is not None:
        return settle(db, conn, settlements)
    with db.begin() as own:
        return settle(db, own, settlements)


def complete(
    db: Database,
    claimed: ClaimedJob,
    *,
    demand_satisfied: bool = False,
    park: bool = False,
    result: Any = None,
    conn: Connection | None = None,
) -> bool:
    """Record a successful attempt: settle ``claimed`` as done, in ``conn``'s transaction when
    given (neither committed nor rolled back there), else in a transaction of its own.

    For slots, ``demand_satisfied`` consumes ordinary demand received during the run and
    ``park`` parks the slot; a pending control wake still rearms it. ``result`` is stored on
    the job, as a worker's return value is; one that cannot be stored raises
    :class:`~kickside_engine.outcomes.ResultNotStorableError` before anything is written. The
    finish time is read inside the transaction that records it.
    """
    stored = None if result is None else storable_result(result)

    def settlement(now: datetime) -> Settlement:
        result = ExecutionResult(
            ResultKind.DONE,
            now,
            _elapsed(claimed, now),
            demand_satisfied=demand_satisfied,
            park=park,
            result=stored,
        )
        return settlement_for(claimed, result)

    return _settle_now(db, claimed, settlement, conn)


def fail(
    db: Database,
    claimed: ClaimedJob,
    error: str,
    *,
    retry_after_ms: float | None = None,
    backoff: Backoff | None = None,
    registry: WorkerRegistry | None = None,
    conn: Connection | None = None,
) -> bool:
    """Record a failed attempt: settle ``claimed`` for a retry or as discarded, in ``conn``'s
    transaction when given (neither committed nor rolled back there), else in one of its own.

    ``retry_after_ms`` is a floor for the next delay that may exceed the policy's cap; an
    invalid value is rejected with :class:`InvalidArgumentError` before anything is written.
    The failure time is read inside the transaction that records it.
    """
    floor = validate_retry_after_ms(retry_after_ms)
    policy = backoff if backoff is not None else _registered_backoff(registry, claimed)

    def settlement(now: datetime) -> Settlement:
        result = ExecutionResult(
            ResultKind.ERROR,
            now,
            _elapsed(claimed, now),
            error=str(error),
            retry_after_ms=floor,
        )
        return settlement_for(claimed, result, backoff=policy)

    return _settle_now(db, claimed, settlement, conn)


def _settle_now(
    db: Database,
    claimed: ClaimedJob,
    settlement: Callable[[datetime], Settlement],
    conn: Connection | None,
) -> bool:
    """Settle ``claimed`` at a time read inside the settling transaction (once SQLite's write
    lock is held), so the history never records an end before the transaction could see it."""
    if conn is not None:
        return claimed.job.id in settle(db, conn, [settlement(utcnow())])
    with db.begin() as own:
        return claimed.job.id in settle(db, own, [settlement(utcnow())])


def _registered_backoff(registry: WorkerRegistry | None, claimed: ClaimedJob) -> Backoff:
    """The worker's retry policy for this job, or the default for an unregistered worker."""
    spec = registry.get(claimed.job.worker) if registry is not None else None
    return spec.backoff_for(claimed.job.is_slot) if spec is not None else DEFAULT_BACKOFF


def _elapsed(claimed: ClaimedJob, now: datetime) -> int:
    started = claimed.job.attempted_at or now
    return max(0, int((now - started) / timedelta(milliseconds=1)))
