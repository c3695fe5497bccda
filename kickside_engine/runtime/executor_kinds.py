"""The pool's kinds of executor: what runs each kind, and how many of each a pool runs.

A pool runs sync jobs on process executors (threads in a thread pool) and ``async def`` jobs
on async executors (:func:`new_executor`). Left to the pool (``process_executors`` or
``async_executors`` of ``None``), the counts follow the app's workers: for sync workers,
process executors as many as the concurrency of the pool's queues, leaving out the queues that
only ``async def`` workers declare (``--queues default:4,io:200`` for sync workers on
``default`` and async ones on ``io`` runs 4 processes, not 204); one async executor for
``async def`` workers.
At start the counts come from the app as the supervisor sees it
(:class:`~kickside_engine.runtime.app.SupervisorApp`); later, an executor that reports workers
of a kind the pool has no executor for brings executors of that kind.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from kickside_engine.runtime.app import SupervisorApp, WorkerKinds, worker_kinds
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
        if kinds is None:
            processes = config.executors
        else:
            processes = sync_executors(config, kinds) if kinds.has_sync else 0
    count = config.async_executors
    if count is None and kinds is not None:
        count = 1 if kinds.has_async else 0
    if count is None and processes == 0:
        count = 1  # a process pool with no process executor learns its workers from it
    if processes == 0 and not count:
        processes = config.executors  # an app without workers: report it as ever
    return processes, count or 0


#: Process executors per CPU above which a pool's start warns: each is a Python process of its
#: own (tens of MB, and a second or so of a core to start), so that 200 on 2 CPUs took 7 GB
#: and minutes before the first was ready.
PROCESSES_PER_CPU = 16


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's or ``taskset``'s share)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform (macOS, Windows)
        return os.cpu_count() or 1


def crowded(processes: int, cpus: int) -> bool:
    """Whether ``processes`` process executors are more than :data:`PROCESSES_PER_CPU` for
    each of ``cpus`` CPUs."""
    return processes > PROCESSES_PER_CPU * max(1, cpus)


def sync_executors(config: PoolConfig, kinds: WorkerKinds) -> int:
    """The process executors for an app with sync workers, left to the pool: the concurrency
    of the pool's queues but those only ``async def`` workers declare. A sync job routed to
    such a queue (``.queue("io")``) waits for a pool with process executors, as any job whose
    worker a pool cannot run."""
    return sum(n for queue, n in config.queues.items() if queue not in kinds.async_only_queues)


def executors_to_add(
    config: PoolConfig,
    executors: Iterable[Executor],
    workers: Mapping[str, Any],
    async_workers: Collection[str],
) -> list[bool]:
    """The executors to start (``is_async`` of each) once an executor reported ``workers``
    (each one's :class:`~kickside_engine.runtime.app.WorkerInfo`), ``async_workers`` of them
    ``async def``: an async executor if the pool has none, and process executors
    (:func:`sync_executors`) if it has none and new code brought sync workers to a pool that
    ran async workers only; each only when the config leaves that kind's count to the app."""
    running = {ex.is_async for ex in executors}
    added: list[bool] = []
    if async_workers and config.async_executors is None and True not in running:
        added.append(True)
    if (
        len(async_workers) < len(workers)
        and config.process_executors is None
        and False not in running
    ):
        kinds = worker_kinds(
            (getattr(info, "queue", "default"), name in async_workers)
            for name, info in workers.items()
        )
        added += [False] * sync_executors(config, kinds)
    return added
