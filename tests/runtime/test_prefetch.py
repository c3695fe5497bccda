"""Prefetch: jobs claimed ahead of free executors start as soon as one frees up, never beyond a
queue's concurrency, each exactly once; the buffer grows to cover a slow database turn; runs
restamped after an upgrade say the right version."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from kickside_engine import Database, Job, JobBuilder, WorkerRegistry, enqueue_many
from kickside_engine.clock import utcnow
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.runtime.prefetch import (
    PREFETCH_MOST,
    PREFETCH_PER_PLACE,
    prefetch_limit,
)
from kickside_engine.runtime.turns import Turn, TurnResult
from kickside_engine.store.claims import claim_jobs, restamp_run

from ..support.processes import wait_for

registry = WorkerRegistry()
_lock = threading.Lock()
_active: Counter[str] = Counter()
_peak: Counter[str] = Counter()
_runs: Counter[str] = Counter()


def _begin(job: Job) -> None:
    """Count ``job`` as running (and its peak per queue) and as run once more."""
    with _lock:
        _active[job.queue] += 1
        _peak[job.queue] = max(_peak[job.queue], _active[job.queue])
        _runs[str(job.id)] += 1


def _end(job: Job) -> None:
    with _lock:
        _active[job.queue] -= 1


@registry.worker("tick")
def tick(args: dict[str, Any], job: Job) -> None:
    _begin(job)
    _end(job)


def _completed(db: Database) -> int:
    job = db.tables.job
    with db.read() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count()).select_from(job).where(job.c.state == "completed")
            ).scalar_one()
        )


def test_prefetched_jobs_run_once_within_each_queues_concurrency(db: Database) -> None:
    _active.clear(), _peak.clear(), _runs.clear()
    jobs = [JobBuilder("tick").queue("a") for _ in range(300)]
    jobs += [JobBuilder("tick").queue("b") for _ in range(300)]
    inserted = enqueue_many(db, jobs)
    pool = WorkerPool(
        db,
        PoolConfig(queues={"a": 2, "b": 3}, mode="thread", registry=registry, run_plugins=False),
    )
    pool.start()
    try:
        wait_for(lambda: _completed(db) == 600, 120, "every job completed")
    finally:
        pool.stop(30)
    assert _peak["a"] <= 2 and _peak["b"] <= 3
    assert sorted(_runs.values()) == [1] * 600
    assert set(_runs) == {str(j.id) for j in inserted}
    assert pool.stats["prefetched"] > 0  # fast jobs were claimed ahead and waited here
    assert not pool.buffer


async_registry = WorkerRegistry()


@async_registry.worker("atick")
async def atick(args: dict[str, Any], job: Job) -> None:
    _begin(job)
    await asyncio.sleep(0)
    _end(job)


def test_an_async_only_pool_prefetches_for_its_slots(db: Database) -> None:
    """A pool told to run no process executor claims ahead of its async executor's free
    slots (each slot counts as a place), and each job still runs once within the
    concurrency. It prefetched nothing before, and drained at a third of the speed."""
    _active.clear(), _peak.clear(), _runs.clear()
    inserted = enqueue_many(db, [JobBuilder("atick") for _ in range(400)])
    pool = WorkerPool(
        db,
        PoolConfig(
            queues={"default": 4},
            mode="thread",
            registry=async_registry,
            run_plugins=False,
            process_executors=0,
            async_executors=1,
        ),
    )
    pool.start()
    try:
        wait_for(lambda: _completed(db) == 400, 120, "every job completed")
        kinds = [ex.kind for ex in pool.executor_set.executors]
    finally:
        pool.stop(30)
    assert kinds == ["async"]
    assert _peak["default"] <= 4
    assert sorted(_runs.values()) == [1] * 400
    assert set(_runs) == {str(j.id) for j in inserted}
    assert pool.stats["prefetched"] > 0  # claimed ahead, started from the buffer
    assert not pool.buffer


def test_prefetch_limit_covers_one_turn_within_two_to_ninety_six_jobs_per_place() -> None:
    assert prefetch_limit(10, None, turn_ms=0.0, execution_ms=20.0) == 20  # nothing measured yet
    assert prefetch_limit(10, None, turn_ms=12.0, execution_ms=4.0) == 30  # 3 jobs per turn
    assert prefetch_limit(10, None, turn_ms=9.0, execution_ms=0.0) == 180  # 0.5 ms hand-offs
    assert prefetch_limit(10, None, turn_ms=60.0, execution_ms=0.0) == 960  # no-ops: capped
    assert prefetch_limit(10, None, turn_ms=2.0, execution_ms=50.0) == 20  # slow jobs: the floor
    assert prefetch_limit(10, 5, turn_ms=100.0, execution_ms=0.0) == 5  # configured: as given
    assert prefetch_limit(10, 0, turn_ms=100.0, execution_ms=0.0) == 0


def test_prefetch_limit_holds_at_most_a_thousand_jobs_whatever_the_places() -> None:
    # 200 async slots with no-op jobs: not 19,200 claimed jobs under one pool's leases.
    assert prefetch_limit(200, None, turn_ms=60.0, execution_ms=0.0) == PREFETCH_MOST == 1_000
    assert prefetch_limit(200, None, turn_ms=2.0, execution_ms=10.0) == 400  # the floor holds
    assert prefetch_limit(800, None, turn_ms=60.0, execution_ms=0.0) == 1_600  # 2 per place
    assert prefetch_limit(200, 5_000, turn_ms=60.0, execution_ms=0.0) == 5_000  # configured


def test_fast_jobs_behind_slow_turns_fill_a_deeper_buffer(db: Database) -> None:
    """With turns far slower than the jobs, the buffer holds more than twice the executors."""
    enqueue_many(db, [JobBuilder("tick") for _ in range(400)])
    pool = WorkerPool(
        db,
        PoolConfig(queues={"default": 2}, mode="thread", registry=registry, run_plugins=False),
    )
    deepest = 0
    real_turn = pool.producer.turns.run

    def slow_turn(turn: Turn) -> TurnResult:
        nonlocal deepest
        deepest = max(deepest, len(pool.buffer))
        time.sleep(0.03)  # a database 30 ms away
        return real_turn(turn)

    pool.producer.turns.run = slow_turn  # type: ignore[method-assign]
    pool.start()
    try:
        wait_for(lambda: _completed(db) == 400, 120, "every job completed")
    finally:
        pool.stop(30)
    assert deepest > 2 * 2  # the fixed default of twice the executors stopped at 4
    assert deepest <= PREFETCH_PER_PLACE[1] * 2


def test_prefetch_zero_claims_only_for_free_executors(db: Database) -> None:
    enqueue_many(db, [JobBuilder("tick") for _ in range(50)])
    pool = WorkerPool(
        db,
        PoolConfig(
            queues={"default": 2}, mode="thread", registry=registry, run_plugins=False, prefetch=0
        ),
    )
    pool.start()
    try:
        wait_for(lambda: _completed(db) == 50, 60, "every job completed")
    finally:
        pool.stop(30)
    assert pool.stats["prefetched"] == 0


def test_restamp_records_the_version_a_prefetched_run_starts_under(db: Database) -> None:
    enqueue_many(db, [JobBuilder("tick")])
    with db.begin() as conn:
        (claimed,) = claim_jobs(
            db,
            conn,
            queue="default",
            node="n1",
            limit=1,
            now=utcnow(),
            lease=timedelta(seconds=30),
            code_version="v1",
        )
    restamp_run(db, claimed.lease_token, "v2")
    run = db.tables.job_run
    with db.read() as conn:
        version = conn.execute(
            sa.select(run.c.code_version).where(run.c.lease_token == claimed.lease_token)
        ).scalar_one()
    assert version == "v2"
