"""The async testing helpers: drain_jobs_async on both backends, perform_job_async, and the
kickside_async_db fixture from an async test."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from kickside_engine import (
    AsyncDatabase,
    Database,
    Done,
    Job,
    JobBuilder,
    JobState,
    WorkerRegistry,
    connect_async_database,
    get_job,
    get_job_async,
)
from kickside_engine.async_testing import drain_jobs_async, perform_job_async
from kickside_engine.testing import assert_enqueued, drain_jobs

from ..conftest import Target

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


registry = WorkerRegistry()
#: The event loops async_echo ran on, and the async handle async_spawns enqueues through.
LOOPS: list[asyncio.AbstractEventLoop] = []
HANDLES: list[AsyncDatabase] = []


@registry.worker("async_echo")
async def async_echo(args: dict[str, Any], job: Job) -> dict[str, Any]:
    LOOPS.append(asyncio.get_running_loop())
    await asyncio.sleep(0)
    return {"echo": args["n"]}


@registry.worker("sync_echo")
def sync_echo(args: dict[str, Any], job: Job) -> dict[str, Any]:
    return {"echo": args["n"]}


@registry.worker("async_hang", max_attempts=1)
async def async_hang(args: dict[str, Any], job: Job) -> None:
    await asyncio.sleep(60)


@registry.worker("async_spawns")
async def async_spawns(args: dict[str, Any], job: Job) -> None:
    await JobBuilder("async_echo", {"n": 99}).insert_async(HANDLES[-1])


@pytest.fixture(autouse=True)
def _fresh_records() -> None:
    LOOPS.clear()
    HANDLES.clear()


async def test_drain_jobs_async_runs_async_workers_on_the_tests_loop(
    db: Database, target: Target
) -> None:
    adb = connect_async_database(target.url, schema=target.schema, pooled=False)
    HANDLES.append(adb)
    a = await JobBuilder("async_echo", {"n": 1}).insert_async(adb)
    s = await JobBuilder("sync_echo", {"n": 2}).insert_async(adb)
    await JobBuilder("async_spawns").insert_async(adb)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    ticking = asyncio.create_task(ticker())
    result = await drain_jobs_async(adb, registry)
    ticking.cancel()
    assert (result.completed, result.failed) == (4, 0)  # the spawned job ran too (recursion)
    here = asyncio.get_running_loop()
    assert [loop is here for loop in LOOPS] == [True, True]
    assert ticks > 0  # the database work ran beside the loop, not on it
    for job_id, value in ((a.id, 1), (s.id, 2)):
        job = await get_job_async(adb, job_id)
        assert job is not None and job.state is JobState.COMPLETED
        assert job.result == {"echo": value}


async def test_drain_jobs_async_counts_as_drain_jobs_does(db: Database) -> None:
    for name in ("async_echo", "sync_echo", "nobody"):
        JobBuilder(name, {"n": 1}).insert(db)
    drained = await drain_jobs_async(db, registry)
    for name in ("async_echo", "sync_echo", "nobody"):
        JobBuilder(name, {"n": 1}).insert(db)
    synced = await asyncio.to_thread(drain_jobs, db, registry)
    assert drained.counts == synced.counts == {"done": 2}
    # Jobs of unknown workers are left waiting: the second drain finds both.
    assert (drained.unknown_workers, synced.unknown_workers) == ({"nobody": 1}, {"nobody": 2})


async def test_drain_jobs_async_times_out_a_hung_async_job(db: Database) -> None:
    job_id = JobBuilder("async_hang").max_attempts(1).insert(db).id
    result = await drain_jobs_async(db, registry, timeout=timedelta(milliseconds=50))
    assert result.counts["timeout"] == 1
    job = get_job(db, job_id)
    assert job is not None and job.state is JobState.DISCARDED
    assert "timeout" in job.errors[-1].error


async def test_perform_job_async_awaits_a_coroutine_worker_in_the_running_loop() -> None:
    assert await perform_job_async(async_echo, {"n": 3}) == Done(result={"echo": 3})
    assert [loop is asyncio.get_running_loop() for loop in LOOPS] == [True]
    assert await perform_job_async(sync_echo, {"n": 4}) == Done(result={"echo": 4})


async def test_the_async_fixture_serves_an_async_test(
    kickside_db: Database, kickside_async_db: AsyncDatabase
) -> None:
    inserted = await JobBuilder("ok", {"user_id": 7}).insert_async(kickside_async_db)
    assert_enqueued(kickside_db, worker="ok", args={"user_id": 7})
    assert (await get_job_async(kickside_async_db, inserted.id)) == get_job(
        kickside_db, inserted.id
    )
