"""AsyncWorkerPool on both backends, with real executor processes: it starts and stops beside
the event loop, runs what async code enqueues, and stops gracefully."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest

from kickside_engine import (
    AsyncDatabase,
    AsyncWorkerPool,
    Database,
    InvalidArgumentError,
    JobBuilder,
    JobState,
    MigrationError,
    connect_async_database,
    get_job_async,
    wait_for_async,
)
from kickside_engine.runtime import PoolConfig

from ..conftest import Target

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

APP = "tests.support.async_app"
CONFIG = PoolConfig(
    app=APP,
    queues={"default": 50},
    process_executors=0,
    async_executors=1,
    run_plugins=False,
    shutdown_grace=timedelta(seconds=20),
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def adb(db: Database, target: Target) -> AsyncDatabase:
    return connect_async_database(target.url, schema=target.schema, pooled=False)


@asynccontextmanager
async def _ticking() -> AsyncIterator[list[int]]:
    """A task counting the event loop's turns while the block runs: ``[count]``."""
    ticks = [0]

    async def tick() -> None:
        while True:
            ticks[0] += 1
            await asyncio.sleep(0.002)

    task = asyncio.create_task(tick())
    await asyncio.sleep(0)
    try:
        yield ticks
    finally:
        task.cancel()


async def test_the_pool_starts_and_stops_beside_the_loop_and_runs_async_enqueues(
    adb: AsyncDatabase,
) -> None:
    pool = AsyncWorkerPool(adb, CONFIG)
    assert pool.pool is None  # nothing is started (or spawned) until the pool starts
    async with _ticking() as ticks:
        before = ticks[0]
        await pool.start()
        assert ticks[0] > before  # the loop kept turning while the pool started
        try:
            async with adb.begin() as conn:
                job = await JobBuilder("async_sleep", {"seconds": 0.01}).insert_async(
                    adb, conn=conn
                )
            done = await wait_for_async(adb, job.id, timeout=60)
            assert done.state is JobState.COMPLETED
        finally:
            before = ticks[0]
            await pool.stop()
        assert ticks[0] > before
    assert pool.pool is None


async def test_leaving_the_block_lets_a_running_job_finish(adb: AsyncDatabase) -> None:
    async with AsyncWorkerPool(adb, CONFIG):
        job = await JobBuilder("async_sleep", {"seconds": 1.5}).insert_async(adb)
        for _ in range(600):  # bounded: until the pool runs it
            running = await get_job_async(adb, job.id)
            if running is not None and running.state is JobState.EXECUTING:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the pool never started the job")
    finished = await get_job_async(adb, job.id)
    assert finished is not None and finished.state is JobState.COMPLETED


async def test_a_pool_that_cannot_start_says_why_in_the_callers_task(
    target: Target, empty_db: Database
) -> None:
    adb = connect_async_database(target.url, schema=target.schema, pooled=False)
    pool = AsyncWorkerPool(adb, CONFIG)
    with pytest.raises(MigrationError):
        async with pool:
            pass
    assert pool.pool is None


@pytest.mark.parametrize(
    ("database", "config", "message"),
    [
        (object(), CONFIG, "takes an AsyncDatabase, a Database or a database URL"),
        ("sqlite:///x.db", {"queues": {"default": 1}}, "config must be a PoolConfig"),
    ],
)
def test_bad_arguments_are_refused(database: Any, config: Any, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        AsyncWorkerPool(database, config)
