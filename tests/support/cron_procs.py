"""Child-process entry point for the racing-cron test (importable under spawn)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from threading import Barrier

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
    pace: float,
) -> list[tuple[str, str]]:
    """Tick like a node from ``first``, one tick every ``every`` of simulated time. Every racer
    waits at ``ready`` (its interpreter up, its database open), then tick ``i`` starts ``i *
    pace`` after the wait ends in every racer, so they contend for each run.

    Returns the runs this process won, as ``(key, run_at ISO)``.
    """
    db = connect_database(url, schema=schema)
    won = []
    try:
        ready.wait(120)
        start_at = time.time()
        for i in range(ticks):
            time.sleep(max(0.0, start_at + i * pace - time.time()))
            won += [
                (f.key, f.run_at.isoformat()) for f in cron_tick(db, SCHEDULE, first + i * every)
            ]
    finally:
        db.dispose()
    return won
