"""Timeouts: an attempt past its max execution is stopped, with its executor process, and
recorded as a timeout failure (then retried with backoff like any failure)."""

from __future__ import annotations

import time
from datetime import timedelta

from slow_tasks import render_video

from kickside_engine import JobState, RunOutcome, connect_database, get_job, migrate
from kickside_engine.control import job_detail
from kickside_engine.runtime import PoolConfig, WorkerPool


def main() -> None:
    db = connect_database()
    migrate.upgrade(db)
    hung = render_video.new({"seconds": 60}).insert(db).id  # the worker's 1 s timeout applies
    # Per job, max_execution overrides the worker's timeout.
    quick = render_video.new({"seconds": 0}).max_execution(timedelta(seconds=10)).insert(db).id

    pool = WorkerPool(db, PoolConfig(app="slow_tasks", queues={"default": 2}))
    pool.start()  # executors are processes: a job past its time is really stopped
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            stopped, done = get_job(db, hung), get_job(db, quick)
            if (stopped and stopped.state is JobState.RETRYABLE) and (
                done and done.state is JobState.COMPLETED
            ):
                break
            time.sleep(0.2)
    finally:
        pool.stop()

    detail = job_detail(db, hung)
    print(detail.runs[0].outcome, detail.runs[0].error)
    assert detail.runs[0].outcome is RunOutcome.TIMEOUT
    finished = get_job(db, quick)
    assert finished is not None and finished.state is JobState.COMPLETED


if __name__ == "__main__":  # executors are spawned processes: they import this file again
    main()
