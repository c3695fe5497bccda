"""A running pool publishes its executors by kind with busy and total slots on each heartbeat,
with real executor processes, on both backends."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kickside_engine import Database, JobBuilder, JobState, enqueue, get_job
from kickside_engine.clock import utcnow
from kickside_engine.control import ExecutorKind, list_nodes
from kickside_engine.runtime import PoolConfig, WorkerPool

from ..support.async_app import registry
from ..support.processes import wait_for

pytestmark = pytest.mark.slow


def _kinds(db: Database) -> tuple[ExecutorKind, ...]:
    nodes = list_nodes(db, utcnow())
    return nodes[0].executors if nodes else ()


def test_a_pool_publishes_process_and_async_executors_with_busy_and_total_slots(
    db: Database,
) -> None:
    config = PoolConfig(
        app="tests.support.async_app",
        queues={"default": 12},
        process_executors=2,
        async_executors=1,
        async_slots=10,
        run_plugins=False,
        shutdown_grace=timedelta(seconds=20),
    )
    jobs = [enqueue(db, JobBuilder("async_sleep", {"seconds": 3})) for _ in range(3)]
    jobs.append(enqueue(db, JobBuilder("sync_sleep", {"seconds": 3})))
    pool = WorkerPool(db, config)
    pool.start()
    try:
        running = (ExecutorKind("process", 2, 1, 2), ExecutorKind("async", 1, 3, 10))
        wait_for(lambda: _kinds(db) == running, 60, f"the heartbeat to publish {running}")
        done = (ExecutorKind("process", 2, 0, 2), ExecutorKind("async", 1, 0, 10))
        wait_for(lambda: _kinds(db) == done, 60, f"the heartbeat to publish {done}")
        for job in jobs:
            found = get_job(db, job.id)
            assert found is not None and found.state is JobState.COMPLETED
    finally:
        pool.stop(30)


def test_a_thread_pool_publishes_thread_executors(db: Database) -> None:
    pool = WorkerPool(
        db,
        PoolConfig(queues={"default": 2}, mode="thread", registry=registry, run_plugins=False),
    )
    pool.start()
    try:
        kinds = wait_for(lambda: _kinds(db), 30, "the first heartbeat")
        assert [k.kind for k in kinds] == ["thread", "async"]
        assert kinds[0] == ExecutorKind("thread", 2, 0, 2)
    finally:
        pool.stop(30)
