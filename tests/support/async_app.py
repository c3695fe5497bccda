"""A worker application with ``async def`` workers, imported by executor processes.

Workers append ``job_id pid start end`` to the file named by the ``log`` arg, so tests can see
from outside where and when each job ran; ``slow_with_finally`` writes its ``marker`` file from
its ``finally`` block, so a test sees that a cancelled task ran it.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta
from typing import Any

from kickside_engine import Job, WorkerRegistry

registry = WorkerRegistry()


def _log(args: dict[str, Any], job: Job, start: float) -> None:
    path = args.get("log")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{job.id} {os.getpid()} {start:.6f} {time.time():.6f}\n")


@registry.worker("async_sleep")
async def async_sleep(args: dict[str, Any], job: Job) -> None:
    start = time.time()
    await asyncio.sleep(float(args.get("seconds", 0.05)))
    _log(args, job, start)


@registry.worker("slow_with_finally", timeout=timedelta(seconds=1), max_attempts=3)
async def slow_with_finally(args: dict[str, Any], job: Job) -> None:
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        with open(args["marker"], "a") as fh:
            fh.write("cancelled\n")
        raise
    finally:
        with open(args["marker"], "a") as fh:
            fh.write("finally\n")


@registry.worker("AsyncClassWorker")
class AsyncClassWorker:
    async def perform(self, args: dict[str, Any], job: Job) -> None:
        start = time.time()
        await asyncio.sleep(0)
        _log(args, job, start)


@registry.worker("sync_sleep")
def sync_sleep(args: dict[str, Any], job: Job) -> None:
    start = time.time()
    time.sleep(float(args.get("seconds", 0)))
    _log(args, job, start)


@registry.worker("blocks_loop", timeout=timedelta(seconds=1), max_attempts=3)
async def blocks_loop(args: dict[str, Any], job: Job) -> None:
    time.sleep(float(args.get("seconds", 30)))  # blocks the event loop: cancel cannot get in


@registry.worker("async_fail", max_attempts=2)
async def async_fail(args: dict[str, Any], job: Job) -> None:
    await asyncio.sleep(0)
    raise ValueError("boom")
