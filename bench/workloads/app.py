"""The benchmark's worker application, imported by every executor process.

``noop`` does nothing. ``stamp`` appends ``job_id start_monotonic_ns start_wall_ns`` to the file
named by its ``log`` arg as soon as its body begins: the latency workload's "start".
``CLOCK_MONOTONIC`` is system-wide on Linux, so these stamps compare with the enqueuing
process's own; the wall-clock stamp compares with the timestamps the engine stores.
``span`` logs its execution (:mod:`bench.nodes`): the multi-node workload counts every
execution, and finds two executions of one job whose intervals (from the claim that handed it
over to the end of its body) overlapped.
"""

from __future__ import annotations

import os
import time
from typing import Any

from bench.nodes import write_span
from kickside_engine import Job, WorkerRegistry

registry = WorkerRegistry()
KICKSIDE_CODE_VERSION = "bench-1"


@registry.worker("noop")
def noop(args: dict[str, Any], job: Job) -> None:
    """Nothing: the job's cost is the engine's alone."""


@registry.worker("stamp")
def stamp(args: dict[str, Any], job: Job) -> None:
    """Record when this body began, in one append (whole lines, even from many processes)."""
    started_ns, wall_ns = time.monotonic_ns(), time.time_ns()
    fd = os.open(args["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{job.id} {started_ns} {wall_ns}\n".encode())
    finally:
        os.close(fd)


@registry.worker("span")
def span(args: dict[str, Any], job: Job) -> None:
    """Log this execution, from the claim that handed it over to the end of its body."""
    claimed = job.attempted_at
    begin_ns = None if claimed is None else round(claimed.timestamp() * 1e9)
    write_span(args["log"], job.id, job.attempt, begin_ns)
