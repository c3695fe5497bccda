"""How many executors of each kind a pool starts when the counts are left to it: they follow
the app's workers, so that ``kickside worker --queues io:200`` for an app of ``async def``
workers runs one event loop with 200 slots, not 200 processes. Real processes, both backends."""

from __future__ import annotations

from typing import Any

import pytest

from kickside_engine import Database, JobBuilder, JobState, enqueue, get_job
from kickside_engine.runtime import PoolConfig, WorkerPool

from ..conftest import Target
from ..support.processes import start_worker, stop, wait_for
from ..support.procfs import process_tree

pytestmark = pytest.mark.slow


def _completed(db: Database, job_id: Any) -> bool:
    job = get_job(db, job_id)
    return job is not None and job.state is JobState.COMPLETED


def test_an_async_only_app_gets_one_event_loop_sized_by_the_queues(db: Database) -> None:
    jobs = [enqueue(db, JobBuilder("io_wait", {"seconds": 0.1}, queue="io")) for _ in range(20)]
    pool = WorkerPool(
        db, PoolConfig(queues={"io": 200}, app="tests.support.async_only_app", run_plugins=False)
    )
    pool.start()
    try:
        wait_for(lambda: all(_completed(db, j.id) for j in jobs), 60, "the jobs completed")
        assert [(ex.is_async, ex.slots) for ex in pool.executors] == [(True, 200)]
    finally:
        pool.stop(30)


def test_a_mixed_app_gets_process_executors_and_one_async_executor(db: Database) -> None:
    pool = WorkerPool(
        db, PoolConfig(queues={"default": 3}, app="tests.support.async_app", run_plugins=False)
    )
    pool.start()
    try:
        wait_for(lambda: all(ex.ready for ex in pool.executors), 60, "executors ready")
        assert sorted((ex.is_async, ex.slots) for ex in pool.executors) == [
            (False, 1),
            (False, 1),
            (False, 1),
            (True, 3),
        ]
    finally:
        pool.stop(30)


def test_kickside_worker_queues_io_200_starts_one_executor_process(
    db: Database, target: Target
) -> None:
    job = enqueue(db, JobBuilder("io_wait", {"seconds": 0}, queue="io"))
    worker = start_worker(target.cli_args(), app="tests.support.async_only_app", queues="io:200")
    try:
        wait_for(lambda: _completed(db, job.id), 60, "the job ran")
        # The supervisor and one async executor (plus multiprocessing's resource tracker, if
        # it started one): nowhere near 200 processes.
        assert len(process_tree(worker.pid)) <= 3
    finally:
        stop(worker)
