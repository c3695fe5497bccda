"""scheduled.py: workers and the cron SCHEDULE that `kickside worker --app scheduled` runs."""

from __future__ import annotations

from typing import Any

from kickside_engine import Job, Recurring, WorkerRegistry

registry = WorkerRegistry()


@registry.worker("purge_sessions", queue="maintenance")
def purge_sessions(args: dict[str, Any], job: Job) -> None: ...


@registry.worker("weekly_digest", queue="mailers")
def weekly_digest(args: dict[str, Any], job: Job) -> None: ...


@registry.worker("heartbeat", queue="maintenance")
def heartbeat(args: dict[str, Any], job: Job) -> None: ...


SCHEDULE = [
    Recurring("purge-sessions", "@hourly", lambda: purge_sessions.new({})),
    Recurring(
        "weekly-digest",
        "0 8 * * MON",  # 08:00 on Mondays, Berlin time
        lambda: weekly_digest.new({"edition": "weekly"}).priority(5),
        timezone="Europe/Berlin",
    ),
    Recurring("heartbeat", "*/5 * * * * *", lambda: heartbeat.new({})),  # six fields: seconds
]
