"""A worker application with a cron schedule, for `kickside worker --app` and `--schedule`.

Its workers are :mod:`tests.support.pool_app`'s. ``SCHEDULE`` has an entry due every minute,
so a pool that starts fires it at once (a due time under a minute old is not skipped).
"""

from __future__ import annotations

from kickside_engine import JobBuilder
from kickside_engine.plugins.cron import Recurring
from tests.support.pool_app import registry

__all__ = ["NIGHTLY", "NOT_A_SCHEDULE", "SCHEDULE", "registry"]

SCHEDULE = [
    Recurring("every_minute", "* * * * *", lambda: JobBuilder("noop", {}).tags(["minutely"])),
]
NIGHTLY = (
    Recurring(
        "nightly_berlin", "30 2 * * *", lambda: JobBuilder("noop", {}), timezone="Europe/Berlin"
    ),
    Recurring("daily_report", "@daily", lambda: JobBuilder("sleep", {}).queue("reports")),
)
NOT_A_SCHEDULE = 42
