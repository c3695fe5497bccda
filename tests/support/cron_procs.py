"""Child-process entry point for the racing-cron test (importable under spawn)."""

from __future__ import annotations

import random
import time
from datetime import datetime, timedelta
from threading import Barrier
from typing import Any

from kickside_engine import JobBuilder, connect_database
from kickside_engine.plugins.cron import Recurring, cron_tick

#: Entries in three timezones; 2030-03-31 is Europe/Berlin's spring-forward day.
SCHEDULE = [
    Recurring("minutely", "* * * * *", lambda: JobBuilder("noop", {})),
    Recurring(
        "berlin_nightly", "30 2 * * *", lambda: JobBuilder("noop", {}), timezone="Europe/Berlin"
    ),
    Recurring(
        "new_york_5min", "*/5 * * * *", lambda: JobBuilder("noop", {}), timezone="America/New_York"
    ),
]


def tick_in_step(
    url: str,
    schema: str | None,
    first: datetime,
    ticks: int,
    every: timedelta,
    ready: Barrier,
    start: Any,
    pace: float,
    seed: int,
) -> list[tuple[str, str]]:
    """Tick like a node from ``first``, one tick every ``every`` of simulated time. Every racer
    waits at ``ready`` (its interpreter up, its database open); the first one released sets
    ``start`` (a shared value) and, once all have read it, tick ``i`` starts ``i * pace`` after
    it in every racer, give or take 10 ms drawn anew each tick. One clock keeps a racer that
    was released first from staying a step ahead (and winning every run); the draw leaves each
    run's winner to chance.

    Returns the runs this process won, as ``(key, run_at ISO)``.
    """
    rng = random.Random(seed)
    db = connect_database(url, schema=schema)
    won = []
    try:
        if ready.wait(120) == 0:
            start.value = time.time() + 0.2
        ready.wait(120)
        start_at = start.value
        for i in range(ticks):
            time.sleep(max(0.0, start_at + i * pace + rng.uniform(0.0, 0.01) - time.time()))
            won += [
                (f.key, f.run_at.isoformat()) for f in cron_tick(db, SCHEDULE, first + i * every)
            ]
    finally:
        db.dispose()
    return won
