"""The benchmark's ``async def`` workers, for the pools that run async executors only.

A module of its own, apart from :mod:`bench.workloads.app`: a process pool whose app has an
async worker starts an async executor beside its process executors, which would change what the
sync workloads measure. ``noop`` does nothing; ``io`` awaits ``asyncio.sleep(seconds)`` (0.01 s
by default), an I/O wait that holds no CPU; ``stamp`` records when its body began, as the sync
``stamp`` does (:mod:`bench.workloads.app`).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from kickside_engine import Job, WorkerRegistry

registry = WorkerRegistry()
KICKSIDE_CODE_VERSION = "bench-async-1"
IO_SECONDS = 0.01


@registry.worker("noop")
async def noop(args: dict[str, Any], job: Job) -> None:
    """Nothing: the job's cost is the engine's alone."""


@registry.worker("io")
async def io(args: dict[str, Any], job: Job) -> None:
    """Wait as an I/O call would, without holding the loop."""
    await asyncio.sleep(float(args.get("seconds", IO_SECONDS)))


@registry.worker("stamp")
async def stamp(args: dict[str, Any], job: Job) -> None:
    """Record when this body began, in one append (a whole line)."""
    started_ns, wall_ns = time.monotonic_ns(), time.time_ns()
    fd = os.open(args["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{job.id} {started_ns} {wall_ns}\n".encode())
    finally:
        os.close(fd)
