"""Embed a supervised pool in your own process, start it, and stop it."""

from __future__ import annotations

import time
from datetime import timedelta

from app_jobs import thumbnail

from kickside_engine import connect_database, enqueue_fanout, migrate
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.testing import refute_enqueued


def main() -> None:
    db = connect_database()
    migrate.upgrade(db)
    enqueue_fanout(db, thumbnail.new(), [{"image_id": n} for n in range(20)])

    config = PoolConfig(
        app="app_jobs",  # executor processes import this module and use its `registry`
        queues={"default": 2},  # two executors for the default queue
        lease=timedelta(seconds=30),
        shutdown_grace=timedelta(seconds=10),
    )
    pool = WorkerPool(db, config)
    pool.start()  # raises MigrationError or PermissionDeniedError at once if it cannot run
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                refute_enqueued(db, worker="thumbnail")  # nothing left waiting
                break
            except AssertionError:
                time.sleep(0.2)
    finally:
        pool.stop()  # waits for running jobs (up to the grace); raises PoolFailedError if the
        # pool had stopped on an error


if __name__ == "__main__":  # executors are spawned processes that import this file again
    main()
