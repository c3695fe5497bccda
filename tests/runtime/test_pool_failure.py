"""A pool that stops on an unexpected error (a bug) says so, and hands its jobs back at once."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import Database, Job, JobBuilder, JobState, WorkerRegistry, enqueue_many
from kickside_engine.clock import utcnow
from kickside_engine.plugins.lifeline import rescue_expired
from kickside_engine.runtime import PoolConfig, PoolFailedError, WorkerPool

from ..support.processes import wait_for


def _states(db: Database) -> dict[str, int]:
    job = db.tables.job
    with db.read() as conn:
        rows = conn.execute(sa.select(job.c.state, sa.func.count()).group_by(job.c.state))
        return {state: int(n) for state, n in rows}


def _nodes(db: Database) -> int:
    with db.read() as conn:
        return int(
            conn.execute(sa.select(sa.func.count()).select_from(db.tables.node)).scalar_one()
        )


def test_a_pool_stopped_by_a_bug_reports_it_and_its_jobs_are_rescued_at_once(
    db: Database,
) -> None:
    registry = WorkerRegistry()
    release = threading.Event()

    @registry.worker("hold")
    def hold(args: dict[str, Any], job: Job) -> None:
        release.wait(30)

    enqueue_many(db, [JobBuilder("hold", {}) for _ in range(3)])
    pool = WorkerPool(
        db,
        PoolConfig(
            queues={"default": 2},
            mode="thread",
            registry=registry,
            run_plugins=False,
            node="buggy",
            lease=timedelta(minutes=10),  # a rescue before the test ends is the pool's doing
        ),
    )
    pool.start()
    try:
        wait_for(lambda: _states(db).get("executing", 0) >= 2, 30, "two jobs running")

        def bug() -> None:
            raise RuntimeError("injected bug")

        pool._timers = bug  # type: ignore[method-assign]  # the next step meets the bug
        pool.wakeups.poke()
        wait_for(lambda: pool.error is not None and _nodes(db) == 0, 30, "the pool to stop")
        assert isinstance(pool.error, RuntimeError) and "injected bug" in str(pool.error)
        with pytest.raises(PoolFailedError, match="injected bug"):
            pool.stop(10)
        rescued = rescue_expired(db, utcnow())
        assert rescued.rescued >= 2
        assert _states(db) == {JobState.AVAILABLE.value: 3}
    finally:
        release.set()
        pool.request_stop()


def test_pool_failed_error_is_a_kickside_error_and_still_a_runtime_error() -> None:
    from kickside_engine.errors import KicksideError
    from kickside_engine.runtime import pool

    assert pool.PoolFailedError is PoolFailedError
    assert issubclass(PoolFailedError, KicksideError)
    assert issubclass(PoolFailedError, RuntimeError)  # `except RuntimeError` still catches it
