"""What asyncio applications call: read, wake, nudge, cancel, retry, discard, resume, delete,
park, disable, enable, purge and wait, awaited.

Each function is the async form of the sync function it names, with the same arguments, the
same rules and the same result, on an :class:`~kickside_engine.store.async_database.AsyncDatabase`
(enqueueing, ``builder.insert_async`` included, is in :mod:`kickside_engine.async_enqueue`).
None of them holds a rule of its own: each runs the sync implementation on an async connection
(:meth:`AsyncDatabase.run`, SQLAlchemy's ``run_sync``), so a statement, its row mapping and the
decisions around it exist once. ``conn`` is the caller's ``AsyncConnection`` or
``AsyncSession``; without it the call runs in a transaction of its own::

    async with adb.begin() as conn:
        await conn.execute(insert(orders).values(...))
        await deliver_email.new({"order_id": 42}).insert_async(adb, conn=conn)
        await wake_multi_async(adb, [("mailboxes", "user", "42")], conn=conn)
    await nudge_workers_async(adb)

On PostgreSQL the NOTIFY that wakes pools everywhere rides in that transaction, delivered on
commit (nothing on rollback), exactly as for the sync calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from kickside_engine.api import get_job, get_job_statuses
from kickside_engine.audit import Actor
from kickside_engine.clock import ensure_aware, utcnow
from kickside_engine.errors import ConflictError, PermissionDeniedError
from kickside_engine.ids import parse_job_id, parse_uuid
from kickside_engine.models import Job, JobState
from kickside_engine.purge import PurgePending, PurgeResult, purge_slot_in_transaction
from kickside_engine.slots import disable_slot, enable_slot, park_job
from kickside_engine.store.async_database import AsyncDatabase
from kickside_engine.store.final_watch import async_final_watch, hears_final, mark_awaited
from kickside_engine.store.notify import local_signal
from kickside_engine.waiting import JobResult, Waiting
from kickside_engine.wake import (
    WakeKey,
    WakeMultiResult,
    WakeResult,
    nudge_errors,
    nudge_in_transaction,
    wake_job,
    wake_multi,
)

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

    Transaction = AsyncConnection | AsyncSession


async def get_job_async(
    adb: AsyncDatabase, job_id: uuid.UUID | str, *, conn: Transaction | None = None
) -> Job | None:
    """The job with this id, or None (see :func:`~kickside_engine.api.get_job`)."""
    return await adb.run(lambda c: get_job(adb.db, job_id, conn=c), conn=conn, read=True)


async def get_job_statuses_async(
    adb: AsyncDatabase, ids: Iterable[uuid.UUID | str], *, conn: Transaction | None = None
) -> dict[uuid.UUID, JobState]:
    """Each existing id's state, in one query (see
    :func:`~kickside_engine.api.get_job_statuses`)."""
    wanted = list(ids)
    return await adb.run(lambda c: get_job_statuses(adb.db, wanted, conn=c), conn=conn, read=True)


async def get_job_statuses_tx_async(
    adb: AsyncDatabase, ids: Iterable[uuid.UUID | str], conn: Transaction
) -> dict[uuid.UUID, JobState]:
    """:func:`get_job_statuses_async` through the caller's transaction, ``conn`` (neither
    committed nor rolled back here)."""
    return await get_job_statuses_async(adb, ids, conn=conn)


async def wake_job_async(
    adb: AsyncDatabase,
    job_id: uuid.UUID | str,
    *,
    control: bool = True,
    ensure_due: bool = False,
    conn: Transaction | None = None,
    now: datetime | None = None,
    actor: Actor | None = None,
) -> WakeResult:
    """Wake one job (see :func:`~kickside_engine.wake.wake_job` for the rules and errors)."""

    def wake(c: Any) -> WakeResult:
        return wake_job(
            adb.db, job_id, control=control, ensure_due=ensure_due, conn=c, now=now, actor=actor
        )

    return await adb.run(wake, conn=conn)


async def wake_multi_async(
    adb: AsyncDatabase,
    keys: Sequence[WakeKey | tuple[str, str, str]],
    *,
    conn: Transaction,
    completion_job_id: uuid.UUID | str | None = None,
    now: datetime | None = None,
) -> WakeMultiResult:
    """Give ordinary demand to the slots with these identities, in the caller's transaction
    ``conn`` (required; see :func:`~kickside_engine.wake.wake_multi`). Call
    :func:`nudge_workers_async` after the caller's commit."""
    from kickside_engine.errors import InvalidArgumentError

    if conn is None:
        raise InvalidArgumentError("wake_multi_async runs in the caller's transaction: pass conn=")
    return await adb.run(
        lambda c: wake_multi(adb.db, keys, conn=c, completion_job_id=completion_job_id, now=now),
        conn=conn,
    )


async def nudge_workers_async(adb: AsyncDatabase, *, now: datetime | None = None) -> int:
    """Tell the worker pools that committed work is waiting; 1 when a live pool exists, else 0
    (see :func:`~kickside_engine.wake.nudge_workers`: call it after the commit)."""
    at = ensure_aware(now, "now") if now is not None else utcnow()
    local_signal(adb.db).wake()
    with nudge_errors():
        return await adb.run(
            lambda c: nudge_in_transaction(adb.db, c, at), read=not adb.is_postgresql
        )


async def cancel_job_async(
    adb: AsyncDatabase,
    job_id: uuid.UUID | str,
    *,
    actor: Actor | None = None,
    now: datetime | None = None,
) -> Job:
    """Cancel a job that is not final; an executing one is aborted on its node (see
    :func:`~kickside_engine.control.actions.cancel_job`). Audited as ``actor`` (default: this
    process's user and host)."""
    return await _job_action(adb, job_id, "cancel", actor, now)


async def retry_job_async(
    adb: AsyncDatabase,
    job_id: uuid.UUID | str,
    *,
    actor: Actor | None = None,
    now: datetime | None = None,
) -> Job:
    """Retry / run now: make the job available now (see
    :func:`~kickside_engine.control.actions.retry_job`)."""
    return await _job_action(adb, job_id, "retry", actor, now)


async def discard_job_async(
    adb: AsyncDatabase,
    job_id: uuid.UUID | str,
    *,
    actor: Actor | None = None,
    now: datetime | None = None,
) -> Job:
    """Discard a job that is not final; an executing one is aborted on its node (see
    :func:`~kickside_engine.control.actions.discard_job`)."""
    return await _job_action(adb, job_id, "discard", actor, now)


async def _job_action(
    adb: AsyncDatabase,
    job_id: uuid.UUID | str,
    action: str,
    actor: Actor | None,
    now: datetime | None,
) -> Job:
    from kickside_engine.control.actions import job_action_in_transaction

    parsed = parse_job_id(job_id)
    at = ensure_aware(now, "now") if now is not None else utcnow()
    who = actor if actor is not None else Actor.current()
    # The write's commit wakes this process's pools (AsyncDatabase.run), as the sync action does.
    return await adb.run(lambda c: job_action_in_transaction(adb.db, c, parsed, action, who, at))


async def resume_job_async(
    adb: AsyncDatabase,
    job_id: uuid.UUID | str,
    *,
    actor: Actor | None = None,
    now: datetime | None = None,
    expected_state: JobState | None = None,
    conn: Transaction | None = None,
) -> Job:
    """Resume a job: enable a disabled slot, wake a parked one, retry anything else (see
    :func:`~kickside_engine.control.actions.resume_job`)."""
    from kickside_engine.control.actions import resume_job

    at, who = _when_and_who(now, actor)
    return await adb.run(
        lambda c: resume_job(adb.db, job_id, who, at, expected_state=expected_state, conn=c),
        conn=conn,
    )


async def delete_job_async(
    adb: AsyncDatabase,
    job_id: uuid.UUID | str,
    *,
    actor: Actor | None = None,
    now: datetime | None = None,
    conn: Transaction | None = None,
) -> Job:
    """Delete a job that is not executing, with its run history (see
    :func:`~kickside_engine.control.actions.delete_job`); returns it as it was."""
    from kickside_engine.control.actions import delete_job

    at, who = _when_and_who(now, actor)
    return await adb.run(lambda c: delete_job(adb.db, job_id, who, at, conn=c), conn=conn)


async def park_job_async(
    adb: AsyncDatabase,
    job_id: uuid.UUID | str,
    *,
    actor: Actor | None = None,
    now: datetime | None = None,
    conn: Transaction | None = None,
) -> Job:
    """Park a slot until its next wake (see :func:`~kickside_engine.slots.park_job`)."""
    return await _slot_action(adb, park_job, job_id, actor, now, conn)


async def disable_slot_async(
    adb: AsyncDatabase,
    job_id: uuid.UUID | str,
    *,
    actor: Actor | None = None,
    now: datetime | None = None,
    conn: Transaction | None = None,
) -> Job:
    """Take a slot out of service (see :func:`~kickside_engine.slots.disable_slot`)."""
    return await _slot_action(adb, disable_slot, job_id, actor, now, conn)


async def enable_slot_async(
    adb: AsyncDatabase,
    job_id: uuid.UUID | str,
    *,
    actor: Actor | None = None,
    now: datetime | None = None,
    conn: Transaction | None = None,
) -> Job:
    """Put a disabled slot back in service (see :func:`~kickside_engine.slots.enable_slot`)."""
    return await _slot_action(adb, enable_slot, job_id, actor, now, conn)


async def purge_slot_async(
    adb: AsyncDatabase,
    *,
    namespace: str,
    scope: str,
    key: str,
    actor: Actor | None = None,
    now: datetime | None = None,
) -> PurgeResult:
    """Remove the slot with this identity and its settled run history (see
    :func:`~kickside_engine.purge.purge_slot`): the purge request commits before a
    ``ConflictError`` says what remains, exactly as the sync call."""
    outcome = await adb.run(
        lambda c: purge_slot_in_transaction(
            adb.db, c, namespace=namespace, scope=scope, key=key, now=now, actor=actor
        )
    )
    if isinstance(outcome, PurgePending):
        raise ConflictError(outcome.message, details=outcome.details)
    return outcome


async def _slot_action(
    adb: AsyncDatabase,
    action: Callable[..., Job],
    job_id: uuid.UUID | str,
    actor: Actor | None,
    now: datetime | None,
    conn: Transaction | None,
) -> Job:
    """Run one of :mod:`~kickside_engine.slots`' actions on the database's worker thread."""
    return await adb.run(lambda c: action(adb.db, job_id, now=now, actor=actor, conn=c), conn=conn)


def _when_and_who(now: datetime | None, actor: Actor | None) -> tuple[datetime, Actor]:
    at = ensure_aware(now, "now") if now is not None else utcnow()
    return at, actor if actor is not None else Actor.current()


async def wait_for_async(
    adb: AsyncDatabase,
    job_id: uuid.UUID | str,
    *,
    timeout: float | timedelta | None = None,
) -> JobResult:
    """Wait until the job is completed, cancelled or discarded, without blocking the event
    loop; how it ended (see :func:`~kickside_engine.waiting.wait_for`: the same pauses,
    errors and timeout)."""
    waiting = Waiting(job_id, timeout)
    parsed = parse_uuid(job_id)
    if parsed is not None and adb.is_postgresql:
        await adb.require_current_schema()  # then hears_final() reads no database
    heard = asyncio.Event()
    watch = (
        async_final_watch(adb).watching(parsed, heard.set, waiting.left())
        if parsed is not None and hears_final(adb.db)
        else contextlib.nullcontext(False)
    )
    async with watch as listening:
        if listening:
            try:
                await adb.run(lambda c: mark_awaited(adb.db, c, parsed))  # type: ignore[arg-type]
            except PermissionDeniedError:  # a role that may only read: it reads the job
                listening = False
        waiting.heard = listening
        while True:
            heard.clear()
            outcome = waiting.after(await get_job_async(adb, job_id))
            if isinstance(outcome, JobResult):
                return outcome
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(heard.wait(), outcome)
