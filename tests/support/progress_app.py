"""Workers that report progress, for the progress tests; a process pool's executors import it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from kickside_engine import Job, WorkerRegistry

registry = WorkerRegistry()


def _gate(path: str) -> int:
    try:
        return int(Path(path).read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0


@registry.worker("stepped")
def stepped(args: dict[str, Any], job: Job) -> Any:
    """Reports ``{"step": i, "of": n, "token": ...}``, then waits until the test opens the gate
    file to ``i + 1`` (it has seen step ``i``)."""
    steps = int(args["steps"])
    for i in range(steps):
        job.report_progress({"step": i, "of": steps, "token": args.get("token", "")})
        deadline = time.monotonic() + 60
        while _gate(args["gate"]) <= i and time.monotonic() < deadline:
            time.sleep(0.02)
    return {"steps": steps}


@registry.worker("flood")
def flood(args: dict[str, Any], job: Job) -> None:
    """A tight loop of reports, the last one 1.0."""
    count = int(args["count"])
    for i in range(1, count + 1):
        job.report_progress(i / count)


@registry.worker("async_stepped")
async def async_stepped(args: dict[str, Any], job: Job) -> Any:
    """``stepped`` on an event loop."""
    steps = int(args["steps"])
    for i in range(steps):
        job.report_progress((i + 1) / (steps + 1))
        deadline = time.monotonic() + 60
        while _gate(args["gate"]) <= i and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    return None


@registry.worker("bad_progress")
def bad_progress(args: dict[str, Any], job: Job) -> None:
    job.report_progress(args["value"])


@registry.worker("half_then_fail")
def half_then_fail(args: dict[str, Any], job: Job) -> None:
    job.report_progress(0.5)
    if job.attempt == 1:
        raise RuntimeError("first attempt fails")
