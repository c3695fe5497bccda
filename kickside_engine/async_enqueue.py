"""Enqueueing from asyncio code: one job, many jobs, and a fan-out, awaited.

The async forms of :mod:`kickside_engine.enqueue`'s functions, on an
:class:`~kickside_engine.store.async_database.AsyncDatabase`: each runs the sync function on an
async connection (:meth:`AsyncDatabase.run`), so the rows, the statements (COPY included) and
the NOTIFY that rides in the transaction are the sync insert's own. ``conn`` is the caller's
``AsyncConnection`` or ``AsyncSession``: the job commits or rolls back with the caller's data.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kickside_engine.enqueue import enqueue, enqueue_fanout, enqueue_many
from kickside_engine.models import Inserted
from kickside_engine.store.async_database import AsyncDatabase

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

    from kickside_engine.builder import JobBuilder

    Transaction = AsyncConnection | AsyncSession


async def enqueue_async(
    adb: AsyncDatabase,
    job: JobBuilder,
    *,
    conn: Transaction | None = None,
    now: datetime | None = None,
) -> Inserted:
    """Insert one job, in ``conn``'s transaction or one of its own (see
    :func:`~kickside_engine.enqueue.enqueue`; ``builder.insert_async`` calls this)."""
    job = job.with_enqueue_meta()  # in the caller's task: its context (a span) is current
    return await adb.run(lambda c: enqueue(adb.db, job, conn=c, now=now), conn=conn)


async def enqueue_many_async(
    adb: AsyncDatabase,
    jobs: Sequence[JobBuilder],
    *,
    conn: Transaction | None = None,
    now: datetime | None = None,
) -> list[Inserted]:
    """Insert many jobs, all or none (see :func:`~kickside_engine.enqueue.enqueue_many`)."""
    jobs = [b.with_enqueue_meta() for b in jobs]
    return await adb.run(lambda c: enqueue_many(adb.db, jobs, conn=c, now=now), conn=conn)


async def enqueue_fanout_async(
    adb: AsyncDatabase,
    template: JobBuilder,
    args: Sequence[Any],
    *,
    conn: Transaction | None = None,
    now: datetime | None = None,
) -> list[Inserted]:
    """Insert one job per element of ``args`` (see
    :func:`~kickside_engine.enqueue.enqueue_fanout`)."""
    template = template.with_enqueue_meta()
    return await adb.run(
        lambda c: enqueue_fanout(adb.db, template, args, conn=c, now=now), conn=conn
    )
