"""A worker application with both kinds on queues of their own: a sync worker on ``default``
and an ``async def`` one on ``io`` (see ``tests/runtime/test_executor_sizing.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

from kickside_engine import Job, WorkerRegistry

registry = WorkerRegistry()


@registry.worker("crunch")
def crunch(args: dict[str, Any], job: Job) -> int:
    return sum(range(int(args.get("n", 10))))


@registry.worker("fetch", queue="io")
async def fetch(args: dict[str, Any], job: Job) -> None:
    await asyncio.sleep(float(args.get("seconds", 0)))
