"""``async def`` workers: they run on async executors, many at once on one event loop."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from kickside_engine import Job, WorkerRegistry

registry = WorkerRegistry()


@registry.worker("fetch_page", timeout=timedelta(seconds=30))
async def fetch_page(args: dict[str, str], job: Job) -> None:
    # Stands for `await client.get(args["url"])` with an async HTTP client.
    await asyncio.sleep(0.2)
