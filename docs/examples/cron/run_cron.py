"""Run the schedule in a pool for a few seconds and see the heartbeat entry fire."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from scheduled import SCHEDULE, registry

from kickside_engine import connect_database, migrate
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.testing import assert_enqueued

# When each entry runs next (due times are UTC):
now = datetime(2026, 3, 27, 7, 30, tzinfo=UTC)  # a Friday
for entry in SCHEDULE:
    print(f"{entry.key:15} {entry.cron:14} next {entry.next_run(now):%a %Y-%m-%d %H:%M:%S} UTC")
assert SCHEDULE[1].next_run(now) == datetime(2026, 3, 30, 6, 0, tzinfo=UTC)  # CEST is UTC+2

db = connect_database()
migrate.upgrade(db)
# A thread pool with the schedule: every pool ticks every second; each run is enqueued once,
# however many pools run the same schedule.
pool = WorkerPool(
    db, PoolConfig(mode="thread", registry=registry, queues={"maintenance": 1}, schedule=SCHEDULE)
)
pool.start()
try:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            assert_enqueued(db, worker="heartbeat", state="completed")
            break
        except AssertionError:
            time.sleep(0.25)
finally:
    pool.stop()
