"""The pool's kinds of executor: what runs each kind, and how many of each a pool runs.

A pool runs sync jobs on process executors (threads in a thread pool) and ``async def`` jobs
on async executors (:func:`new_executor`). Left to the pool (``process_executors`` or
``async_executors`` of ``None``), the counts follow the app's workers: process executors (the
sum of the queues' concurrency) for sync workers, one async executor for ``async def`` workers.
At start the counts come from the app as the supervisor sees it
(:class:`~kickside_engine.runtime.app.SupervisorApp`); later, an executor that reports workers
of a kind the pool has no executor for brings executors of that kind.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from kickside_engine.runtime.app import SupervisorApp, WorkerKinds
from kickside_engine.runtime.async_executor import AsyncProcessExecutor, AsyncThreadExecutor
from kickside_engine.runtime.config import PoolConfig
from kickside_engine.runtime.executors import Executor, ProcessExecutor, ThreadExecutor


def new_executor(
    config: PoolConfig, app: SupervisorApp, version: str, generation: int, *, is_async: bool
) -> Executor:
    """Start an executor of ``generation``: in a process pool, a process that imports the app
    itself; in a thread pool, a thread running the supervisor's registry under ``version``."""
    slots = config.slots_per_async_executor
    if config.mode == "process":
        assert config.app is not None
        if is_async:
            return AsyncProcessExecutor(config.app, generation, slots)
        return ProcessExecutor(config.app, generation)
    if is_async:
        return AsyncThreadExecutor(app.require(), version, generation, slots)
    return ThreadExecutor(app.require(), version, generation)


def starting_counts(config: PoolConfig, kinds: WorkerKinds | None) -> tuple[int, int]:
    """How many (process, async) executors a pool starts with, for an app with worker
    ``kinds``. An app that did not load (``kinds`` None) is left to the executors to report,
    with today's counts."""
    processes = config.process_executors
    if processes is None:
        processes = config.executors if kinds is None or kinds.has_sync else 0
    count = config.async_executors
    if count is None and kinds is not None:
        count = 1 if kinds.has_async else 0
    if count is None and processes == 0:
        count = 1  # a process pool with no process executor learns its workers from it
    if processes == 0 and not count:
        processes = config.executors  # an app without workers: report it as ever
    return processes, count or 0


def executors_to_add(
    config: PoolConfig,
    executors: Iterable[Executor],
    workers: Collection[str],
    async_workers: Collection[str],
) -> list[bool]:
    """The executors to start (``is_async`` of each) once an executor reported ``workers``,
    ``async_workers`` of them ``async def``: an async executor if the pool has none, and
    process executors if it has none and new code brought sync workers to a pool that ran
    async workers only; each only when the config leaves that kind's count to the app."""
    running = {ex.is_async for ex in executors}
    added: list[bool] = []
    if async_workers and config.async_executors is None and True not in running:
        added.append(True)
    if (
        len(async_workers) < len(workers)
        and config.process_executors is None
        and False not in running
    ):
        added += [False] * config.executors
    return added
