"""The worker application of the fault suites, imported by executor processes.

Its workers append one record as their body begins and one as it ends to the file named by the
``log`` arg, each in a single ``O_APPEND`` write (whole lines, even from many processes)::

    S|E  pid  ppid  job_id  attempt  monotonic_ns

``ppid`` is the pool supervisor that ran the executor; ``CLOCK_MONOTONIC`` is system-wide on
Linux, so records from every process (and the test's own kill times) compare.
:mod:`tests.support.execlog` reads them back.
"""

from __future__ import annotations

import os
import time
from typing import Any

from kickside_engine import Job, WorkerRegistry

registry = WorkerRegistry()


def record(path: str, mark: str, job: Job) -> None:
    """Append one execution record for ``job`` to ``path``."""
    line = f"{mark} {os.getpid()} {os.getppid()} {job.id} {job.attempt} {time.monotonic_ns()}\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@registry.worker("chaos", max_attempts=50)
def chaos(args: dict[str, Any], job: Job) -> None:
    """Record the start, sleep ``ms`` milliseconds (wall clock), record the end.

    ``retry_ms``, when given, is the sleep of every attempt after the first; attempts up to
    ``fail_attempts`` raise after their end record (a failure to record, or to drop).
    """
    record(args["log"], "S", job)
    ms = args.get("retry_ms", args.get("ms", 0)) if job.attempt > 1 else args.get("ms", 0)
    time.sleep(float(ms) / 1000)
    record(args["log"], "E", job)
    if job.attempt <= int(args.get("fail_attempts", 0)):
        raise RuntimeError(f"attempt {job.attempt} failed late")
