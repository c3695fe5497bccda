"""The pool's database turns run beside the supervisor loop while executors are busy: results
keep arriving and prefetched jobs keep starting during a slow round trip, and nothing runs twice
or is lost when the turn finally returns."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import sqlalchemy as sa

from kickside_engine import Database, Job, JobBuilder, WorkerRegistry, enqueue_many
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.runtime.turns import Turn, TurnResult

from ..support.history import state_counts
from ..support.processes import wait_for

registry = WorkerRegistry()
_lock = threading.Lock()
_runs: Counter[str] = Counter()


@registry.worker("nap")
def nap(args: dict[str, Any], job: Job) -> None:
    time.sleep(0.005)
    with _lock:
        _runs[str(job.id)] += 1


def test_prefetched_jobs_start_while_a_turn_waits_on_the_database(db: Database) -> None:
    _runs.clear()
    inserted = enqueue_many(db, [JobBuilder("nap") for _ in range(120)])
    pool = WorkerPool(
        db,
        PoolConfig(queues={"default": 2}, mode="thread", registry=registry, run_plugins=False),
    )
    blocked, release = threading.Event(), threading.Event()
    waiting: set[str] = set()  # prefetched when the slow turn began
    real_turn = pool.producer.turns.run

    def slow_turn(turn: Turn) -> TurnResult:
        """The first turn on the store thread that starts while prefetched jobs wait in the
        buffer waits as if the database were slow to answer."""
        on_store_thread = threading.current_thread().name.startswith("kickside-store")
        if on_store_thread and pool.buffer and not blocked.is_set():
            waiting.update(str(c.job.id) for c in pool.buffer)
            blocked.set()
            release.wait(60)
        return real_turn(turn)

    pool.producer.turns.run = slow_turn  # type: ignore[method-assign]
    pool.start()
    try:
        wait_for(blocked.is_set, 60, "a turn on the store thread")
        # Only the supervisor loop, dispatching from its prefetch buffer, can start these.
        wait_for(lambda: bool(waiting & set(_runs)), 20, "prefetched jobs run during the turn")
        assert not release.is_set()
        release.set()
        wait_for(lambda: state_counts(db) == {"completed": 120}, 60, "every job completed")
    finally:
        release.set()
        pool.stop(30)
    assert sorted(_runs.values()) == [1] * 120
    assert set(_runs) == {str(j.id) for j in inserted}
    assert not pool.pending and not pool.buffer


def test_jobs_claimed_by_a_turn_that_spans_an_upgrade_record_the_new_code_version(
    db: Database,
) -> None:
    _runs.clear()
    enqueue_many(db, [JobBuilder("nap") for _ in range(60)])
    pool = WorkerPool(
        db,
        PoolConfig(
            queues={"default": 2},
            mode="thread",
            registry=registry,
            run_plugins=False,
            code_version="v1",
        ),
    )
    blocked, release = threading.Event(), threading.Event()
    claimed_in_turn: set[str] = set()
    real_turn = pool.producer.turns.run

    def slow_turn(turn: Turn) -> TurnResult:
        """The first turn on the store thread claims, then waits while the pool upgrades."""
        done = real_turn(turn)
        on_store_thread = threading.current_thread().name.startswith("kickside-store")
        if on_store_thread and not blocked.is_set() and done.batches:
            claimed_in_turn.update(str(c.job.id) for _, b in done.batches for c in b)
            blocked.set()
            release.wait(60)
        return done

    pool.producer.turns.run = slow_turn  # type: ignore[method-assign]
    pool.start()
    try:
        wait_for(blocked.is_set, 60, "a turn on the store thread")
        pool.version = "v2"  # what a thread pool's new executors load after the upgrade
        pool.request_upgrade()
        wait_for(
            lambda: {ex.version for ex in pool.executors if not ex.retiring} == {"v2"},
            30,
            "executors upgraded",
        )
        release.set()
        wait_for(lambda: state_counts(db) == {"completed": 60}, 60, "every job completed")
    finally:
        release.set()
        pool.stop(30)
    assert claimed_in_turn
    run = db.tables.job_run
    with db.read() as conn:
        versions: dict[str, str | None] = dict(
            conn.execute(sa.select(sa.cast(run.c.job_id, sa.String), run.c.code_version)).all()
        )
    assert {versions[_key(db, j)] for j in claimed_in_turn} == {"v2"}


def _key(db: Database, job_id: str) -> str:
    """A job id as the run table's id column reads back cast to text on this backend."""
    return job_id if db.is_postgresql else job_id.replace("-", "")
