"""tasks.py: the application's workers. `kickside worker --app tasks` imports this module."""

from __future__ import annotations

from typing import Any

from kickside_engine import Job, WorkerRegistry

registry = WorkerRegistry()  # the pool looks for a module attribute named `registry`


@registry.worker("send_welcome", queue="default", max_attempts=5)
def send_welcome(args: dict[str, Any], job: Job) -> None:
    # Args hold ids, never records or secrets: load what you need here.
    print(f"welcome, user {args['user_id']} (attempt {job.attempt})")
