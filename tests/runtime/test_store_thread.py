"""The pool's database turns run beside the supervisor loop while executors are busy: results
keep arriving and prefetched jobs keep starting during a slow round trip, and nothing runs twice
or is lost when the turn finally returns."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from kickside_engine import Database, Job, JobBuilder, WorkerRegistry, enqueue_many
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.runtime.pool import Turn, TurnResult

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
    real_turn = pool._run_turn

    def slow_turn(turn: Turn) -> TurnResult:
        """The first turn on the store thread that starts while prefetched jobs wait in the
        buffer waits as if the database were slow to answer."""
        on_store_thread = threading.current_thread().name.startswith("kickside-store")
        if on_store_thread and pool.buffer and not blocked.is_set():
            waiting.update(str(c.job.id) for c in pool.buffer)
            blocked.set()
            release.wait(60)
        return real_turn(turn)

    pool._run_turn = slow_turn  # type: ignore[method-assign]
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
