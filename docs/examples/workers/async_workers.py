"""A pool running ``async def`` jobs: 50 jobs of 0.2 s each finish in well under 50 x 0.2 s,
on one async executor process."""

from __future__ import annotations

import time

from io_tasks import fetch_page

from kickside_engine import JobState, connect_database, get_job, migrate
from kickside_engine.runtime import PoolConfig, WorkerPool


def main() -> None:
    db = connect_database()
    migrate.upgrade(db)
    ids = [fetch_page.new({"url": f"https://example.com/{n}"}).insert(db).id for n in range(50)]
    # No sync workers here: no process executor, one async executor with 50 slots. A queue's
    # concurrency bounds async jobs too.
    config = PoolConfig(
        app="io_tasks",
        queues={"default": 50},
        process_executors=0,
        async_executors=1,
        async_slots=50,
    )
    pool = WorkerPool(db, config)
    pool.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            jobs = [get_job(db, i) for i in ids]
            if all(j is not None and j.state is JobState.COMPLETED for j in jobs):
                break
            time.sleep(0.2)
    finally:
        pool.stop()
    done = [get_job(db, i) for i in ids]
    assert all(j is not None and j.state is JobState.COMPLETED for j in done)
    print(f"{len(done)} async jobs completed")


if __name__ == "__main__":  # executors are spawned processes: they import this file again
    main()
