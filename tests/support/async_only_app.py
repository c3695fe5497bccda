"""A worker application whose every worker is ``async def``: a pool of it needs no process
executor (see ``tests/runtime/test_executor_sizing.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

from kickside_engine import Job, WorkerRegistry

registry = WorkerRegistry()


@registry.worker("io_wait", queue="io")
async def io_wait(args: dict[str, Any], job: Job) -> None:
    await asyncio.sleep(float(args.get("seconds", 0)))
