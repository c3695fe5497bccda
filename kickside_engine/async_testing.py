"""Testing helpers for asyncio applications: the async twins of :mod:`kickside_engine.testing`.

:func:`drain_jobs_async` drains as :func:`~kickside_engine.testing.drain_jobs` does (the same
claims, records and tally: the drain's database side is shared), with ``async def`` workers
awaited on the test's own event loop, so a job may use what the test set up on it (an async
engine, an HTTP client); the database work and sync workers run in a worker thread, so the loop
is never blocked. :func:`perform_job_async` is :func:`~kickside_engine.testing.perform_job`
for a coroutine worker, awaited in place. Neither needs pytest.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from kickside_engine.execution import execute_async, execute_with_timeout, timeout_result
from kickside_engine.lifecycle import ExecutionResult
from kickside_engine.models import ClaimedJob
from kickside_engine.outcomes import Outcome
from kickside_engine.progress import begin_reporting, end_reporting
from kickside_engine.store.async_database import AsyncDatabase
from kickside_engine.store.database import Database
from kickside_engine.testing import (
    DrainResult,
    advance,
    drain_steps,
    job_to_perform,
    middleware_wrapped,
    performed,
)
from kickside_engine.workers import WorkerRegistry


async def drain_jobs_async(
    database: AsyncDatabase | Database,
    registry: WorkerRegistry,
    *,
    queue: str | None = None,
    with_scheduled: bool = False,
    with_recursion: bool = True,
    node: str = "test:drain",
    timeout: timedelta | None = None,
) -> DrainResult:
    """Run due jobs until none is left, from async code; return the tally.

    The options are :func:`~kickside_engine.testing.drain_jobs`'s. ``async def`` workers run on
    the running event loop (one at a time, as the sync drain runs them); past ``timeout`` one is
    cancelled and its attempt recorded as a timeout. An :class:`AsyncDatabase` is drained
    through a sync handle of its own on the same database, closed at the end.
    """
    db = database.sync_database() if isinstance(database, AsyncDatabase) else database
    try:
        steps = drain_steps(db, registry, queue, with_scheduled, with_recursion, node)
        claimed, result = await asyncio.to_thread(advance, steps, None)
        while claimed is not None:
            outcome = await _execute(registry, claimed, timeout)
            claimed, result = await asyncio.to_thread(advance, steps, outcome)
    finally:
        if db is not database:
            await asyncio.to_thread(db.dispose)
    assert result is not None
    return result


async def _execute(
    registry: WorkerRegistry, claimed: ClaimedJob, timeout: timedelta | None
) -> ExecutionResult:
    """Await an async worker here (cancelled past ``timeout``); run a sync one in a thread."""
    spec = registry.get(claimed.job.worker)
    if spec is None or not spec.is_async:
        return await asyncio.to_thread(execute_with_timeout, registry, claimed, timeout)
    if timeout is None:
        return await execute_async(registry, claimed)
    started = time.monotonic()
    try:
        return await asyncio.wait_for(execute_async(registry, claimed), timeout.total_seconds())
    except TimeoutError:
        return timeout_result(timeout, started)


async def perform_job_async(
    worker: Any,
    args: Any = None,
    *,
    attempt: int = 1,
    max_attempts: int | None = None,
    tags: list[str] | None = None,
    meta: Mapping[str, Any] | None = None,
    progress: list[Any] | None = None,
) -> Outcome:
    """:func:`~kickside_engine.testing.perform_job` from async code: a coroutine worker is
    awaited on the running event loop; a sync worker is called in place. The same args checks,
    the same normalised outcome, exceptions propagated, the same ``progress`` list."""
    spec, decoded, job = job_to_perform(
        worker, args, attempt=attempt, max_attempts=max_attempts, tags=tags, meta=meta
    )
    running = begin_reporting(job, on_report=None if progress is None else progress.append)
    try:
        value = middleware_wrapped(spec)(decoded, job)
        if inspect.isawaitable(value):
            value = await value
    finally:
        end_reporting(running)
    return performed(value)
